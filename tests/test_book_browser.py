"""Headless-Chromium checks of the built book (pytest -m browser).

The session fixture ``built_book`` (``conftest.py``) builds the book with ``jupyter-book build book`` from the
repository root (the execution cache makes an up-to-date rebuild take seconds); ``server`` serves
``_build/html`` over http on 127.0.0.1, and every page of the table of contents is opened in Chromium
(Debian's /usr/bin/chromium, driven by playwright; never ``playwright install``). Per page it checks that the page loads, that every image loaded, that MathJax typeset
the mathematics (no raw TeX delimiters left), that no notebook error or stderr output is shown and that the
launch buttons are there. A full-page screenshot of each page is saved under ``_build/screenshots/``.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from book_toc import toc_files
from conftest import BOOK, KNOWN_JS_ERRORS, ROOT, SHOTS

BINDER_PREFIX = "https://mybinder.org/v2/gh/attnlib/attention-phase-transition/main?urlpath=lab/tree/book/"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


PAGES = toc_files()


def has_math(name: str) -> bool:
    """Does the page's source contain mathematics outside code cells?"""
    text = (BOOK / f"{name}.md").read_text()
    text = re.sub(r"^(```|~~~)[^\n]*\n.*?^\1\s*$", "", text, flags=re.S | re.M)  # drop fenced code
    return bool(re.search(r"\$[^$\n]+\$|\$\$|\{math\}|\\begin\{", text))


def code_cells(name: str) -> str:
    text = (BOOK / f"{name}.md").read_text()
    return "\n".join(re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", text, flags=re.S | re.M))


def expects_figure(name: str) -> bool:
    """A page whose code cells draw with matplotlib must show at least one image."""
    return bool(re.search(r"\bplt\.(plot|subplots|figure|show|imshow|scatter)\b|\.plot\(", code_cells(name)))


def test_build_has_no_sphinx_warnings(built_book: Path) -> None:
    """Sphinx warnings (broken references, unknown bibtex keys, bad directives...) fail the test.

    Only documents re-read in this build can warn (unchanged ones come from the cache); a clean build
    (``rm -rf _build``) checks them all.
    """
    log = (ROOT / "_build" / "build.log")
    if not log.is_file():
        pytest.skip("no build log (BOOK_SKIP_BUILD=1)")
    text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text())  # drop terminal colours
    warnings = [line for line in text.splitlines()
                if re.search(r"\bWARNING:|\bERROR:", line) and "[IPKernelApp]" not in line]
    assert not warnings, "Sphinx warnings in the book build:\n" + "\n".join(warnings)


# JavaScript run in the page once MathJax is done: what the checks need, in one round trip.
INSPECT_JS = r"""
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const clone = article.cloneNode(true);
  clone.querySelectorAll('pre, .highlight, script, style, mjx-container, mjx-assistive-mml').forEach(e => e.remove());
  const imgs = Array.from(article.querySelectorAll('img'));
  return {
    text: clone.textContent,
    fullText: article.innerText,
    nImg: imgs.length,
    brokenImgs: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    nMath: document.querySelectorAll('mjx-container').length,
    nMathError: document.querySelectorAll('mjx-merror').length,
    nStderr: document.querySelectorAll('.output.stderr, .output.error, .output.traceback').length,
    binder: Array.from(document.querySelectorAll('a[href*="mybinder.org"]')).map(a => a.href),
    thebe: document.querySelectorAll('.btn-launch-thebe, .thebe-launch-button').length,
  };
}
"""


@pytest.mark.parametrize("name", PAGES)
def test_page_renders(name: str, server: str, browser) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    external: list[str] = []
    page.on("request", lambda r: None if r.url.startswith((server, "data:", "blob:")) else external.append(r.url))
    console_errors: list[str] = []
    page.on("pageerror", lambda e: None if str(e) in KNOWN_JS_ERRORS else console_errors.append(str(e)))
    try:
        response = page.goto(f"{server}/{name}.html", wait_until="load", timeout=60_000)
        assert response is not None and response.status == 200, f"{name}: HTTP {response and response.status}"
        # Sphinx includes MathJax only in pages that contain math; there, wait until typesetting is done.
        uses_mathjax = page.evaluate("() => !!document.querySelector('script[src*=\"mathjax\"]')")
        if uses_mathjax:
            page.wait_for_function("() => window.MathJax && window.MathJax.startup && window.MathJax.startup.promise",
                                   timeout=30_000)
            page.evaluate("() => window.MathJax.startup.promise")
        page.wait_for_load_state("networkidle", timeout=30_000)
        info = page.evaluate(INSPECT_JS)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    finally:
        page.close()

    if expects_figure(name):
        assert info["nImg"] > 0, f"{name}: the code draws a figure but the page shows no image"
    assert not info["brokenImgs"], f"{name}: images that did not load: {info['brokenImgs']}"
    for delim in ("\\(", "\\)", "\\[", "\\]", "$$"):
        assert delim not in info["text"], f"{name}: raw TeX delimiter {delim!r} left untypeset"
    assert info["nMathError"] == 0, f"{name}: {info['nMathError']} MathJax errors"
    if has_math(name):
        assert uses_mathjax, f"{name}: the source has math but the page does not load MathJax"
        assert info["nMath"] > 0, f"{name}: the source has math but no mjx-container was rendered"
    assert "Traceback" not in info["fullText"], f"{name}: a traceback is shown"
    assert info["nStderr"] == 0, f"{name}: {info['nStderr']} stderr/error outputs shown"
    assert not console_errors, f"{name}: JavaScript errors: {console_errors}"
    if name != "references":
        assert any(u.startswith(BINDER_PREFIX + f"{name}.md") for u in info["binder"]), \
            f"{name}: no Binder launch link to book/{name}.md (found {info['binder']})"
        assert info["thebe"] > 0, f"{name}: no Thebe launch button"
    # Everything a page needs is served locally: the book must render offline.
    assert not external, f"{name}: requests to external hosts at page load: {external}"

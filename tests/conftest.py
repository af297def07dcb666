"""Shared fixtures of the book tests: the built book (built once per test session), an http server of
``_build/html`` on 127.0.0.1 and headless Chromium (Debian's /usr/bin/chromium or ``$CHROMIUM``, driven by
playwright; never ``playwright install``)."""
from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from book_toc import ROOT as _ROOT, built_toc, built_toc_files

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Known, harmless: with Sphinx 7.4, sphinx-thebe 0.3.1's inline config script ends up twice in each page
# (once with filename None, once with ''), so the second copy re-declares the same constants.
# A cold build (every chapter executed, empty caches) takes 3-4 minutes on 2 cores; the limit is several times
# that, so that a stalled build fails long before CI's 90 minutes (each cell also has _config.yml's timeout).
BUILD_TIMEOUT_S = 1800
KNOWN_JS_ERRORS = ("Identifier 'THEBE_JS_URL' has already been declared",)


def jupyter_book_command() -> list[str]:
    """README's build command; with ``$BOOK_TOC`` (a partial toc), ``--toc`` points at it."""
    exe = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(exe) if exe.exists() else (shutil.which("jupyter-book") or "jupyter-book"), "build", "book"]
    if built_toc() != (_ROOT / "_toc.yml").resolve():
        cmd += ["--toc", str(built_toc())]
    return cmd


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build (or incrementally rebuild) the book exactly as the README says; fail on any notebook error.

    ``BOOK_SKIP_BUILD=1`` uses the existing ``_build/html`` as it is; ``BOOK_TOC=<toc.yml>`` builds and checks the
    pages of a partial table of contents instead of ``_toc.yml``."""
    if os.environ.get("BOOK_SKIP_BUILD") != "1":
        try:
            proc = subprocess.run(jupyter_book_command(), cwd=ROOT, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"jupyter-book build ran past {BUILD_TIMEOUT_S} s:\n{(exc.stderr or b'')[-4000:]!r}")
        log = proc.stdout + proc.stderr
        (ROOT / "_build").mkdir(exist_ok=True)
        (ROOT / "_build" / "build.log").write_text(log)
        assert proc.returncode == 0, f"jupyter-book build failed:\n{log[-6000:]}"
        assert "build succeeded" in log, log[-3000:]
    else:
        (ROOT / "_build" / "build.log").unlink(missing_ok=True)
    for name in built_toc_files():
        assert (HTML / f"{name}.html").is_file(), f"missing page {name}.html"
    return HTML


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output readable
        pass


@pytest.fixture(scope="session")
def server(built_book: Path):
    handler = functools.partial(QuietHandler, directory=str(built_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.hookimpl(tryfirst=True)   # before xdist's worker reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``scripts/test.sh`` runs ``-n auto --dist loadgroup``), keep together what shares a
    fixture: every test that needs the built book runs in one worker, after the one build, and every other test
    with the rest of its module (whose module-scoped fixtures, such as solved traces, are then computed once)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = "built-book" if "built_book" in item.fixturenames else Path(item.nodeid.split("::")[0]).stem
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_report_header(config):
    """The machine properties that the replay tests' rounding depends on (tests/replay.py)."""
    import importlib.util
    import platform

    import numpy as np

    spec = importlib.util.spec_from_file_location("blas_kernel", _ROOT / "scripts" / "blas_kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return (f"replay rounding: OpenBLAS kernel {mod.active_kernel() or 'unknown'} "
            f"(OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}), {platform.machine()}, "
            f"numpy {np.__version__}")

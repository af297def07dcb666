"""Fast checks of the API reference appendix (book/api.md), no build: it documents exactly the public names.

The page documents every name of ``attnlib.__all__`` (but ``__version__``) once, under ``attnlib.<name>``, and
the names of ``attnlib.histogram.__all__`` under ``attnlib.histogram.<name>`` and those of ``attnlib.book.__all__``
under ``attnlib.book.<name>``; its autosummary tables list only
documented names; the hand-written constants show their actual values; the Sphinx extensions it needs are
configured in ``_config.yml``; and the chapters' ``{py:...}`` links point at entries of the page.
"""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import yaml

import attnlib

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "api.md"
#: directives that describe an object (one entry each); autosummary lists them in its tables
DESCRIBE = ("autofunction", "autoclass", "autoexception", "autodata", "py:function", "py:class", "py:exception",
            "py:data")


def public_names() -> set[str]:
    return {n for n in attnlib.__all__ if n != "__version__"}


def book_names() -> set[str]:
    import attnlib.book
    return set(attnlib.book.__all__)


def histogram_names() -> set[str]:
    """``attnlib.histogram.__all__``, read from the source (importing it needs JAX)."""
    tree = ast.parse((ROOT / "attnlib" / "histogram.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("attnlib/histogram.py has no __all__")


def rst_blocks() -> list[str]:
    text = PAGE.read_text()
    blocks = re.findall(r"^```\{eval-rst\}\n(.*?)^```", text, flags=re.S | re.M)
    assert blocks, "book/api.md has no {eval-rst} block"
    return blocks


def entries() -> tuple[list[str], list[str], dict[str, str]]:
    """(described names, autosummary names, ``:value:`` of each py:data), each fully qualified."""
    described, summarised, values = [], [], {}
    for block in rst_blocks():
        module, in_summary, last = None, False, None
        for line in block.splitlines():
            if m := re.match(r"\.\. currentmodule:: (\S+)\s*$", line):
                module, in_summary = m.group(1), False
            elif re.match(r"\.\. autosummary::", line):
                in_summary = True
            elif m := re.match(r"\.\. ([\w:]+):: (\S+?)(\(.*\))?\s*$", line):
                in_summary = False
                assert m.group(1) in DESCRIBE, f"unexpected directive {line!r}"
                assert module, f"{line!r} comes before any currentmodule"
                last = f"{module}.{m.group(2)}"
                described.append(last)
            elif m := re.match(r"   :value: (.+)$", line):
                values[last] = m.group(1)
            elif in_summary and (m := re.match(r"   ([\w.]+)\s*$", line)):
                summarised.append(f"{module}.{m.group(1)}")
            elif line.strip() and not line.startswith(" "):
                in_summary = False
    return described, summarised, values


def test_page_title_label_and_toc():
    text = PAGE.read_text()
    assert text.startswith("(api)=\n# API reference\n")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for c in toc["chapters"]]
    assert "api" in files and files.index("api") < files.index("references")
    if "conventions" in files:
        assert files.index("conventions") < files.index("api")


def test_every_public_name_is_documented_once():
    described, _, _ = entries()
    top = {n.removeprefix("attnlib.") for n in described if n.count(".") == 1}
    assert top == public_names(), (f"missing: {sorted(public_names() - top)}; "
                                   f"not public: {sorted(top - public_names())}")
    duplicates = sorted({n for n in described if described.count(n) > 1})
    assert not duplicates, f"documented twice: {duplicates}"


def test_histogram_section_documents_its_public_names():
    described, _, _ = entries()
    hist = {n.removeprefix("attnlib.histogram.") for n in described if n.startswith("attnlib.histogram.")}
    assert hist == histogram_names(), (f"missing: {sorted(histogram_names() - hist)}; "
                                       f"not public: {sorted(hist - histogram_names())}")
    others = [n for n in described if n.count(".") > 1 and not n.startswith(("attnlib.histogram.", "attnlib.book."))]
    assert not others, f"entries under a non-public module path: {others}"


def test_book_section_documents_its_public_names():
    described, _, _ = entries()
    book = {n.removeprefix("attnlib.book.") for n in described if n.startswith("attnlib.book.")}
    assert book == book_names(), (f"missing: {sorted(book_names() - book)}; "
                                  f"not public: {sorted(book - book_names())}")


def test_autosummary_tables_list_documented_names_only():
    described, summarised, _ = entries()
    assert summarised, "no autosummary table"
    assert set(summarised) <= set(described), sorted(set(summarised) - set(described))


def test_hand_written_constants_show_their_values():
    _, _, values = entries()
    for name, value in values.items():
        owner, _, short = name.rpartition(".")
        actual = getattr(importlib.import_module(owner), short)
        assert ast.literal_eval(value) == actual, f"{name}: page says {value}, attnlib has {actual!r}"


def test_sphinx_extensions_configured():
    sphinx = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    for ext in ("sphinx.ext.mathjax", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon"):
        assert ext in sphinx["extra_extensions"], f"{ext} missing from sphinx.extra_extensions"
    config = sphinx["config"]
    assert config["autosummary_generate"] is False          # tables only: no stub pages
    assert config["napoleon_numpy_docstring"] is True and config["napoleon_google_docstring"] is False
    assert config["autodoc_typehints"] in ("none", "description", "signature", "both")


def test_chapter_links_point_at_entries():
    described, _, _ = entries()
    for page in sorted((ROOT / "book").glob("*.md")):
        for role, target in re.findall(r"\{py:(\w+)\}`~?([^`<]+?)`", page.read_text()):
            assert target in described, f"{page.name}: {{py:{role}}}`{target}` has no entry on book/api.md"

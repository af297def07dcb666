"""Fast checks of the book's source layout (no build): toc <-> files, jupytext notebooks, config wiring."""
from __future__ import annotations

import os
from pathlib import Path

import jupytext
import pytest
from book_toc import toc_files
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


CHAPTERS = sorted(p.stem for p in BOOK.glob("[0-9][0-9]-*.md"))


def test_book_toc_is_symlink_to_root_toc():
    link = BOOK / "_toc.yml"
    assert link.is_symlink(), "book/_toc.yml must be a symlink (jupyter-book reads the toc from book/)"
    assert os.readlink(link) == "../_toc.yml"
    assert link.resolve() == (ROOT / "_toc.yml").resolve()


def test_config_at_root():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "cache"
    assert config["only_build_toc_files"] is True
    assert config["sphinx"]["config"]["nb_execution_raise_on_error"] is True
    for bib in config["bibtex_bibfiles"]:
        assert (BOOK / bib).is_file(), f"bibtex file {bib} (relative to book/) is missing"
    mathjax = BOOK / "_static" / config["sphinx"]["config"]["mathjax_path"]
    assert mathjax.is_file(), f"vendored MathJax {mathjax} is missing"
    assert (mathjax.parent / "LICENSE").is_file()
    for name, folder in config["sphinx"]["local_extensions"].items():
        assert (ROOT / folder / f"{name}.py").is_file()


def test_every_toc_entry_exists():
    for name in toc_files():
        assert (BOOK / f"{name}.md").is_file() or (BOOK / f"{name}.ipynb").is_file(), f"toc entry {name} missing"


def test_every_page_is_in_toc():
    listed = set(toc_files())
    pages = {p.stem for p in BOOK.glob("*.md")} | {p.stem for p in BOOK.glob("*.ipynb")}
    assert pages - listed == set(), f"pages not in _toc.yml: {sorted(pages - listed)}"


def test_chapters_are_numbered_and_complete():
    assert CHAPTERS, "no chapters found"
    assert [c[:2] for c in CHAPTERS] == [f"{i:02d}" for i in range(len(CHAPTERS))], CHAPTERS


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_is_jupytext_myst_notebook(name: str):
    path = BOOK / f"{name}.md"
    nb = jupytext.read(path)
    meta = nb.metadata
    assert meta["kernelspec"]["name"] == "python3"
    assert meta["jupytext"]["text_representation"]["format_name"] == "myst"
    assert any(c.cell_type == "code" for c in nb.cells), f"{name} has no code cell"
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    assert first.source.lstrip().startswith("# "), f"{name} must start with a '# Title'"

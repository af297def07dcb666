"""Write (or check) the first cell of every chapter: how to run the notebook outside the repository.

A chapter downloaded from the published book (the ``.ipynb`` of the download menu) imports ``attnlib``, which
its reader may not have. Every chapter therefore starts with one code cell, tagged ``remove-cell`` (so the
HTML page does not show it, while the notebook keeps it), that says in comments how to install ``attnlib``
-- one ``pip install`` line built from ``repository.url`` in ``_config.yml`` -- and imports it. Chapters that
read data files (``data/<name>``) also call :func:`attnlib.use_book_data`, which puts any missing file there
from the copy installed with ``attnlib`` (nothing happens inside the repository).

Usage, from the repository root::

    python scripts/notebook_header.py          # insert or update the cell in every chapter book/NN-*.md
    python scripts/notebook_header.py --check  # exit 1 if a chapter's cell is missing or out of date

``tests/test_notebook_header.py`` runs the check.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
MARK = "# Running this notebook outside the book's repository"
_FRONT = re.compile(r"\A---\n.*?\n---\n", re.S)
_CELL = re.compile(r"```\{code-cell\}[^\n]*\n(?:.*?\n)??```\n", re.S)


def repository_url(config: Path = ROOT / "_config.yml") -> str:
    """``repository.url`` of the book's configuration (no trailing slash)."""
    return yaml.safe_load(config.read_text())["repository"]["url"].rstrip("/")


def install_line(url: str | None = None) -> str:
    """The ``pip install`` command of the first cell (attnlib with the ``notebooks`` extra, from git)."""
    return f'pip install "attnlib[notebooks] @ git+{url or repository_url()}"'


def reads_data(text: str) -> bool:
    """Does a chapter's code read files under ``data/``?"""
    code = "\n".join(re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", text, flags=re.S | re.M))
    return bool(re.search(r"""["'](?:\./)?data/""", code))


def header_cell(url: str | None = None, data: bool = False) -> str:
    """The first cell of a chapter, as MyST-markdown text."""
    lines = [
        "```{code-cell} ipython3",
        ":tags: [remove-cell]",
        "",
        f"{MARK} (e.g. downloaded from the book's web page)?",
        "# Install attnlib and what the chapters use, then restart the kernel:",
        f"#   {install_line(url)}",
    ]
    if data:
        lines += [
            "# Data files are read as data/<name> next to this notebook: use_book_data() copies any missing",
            "# file there from the copy installed with attnlib (see attnlib.book.book_data). In the repository it",
            "# does nothing.",
            "import attnlib",
            "",
            "attnlib.use_book_data()",
        ]
    else:
        lines += ["import attnlib"]
    return "\n".join(lines + ["```", ""])


def with_header(text: str, url: str | None = None) -> str:
    """``text`` (a chapter) with its first cell replaced by, or preceded by, the header cell."""
    front = _FRONT.match(text)
    if front is None:
        raise ValueError("a chapter must start with jupytext front matter (---)")
    head, body = text[:front.end()], text[front.end():].lstrip("\n")
    cell = _CELL.match(body)
    if cell is not None and MARK in cell.group(0):
        body = body[cell.end():].lstrip("\n")
    return f"{head}\n{header_cell(url, reads_data(body))}\n{body}"


def chapters() -> list[Path]:
    return sorted(BOOK.glob("[0-9][0-9]-*.md"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if a chapter is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path in chapters():
        text = path.read_text()
        new = with_header(text)
        if new != text:
            stale.append(path.name)
            if not args.check:
                path.write_text(new)
    if stale:
        print(("out of date: " if args.check else "updated: ") + ", ".join(stale))
    return 1 if (stale and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared helpers of the book tests: the pages listed in the table of contents, and the code of a page."""
from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files(toc_path: Path = ROOT / "_toc.yml") -> list[str]:
    """File names (without suffix) of every page of the table of contents, in order."""
    toc = yaml.safe_load(Path(toc_path).read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return files


def built_toc() -> Path:
    """The table of contents the browser tests build and open: ``$BOOK_TOC`` if set (a partial toc, for checking
    some chapters while others cannot be built yet), else the book's ``_toc.yml``."""
    return Path(os.environ.get("BOOK_TOC") or ROOT / "_toc.yml").resolve()


def built_toc_files() -> list[str]:
    """The pages of :func:`built_toc`, in order."""
    return toc_files(built_toc())


def code_cells(path: Path) -> str:
    """The code of the MyST page at ``path``: its ``{code-cell}`` blocks, joined."""
    text = Path(path).read_text()
    return "\n".join(re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", text, flags=re.S | re.M))

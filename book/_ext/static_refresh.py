"""Sphinx extension: rebuild when a file under ``book/_static`` changed, so the site gets the new copy.

Sphinx copies the static files only when it writes pages. After an edit of, say, ``_static/explorer.js`` alone
no document is out of date, the build stops at "no targets are out of date" and ``_build/html`` keeps the old
script. On ``env-get-outdated`` this extension compares every file of ``<source>/_static`` with its copy in
``<outdir>/_static`` and, if one differs or is missing, marks the root document outdated: Sphinx then writes
it and copies the static files again.
"""
from __future__ import annotations

import filecmp
from pathlib import Path

from sphinx.application import Sphinx


def static_changed(src: Path, out: Path) -> bool:
    """Is any file below ``src`` missing from ``out`` or different there?"""
    for path in src.rglob("*"):
        if path.is_file():
            copy = out / path.relative_to(src)
            if not copy.is_file() or not filecmp.cmp(path, copy, shallow=False):
                return True
    return False


def refresh(app: Sphinx, env, added, changed, removed) -> list[str]:
    src, out = Path(app.srcdir) / "_static", Path(app.outdir) / "_static"
    if src.is_dir() and out.is_dir() and static_changed(src, out):
        return [app.config.root_doc]
    return []


def setup(app: Sphinx) -> dict:
    app.connect("env-get-outdated", refresh)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

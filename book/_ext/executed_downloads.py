"""Sphinx extension: the notebooks of the download menu carry their outputs, also when they came from the cache.

myst-nb writes each notebook as it rendered it to ``_build/jupyter_execute/<doc>.ipynb``, and
sphinx-book-theme copies that file to ``_build/html/_sources/<doc>.ipynb``, the ``.ipynb`` of the download
menu. With ``execute_notebooks: cache``, a notebook that is not executed again because jupyter-cache has its
outputs is rendered from the cached copy, but myst-nb 1.4 writes the notebook it was given, without outputs
(``NotebookClientCache`` keeps the merged notebook to itself). A rebuild from a warm cache, as on CI with the
restored cache, would then offer notebooks without results.

On ``env-updated`` (every document read, none written yet) this extension merges the cached outputs into each
``jupyter_execute/<doc>.ipynb`` that has a match in the jupyter cache, so that the copy made when the page is
written is the executed notebook.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from sphinx.application import Sphinx
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)


def _cache_folder(app: Sphinx) -> Path:
    configured = getattr(app.config, "nb_execution_cache_path", "") or ""
    return Path(configured) if configured else Path(app.outdir).parent / ".jupyter_cache"


def _has_outputs(nb) -> bool:
    return any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


def restore_outputs(app: Sphinx, env) -> None:
    if getattr(app.config, "nb_execution_mode", "") != "cache":
        return
    folder = _cache_folder(app)
    executed = Path(app.outdir).parent / "jupyter_execute"
    if not folder.is_dir() or not executed.is_dir():
        return
    from jupyter_cache import get_cache

    cache = get_cache(folder)
    for docname in sorted(env.found_docs):
        path = executed / f"{docname}.ipynb"
        if not path.is_file():
            continue
        nb = nbformat.read(path, as_version=4)
        if _has_outputs(nb) or not any(c.cell_type == "code" for c in nb.cells):
            continue
        try:
            _, merged = cache.merge_match_into_notebook(nb)
        except KeyError:  # not in the cache (e.g. execution switched off)
            continue
        nbformat.write(merged, path)
        LOGGER.info(f"[executed_downloads] outputs of {docname} restored from the jupyter cache")


def setup(app: Sphinx) -> dict:
    app.connect("env-updated", restore_outputs)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

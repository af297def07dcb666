"""Sphinx extension: serve the vendored MathJax from ``_static/mathjax`` without loading all of it eagerly.

jupyter-book 1.x adds *every* ``*.js`` file found under ``_static/`` to ``html_js_files``, so each page would
load ``tex-chtml.js`` a second time plus all TeX extensions. MathJax must be loaded once, through
``mathjax_path`` (set in ``_config.yml``), and it loads its extensions and fonts itself, relative to its own
URL. This extension drops the ``mathjax/`` entries from ``html_js_files`` again.
"""
from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.config import Config

VENDORED_PREFIX = "mathjax/"


def _name(entry) -> str:
    return entry[0] if isinstance(entry, (tuple, list)) else str(entry)


def drop_vendored_scripts(app: Sphinx, config: Config) -> None:
    config.html_js_files = [e for e in config.html_js_files if not _name(e).startswith(VENDORED_PREFIX)]
    config.html_css_files = [e for e in config.html_css_files if not _name(e).startswith(VENDORED_PREFIX)]


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", drop_vendored_scripts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

"""Sphinx extension: re-execute the book's notebooks whenever the attnlib library changes.

jupyter-cache (used by myst-nb with ``execute_notebooks: cache``) keys a notebook's stored outputs on the
notebook's own code cells only, so editing ``attnlib`` would otherwise leave stale results in the book.

On ``config-inited`` this extension

1. computes ``attnlib.cache.library_fingerprint()`` (version + hash of every ``attnlib/**/*.py``);
2. compares it with the stamp file ``<jupyter cache folder>.attnlib-fingerprint`` stored beside the jupyter
   cache (``_build/.jupyter_cache`` by default);
3. if they differ (or there is no stamp), deletes the jupyter cache folder and writes the new stamp;
4. always publishes the fingerprint as the config value ``attnlib_fingerprint`` (rebuild = "env"), so that
   Sphinx also sees a changed configuration and re-reads (hence re-executes) every notebook instead of
   reusing the pickled doctrees of unchanged sources;
5. if the cache was wiped, additionally marks every document outdated (``env-get-outdated``), which covers a
   stamp that disagrees with the pickled environment (e.g. a stamp deleted by hand);
6. points attnlib's own disk cache (sweeps, simulations) at ``_build/.attnlib_cache`` unless
   ``ATTNLIB_CACHE_DIR`` is set, by setting that variable in the build process, which the notebook kernels
   inherit: a clean build (``rm -rf _build``) is then clean for attnlib's results too.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
STAMP_SUFFIX = ".attnlib-fingerprint"


def _fingerprint() -> str:
    try:
        from attnlib.cache import library_fingerprint
    except Exception as exc:  # a broken attnlib must not hide behind a stale cache
        LOGGER.warning(f"[attnlib_cache_guard] cannot import attnlib ({exc!r}); hashing the sources directly")
        import importlib.util

        spec = importlib.util.find_spec("attnlib")
        if spec is None or not spec.submodule_search_locations:
            return "attnlib-not-found"
        digest = hashlib.sha256()
        package = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(package.rglob("*.py")):
            digest.update(path.relative_to(package).as_posix().encode())
            digest.update(path.read_bytes())
        return "unimportable+" + digest.hexdigest()[:16]
    return library_fingerprint()


def _cache_path(app: Sphinx, config: Config) -> Path:
    configured = getattr(config, "nb_execution_cache_path", "") or ""
    if configured:
        return Path(configured).resolve()
    # myst-nb's default: beside the html output folder, i.e. _build/.jupyter_cache
    return Path(app.outdir).parent.joinpath(".jupyter_cache").resolve()


def guard_cache(app: Sphinx, config: Config) -> None:
    os.environ.setdefault("ATTNLIB_CACHE_DIR", str(Path(app.outdir).parent.joinpath(".attnlib_cache").resolve()))
    app.attnlib_cache_wiped = False
    fingerprint = _fingerprint()
    config.attnlib_fingerprint = fingerprint
    cache = _cache_path(app, config)
    stamp = cache.with_name(cache.name + STAMP_SUFFIX)
    previous = stamp.read_text().strip() if stamp.is_file() else None
    if previous == fingerprint:
        LOGGER.info(f"[attnlib_cache_guard] attnlib unchanged ({fingerprint}); keeping {cache}")
        return
    if cache.exists():
        LOGGER.info(f"[attnlib_cache_guard] attnlib changed ({previous} -> {fingerprint}); wiping {cache}")
        shutil.rmtree(cache)
    app.attnlib_cache_wiped = True
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint + "\n")


def reread_all(app: Sphinx, env, added, changed, removed) -> list[str]:
    if getattr(app, "attnlib_cache_wiped", False):
        return sorted(env.found_docs - set(added) - set(changed) - set(removed))
    return []


def setup(app: Sphinx) -> dict:
    app.add_config_value("attnlib_fingerprint", "", "env")
    # run before myst-nb (priority 500) reads its configuration and opens the cache
    app.connect("config-inited", guard_cache, priority=100)
    app.connect("env-get-outdated", reread_all)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

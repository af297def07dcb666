"""A small, safe disk cache for expensive results (state-evolution sweeps, finite-d simulations).

* Keys are made of every parameter of the computation **and** the library fingerprint (the version plus a
  hash of the source of every ``attnlib`` module), so editing ``attnlib`` invalidates all cached results.
* Values are JSON documents (numbers, strings, lists, dicts) carrying a SHA-256 checksum of their payload.
* Writes are atomic: the document is written to a temporary file in the cache folder, flushed and
  ``fsync``-ed, then renamed over the target (``os.replace``), so a reader never sees half a file.
* A file that cannot be parsed, whose checksum does not match or whose stored key differs is reported with a
  :class:`~attnlib.exceptions.CacheWarning`, deleted and recomputed: it is never trusted.

The folder is ``$ATTNLIB_CACHE_DIR`` if set, else ``~/.cache/attnlib``.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ._version import __version__
from .exceptions import CacheWarning, warn_caller

__all__ = ["library_fingerprint", "cache_dir", "cache_key", "cached", "load_cached", "store_cached", "provenance"]

_PACKAGE_DIR = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def library_fingerprint() -> str:
    """Version of :mod:`attnlib` plus a hash of the source of all its modules (changes on any edit).

    Computed once per process, when this module is imported: a process keys what its code computes by that
    code, even if the files are edited while it runs (the edits get their own fingerprint in the next
    process)."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(_PACKAGE_DIR.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE_DIR).as_posix().encode())
        digest.update(path.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def provenance() -> dict:
    """Where and with what a result was computed, for the sidecar files of committed data: the ``attnlib``
    version and source fingerprint, the Python and numpy versions, the machine and the date."""
    return {"attnlib_version": __version__, "library": library_fingerprint(), "python": sys.version.split()[0],
            "numpy": np.__version__, "machine": platform.machine(), "generated": time.strftime("%Y-%m-%dT%H:%M:%S")}


def cache_dir() -> Path:
    """The cache folder (created on demand): ``$ATTNLIB_CACHE_DIR`` or ``~/.cache/attnlib``."""
    root = os.environ.get("ATTNLIB_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "attnlib"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _canonical(obj: Any) -> Any:
    """Turn parameters into a canonical JSON-able structure (floats by ``repr``, dataclasses by fields)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"__type__": type(obj).__name__,
                **{f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": _canonical(obj.tolist()), "dtype": str(obj.dtype)}
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return repr(float(obj))
    if obj is None or isinstance(obj, str):
        return obj
    raise TypeError(f"cannot use {type(obj).__name__} in a cache key")


def cache_key(namespace: str, **params: Any) -> str:
    """Hex key of ``namespace`` + all ``params`` + :func:`library_fingerprint`."""
    doc = {"namespace": namespace, "library": library_fingerprint(), "params": _canonical(params)}
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return f"{namespace}-{hashlib.sha256(blob.encode()).hexdigest()[:32]}"


def _payload_checksum(payload: str) -> str:
    return hashlib.sha256(payload.encode()).hexdigest()


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _to_jsonable(value.tolist())
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else repr(value)  # 'nan'/'inf' kept explicit, never silently
    return value


def store_cached(key: str, value: Any) -> Path:
    """Atomically write ``value`` (JSON-able) under ``key``; returns the file path."""
    folder = cache_dir()
    payload = json.dumps(_to_jsonable(value), sort_keys=True)
    doc = json.dumps({"key": key, "checksum": _payload_checksum(payload), "payload": payload})
    target = folder / f"{key}.json"
    fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(doc)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target


_MISSING = object()  # "no default given" marker of load_cached
_ABSENT = object()  # "nothing cached" answer asked for by cached


def load_cached(key: str, default: Any = _MISSING) -> Any:
    """Read the value stored under ``key``.

    Returns ``default`` (or raises ``KeyError`` if none given) when there is no valid entry; a corrupt entry
    is reported with :class:`CacheWarning` and removed.
    """
    target = cache_dir() / f"{key}.json"
    if not target.exists():
        if default is _MISSING:
            raise KeyError(key)
        return default
    try:
        doc = json.loads(target.read_text())
        if doc.get("key") != key:
            raise ValueError("stored key does not match")
        payload = doc["payload"]
        if _payload_checksum(payload) != doc["checksum"]:
            raise ValueError("checksum mismatch")
        return json.loads(payload)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warn_caller(f"corrupt cache file {target} ({exc}); recomputing", CacheWarning)
        try:
            target.unlink()
        except OSError:
            pass
        if default is _MISSING:
            raise KeyError(key) from exc
        return default


def cached(namespace: str, compute: Callable[[], Any], *, use_cache: bool = True, **params: Any) -> Any:
    """Return ``compute()`` cached under ``(namespace, params, library fingerprint)``.

    ``compute`` must return a JSON-able value (dicts, lists, numbers, strings; numpy values are converted).
    The value returned is always the JSON round trip, so a cached and a fresh call give identical objects.
    """
    if not use_cache:
        return json.loads(json.dumps(_to_jsonable(compute())))
    key = cache_key(namespace, **params)
    value = load_cached(key, default=_ABSENT)
    if value is not _ABSENT:
        return value
    value = compute()
    store_cached(key, value)
    return json.loads(json.dumps(_to_jsonable(value), sort_keys=True))


library_fingerprint()  # fix the fingerprint of the source as imported

"""Running independent jobs in parallel (joblib) with the caller's disk cache, on local cores or a Dask cluster.

Reused joblib worker processes keep the environment they were started with, so an ``ATTNLIB_CACHE_DIR`` set
later in the parent (as the book and the tests do) would be ignored by them; :func:`run_jobs` hands the
caller's cache folder to every job explicitly (also to Dask workers: on other machines that folder must be on
a shared file system).

Environment variables
---------------------
ATTNLIB_PARALLEL_BACKEND
    The backend of :func:`run_jobs` when a call gives none (``backend=None``), so that every sweep of the
    library (``erm_sweep``, ``arbiter_table``, ``phase_diagram``, ...) runs there unchanged: ``"loky"``,
    ``"threading"`` or ``"dask"``. Unset or empty: joblib's default (``loky``).
ATTNLIB_DASK_SCHEDULER
    Address of a Dask scheduler (``tcp://host:8786``) for ``backend="dask"`` when no
    :class:`distributed.Client` is open: :func:`run_jobs` connects a Client for the call and closes it
    afterwards. The workers need attnlib installed (the same version: cache keys include its source).

Examples
--------
Every sweep on an existing cluster, without changing a call::

    export ATTNLIB_PARALLEL_BACKEND=dask ATTNLIB_DASK_SCHEDULER=tcp://host:8786
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

__all__ = ["run_jobs"]

#: The joblib backends :func:`run_jobs` accepts (``None``: ``$ATTNLIB_PARALLEL_BACKEND``, else ``"loky"``).
BACKENDS = ("loky", "threading", "dask")
_LOCAL = ("loky", "threading")
_DASK_MISSING = "backend='dask' needs dask and distributed: pip install dask distributed"


def _job(cache_folder: str | None, f: Callable, kwargs: dict) -> Any:
    if cache_folder is not None and os.environ.get("ATTNLIB_CACHE_DIR") != cache_folder:
        os.environ["ATTNLIB_CACHE_DIR"] = cache_folder
    return f(**kwargs)


def _resolve_backend(backend: str | None) -> str | None:
    """The backend name to use (``None``: joblib's default, exactly as before backends existed)."""
    source = "backend"
    if backend is None:
        backend = os.environ.get("ATTNLIB_PARALLEL_BACKEND", "").strip() or None
        source = "ATTNLIB_PARALLEL_BACKEND"
        if backend is None:
            return None
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"{source} must be one of {BACKENDS} (or None), got {backend!r}")
    return backend


@contextmanager
def _dask_client() -> Iterator[Any]:
    """The open :class:`distributed.Client`, else one connected to ``$ATTNLIB_DASK_SCHEDULER`` (closed on exit)."""
    try:
        import distributed  # (imports dask)
    except ImportError as exc:
        raise ImportError(_DASK_MISSING) from exc
    try:
        client = distributed.get_client()
    except ValueError:  # no Client open in this process
        client = None
    if client is not None:
        yield client
        return
    address = os.environ.get("ATTNLIB_DASK_SCHEDULER", "").strip()
    if not address:
        raise RuntimeError("backend='dask' needs an open distributed.Client (client = distributed.Client(...)) "
                           "or a scheduler address in ATTNLIB_DASK_SCHEDULER (e.g. tcp://host:8786)")
    client = distributed.Client(address, set_as_default=False)
    try:
        yield client
    finally:
        client.close()


def _run_parallel(calls: list, n_jobs: int, progress: bool, desc: str) -> list:
    from joblib import Parallel

    if progress:
        from tqdm.auto import tqdm

        return list(tqdm(Parallel(n_jobs=n_jobs, return_as="generator")(calls), total=len(calls), desc=desc))
    return list(Parallel(n_jobs=n_jobs)(calls))


def run_jobs(jobs: Sequence[tuple[Callable, dict]], n_jobs: int = 1, progress: bool = False,
             desc: str = "jobs", backend: str | None = None) -> list:
    """Results of ``f(**kwargs)`` for every ``(f, kwargs)`` in ``jobs``, in order.

    Parameters
    ----------
    jobs : sequence of (callable, dict)
        The jobs; with a process or cluster backend ``f`` and ``kwargs`` must pickle.
    n_jobs : int
        Workers of a local backend: ``1`` runs the jobs in this process, otherwise :class:`joblib.Parallel`
        with ``n_jobs`` workers (``-1``: all cores). Ignored by ``"dask"``, which always runs on the cluster,
        on all its worker threads.
    progress : bool
        Show a tqdm bar (``desc`` its label).
    backend : {None, "loky", "threading", "dask"}
        The joblib backend (set through :class:`joblib.parallel_config`). ``None``: ``$ATTNLIB_PARALLEL_BACKEND``
        if set, else joblib's default (``loky``, or what an enclosing ``parallel_config`` chose). ``"dask"``:
        joblib's Dask backend on the open :class:`distributed.Client`, else on a Client connected to
        ``$ATTNLIB_DASK_SCHEDULER`` for this call.

    Raises
    ------
    ValueError
        For an unknown ``backend`` (or ``$ATTNLIB_PARALLEL_BACKEND``).
    ImportError
        For ``"dask"`` without dask and distributed installed.
    RuntimeError
        For ``"dask"`` with neither an open Client nor ``$ATTNLIB_DASK_SCHEDULER``.
    """
    backend = _resolve_backend(backend)
    jobs = list(jobs)
    if backend != "dask" and n_jobs == 1:
        it = jobs
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(jobs, desc=desc)
        return [f(**kw) for f, kw in it]
    if not jobs:
        return []
    from joblib import delayed, parallel_config

    folder = os.environ.get("ATTNLIB_CACHE_DIR")
    calls = [delayed(_job)(folder, f, kw) for f, kw in jobs]
    if backend is None:
        return _run_parallel(calls, n_jobs, progress, desc)
    if backend in _LOCAL:
        with parallel_config(backend=backend):
            return _run_parallel(calls, n_jobs, progress, desc)
    with _dask_client() as client, parallel_config(backend="dask", client=client):
        return _run_parallel(calls, -1, progress, desc)

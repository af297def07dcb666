"""Running independent jobs in parallel (joblib) with the caller's disk cache.

Reused joblib worker processes keep the environment they were started with, so an ``ATTNLIB_CACHE_DIR`` set
later in the parent (as the book and the tests do) would be ignored by them; :func:`run_jobs` hands the
caller's cache folder to every job explicitly.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

__all__ = ["run_jobs"]


def _job(cache_folder: str | None, f: Callable, kwargs: dict) -> Any:
    if cache_folder is not None and os.environ.get("ATTNLIB_CACHE_DIR") != cache_folder:
        os.environ["ATTNLIB_CACHE_DIR"] = cache_folder
    return f(**kwargs)


def run_jobs(jobs: Sequence[tuple[Callable, dict]], n_jobs: int = 1, progress: bool = False,
             desc: str = "jobs") -> list:
    """Results of ``f(**kwargs)`` for every ``(f, kwargs)`` in ``jobs``, in order.

    ``n_jobs == 1`` runs them in this process; otherwise :class:`joblib.Parallel` with ``n_jobs`` workers
    (``-1``: all cores). ``progress`` shows a tqdm bar.
    """
    jobs = list(jobs)
    if n_jobs == 1:
        it = jobs
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(jobs, desc=desc)
        return [f(**kw) for f, kw in it]
    from joblib import Parallel, delayed

    folder = os.environ.get("ATTNLIB_CACHE_DIR")
    calls = (delayed(_job)(folder, f, kw) for f, kw in jobs)
    if progress:
        from tqdm.auto import tqdm

        return list(tqdm(Parallel(n_jobs=n_jobs, return_as="generator")(calls), total=len(jobs), desc=desc))
    return list(Parallel(n_jobs=n_jobs)(calls))

"""Sweeps of finite-d ERM simulations over a grid, in parallel, each point cached on disk.

Every grid point is one call of :func:`attnlib.finite_d.simulation.simulate_erm`, cached with the
:mod:`attnlib.cache` machinery under a key made of every argument of the run (task parameters, ``d``,
``alpha``, seed, start, method and options) plus the library fingerprint. Because points are cached one by
one, an interrupted sweep resumes where it stopped: finished points are read back, missing or corrupt ones
(reported with :class:`~attnlib.exceptions.CacheWarning`) are recomputed.

The result is a tidy table: a list of dict rows (one per run, the fields of
:meth:`attnlib.finite_d.simulation.ERMResult.as_dict`); :func:`rows_to_columns` turns it into a dict of numpy
columns (no pandas needed).
"""
from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

import numpy as np
from ..cache import cached
from ..parallel import run_jobs
from ..params import TaskParams, check_int
from .simulation import METHODS, STARTS, simulate_erm

__all__ = ["CACHE_NAMESPACE", "erm_point", "sweep_grid", "erm_sweep", "rows_to_columns", "classify_minima"]

#: Cache namespace of single ERM runs.
CACHE_NAMESPACE = "erm"


def erm_point(params: TaskParams, d: int, alpha: float, start: str = "semantic", seed: int = 0,
              method: str = "gd", use_cache: bool = True, **options: Any) -> dict[str, Any]:
    """One ERM run as a tidy row, cached on disk.

    Parameters are those of :func:`attnlib.simulate_erm` (``options`` are passed on, e.g.
    ``lr``, ``steps``, ``n_test``, ``rank``, ``normalize_teacher``); the final ``Q`` is not cached.
    Convergence warnings of the run are issued when it is computed, not when it is read back; the row's
    ``converged`` field records the outcome either way.
    """
    options.pop("keep_Q", None)

    def compute():
        return simulate_erm(params, d, alpha, start=start, seed=seed, method=method, keep_Q=False,
                            **options).as_dict()

    return cached(CACHE_NAMESPACE, compute, use_cache=use_cache, params=params, d=d, alpha=alpha,
                  start=start, seed=seed, method=method, options=options)


def _as_list(name: str, value) -> list:
    if isinstance(value, (str, TaskParams)) or np.isscalar(value):
        return [value]
    values = list(value)
    if not values:
        raise ValueError(f"{name} must not be empty")
    return values


def sweep_grid(params: TaskParams | Sequence[TaskParams] = TaskParams(), alphas: Iterable[float] = (2.0,),
               ds: Iterable[int] = (1000,), seeds: Iterable[int] = (0,), starts: Iterable[str] = ("semantic",),
               methods: Iterable[str] = ("lbfgs",), omegas: Iterable[float] | None = None) -> list[dict]:
    """The grid of a sweep: the Cartesian product of its axes as a list of keyword dicts.

    ``params`` is one :class:`TaskParams` or a list of them; ``omegas``, if given, replaces the ``omega`` of
    each (so ``params x omegas`` task points). Each axis accepts a scalar or an iterable.
    Unknown starts or methods raise ``ValueError`` (naming the parameter) before anything runs.
    """
    plist = _as_list("params", params)
    for p in plist:
        if not isinstance(p, TaskParams):
            raise ValueError(f"params must be TaskParams (or a list of them), got {type(p).__name__}")
    if omegas is not None:
        plist = [p.with_(omega=o) for p in plist for o in _as_list("omegas", omegas)]
    starts, methods = _as_list("starts", starts), _as_list("methods", methods)
    for s in starts:
        if not (isinstance(s, str) and s in STARTS):
            raise ValueError(f"starts must be among {STARTS}, got {s!r}")
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"methods must be among {METHODS}, got {m!r}")
    ds = [check_int("d", d, 1) for d in _as_list("ds", ds)]
    seeds = [check_int("seed", s, 0) for s in _as_list("seeds", seeds)]
    alphas = [float(a) for a in _as_list("alphas", alphas)]
    return [dict(params=p, d=d, alpha=a, start=s, seed=sd, method=m)
            for p, d, a, s, sd, m in itertools.product(plist, ds, alphas, starts, seeds, methods)]


def erm_sweep(params: TaskParams | Sequence[TaskParams] = TaskParams(), alphas: Iterable[float] = (2.0,),
              ds: Iterable[int] = (1000,), seeds: Iterable[int] = (0,), starts: Iterable[str] = ("semantic",),
              methods: Iterable[str] = ("lbfgs",), omegas: Iterable[float] | None = None, n_jobs: int = 1,
              progress: bool = False, use_cache: bool = True, **options: Any) -> list[dict[str, Any]]:
    """Run ERM over a grid (see ``sweep_grid``) with joblib, each point cached individually.

    Parameters
    ----------
    params, alphas, ds, seeds, starts, methods, omegas
        Axes of the grid (scalars or iterables).
    n_jobs : int
        Worker processes for ``joblib.Parallel`` (1: in this process; -1: all cores).
    progress : bool
        Show a tqdm progress bar.
    use_cache : bool
        Read and write the disk cache (``$ATTNLIB_CACHE_DIR``).
    **options
        Passed to :func:`attnlib.simulate_erm` (``lr``, ``steps``, ``n_test``, ``rank``, ...).

    Returns
    -------
    list of dict
        One tidy row per grid point, in grid order.
    """
    grid = sweep_grid(params, alphas, ds, seeds, starts, methods, omegas)
    jobs = [(erm_point, dict(use_cache=use_cache, **point, **options)) for point in grid]
    return run_jobs(jobs, n_jobs=n_jobs, progress=progress, desc="ERM")


def rows_to_columns(rows: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Turn tidy rows into a dict of numpy columns (pandas-free).

    Numeric and boolean fields become numeric arrays (``None`` -> NaN); strings become string arrays;
    list-valued fields (``A``, per-column overlaps) become object arrays.
    """
    if not rows:
        return {}
    keys = list(rows[0])
    for row in rows[1:]:
        for k in row:
            if k not in keys:
                keys.append(k)
    columns = {}
    for k in keys:
        values = [row.get(k) for row in rows]
        if any(isinstance(v, (list, tuple, dict)) for v in values):
            col = np.empty(len(values), dtype=object)
            col[:] = values
        elif all(isinstance(v, bool) for v in values):
            col = np.array(values, dtype=bool)
        elif all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
            col = np.array([np.nan if v is None else v for v in values],
                           dtype=int if all(isinstance(v, int) for v in values) else float)
        else:
            col = np.array(values)
        columns[k] = col
    return columns


#: Thresholds of :func:`classify_minima` on ``theta/sigma^2`` and ``|m|/sigma^2``.
SEMANTIC_THRESHOLD = 0.1
POSITIONAL_THRESHOLD = 0.2


def classify_minima(m, theta, sigma: float, semantic: float = SEMANTIC_THRESHOLD,
                    positional: float = POSITIONAL_THRESHOLD) -> np.ndarray:
    """Kind of each finite-d minimiser from its overlaps: ``"semantic"`` (``|theta|/sigma^2 > semantic`` and
    ``|m|/sigma^2 <= positional``), ``"positional"`` (the reverse), ``"mixed"`` (both above) or
    ``"uninformed"`` (neither). On the branches of the reference task ``theta/sigma^2`` is 0.4-0.7 and
    ``m/sigma^2`` about 1, so the thresholds sit far below both."""
    s2 = float(sigma) ** 2
    sem = np.abs(np.asarray(theta, float)) / s2 > semantic
    pos = np.abs(np.asarray(m, float)) / s2 > positional
    return np.where(sem & pos, "mixed", np.where(sem, "semantic", np.where(pos, "positional", "uninformed")))

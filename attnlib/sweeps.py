"""Branch curves, thresholds and the phase diagram of the state evolution.

* :func:`branch_curve` follows one branch along an ``alpha`` grid with warm starts.
* :func:`alpha_sweep` gives both branches as a tidy :class:`pandas.DataFrame` (one row per point), cached.
* :func:`critical_alpha` (``alpha_c``): where the training losses ``eps_t`` of the semantic and positional
  branches cross, by Brent's root finding (bracketed on a coarse grid, not read off it).
* :func:`linear_crossing_alpha` (``alpha_l``): where the test error of the global minimum falls below the
  linear baseline's ``eps_lin``.
* :func:`spinodal_alpha`: where a branch stops existing as a local minimum of the training loss: its
  defining overlap vanishes (it merges with the agnostic point), or the curvature of ``eps_t`` across the
  branch, along its held overlap (``m`` for the semantic branch, ``theta`` for the positional one, measured
  by pinning that overlap at a small value, :func:`branch_curvature`), turns negative. The paper does not
  compute it.
* :func:`phase_diagram` sweeps these over ``omega`` in parallel (joblib; any joblib backend, e.g. Dask).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy.optimize import brentq
from tqdm.auto import tqdm

from .cache import cached
from .exceptions import ConvergenceWarning
from .generalisation import linear_baseline_error
from .params import TaskParams, check_alpha
from .state_evolution import Overlaps, SEResult, SESolver, solve_state_evolution

__all__ = ["ThresholdNotFound", "follow_branch", "branch_curve", "alpha_sweep", "energy_gap", "critical_alpha",
           "linear_crossing_alpha", "branch_curvature", "branch_exists", "spinodal_alpha", "phase_diagram",
           "DEFAULT_ALPHA_GRID"]

#: Coarse grid used to bracket thresholds.
DEFAULT_ALPHA_GRID = tuple(np.round(np.geomspace(0.25, 5.0, 16), 4))
#: Pinned value of the held overlap used to measure the curvature across a branch.
CURVATURE_STEP = 0.02
#: Iterations allowed to the plain damped iteration that double-checks a branch's disappearance.
PLAIN_MAX_ITER = 300
#: A branch whose defining overlap (theta or m) is below this times rho has merged with the agnostic point.
EXISTENCE_TOL = 1e-3


class ThresholdNotFound(RuntimeError):
    """A threshold has no crossing inside the searched ``alpha`` range."""


def _check_grid(alphas) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(alphas, dtype=float))
    if arr.size == 0:
        raise ValueError("alphas must contain at least one value")
    for a in arr:
        check_alpha(a)
    return arr


def _defining_overlap(x, branch: str) -> float:
    """``|theta|`` for the semantic branch, ``|m|`` otherwise (the overlap whose vanishing ends a branch)."""
    return abs(x.theta if branch == "semantic" else x.m)


def follow_branch(params: TaskParams, alpha: float, branch: str, start: Overlaps | None,
                  solver: SESolver | None = None) -> SEResult:
    """One point of a branch, warm-started from a nearby point of the same branch, followed continuously.

    Anderson acceleration can jump from the continuation of a branch to another fixed point (in practice the
    uninformed one, ``m = theta = 0``, which coexists with the branch near its end). So when the branch's
    defining overlap (``theta`` semantic, ``m`` positional) was present at ``start`` but vanishes (below
    ``EXISTENCE_TOL * rho``) or the iteration fails, the point is solved again from ``start`` with plain damped
    steps (no acceleration, up to ``PLAIN_MAX_ITER`` iterations), which follow the attractor continuously; that
    result is kept when it converges.
    """
    solver = solver or SESolver()
    floor = EXISTENCE_TOL * params.rho
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_state_evolution(params, alpha, branch, start=start, solver=solver)
        if start is None or _defining_overlap(start, branch) < floor or (
                res.converged and _defining_overlap(res, branch) >= floor):
            return res
        plain = replace(solver, anderson=0, max_iter=max(solver.max_iter, PLAIN_MAX_ITER))
        again = solve_state_evolution(params, alpha, branch, start=start, solver=plain)
    return again if again.converged or not res.converged else res


def branch_curve(params: TaskParams, alphas, branch: str, solver: SESolver | None = None,
                 start: Overlaps | None = None) -> list[SEResult]:
    """Solve one branch along ``alphas`` (in the order given), warm-starting each point from the previous
    converged one (:func:`follow_branch`)."""
    out = []
    for a in _check_grid(alphas):
        res = follow_branch(params, float(a), branch, start, solver)
        if res.converged:
            start = res.overlaps
        else:
            warnings.warn(f"{branch} branch did not converge at alpha={a:g} (omega={params.omega:g})",
                          ConvergenceWarning, stacklevel=2)
        out.append(res)
    return out


def _curve_rows(params, alphas, branch, solver):
    return [r.as_row() for r in branch_curve(params, alphas, branch, solver)]


def alpha_sweep(params: TaskParams, alphas, branches=("semantic", "positional"),
                solver: SESolver | None = None, n_jobs: int = 1, use_cache: bool = True) -> pd.DataFrame:
    """Both (or the given) branches along an ``alpha`` grid, as a tidy table.

    Each branch is followed in increasing ``alpha`` with warm starts; the semantic branch is followed
    downwards from the largest ``alpha`` (it is easiest to find where it is the global minimum). Branches run
    in parallel through joblib (``n_jobs``); each branch curve is cached on disk under every parameter.

    Returns
    -------
    pandas.DataFrame
        One row per (branch, alpha): overlaps, conjugates, ``test_error``, ``train_loss``, ``converged``,
        iterations, residual, seconds and the task parameters.
    """
    solver = solver or SESolver()
    grid = np.sort(_check_grid(alphas))

    def one(branch):
        order = grid[::-1] if branch == "semantic" else grid
        return cached("se-branch", lambda: _curve_rows(params, order, branch, solver), use_cache=use_cache,
                      params=params, alphas=order, branch=branch, solver=solver)

    parts = Parallel(n_jobs=n_jobs)(delayed(one)(b) for b in branches) if n_jobs != 1 else \
        [one(b) for b in branches]
    df = pd.DataFrame([row for part in parts for row in part])
    return df.sort_values(["branch", "alpha"]).reset_index(drop=True)


def _nearest_start(table: dict, alpha: float):
    if not table:
        return None
    key = min(table, key=lambda a: abs(a - alpha))
    return table[key]


def energy_gap(params: TaskParams, alpha: float, solver: SESolver | None = None, starts=None) -> float:
    """``eps_t(semantic) - eps_t(positional)`` at ``alpha`` (negative where the semantic minimum is global)."""
    starts = starts or {}
    sem = follow_branch(params, alpha, "semantic", starts.get("semantic"), solver)
    pos = follow_branch(params, alpha, "positional", starts.get("positional"), solver)
    return sem.train_loss - pos.train_loss


def _bracket(alphas, values):
    """First sign change (+ to -) of ``values`` along increasing ``alphas``; None if there is none."""
    for i in range(len(alphas) - 1):
        if values[i] > 0 >= values[i + 1]:
            return alphas[i], alphas[i + 1]
    return None


def _refine_root(f, lo: float, hi: float, f_lo: float | None, f_hi: float | None, xtol: float, name: str) -> float:
    """Brent's method on ``[lo, hi]``; if ``f`` recomputed at the ends (from other warm starts) no longer
    changes sign there -- the fixed points are only piecewise smooth in ``alpha`` -- fall back to the linear
    interpolation of the bracketing values (``f_lo``, ``f_hi``, or ``f`` at the ends), with a warning."""
    a, b = f(lo), f(hi)
    if a * b < 0:
        return brentq(f, lo, hi, xtol=xtol)
    f_lo = a if f_lo is None else f_lo
    f_hi = b if f_hi is None else f_hi
    root = lo + (hi - lo) * f_lo / (f_lo - f_hi) if f_lo != f_hi else 0.5 * (lo + hi)
    warnings.warn(f"{name}: the bracket [{lo:g}, {hi:g}] did not keep its sign change when recomputed; "
                  f"returning the linear interpolation {root:.4g} of the bracketing values", ConvergenceWarning,
                  stacklevel=3)
    return float(min(max(root, lo), hi))


def critical_alpha(params: TaskParams, solver: SESolver | None = None, alphas=DEFAULT_ALPHA_GRID,
                   xtol: float = 1e-4, use_cache: bool = True) -> float:
    """``alpha_c``: where the semantic and positional training losses are equal (spec section 3).

    The gap ``eps_t(sem) - eps_t(pos)`` is evaluated on the coarse grid ``alphas`` (both branches with warm
    starts) to bracket its first sign change from + to -, then refined by Brent's method to ``xtol`` (each
    evaluation warm-started from the nearest grid point).

    Raises
    ------
    ThresholdNotFound
        If the gap does not change sign on the grid (no transition in that range).
    """
    solver = solver or SESolver()

    def compute():
        df = alpha_sweep(params, alphas, solver=solver, use_cache=use_cache)
        sem = df[df.branch == "semantic"].set_index("alpha")
        pos = df[df.branch == "positional"].set_index("alpha")
        ok = sem.converged & pos.converged
        grid = np.array(sem.index[ok])
        gap = (sem.train_loss - pos.train_loss)[ok].to_numpy()
        br = _bracket(grid, gap)
        if br is None:
            return None
        starts = {b: {a: Overlaps(r.q, r.m, r.V, r.theta) for a, r in d[ok].iterrows()}
                  for b, d in (("semantic", sem), ("positional", pos))}

        def f(a):
            return energy_gap(params, a, solver, {b: _nearest_start(s, a) for b, s in starts.items()})

        return _refine_root(f, *br, gap[list(grid).index(br[0])], gap[list(grid).index(br[1])], xtol, "alpha_c")

    value = cached("alpha-c", compute, use_cache=use_cache, params=params, solver=solver, alphas=alphas,
                   xtol=xtol)
    if value is None:
        raise ThresholdNotFound(f"semantic and positional training losses do not cross for alpha in "
                                f"[{min(alphas)}, {max(alphas)}] (omega={params.omega:g})")
    return float(value)


def linear_crossing_alpha(params: TaskParams, solver: SESolver | None = None, alphas=DEFAULT_ALPHA_GRID,
                          xtol: float = 1e-4, use_cache: bool = True) -> float:
    """``alpha_l``: the smallest ``alpha`` where the global minimum's test error falls below ``eps_lin``.

    The global minimum is the branch of lowest ``eps_t`` (semantic above ``alpha_c``), so its ``eps_g``
    jumps at ``alpha_c``; if the jump already takes it below ``eps_lin``, ``alpha_l = alpha_c``. Otherwise
    the crossing of the continuous part is refined by Brent's method.

    Raises
    ------
    ThresholdNotFound
        If the global-minimum test error stays above ``eps_lin`` on the grid.
    """
    solver = solver or SESolver()

    def compute():
        eps_lin = linear_baseline_error(params)
        df = alpha_sweep(params, alphas, solver=solver, use_cache=use_cache)
        sem = df[df.branch == "semantic"].set_index("alpha")
        pos = df[df.branch == "positional"].set_index("alpha")
        try:
            a_c = critical_alpha(params, solver, alphas, xtol, use_cache)
        except ThresholdNotFound:
            a_c = math.inf
        grid = np.array(sem.index)
        glob = np.where(grid < a_c, pos.test_error.to_numpy(), sem.test_error.to_numpy())
        branch_of = np.where(grid < a_c, "positional", "semantic")
        below = np.nonzero(glob < eps_lin)[0]
        if below.size == 0:
            return None
        i = below[0]
        if i == 0:
            return float(grid[0])
        lo, hi = grid[i - 1], grid[i]
        if branch_of[i] != branch_of[i - 1]:  # the crossing is at the jump, or just after it
            sem_at_c = follow_branch(params, a_c, "semantic", Overlaps(*sem.loc[hi, ["q", "m", "V", "theta"]]),
                                     solver)
            if sem_at_c.test_error < eps_lin:
                return float(a_c)
            lo = a_c
        branch = branch_of[i]
        ref = (sem if branch == "semantic" else pos).loc[hi]

        def f(a):
            return follow_branch(params, a, branch, Overlaps(ref.q, ref.m, ref.V, ref.theta), solver).test_error \
                - eps_lin

        return _refine_root(f, lo, hi, None, None, xtol, "alpha_l")

    value = cached("alpha-l", compute, use_cache=use_cache, params=params, solver=solver, alphas=alphas,
                   xtol=xtol)
    if value is None:
        raise ThresholdNotFound(f"the global minimum's test error stays above eps_lin for alpha in "
                                f"[{min(alphas)}, {max(alphas)}] (omega={params.omega:g})")
    return float(value)


def branch_curvature(params: TaskParams, alpha: float, branch: str, solver: SESolver | None = None,
                     start: Overlaps | None = None, step: float = CURVATURE_STEP) -> float:
    """Curvature of the training loss across a branch, along its held overlap.

    ``kappa = (eps_t(pinned at step) - eps_t(branch)) / step^2``, the pinned overlap being ``m`` for the
    semantic branch and ``theta`` for the positional one (a constrained fixed point,
    :func:`~attnlib.state_evolution.solve_state_evolution` with ``fix_m`` / ``fix_theta``). ``kappa > 0``:
    the branch is a local minimum in that direction; ``kappa < 0``: a saddle.
    """
    if branch not in ("semantic", "positional"):
        raise ValueError(f"branch must be 'semantic' or 'positional', got {branch!r}")
    base = solve_state_evolution(params, alpha, branch, start=start, solver=solver)
    x = base.overlaps
    if branch == "semantic":
        if not params.swap_symmetric:
            raise ValueError("the semantic curvature along m needs a token-swap-symmetric A (A_11 == A_22)")
        pinned = solve_state_evolution(params, alpha, branch, solver=solver, fix_m=step,
                                       start=Overlaps(x.q, step, x.V, x.theta))
    else:
        pinned = solve_state_evolution(params, alpha, branch, solver=solver, fix_theta=step,
                                       start=Overlaps(x.q, x.m, x.V, min(step, 0.5 * math.sqrt(params.rho * x.q))))
    if not (base.converged and pinned.converged):
        return math.nan
    return (pinned.train_loss - base.train_loss) / step**2


def branch_exists(params: TaskParams, alpha: float, branch: str, solver: SESolver | None = None,
                  start: Overlaps | None = None) -> tuple[bool, SEResult]:
    """Is ``branch`` a distinct local minimum of the training loss at ``alpha``?

    It is when its fixed point converges, its defining overlap is non-zero (``theta`` for the semantic
    branch, ``m`` for the positional one, above ``EXISTENCE_TOL * rho``: otherwise it has merged with the
    agnostic point) and the training loss curves upwards along its held overlap
    (:func:`branch_curvature` ``> 0``; not measured for a semantic branch without token-swap symmetry,
    which holds no overlap). From a ``start`` on the branch, the point is followed continuously
    (:func:`follow_branch`).
    """
    res = follow_branch(params, alpha, branch, start, solver)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if not res.converged:
            return False, res
        if _defining_overlap(res, branch) < EXISTENCE_TOL * params.rho:
            return False, res
        if branch == "semantic" and not params.swap_symmetric:
            return True, res
        return bool(branch_curvature(params, alpha, branch, solver, start=res.overlaps) > 0), res


def spinodal_alpha(params: TaskParams, branch: str, solver: SESolver | None = None, alphas=DEFAULT_ALPHA_GRID,
                   xtol: float = 1e-3, use_cache: bool = True) -> float | None:
    """Where ``branch`` stops existing as a local minimum of the training loss (:func:`branch_exists`).

    The branch is followed along the grid (the semantic one from large to small ``alpha``, the positional one
    from small to large), warm-starting each point from the last one where it exists; the first change from
    "exists" to "does not" is refined by bisection to ``xtol``. Returns ``None`` if there is no such change
    on the grid (the branch exists throughout, or nowhere).
    """
    if branch not in ("semantic", "positional"):
        raise ValueError(f"branch must be 'semantic' or 'positional', got {branch!r}")
    solver = solver or SESolver()

    def compute():
        grid = np.sort(_check_grid(alphas))
        if branch == "semantic":
            grid = grid[::-1]
        start, prev = None, None
        for a in grid:
            ok, res = branch_exists(params, float(a), branch, solver, start)
            if ok:
                start, prev = res.overlaps, float(a)
                continue
            if prev is None:
                return None  # does not exist where the search starts
            good, bad = prev, float(a)
            while abs(good - bad) > xtol:
                mid = 0.5 * (good + bad)
                ok, res = branch_exists(params, mid, branch, solver, start)
                if ok:
                    good, start = mid, res.overlaps
                else:
                    bad = mid
            return 0.5 * (good + bad)
        return None

    value = cached("spinodal", compute, use_cache=use_cache, params=params, branch=branch, solver=solver,
                   alphas=alphas, xtol=xtol)
    return None if value is None else float(value)


def _phase_point(params, solver, alphas, spinodals, use_cache):
    row = {"omega": params.omega, "eps_lin": linear_baseline_error(params)}
    for name, fn in (("alpha_c", critical_alpha), ("alpha_l", linear_crossing_alpha)):
        try:
            row[name] = fn(params, solver, alphas, use_cache=use_cache)
        except ThresholdNotFound:
            row[name] = math.nan
    if spinodals:
        for branch in ("semantic", "positional"):
            s = spinodal_alpha(params, branch, solver, alphas, use_cache=use_cache)
            row[f"spinodal_{branch}"] = math.nan if s is None else s
    return row


def phase_diagram(params: TaskParams, omegas, solver: SESolver | None = None, alphas=DEFAULT_ALPHA_GRID,
                  spinodals: bool = False, n_jobs: int = -1, progress: bool = False,
                  use_cache: bool = True) -> pd.DataFrame:
    """``alpha_c(omega)``, ``alpha_l(omega)`` (and optionally the spinodals) over a grid of ``omega``.

    Runs the values of ``omega`` in parallel through :class:`joblib.Parallel` (``n_jobs``; switch the
    backend with ``joblib.parallel_backend`` to use e.g. a Dask cluster). ``NaN`` marks a threshold that
    has no crossing in the ``alpha`` range (the column is then explained by ``found_*``).
    """
    solver = solver or SESolver()
    omegas = np.atleast_1d(np.asarray(omegas, dtype=float))
    tasks = [replace(params, omega=float(w)) for w in omegas]
    it = tqdm(tasks, desc="phase diagram", disable=not progress)
    rows = Parallel(n_jobs=n_jobs)(delayed(_phase_point)(p, solver, alphas, spinodals, use_cache) for p in it)
    df = pd.DataFrame(rows)
    for name in ("alpha_c", "alpha_l"):
        df[f"found_{name}"] = np.isfinite(df[name])
    return df

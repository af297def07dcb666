"""Branches, thresholds and the phase diagram of the state evolution.

Point-wise, by the state-evolution iteration (fast; default Gauss-Hermite rule):

* :func:`branch_curve` follows one branch along an ``alpha`` grid with warm starts (:func:`follow_branch`).
* :func:`alpha_sweep` gives both branches as a tidy :class:`pandas.DataFrame` (one row per point), cached.
* :func:`branch_curvature`: curvature of ``eps_t`` across a branch along its held overlap (a diagnostic).

Grid-independent, by pseudo-arclength continuation (:mod:`attnlib.theory.continuation`, with the smooth rule of
:func:`continuation_settings`):

* :func:`branch_trace` follows a branch from where it is unambiguous (the semantic one from the top of the
  ``alpha`` range down, the positional one from a point with ``m`` clearly non-zero, both ways) to its ends
  (a fold, or the continuous vanishing of its defining overlap), cached.
* :func:`critical_alpha` (``alpha_c``): where the training losses ``eps_t`` of the semantic and positional
  branches are equal, searched only where both exist as distinct branches (defining overlaps above
  ``VANISH_FLOOR * rho``), bracketed on the traces and refined by Brent's method on Newton-solved fixed
  points. The ``alpha`` grid a caller passes only sets the search range.
* :func:`linear_crossing_alpha` (``alpha_l``): where the test error of the global minimum (the branch of
  lowest ``eps_t``) falls below the linear baseline's ``eps_lin``.
* :func:`branch_ends` and :func:`phase_diagram` (over ``omega``, in parallel through joblib).
* :func:`semantic_takeover`: where the global minimum becomes semantic, also when ``alpha_c`` is undefined
  (no positional branch, branches that do not coexist, one branch lower wherever both exist).

Both thresholds raise :class:`ThresholdNotFound` with the reason when there is no transition in the range.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from ..cache import cached
from .continuation import (VANISH_FLOOR, BranchEnd, BranchTrace, Continuation, FixedPointMap, defining_overlap,
                           newton_fixed_point, trace_branch)
from ..exceptions import ConvergenceWarning
from ..parallel import run_jobs
from .generalisation import linear_baseline_error
from ..params import TaskParams, check_alpha
from .quadrature import Quadrature
from .state_evolution import Overlaps, SEResult, SESolver, default_start, solve_state_evolution

__all__ = ["ThresholdNotFound", "follow_branch", "rescue_branch_point", "branch_curve", "alpha_sweep",
           "branch_curvature", "continuation_settings", "branch_trace", "branch_point", "energy_gap", "critical_alpha",
           "linear_crossing_alpha", "branch_ends", "phase_diagram", "summarise_phase_diagram", "semantic_takeover",
           "DEFAULT_ALPHA_GRID", "DEFAULT_RANGE", "SMOOTH_QUADRATURE", "TIE_SMOOTHING"]

#: A coarse grid of ``alpha`` (for point-wise sweeps; thresholds use only its range).
DEFAULT_ALPHA_GRID = tuple(np.round(np.geomspace(0.25, 5.0, 16), 4))
#: Default ``alpha`` range searched by the continuation-based functions.
DEFAULT_RANGE = (0.2, 6.0)
#: Quadrature of the continuation: 2^14 symmetrised scrambled Sobol points (:class:`Quadrature` "sobol-sym").
#: Tensor Gauss-Hermite rules put large weights on a few central node orbits; where one of them switches
#: proximal minimum the map jumps by a few per cent, which creates spurious folds near the ends of the
#: branches (seen at omega = 0 with 12 nodes per dimension). Equal weights of 6e-5 keep every switch small,
#: and the symmetrisation keeps m = 0 and theta = 0 exactly invariant (plain Sobol points do not, and leave
#: spurious fixed points with theta ~ 1e-3 below the end of the semantic branch).
SMOOTH_QUADRATURE = Quadrature("sobol-sym", 14)
#: Temperature of the smoothed choice between a node's two best proximal minima used by the continuation
#: (:class:`~attnlib.theory.state_evolution.SESolver` ``tie_smoothing``): about 0.3 % of the nodes lie within it of a
#: tie, so it moves the fixed points by far less than the quadrature error while making the map smooth.
TIE_SMOOTHING = 5e-5
#: Ring starts of the continuation's proximal search (:class:`~attnlib.theory.state_evolution.SESolver` ``n_ring``):
#: 4 (as in the default pooled rule) instead of 12 halves the cost of a map evaluation, and at the branch ends of
#: omega = 0 and 0.3 the two searches find the same minima (residuals equal to 1e-10, the descent tolerance).
SMOOTH_N_RING = 4
#: Order of the scrambled Sobol rule of the coarse probe that looks for the positional branch (only where ``m``
#: is clearly non-zero; the trace itself starts from the probe's point under the continuation's rule).
PROBE_ORDER = 10
#: Pinned value of the held overlap used to measure the curvature across a branch.
CURVATURE_STEP = 0.02
#: Iterations allowed to the plain damped iteration that double-checks a branch's disappearance.
PLAIN_MAX_ITER = 300
#: A branch whose defining overlap (theta or m) is below this times rho has merged with the agnostic point.
EXISTENCE_TOL = VANISH_FLOOR
#: Where a branch point collapses onto the uninformed point, :func:`follow_branch` looks for the branch by
#: Newton's method (which, unlike the iteration, also converges to a fixed point that repels the iteration)
#: with at most this many corrector iterations per round of the continuation settings.
RESCUE_NEWTON = 3
#: Cold starts of that search: the default start with its defining overlap scaled by these factors.
RESCUE_SCALES = (0.6, 0.3)


class ThresholdNotFound(RuntimeError):
    """A threshold has no crossing inside the searched ``alpha`` range."""


def _check_grid(alphas) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(alphas, dtype=float))
    if arr.size == 0:
        raise ValueError("alphas must contain at least one value")
    for a in arr:
        check_alpha(a)
    return arr


def _on_branch(params: TaskParams, branch: str, res: SEResult) -> bool:
    """Did ``res`` converge with the branch's defining overlap present (at least ``EXISTENCE_TOL * rho``)?"""
    return res.converged and defining_overlap(branch, res) >= EXISTENCE_TOL * params.rho


def follow_branch(params: TaskParams, alpha: float, branch: str, start: Overlaps | None,
                  solver: SESolver | None = None) -> SEResult:
    """One point of a branch, warm-started from a nearby point of the same branch, followed continuously.

    Anderson acceleration can jump from the continuation of a branch to another fixed point (in practice the
    uninformed one, ``m = theta = 0``, which coexists with the branch near its end). So when the branch's
    defining overlap (``theta`` semantic, ``m`` positional) was present at ``start`` but vanishes (below
    ``EXISTENCE_TOL * rho``) or the iteration fails, the point is solved again from ``start`` with plain damped
    steps (no acceleration, up to ``PLAIN_MAX_ITER`` iterations), which follow the attractor continuously; that
    result is kept when it converges.

    Where the branch repels the iteration (the positional branch at ``omega = 0``: every iteration from
    ``m > 0`` flows to ``m = 0``), even plain steps end on the uninformed point. So when the point still
    collapses, from a cold start (``start=None``) or from a point of the branch, the branch is looked for by
    Newton's method (:func:`rescue_branch_point`); the result is kept if it converges with the defining overlap
    present. If not, the uninformed point is returned: the branch does not exist at ``alpha`` (it ended) or
    was not found from here; :func:`branch_trace` finds its ends.
    """
    solver = solver or SESolver()
    cold = start is None or defining_overlap(branch, start) < EXISTENCE_TOL * params.rho
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_state_evolution(params, alpha, branch, start=start, solver=solver)
        if _on_branch(params, branch, res):
            return res
        if not cold:
            plain = replace(solver, anderson=0, max_iter=max(solver.max_iter, PLAIN_MAX_ITER))
            again = solve_state_evolution(params, alpha, branch, start=start, solver=plain)
            res = again if again.converged or not res.converged else res
            if _on_branch(params, branch, res):
                return res
    if branch not in ("semantic", "positional") or (start is not None and cold):
        return res
    found = rescue_branch_point(params, alpha, branch, None if cold else start, solver)
    return found if found is not None else res


def rescue_branch_point(params: TaskParams, alpha: float, branch: str, start: Overlaps | None,
                        solver: SESolver | None = None) -> SEResult | None:
    """The point of ``branch`` at ``alpha`` by Newton's method (:func:`attnlib.newton_fixed_point`), from
    ``start`` (a nearby point of the branch) or, if None, from the branch's default start with its defining
    overlap scaled by each of :data:`RESCUE_SCALES` in turn; at most :data:`RESCUE_NEWTON` corrector
    iterations per round. Returns the first converged fixed point whose defining overlap is present (at least
    ``EXISTENCE_TOL * rho``), else None."""
    solver = solver or SESolver()
    if start is None:
        x = default_start(params, branch)
        starts = [Overlaps(q=x.q, m=x.m * f, V=x.V, theta=x.theta * f) for f in RESCUE_SCALES]
    else:
        starts = [start]
    settings = Continuation(solver=solver, max_newton=RESCUE_NEWTON)
    for x0 in starts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            try:
                res = newton_fixed_point(params, alpha, branch, x0, settings=settings)
            except (ValueError, ArithmeticError):   # Newton left the domain of the map: no point from here
                continue
        if _on_branch(params, branch, res):
            return res
    return None


def branch_curve(params: TaskParams, alphas, branch: str, solver: SESolver | None = None,
                 start: Overlaps | None = None) -> list[SEResult]:
    """Solve one branch along ``alphas`` (in the order given), warm-starting each point from the previous
    converged one: by :func:`follow_branch` under ``solver``, or, with ``solver=None``, by the default rule of
    :func:`~attnlib.solve_state_evolution` (whose start rule's point is found by :func:`follow_branch` too)."""
    out = []
    for a in _check_grid(alphas):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)   # one warning per point, below
            res = (solve_state_evolution(params, float(a), branch, start=start) if solver is None
                   else follow_branch(params, float(a), branch, start, solver))
        if res.converged:
            start = res.overlaps
        else:
            warnings.warn(f"{branch} branch did not converge at alpha={a:g} (omega={params.omega:g})",
                          ConvergenceWarning, stacklevel=2)
        out.append(res)
    return out


def _curve_rows(params, alphas, branch, solver):
    return [r.as_row() for r in branch_curve(params, alphas, branch, solver)]


def _cached_curve(params, alphas, branch, solver, use_cache):
    """One branch curve of :func:`alpha_sweep`, cached (a module-level job for ``attnlib.parallel.run_jobs``)."""
    return cached("se-branch", lambda: _curve_rows(params, alphas, branch, solver), use_cache=use_cache,
                  params=params, alphas=alphas, branch=branch, solver=solver)


def alpha_sweep(params: TaskParams, alphas, branches=("semantic", "positional"),
                solver: SESolver | None = None, n_jobs: int = 1, use_cache: bool = True) -> pd.DataFrame:
    """Both (or the given) branches along an ``alpha`` grid, as a tidy table.

    Each branch is followed in increasing ``alpha`` with warm starts; the semantic branch is followed
    downwards from the largest ``alpha`` (it is easiest to find where it is the global minimum). Branches run
    in parallel through ``attnlib.parallel.run_jobs`` (``n_jobs``; ``$ATTNLIB_PARALLEL_BACKEND`` chooses where);
    each branch curve is cached on disk under every parameter.

    Each point is ``attnlib.theory.sweeps.follow_branch``: where the iteration collapses onto the uninformed point
    (``m = theta = 0``) from a cold start or from a point of the branch, the branch is looked for by Newton's
    method before the uninformed point is accepted. A row whose defining overlap (``theta`` semantic, ``m``
    positional) vanishes is therefore the uninformed point where the branch was not found: beyond its end, as a
    rule (:func:`attnlib.branch_trace` locates the ends).

    ``solver=None`` (the default) solves every point with the default rule of
    :func:`~attnlib.solve_state_evolution` (pooled scrambled Sobol rules, :func:`attnlib.solve_chord`), with
    standard errors; an :class:`~attnlib.theory.state_evolution.SESolver` iterates its single rule instead
    (faster, with the bias the numerics appendix measures, and no error column).

    Returns
    -------
    pandas.DataFrame
        One row per (branch, alpha): overlaps, conjugates, ``test_error``, ``train_loss``, ``converged``,
        map evaluations (``n_iter``), residual, seconds, the quadrature ``rule``, the task parameters and, with
        the default rule, the standard errors ``q_err, m_err, V_err, theta_err, test_error_err,
        train_loss_err``.
    """
    params.require_two_tokens("alpha_sweep")
    if solver is not None and not isinstance(solver, SESolver):
        raise ValueError(f"solver must be an SESolver or None, got {type(solver).__name__}")
    grid = np.sort(_check_grid(alphas))

    jobs = [(_cached_curve, dict(params=params, alphas=grid[::-1] if b == "semantic" else grid, branch=b,
                                 solver=solver, use_cache=use_cache)) for b in branches]
    parts = run_jobs(jobs, n_jobs=n_jobs)
    df = pd.DataFrame([row for part in parts for row in part])
    return df.sort_values(["branch", "alpha"]).reset_index(drop=True)


def branch_curvature(params: TaskParams, alpha: float, branch: str, solver: SESolver | None = None,
                     start: Overlaps | None = None, step: float = CURVATURE_STEP) -> float:
    """Curvature of the training loss across a branch, along its held overlap.

    ``kappa = (eps_t(pinned at step) - eps_t(branch)) / step^2``, the pinned overlap being ``m`` for the
    semantic branch and ``theta`` for the positional one (a constrained fixed point,
    :func:`~attnlib.solve_state_evolution` with ``fix_m`` / ``fix_theta``). ``kappa > 0``:
    the branch is a local minimum in that direction; ``kappa < 0``: a saddle. Both fixed points are solved under
    the one rule of ``solver`` (default :class:`~attnlib.theory.state_evolution.SESolver`), since a pinned
    point has no pooled-rule solver and the difference must not mix two rules.
    """
    if branch not in ("semantic", "positional"):
        raise ValueError(f"branch must be 'semantic' or 'positional', got {branch!r}")
    solver = solver or SESolver()
    base = solve_state_evolution(params, alpha, branch, start=start, solver=solver)
    x = base.overlaps
    if branch == "semantic":
        pinned = solve_state_evolution(params, alpha, branch, solver=solver, fix_m=step,
                                       start=Overlaps(x.q, step, x.V, x.theta))
    else:
        pinned = solve_state_evolution(params, alpha, branch, solver=solver, fix_theta=step,
                                       start=Overlaps(x.q, x.m, x.V, min(step, 0.5 * math.sqrt(params.rho * x.q))))
    if not (base.converged and pinned.converged):
        return math.nan
    return (pinned.train_loss - base.train_loss) / step**2




def continuation_settings(solver: SESolver | Continuation | None = None) -> Continuation:
    """The continuation settings used by the thresholds: ``solver`` if it is a :class:`Continuation`; an
    :class:`SESolver` wrapped as it is; by default the smooth rule :data:`SMOOTH_QUADRATURE` with
    :data:`TIE_SMOOTHING` and :data:`SMOOTH_N_RING` ring starts."""
    if isinstance(solver, Continuation):
        return solver
    if isinstance(solver, SESolver):
        return Continuation(solver=solver)
    if solver is None:
        return Continuation(solver=SESolver(quadrature=SMOOTH_QUADRATURE, tie_smoothing=TIE_SMOOTHING,
                                            n_ring=SMOOTH_N_RING))
    raise ValueError(f"solver must be an SESolver, a Continuation or None, got {type(solver).__name__}")


def _trace_range(lo: float, hi: float) -> tuple[float, float]:
    """The range over which thresholds trace the branches: the default range, widened to include
    ``[lo, hi]`` (so that a narrower search range reuses the same traces and the same branch)."""
    return min(lo, DEFAULT_RANGE[0]), max(hi, DEFAULT_RANGE[1])


def _range(alpha_range, alphas) -> tuple[float, float]:
    if alphas is not None:
        grid = _check_grid(alphas)
        alpha_range = (float(grid.min()), float(grid.max()))
    lo, hi = (check_alpha(a) for a in alpha_range)
    if not lo < hi:
        raise ValueError(f"alpha_range must be increasing, got ({lo}, {hi})")
    return lo, hi


#: Number of points of the range at which :func:`branch_trace` looks for the positional branch.
_POSITIONAL_PROBES = 7
#: Starts tried at most for the positional trace (the one covering the widest range of alpha is kept).
_POSITIONAL_TRIES = 3


def _positional_starts(params: TaskParams, lo: float, hi: float, solver: SESolver) -> list:
    """Where the positional branch is unambiguous: the points of a coarse probe of the range (the
    state-evolution iteration of ``solver`` from ``m = 0.25``, ``V = 10``) where ``m`` is clearly non-zero
    (ten times the vanishing floor), the middle one first, as ``(alpha, overlaps)``. A Sobol rule is probed at
    order :data:`PROBE_ORDER` (same scrambling): the probe only has to find the branch, which the trace then
    solves under ``solver`` from the probe's point."""
    start = Overlaps(q=0.2 * params.rho, m=0.25, V=10.0, theta=0.0)
    quad = solver.quadrature
    if quad.rule != "gauss-hermite" and quad.order > PROBE_ORDER:
        solver = replace(solver, quadrature=replace(quad, order=PROBE_ORDER))
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for a in np.geomspace(lo, hi, _POSITIONAL_PROBES):
            res = solve_state_evolution(params, float(a), "positional", start=start, solver=solver)
            if res.converged and abs(res.m) >= 10 * VANISH_FLOOR * params.rho:
                found.append((float(a), res.overlaps))
    # the middle of the probed points where m is non-zero first (away from both ends of the branch), then
    # outwards from it
    mid = (len(found) - 1) / 2
    return [found[i] for i in sorted(range(len(found)), key=lambda i: (abs(i - mid), i))]


def _trace_to_json(trace: BranchTrace) -> dict:
    return {"table": trace.table.to_dict(orient="list"),
            "lower": [trace.lower.kind, trace.lower.alpha, trace.lower.detail],
            "upper": [trace.upper.kind, trace.upper.alpha, trace.upper.detail],
            "converged": trace.converged, "seconds": trace.seconds, "n_evaluations": trace.n_evaluations}


def _trace_from_json(params: TaskParams, branch: str, alpha_range, doc: dict) -> BranchTrace:
    table = pd.DataFrame(doc["table"])
    for col in table.columns:
        if table[col].dtype == object:  # non-finite floats come back from the cache as strings
            try:
                table[col] = table[col].astype(float)
            except (TypeError, ValueError):
                pass
    table["partner"] = table["partner"].astype(bool)
    table["converged"] = table["converged"].astype(bool)
    return BranchTrace(params=params, branch=branch, table=table, lower=BranchEnd(*doc["lower"]),
                       upper=BranchEnd(*doc["upper"]), alpha_range=tuple(alpha_range),
                       converged=bool(doc["converged"]), seconds=float(doc["seconds"]),
                       n_evaluations=int(doc["n_evaluations"]))


def branch_trace(params: TaskParams, branch: str, alpha_range=DEFAULT_RANGE, solver=None,
                 use_cache: bool = True) -> BranchTrace | None:
    """A branch followed by continuation to its ends (:func:`attnlib.trace_branch`), cached.

    The semantic branch is started at the top of ``alpha_range`` (where it is the global minimum), the
    positional one in the middle of the part of the range where a coarse probe finds ``m`` clearly non-zero
    (``_positional_starts``; up to ``_POSITIONAL_TRIES`` starts, the trace that covers the widest
    range of ``alpha`` is kept). Returns None if the branch is not found.
    """
    params.require_two_tokens("branch_trace")
    if branch not in ("semantic", "positional"):
        raise ValueError(f"branch must be 'semantic' or 'positional', got {branch!r}")
    settings = continuation_settings(solver)
    lo, hi = _range(alpha_range, None)

    def compute():
        if branch == "semantic":
            tries = [(hi, None)]
        else:
            tries = _positional_starts(params, lo, hi, settings.solver)
        best, best_span = None, -1.0
        for a0, start in tries[:_POSITIONAL_TRIES]:
            try:
                trace = trace_branch(params, branch, a0, (lo, hi), settings, start=start)
            except ValueError:
                continue
            st = trace.stable.alpha
            span = math.log(st.max() / st.min()) if len(st) else 0.0
            if span > best_span:
                best, best_span = trace, span
            if trace.converged and trace.lower.alpha <= a0 / 1.5 or trace.lower.kind == "range":
                break  # the trace reaches well below its start: the branch was followed from inside it
        return None if best is None else _trace_to_json(best)

    doc = cached("branch-trace", compute, use_cache=use_cache, params=params, branch=branch,
                 alpha_range=(lo, hi), settings=settings)
    return None if doc is None else _trace_from_json(params, branch, (lo, hi), doc)


def branch_point(trace: BranchTrace, alpha: float, settings: Continuation | None = None,
                 fmap: FixedPointMap | None = None) -> SEResult:
    """The fixed point of a traced branch at ``alpha``, by Newton's method from the trace's interpolation
    (:meth:`BranchTrace.start_near`); if Newton fails, the log-linear interpolation of the trace's rows
    (with ``converged=False``)."""
    settings = settings or continuation_settings()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = newton_fixed_point(trace.params, alpha, trace.branch, trace.start_near(alpha), settings, fmap)
    if res.converged:
        return res
    st = trace.stable
    la = np.log(st.alpha.to_numpy())
    vals = {c: float(np.interp(math.log(alpha), la, st[c].to_numpy(float)))
            for c in ("q", "m", "V", "theta", "q_hat", "m_hat", "V_hat", "theta_hat", "test_error", "train_loss")}
    return SEResult(params=trace.params, alpha=float(alpha), branch=trace.branch, **vals, converged=False,
                    n_iter=res.n_iter, residual=res.residual)


def _interp(trace: BranchTrace, column: str, alphas: np.ndarray) -> np.ndarray:
    st = trace.stable
    return np.interp(np.log(alphas), np.log(st.alpha.to_numpy()), st[column].to_numpy(float))


def _coexistence(sem: BranchTrace, pos: BranchTrace) -> tuple[float, float]:
    lo = max(sem.lower.alpha, pos.lower.alpha, sem.stable.alpha.min(), pos.stable.alpha.min())
    hi = min(sem.upper.alpha, pos.upper.alpha, sem.stable.alpha.max(), pos.stable.alpha.max())
    return lo, hi


def energy_gap(params: TaskParams, alpha: float, solver=None, alpha_range=DEFAULT_RANGE,
               use_cache: bool = True) -> float:
    """``eps_t(semantic) - eps_t(positional)`` at ``alpha`` on the traced branches (negative where the
    semantic minimum is global); NaN where a branch does not exist."""
    settings = continuation_settings(solver)
    rng = _trace_range(*_range(alpha_range, None))
    sem = branch_trace(params, "semantic", rng, settings, use_cache)
    pos = branch_trace(params, "positional", rng, settings, use_cache)
    if sem is None or pos is None:
        return math.nan
    lo, hi = _coexistence(sem, pos)
    if not lo <= alpha <= hi:
        return math.nan
    return branch_point(sem, alpha, settings).train_loss - branch_point(pos, alpha, settings).train_loss


def _bracket(alphas, values):
    """First sign change (+ to -) of ``values`` along increasing ``alphas``; None if there is none."""
    for i in range(len(alphas) - 1):
        if values[i] > 0 >= values[i + 1]:
            return alphas[i], alphas[i + 1]
    return None


def _root(f, lo: float, hi: float, xtol: float) -> float:
    return float(brentq(f, lo, hi, xtol=xtol))


#: Why :func:`critical_alpha` found no transition (the start of its reason; :func:`semantic_takeover` reads them).
REASON_ABSENT = "the {branch} branch does not exist on"
REASON_APART = "the branches do not coexist on"
REASON_LOWER = "the {branch} branch has the lower training loss wherever both exist"
#: A crossing below the semantic end (both under the pooled rule) is one with the branch's unresolved tail of
#: small theta: the semantic branch is lower wherever it is resolved, and takes over at its end.
REASON_BELOW_END = "the crossing lies below the semantic branch's end under the same rule"


def critical_alpha(params: TaskParams, solver=None, alphas=None, xtol: float = 1e-4, use_cache: bool = True,
                   alpha_range=DEFAULT_RANGE) -> float:
    """``alpha_c``: where the semantic and positional training losses are equal (book :eq:`eq-thresholds`).

    Both branches are traced by continuation (:func:`branch_trace`); the gap ``eps_t(sem) - eps_t(pos)`` is
    bracketed on the traces' points where both branches exist as distinct branches (their coexistence
    interval) at its first change from + to -, and refined by Brent's method to ``xtol`` on Newton-solved
    fixed points (``branch_point``). ``alphas`` (a grid) or ``alpha_range`` only set the range searched,
    so any grid that brackets the transition gives the same value.

    Raises
    ------
    ThresholdNotFound
        With the reason: a branch does not exist in the range, the branches do not coexist, or the gap does
        not change sign where they do.
    """
    params.require_two_tokens("critical_alpha")
    settings = continuation_settings(solver)
    lo, hi = _range(alpha_range, alphas)

    def compute():
        sem = branch_trace(params, "semantic", _trace_range(lo, hi), settings, use_cache)
        pos = branch_trace(params, "positional", _trace_range(lo, hi), settings, use_cache)
        if sem is None or pos is None:
            missing = "semantic" if sem is None else "positional"
            return {"value": None, "reason": f"{REASON_ABSENT.format(branch=missing)} [{lo:g}, {hi:g}]"}
        c_lo, c_hi = _coexistence(sem, pos)
        c_lo, c_hi = max(c_lo, lo), min(c_hi, hi)
        if not c_lo < c_hi:
            return {"value": None, "reason": f"{REASON_APART} [{lo:g}, {hi:g}] (semantic on "
                    f"[{sem.lower.alpha:.4g}, {sem.upper.alpha:.4g}], positional on [{pos.lower.alpha:.4g}, "
                    f"{pos.upper.alpha:.4g}])"}
        grid = np.unique(np.concatenate([sem.stable.alpha, pos.stable.alpha]))
        grid = np.unique(np.concatenate([[c_lo, c_hi], grid[(grid > c_lo) & (grid < c_hi)]]))
        gap = _interp(sem, "train_loss", grid) - _interp(pos, "train_loss", grid)
        br = _bracket(grid, gap)
        if br is None:
            lower = "semantic" if gap.max() < 0 else "positional" if gap.min() > 0 else "neither"
            return {"value": None, "reason": f"{REASON_LOWER.format(branch=lower)} ([{c_lo:.4g}, {c_hi:.4g}]); "
                    f"no transition on [{lo:g}, {hi:g}]"}
        fmaps = {b: FixedPointMap(params, b, settings.solver, settings.cheap) for b in ("semantic", "positional")}

        def f(a):
            return (branch_point(sem, a, settings, fmaps["semantic"]).train_loss
                    - branch_point(pos, a, settings, fmaps["positional"]).train_loss)

        a, b = br
        try:
            value = _root(f, a, b, xtol)
        except ValueError:  # the refined ends lost the sign change: keep the interpolated root
            ga, gb = gap[list(grid).index(a)], gap[list(grid).index(b)]
            value = a + (b - a) * ga / (ga - gb)
            warnings.warn(f"alpha_c: Newton-solved gap lost its sign change on [{a:.4g}, {b:.4g}]; "
                          f"interpolated root {value:.5g}", ConvergenceWarning, stacklevel=3)
        return {"value": value, "reason": ""}

    out = cached("alpha-c", compute, use_cache=use_cache, params=params, settings=settings, alpha_range=(lo, hi),
                 xtol=xtol)
    if out["value"] is None:
        raise ThresholdNotFound(f"alpha_c (omega={params.omega:g}): {out['reason']}")
    return float(out["value"])


def linear_crossing_alpha(params: TaskParams, solver=None, alphas=None, xtol: float = 1e-4,
                          use_cache: bool = True, alpha_range=DEFAULT_RANGE) -> float:
    """``alpha_l``: the smallest ``alpha`` where the global minimum's test error falls below ``eps_lin``.

    The global minimum is the positional branch below ``alpha_c`` and the semantic one above (if there is no
    transition in the range, the branch that has the lower ``eps_t`` wherever both exist, or the only one
    that exists). Its ``eps_g`` jumps at ``alpha_c``; if the jump already takes it below ``eps_lin``,
    ``alpha_l = alpha_c``. Crossings are bracketed on the traces and refined by Brent's method on
    Newton-solved fixed points.

    Raises
    ------
    ThresholdNotFound
        If the global minimum's test error stays above ``eps_lin`` on the range.
    """
    params.require_two_tokens("linear_crossing_alpha")
    settings = continuation_settings(solver)
    lo, hi = _range(alpha_range, alphas)

    def compute():
        eps_lin = linear_baseline_error(params)
        traces = {b: branch_trace(params, b, _trace_range(lo, hi), settings, use_cache)
                  for b in ("semantic", "positional")}
        try:
            a_c = critical_alpha(params, settings, xtol=xtol, use_cache=use_cache, alpha_range=(lo, hi))
        except ThresholdNotFound:
            a_c = None
        pieces = []  # (branch, from, to) of the global minimum, in increasing alpha
        sem, pos = traces["semantic"], traces["positional"]
        if a_c is not None:
            pieces = [("positional", max(lo, pos.lower.alpha), a_c), ("semantic", a_c, min(hi, sem.upper.alpha))]
        else:
            for b, tr in traces.items():
                if tr is not None:
                    other = traces["positional" if b == "semantic" else "semantic"]
                    if other is None or energy_below(tr, other):
                        pieces = [(b, max(lo, tr.lower.alpha), min(hi, tr.upper.alpha))]
        for b, a, z in pieces:
            tr = traces[b]
            if not a < z:
                continue
            grid = np.unique(np.concatenate([[a, z], tr.stable.alpha[(tr.stable.alpha > a) & (tr.stable.alpha < z)]]))
            err = _interp(tr, "test_error", grid) - eps_lin
            if b == "semantic" and a_c is not None and branch_point(tr, a, settings).test_error < eps_lin:
                return {"value": a, "reason": ""}
            br = _bracket(grid, err)
            if br is None:
                continue
            fmap = FixedPointMap(params, b, settings.solver, settings.cheap)
            try:
                value = _root(lambda x: branch_point(tr, x, settings, fmap).test_error - eps_lin, *br, xtol)
            except ValueError:
                i = list(grid).index(br[0])
                value = grid[i] + (grid[i + 1] - grid[i]) * err[i] / (err[i] - err[i + 1])
            return {"value": value, "reason": ""}
        return {"value": None, "reason": f"the global minimum's test error stays above eps_lin = {eps_lin:.4g} "
                f"on [{lo:g}, {hi:g}]"}

    out = cached("alpha-l", compute, use_cache=use_cache, params=params, settings=settings, alpha_range=(lo, hi),
                 xtol=xtol)
    if out["value"] is None:
        raise ThresholdNotFound(f"alpha_l (omega={params.omega:g}): {out['reason']}")
    return float(out["value"])


def energy_below(trace: BranchTrace, other: BranchTrace) -> bool:
    """Whether ``trace`` has the lower training loss than ``other`` on their coexistence interval (at its
    middle, in log alpha), or ``other`` does not coexist with it."""
    lo = max(trace.lower.alpha, other.lower.alpha)
    hi = min(trace.upper.alpha, other.upper.alpha)
    if not lo < hi:
        return True
    mid = np.array([math.sqrt(lo * hi)])
    return bool(_interp(trace, "train_loss", mid)[0] <= _interp(other, "train_loss", mid)[0])


def branch_ends(params: TaskParams, solver=None, alpha_range=DEFAULT_RANGE, use_cache: bool = True) -> pd.DataFrame:
    """Where each branch ends and how (``attnlib.theory.continuation.END_KINDS``; traced over ``alpha_range``
    widened to ``DEFAULT_RANGE``): one row per (branch, side) with ``kind``, ``alpha`` and the defining
    overlap at the last point of the branch."""
    params.require_two_tokens("branch_ends")
    settings = continuation_settings(solver)
    rng = _trace_range(*_range(alpha_range, None))
    rows = []
    for b in ("semantic", "positional"):
        tr = branch_trace(params, b, rng, settings, use_cache)
        for side in ("lower", "upper"):
            if tr is None:
                rows.append({"branch": b, "side": side, "kind": "absent", "alpha": math.nan, "overlap": math.nan})
                continue
            end = getattr(tr, side)
            st = tr.stable
            last = st.iloc[0] if side == "lower" else st.iloc[-1]
            rows.append({"branch": b, "side": side, "kind": end.kind, "alpha": end.alpha,
                         "overlap": defining_overlap(b, last)})
    return pd.DataFrame(rows)


def _phase_point(params, settings, alpha_range, use_cache):
    row = {"omega": params.omega, "eps_lin": linear_baseline_error(params)}
    for name, fn in (("alpha_c", critical_alpha), ("alpha_l", linear_crossing_alpha)):
        try:
            row[name] = fn(params, settings, use_cache=use_cache, alpha_range=alpha_range)
            row[f"reason_{name}"] = ""
        except ThresholdNotFound as exc:
            row[name] = math.nan
            row[f"reason_{name}"] = str(exc)
    ends = branch_ends(params, settings, alpha_range, use_cache)
    for r in ends.itertuples():
        row[f"{r.branch}_{r.side}_alpha"] = r.alpha
        row[f"{r.branch}_{r.side}_kind"] = r.kind
    # the semantic branch's lower end under the pooled rule (the continuation's own beside it)
    from .pooled_end import semantic_end

    row["semantic_lower_trace_alpha"] = row["semantic_lower_alpha"]
    row["semantic_lower_trace_kind"] = row["semantic_lower_kind"]
    end = semantic_end(params, settings, alpha_range, use_cache)
    if end is not None:
        row["semantic_lower_alpha"], row["semantic_lower_kind"] = end["alpha"], end["kind"]
    # likewise the positional branch's upper end, where the continuation stops inside the range
    from .pooled_end import positional_end

    row["positional_upper_trace_alpha"] = row["positional_upper_alpha"]
    row["positional_upper_trace_kind"] = row["positional_upper_kind"]
    pos = positional_end(params, settings, alpha_range, use_cache)
    row["positional_upper_gap"] = math.nan
    if pos is not None:
        row["positional_upper_alpha"], row["positional_upper_kind"] = pos["alpha"], pos["kind"]
        row["positional_upper_gap"] = pos["gap"]
    # the thresholds under the pooled rule too (the continuation's beside them, as alpha_c_trace, alpha_l_trace)
    from .pooled_thresholds import phase_thresholds

    thr = phase_thresholds(params, settings, alpha_range, use_cache)
    for name in ("alpha_c", "alpha_l"):
        row[f"{name}_trace"] = thr[f"{name}_trace"]
        row[name], row[f"{name}_pooled_err"] = thr[name], thr[f"{name}_err"]
        if not math.isfinite(thr[name]) and math.isfinite(thr[f"{name}_trace"]):
            row[f"reason_{name}"] = f"pooled rule: {thr[f'reason_{name}']}"
    end_alpha = row.get("semantic_lower_alpha", math.nan)
    if end is not None and math.isfinite(row["alpha_c"]) and row["alpha_c"] < end_alpha:
        row["reason_alpha_c"] = (f"alpha_c (omega={params.omega:g}): {REASON_BELOW_END} "
                                 f"({row['alpha_c']:.4g} < {end_alpha:.4g})")
        if row["alpha_l"] == row["alpha_c"]:   # alpha_l was the jump at that crossing
            row["reason_alpha_l"] = row["reason_alpha_c"].replace("alpha_c (", "alpha_l (", 1)
            row["alpha_l"] = row["alpha_l_pooled_err"] = math.nan
        row["alpha_c"] = row["alpha_c_pooled_err"] = math.nan
    return row


def _with_scrambling(settings: Continuation, seed: int) -> Continuation:
    q = settings.solver.quadrature
    if q.rule == "gauss-hermite":
        raise ValueError("scramblings > 1 needs a Sobol rule (a Gauss-Hermite rule has no random scrambling)")
    return replace(settings, solver=replace(settings.solver, quadrature=replace(q, seed=seed)))


def phase_diagram(params: TaskParams, omegas, solver=None, alpha_range=DEFAULT_RANGE, n_jobs: int = -1,
                  progress: bool = False, use_cache: bool = True, scramblings: int = 1) -> pd.DataFrame:
    """``alpha_c(omega)``, ``alpha_l(omega)`` and the branch ends over a grid of ``omega``, as a tidy table.

    One row per ``omega`` (and per scrambling of the Sobol rule, column ``scrambling``, when
    ``scramblings > 1``: scramblings ``0 .. scramblings-1`` are independent randomisations of the quadrature,
    whose spread measures its error; ``summarise_phase_diagram`` averages them): ``eps_lin``, ``alpha_c``,
    ``alpha_l`` (NaN with the reason in ``reason_*`` when there is no transition in the range), ``found_*``, and
    for each branch and side the end's ``alpha`` and kind (``semantic_lower_alpha``, ``semantic_lower_kind``,
    ...): the continuation's (:func:`branch_ends`), except the semantic branch's lower end and, where the
    continuation stops inside the range, the positional branch's upper end, which are placed under the pooled rule
    (``attnlib.theory.pooled_end.semantic_end`` and ``positional_end``, with the seed sets of the row's
    scrambling), the continuation's own being kept as ``semantic_lower_trace_alpha``, ``semantic_lower_trace_kind``,
    ``positional_upper_trace_alpha`` and ``positional_upper_trace_kind``.
    The thresholds, found first on the continuation's branches (:func:`critical_alpha`,
    :func:`linear_crossing_alpha`; kept as ``alpha_c_trace``, ``alpha_l_trace``), are then moved onto the pooled
    rule with the same seed set (``attnlib.theory.pooled_thresholds.phase_thresholds``): ``alpha_c`` and
    ``alpha_l`` are the pooled rule's roots, ``alpha_c_pooled_err`` and ``alpha_l_pooled_err`` their quadrature
    errors; where the pooled search finds no root, NaN with the reason. A pooled ``alpha_c`` below the pooled
    semantic end is a crossing with the branch's unresolved tail: NaN, with the reason
    (``REASON_BELOW_END``; the semantic branch then takes over at its end, :func:`semantic_takeover`).
    Points run in parallel through
    ``attnlib.parallel.run_jobs`` (``n_jobs``).
    """
    params.require_two_tokens("phase_diagram")
    settings = continuation_settings(solver)
    if isinstance(scramblings, bool) or not isinstance(scramblings, (int, np.integer)) or scramblings < 1:
        raise ValueError(f"scramblings must be an integer >= 1, got {scramblings!r}")
    seeds = [settings.solver.quadrature.seed] if scramblings == 1 else list(range(scramblings))
    omegas = np.atleast_1d(np.asarray(omegas, dtype=float))
    rng = _range(alpha_range, None)
    jobs, labels = [], []
    for seed in seeds:
        st = settings if scramblings == 1 else _with_scrambling(settings, seed)
        for w in omegas:
            jobs.append((_phase_point, dict(params=replace(params, omega=float(w)), settings=st, alpha_range=rng,
                                            use_cache=use_cache)))
            labels.append(seed)
    df = pd.DataFrame(run_jobs(jobs, n_jobs=n_jobs, progress=progress, desc="phase diagram"))
    df.insert(1, "scrambling", labels)
    for name in ("alpha_c", "alpha_l"):
        df[f"found_{name}"] = np.isfinite(df[name])
    return df.sort_values(["omega", "scrambling"]).reset_index(drop=True)


def summarise_phase_diagram(df: pd.DataFrame) -> pd.DataFrame:
    """Average a :func:`phase_diagram` table over its scramblings: per ``omega`` the mean of every threshold
    over the scramblings where it was found and of every end ``alpha`` over the scramblings that found the
    end's most frequent kind (``*_kind``, with its count ``*_kind_n``), the standard error (``*_err``, NaN with
    one value) and the number of values averaged (``*_n``)."""
    rows = []
    value_cols = ["alpha_c", "alpha_l"] + [c for c in ("alpha_c_trace", "alpha_l_trace") if c in df] + [
        c for c in df.columns if c.endswith("_alpha")]
    kind_cols = [c for c in df.columns if c.endswith("_kind")]
    for w, sub in df.groupby("omega"):
        row = {"omega": float(w), "eps_lin": float(sub.eps_lin.iloc[0]), "scramblings": int(len(sub))}
        for c in value_cols:
            kind = f"{c[:-len('_alpha')]}_kind"
            use = sub
            if c.endswith("_alpha") and kind in sub:  # an end: averaged over the scramblings of the majority kind
                use = sub[sub[kind] == sub[kind].value_counts().index[0]]
            v = use[c].to_numpy(float)
            v = v[np.isfinite(v)]
            row[c] = float(v.mean()) if len(v) else math.nan
            row[f"{c}_err"] = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan
            row[f"{c}_n"] = int(len(v))
        for c in kind_cols:
            counts = sub[c].value_counts()
            row[c] = str(counts.index[0])
            row[f"{c}_n"] = int(counts.iloc[0])
        rows.append(row)
    return pd.DataFrame(rows)


#: Kinds of a branch end placed inside the computed range: the continuation's fold or vanishing, or the end
#: under the pooled rule where independent seed sets stop agreeing (``attnlib.theory.pooled_end``).
ENDED_KINDS = ("fold", "vanishes", "agreement")
#: How :func:`semantic_takeover` found the switch of the global minimum to the semantic branch.
TAKEOVER_KINDS = ("crossing", "semantic end", "positional end", "beyond range", "undetermined")


def semantic_takeover(row) -> tuple[float, str]:
    """Where the global minimum of the state evolution becomes the semantic branch, read off one row of a
    :func:`phase_diagram` table (raw or summarised, with ``reason_alpha_c`` when ``alpha_c`` is missing).

    The global minimum at ``alpha`` is the existing branch of lowest ``eps_t``, or the uninformed point where
    neither exists. It becomes semantic

    * at ``alpha_c`` where the two training losses cross (``"crossing"``);
    * at the lower end of the semantic branch (``"semantic end"``) when there is no positional branch, when
      the branches do not coexist (the positional end below the semantic one), when the semantic branch is lower
      wherever both exist, or when the crossing
      lies below the semantic end (a crossing with the branch's unresolved tail): below that end
      the global minimum is positional or uninformed, above it semantic;
    * at the upper end of the positional branch (``"positional end"``: a fold, a vanishing or where seed sets
      stop agreeing, ``ENDED_KINDS``) when the positional branch is lower wherever both exist on the
      continuation's branches (or they do not coexist there, but the positional end, placed beyond the
      continuation, lies above the semantic end), ends inside the semantic branch's range and is still the lower
      at its end (``positional_upper_gap``, the semantic minus the positional training loss there, not
      negative): the global minimum jumps when the positional minimum disappears. Where that end lies below the
      semantic end (the thresholds are compared on the continuation's branches, whose semantic branch can reach
      below the pooled rule's semantic end), no resolved informed minimum exists between the two ends and the
      switch is at the semantic end (``"semantic end"``).

    Otherwise the switch lies beyond the range computed (``"beyond range"``: positional lower up to the top
    of the range) or cannot be placed (``"undetermined"``: no semantic branch; the positional branch's end was
    lost, so that it is unknown; or the semantic branch is already the lower at the positional end, so that the
    losses cross on the part of the positional branch beyond its continuation, where no crossing is searched).

    Returns
    -------
    (alpha, kind)
        ``alpha`` is NaN for the last two kinds; ``kind`` is one of ``TAKEOVER_KINDS``.
    """
    get = row.get if isinstance(row, dict) else (lambda k, default=None: getattr(row, k, default))
    ac = get("alpha_c")
    if ac is not None and np.isfinite(ac):
        return float(ac), "crossing"
    sem = get("semantic_lower_alpha")
    if sem is None or not np.isfinite(sem):
        return math.nan, "undetermined"
    reason = str(get("reason_alpha_c", "") or "")
    pos_kind = str(get("positional_upper_kind", "") or "")
    pos = float(get("positional_upper_alpha", math.nan)) if pos_kind in ENDED_KINDS else math.nan
    # branches that do not coexist on the continuation's traces can coexist beyond the positional trace's end,
    # up to the positional end that the seed sets place there
    apart = REASON_APART in reason and pos_kind == "agreement"
    if (REASON_ABSENT.format(branch="positional") in reason or REASON_LOWER.format(branch="semantic") in reason
            or REASON_BELOW_END in reason or pos_kind == "absent" or (REASON_APART in reason and not apart)):
        return float(sem), "semantic end"
    if REASON_LOWER.format(branch="positional") in reason or apart:
        if pos_kind in ENDED_KINDS:
            if pos < sem:   # no resolved informed minimum between the two ends: semantic from its end on
                return float(sem), "semantic end"
            gap = get("positional_upper_gap", math.nan)
            if gap is not None and np.isfinite(gap) and gap < 0:
                # the semantic branch is already the lower at the positional end: the training losses cross on the
                # part of the positional branch beyond its continuation, where no crossing was searched
                return math.nan, "undetermined"
            return pos, "positional end"
        return math.nan, "beyond range" if pos_kind == "range" else "undetermined"
    return math.nan, "undetermined"

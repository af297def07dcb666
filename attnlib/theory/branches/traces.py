"""Branches traced by continuation to their ends, cached: the input of the thresholds and the phase diagram.

:func:`branch_trace` follows a branch from where it is unambiguous (the semantic one from the top of the ``alpha``
range down, the positional one from a point with ``m`` clearly non-zero, both ways) to its ends (a fold, or the
continuous vanishing of its defining overlap) under the smooth rule of :func:`continuation_settings`;
:func:`branch_point` solves a traced branch at one ``alpha``.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd

from ...cache import cached
from ...exceptions import ConvergenceWarning
from ...params import TaskParams, check_alpha
from .continuation import BranchEnd, BranchTrace, trace_branch
from ..solve.newton import Continuation, FixedPointMap, newton_fixed_point
from ..model.status import VANISH_FLOOR
from ..model.quadrature import Quadrature
from ..model.state_evolution import Overlaps, SEResult, SESolver
from ..solve.iteration import iterate_state_evolution

__all__ = ["continuation_settings", "branch_trace", "branch_point", "DEFAULT_RANGE", "SMOOTH_QUADRATURE",
           "TIE_SMOOTHING", "SMOOTH_N_RING", "PROBE_ORDER"]

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
#: (:class:`~attnlib.theory.model.state_evolution.SESolver` ``tie_smoothing``): about 0.3 % of the nodes lie within it of a
#: tie, so it moves the fixed points by far less than the quadrature error while making the map smooth.
TIE_SMOOTHING = 5e-5


#: Ring starts of the continuation's proximal search (:class:`~attnlib.theory.model.state_evolution.SESolver` ``n_ring``):
#: 4 (as in the default pooled rule) instead of 12 halves the cost of a map evaluation, and at the branch ends of
#: omega = 0 and 0.3 the two searches find the same minima (residuals equal to 1e-10, the descent tolerance).
SMOOTH_N_RING = 4


#: Order of the scrambled Sobol rule of the coarse probe that looks for the positional branch (only where ``m``
#: is clearly non-zero; the trace itself starts from the probe's point under the continuation's rule).
PROBE_ORDER = 10


def _check_grid(alphas) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(alphas, dtype=float))
    if arr.size == 0:
        raise ValueError("alphas must contain at least one value")
    for a in arr:
        check_alpha(a)
    return arr


def continuation_settings(solver: SESolver | Continuation | None = None, seed: int | None = None) -> Continuation:
    """The continuation settings used by the thresholds: ``solver`` if it is a :class:`Continuation`; an
    :class:`SESolver` wrapped as it is; by default the smooth rule :data:`SMOOTH_QUADRATURE` with
    :data:`TIE_SMOOTHING` and :data:`SMOOTH_N_RING` ring starts. With ``seed``, the same settings with the Sobol
    rule scrambled by that seed (one scrambling of the phase diagram's)."""
    if isinstance(solver, Continuation):
        settings = solver
    elif isinstance(solver, SESolver):
        settings = Continuation(solver=solver)
    elif solver is None:
        settings = Continuation(solver=SESolver(quadrature=SMOOTH_QUADRATURE, tie_smoothing=TIE_SMOOTHING,
                                                n_ring=SMOOTH_N_RING))
    else:
        raise ValueError(f"solver must be an SESolver, a Continuation or None, got {type(solver).__name__}")
    return settings if seed is None else _with_scrambling(settings, seed)


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
            res = iterate_state_evolution(params, float(a), "positional", start=start, solver=solver)
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


def _with_scrambling(settings: Continuation, seed: int) -> Continuation:
    q = settings.solver.quadrature
    if q.rule == "gauss-hermite":
        raise ValueError("scramblings > 1 needs a Sobol rule (a Gauss-Hermite rule has no random scrambling)")
    return replace(settings, solver=replace(settings.solver, quadrature=replace(q, seed=seed)))

"""One point of a branch, found where the plain iteration would lose it.

:func:`follow_branch` solves a point warm-started from a nearby point of the same branch, under one quadrature
rule, and keeps it on the branch (plain damped steps where the accelerated iteration jumps to the uninformed
point, Newton's method where the branch repels the iteration); :func:`rescue_branch_point` is that Newton search.
Used by the sweeps along ``alpha`` and by the accurate solvers' starting points.
"""
from __future__ import annotations

import warnings
from dataclasses import replace

from ...exceptions import ConvergenceWarning
from ...params import TaskParams
from .newton import VANISH_FLOOR, Continuation, defining_overlap, newton_fixed_point
from ..model.state_evolution import default_start, Overlaps, SEResult, SESolver
from .iteration import iterate_state_evolution

__all__ = ["follow_branch", "rescue_branch_point", "EXISTENCE_TOL", "PLAIN_MAX_ITER", "RESCUE_NEWTON",
           "RESCUE_SCALES"]

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
        res = iterate_state_evolution(params, alpha, branch, start=start, solver=solver)
        if _on_branch(params, branch, res):
            return res
        if not cold:
            plain = replace(solver, anderson=0, max_iter=max(solver.max_iter, PLAIN_MAX_ITER))
            again = iterate_state_evolution(params, alpha, branch, start=start, solver=plain)
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

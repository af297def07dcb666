"""One point of a branch, found where the plain iteration would lose it.

:func:`follow_branch` solves a point warm-started from a nearby point of the same branch, under one quadrature
rule, and keeps it on the branch (plain damped steps where the accelerated iteration jumps to the uninformed
point, Newton's method where the branch repels the iteration); :func:`rescue_branch_point` is that Newton search,
from several cold starts and, failing them, from the branch at a neighbouring ``alpha``. At large ``alpha`` a cold
start begins at the branch's ``alpha -> inf`` limit (:func:`population_start`). Used by the sweeps along ``alpha``
and by the accurate solvers' starting points.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import replace

import numpy as np

from ...exceptions import ConvergenceWarning
from ...params import TaskParams
from .newton import Continuation, newton_fixed_point
from ..model.status import VANISH_FLOOR, defining_overlap
from ..model.population import population_minimum
from ..model.quadrature import Quadrature
from ..model.state_evolution import default_start, Overlaps, SEResult, SESolver
from .iteration import iterate_state_evolution

__all__ = ["follow_branch", "rescue_branch_point", "population_start", "EXISTENCE_TOL", "PLAIN_MAX_ITER",
           "RESCUE_NEWTON", "RESCUE_EVALUATIONS", "RESCUE_PATIENCE", "RESCUE_SCALES", "RESCUE_NEIGHBOURS",
           "RESCUE_NEAR", "RESCUE_NEAR_OVERLAP", "RESCUE_LADDER", "POPULATION_START_ALPHA", "POPULATION_START_RULE"]

#: Iterations allowed to the plain damped iteration that double-checks a branch's disappearance.
PLAIN_MAX_ITER = 300


#: A branch whose defining overlap (theta or m) is below this times rho has merged with the agnostic point.
EXISTENCE_TOL = VANISH_FLOOR


#: Where a branch point collapses onto the uninformed point, :func:`follow_branch` looks for the branch by
#: Newton's method (which, unlike the iteration, also converges to a fixed point that repels the iteration)
#: with at most this many corrector iterations per round of the continuation settings.
RESCUE_NEWTON = 3


#: Evaluations of the map (finite differences included) allowed to each Newton search of the rescue (the searches
#: that find the branch take 10 to 30; those that do not run on to 100 and more).
RESCUE_EVALUATIONS = 40

#: ... and a search that has not halved its residual after this many evaluations stops (one that makes no
#: headway: where no fixed point lies near its start, the residual stays where it began).
RESCUE_PATIENCE = 15

#: Cold starts of that search: the default start with its defining overlap scaled by these factors, then the
#: default defining overlap on the width and norm of the point the iteration collapsed to.
RESCUE_SCALES = (0.6, 0.3)

#: Where no cold start finds the branch at ``alpha`` (Newton's basins are ragged where the branch repels the
#: iteration), it is looked for at ``alpha`` times each of these factors in turn, and followed back from the first
#: that has it, in steps of at most :data:`RESCUE_LADDER` in ``alpha`` (the continuation from where it is found).
RESCUE_NEIGHBOURS = (1.1, 0.9)

#: ... which is done only where some cold start ended near the branch: unconverged, its residual (in the coordinates
#: of :class:`~attnlib.theory.solve.newton.FixedPointMap`: log q, log V, m/rho, theta/rho) below this ...
RESCUE_NEAR = 0.2

#: ... and its defining overlap at least this times rho (ten times the floor of a present overlap: a search that
#: ends with a residual of 1e-3 and an overlap of 1e-3 rho is on its way to the uninformed point, not the branch;
#: those that end near a branch the neighbours then find have overlaps of order rho).
RESCUE_NEAR_OVERLAP = 10 * EXISTENCE_TOL

#: Largest ratio of consecutive ``alpha`` on the way back from a neighbour.
RESCUE_LADDER = 1.05

#: From this ``alpha`` on, a cold start is first sought by Newton's method from the population risk's minimiser on
#: the branch's subspace (:func:`population_start`).
POPULATION_START_ALPHA = 10.0


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
    if start is None and alpha >= POPULATION_START_ALPHA and branch in ("semantic", "positional"):
        # many samples: the branch lies near the population risk's minimiser on its subspace (its alpha -> inf
        # limit), where the default start can lead to another fixed point of the subspace
        tried = [population_start(params, branch)]
        found = _newton_from(params, alpha, branch, tried, solver)
        if found is not None:
            return found
    else:
        tried = []
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
    found = rescue_branch_point(params, alpha, branch, None if cold else start, solver,
                                collapsed=res.overlaps if res.converged else None, tried=tried)
    return found if found is not None else res


def rescue_branch_point(params: TaskParams, alpha: float, branch: str, start: Overlaps | None,
                        solver: SESolver | None = None, collapsed: Overlaps | None = None,
                        tried: list | tuple = ()) -> SEResult | None:
    """The point of ``branch`` at ``alpha`` by Newton's method (:func:`attnlib.newton_fixed_point`), from
    ``start`` (a nearby point of the branch) or, if None, from cold starts: the branch's default start with its
    defining overlap scaled by each of :data:`RESCUE_SCALES`, then (given ``collapsed``, the point the iteration
    collapsed to) ``collapsed``'s ``q`` and ``V`` with the default defining overlap; at most :data:`RESCUE_NEWTON`
    corrector iterations per round. Where no cold start finds it but one ended near the branch
    (:data:`RESCUE_NEAR`), the branch is looked for at the neighbouring ``alpha`` of :data:`RESCUE_NEIGHBOURS` and
    followed back from the first that has it (Newton from each point of the way, :data:`RESCUE_LADDER`). Cold
    starts in ``tried`` (searched from already, at ``alpha``) are skipped at ``alpha``. Returns the first converged
    fixed point whose defining overlap is present (at least ``EXISTENCE_TOL * rho``), else None."""
    solver = solver or SESolver()
    if start is not None:
        return _newton_from(params, alpha, branch, [start], solver)
    starts = [x for x in _cold_starts(params, branch, collapsed) if x not in tried]
    found, near = _newton_search(params, alpha, branch, starts, solver)
    if found is not None or not near:
        # no cold start came near a point of the branch: none to look for at the neighbours either
        return found
    for factor in RESCUE_NEIGHBOURS:
        near = _newton_from(params, alpha * factor, branch, _cold_starts(params, branch, collapsed), solver)
        if near is None:
            continue
        n_steps = max(1, math.ceil(abs(math.log(factor)) / math.log(RESCUE_LADDER)))
        for a in alpha * factor ** (1.0 - np.arange(1, n_steps + 1) / n_steps):
            near = _newton_from(params, float(a), branch, [near.overlaps], solver)
            if near is None:
                break
        if near is not None:
            return replace(near, alpha=float(alpha))
    return None


def population_start(params: TaskParams, branch: str) -> Overlaps:
    """A start near the branch's point at large ``alpha``: the minimiser of the population risk on the branch's
    subspace (:func:`attnlib.population_minimum` under :data:`POPULATION_START_RULE`, its ``alpha -> inf`` limit),
    moved off the edge of the overlaps' domain (``q`` raised by 1 %), with the default width."""
    pm = _population_minimum(params, branch)
    return Overlaps(q=1.01 * pm.q + 1e-6 * params.rho, m=pm.m, V=default_start(params, branch).V, theta=pm.theta)


#: The rule of the population risk in :func:`population_start`: a start needs the minimiser to a few per cent (8 nodes
#: per dimension: within 5 % in q, 2 % in m and theta of the converged rule's at random points of the domain, in a
#: tenth of its time on the semantic branch).
POPULATION_START_RULE = Quadrature("gauss-hermite", 8)


@functools.lru_cache(maxsize=64)
def _population_minimum(params: TaskParams, branch: str):
    return population_minimum(params, branch, quadrature=POPULATION_START_RULE)


def _cold_starts(params: TaskParams, branch: str, collapsed: Overlaps | None) -> list:
    """The cold starts of :func:`rescue_branch_point`."""
    x = default_start(params, branch)
    starts = [Overlaps(q=x.q, m=x.m * f, V=x.V, theta=x.theta * f) for f in RESCUE_SCALES]
    starts.append(population_start(params, branch))
    if collapsed is not None and collapsed.q > 0 and collapsed.V > 0:
        theta = min(x.theta, 0.9 * math.sqrt(params.rho * collapsed.q))
        starts.append(Overlaps(q=collapsed.q, m=x.m, V=collapsed.V, theta=theta))
    return starts


def _newton_from(params: TaskParams, alpha: float, branch: str, starts: list, solver: SESolver) -> SEResult | None:
    """The first converged Newton solve from ``starts`` with the defining overlap present, else None."""
    return _newton_search(params, alpha, branch, starts, solver)[0]


def _newton_search(params: TaskParams, alpha: float, branch: str, starts: list, solver: SESolver) -> tuple:
    """``(found, near)``: the first converged Newton solve from ``starts`` with the defining overlap present (else
    None), and whether any search ended near a point of the branch without converging (the defining overlap
    at least :data:`RESCUE_NEAR_OVERLAP`, the residual below :data:`RESCUE_NEAR`).

    The searches run first under the solver's coarse rule (``solver.coarse_quadrature``, a sixteenth of the nodes):
    where none of them comes near the branch, none under the fine rule does either (the two rules' maps differ by
    far less than the residuals of a search that makes no headway), and the answer is ``(None, False)``; a point
    found is polished under the fine rule, and where that fails, or a coarse search came near, the fine searches
    run from ``starts``."""
    if solver.coarse_quadrature is not None and len(starts) > 1:
        found, near = _search_under(params, alpha, branch, starts, replace(solver, quadrature=solver.coarse_quadrature))
        if found is None and not near:
            return None, False
        if found is not None:
            polished, _ = _search_under(params, alpha, branch, [found.overlaps], solver)
            if polished is not None:
                return polished, True
    return _search_under(params, alpha, branch, starts, solver)


def _search_under(params: TaskParams, alpha: float, branch: str, starts: list, solver: SESolver) -> tuple:
    """:func:`_newton_search` under the rule of ``solver`` alone."""
    settings = Continuation(solver=solver, max_newton=RESCUE_NEWTON)
    near = False
    for x0 in starts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            try:
                res = newton_fixed_point(params, alpha, branch, x0, settings=settings,
                                         max_evaluations=RESCUE_EVALUATIONS, give_up_after=RESCUE_PATIENCE)
            except (ValueError, ArithmeticError):   # Newton left the domain of the map: no point from here
                continue
        if _on_branch(params, branch, res):
            return res, True
        near = near or (res.residual < RESCUE_NEAR
                        and defining_overlap(branch, res) >= RESCUE_NEAR_OVERLAP * params.rho)
    return None, near

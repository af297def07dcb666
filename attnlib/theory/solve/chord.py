"""The fixed point under a large randomised rule in a few map evaluations: a chord-Newton solve of the union of
several scrambled Sobol rules, with the error from the scramblings' spread by linear response.

:func:`attnlib.solve_accurately` solves the state evolution once per scrambling of a ``"sobol-sym"`` rule
(some twenty map evaluations each, most of them at the full rule) and averages. Here the scramblings are
pooled into one rule, and its fixed point ``x* = F(x*)`` (book :eq:`eq-conjugates` to
:eq:`eq-overlap-update`, ``F = sum_k F_k / K`` in the conjugates) is found by the chord method

    x_{n+1} = x_n + (I - J)^{-1} (F(x_n) - x_n),

with ``J`` the Jacobian of a cheap smooth rule's map (tensor Gauss-Hermite, central differences) at that rule's
own fixed point, which is the start. Both maps differ by a nearly constant offset near the fixed point, so
the chord contracts by ``|| (I - J)^{-1} (J_F - J) ||`` per step (about 0.1 at the paper's reference points):
three to seven evaluations of the large rule, of which only the first searches the proximal problem fully at
every node (the others descend from the previous proximal points and search fully near the jump of the
proximal point only), and a last full search confirms the fixed point.

The error bar comes from the same evaluations. The fixed point of scrambling ``k`` alone lies, to first order,
at ``x*_k = x* + (I - J)^{-1} (F_k(x*) - x*)``; the spread of the ``x*_k`` over the ``K`` scramblings, divided by
``sqrt(K)``, is the standard error of ``x*``. The training loss ``eps_t = -Phi`` is stationary at each
scrambling's fixed point, so its value there is ``-Phi`` of that scrambling's conjugates at ``x*`` to second
order; the test error is evaluated at ``x*_k``. Where a relative standard error exceeds ``rtol`` (near the
end of a branch, where the map is nearly neutral and the error is amplified) every rule is doubled and the
solve continues from ``x*``.
"""
from __future__ import annotations

import time
import warnings
from collections import OrderedDict
from dataclasses import replace

import numpy as np

from ...cache import cache_key
from ...exceptions import ConvergenceWarning, warn_caller
from ...params import TaskParams, check_finite_scalar, check_int, check_params
from .accurate import ACCURATE_FIELDS, ACCURATE_RTOL, AccurateFixedPoint, check_rule_arguments
from .differences import central_jacobian
from ..model.generalisation import test_error_from_overlaps
from ..model.quadrature import Quadrature
from ..model.status import VANISH_FLOOR, defining_overlap, impossible
from ..model.state_evolution import (Conjugates, Overlaps, SEResult, SESolver, _check_state, _free_energy, _hold,
                                     _residual, conjugates_and_energy, overlaps_from_conjugates, se_nodes,
                                     symmetry_generators)
from .branch_points import follow_branch

__all__ = ["CHORD_FIELDS", "CHORD_ORDER", "CHORD_SEEDS", "CHORD_MAX_ORDER", "NOISE_FRACTION", "START_HOVER_WINDOW",
           "chord_start_solver", "solve_chord",
           "scrambling_fixed_points"]

#: log2 of the points of each pooled scrambling (four of them: ``2**17`` points in all)
CHORD_ORDER = 15
#: scrambling seeds of the pooled rule
CHORD_SEEDS = (3, 4, 5, 6)
#: largest log2 point count per scrambling that the rule is raised to while the standard error exceeds rtol
CHORD_MAX_ORDER = 18
#: quantities whose relative standard error must meet rtol (V is reported with its error, not held to it)
CHORD_FIELDS = ("q", "m", "theta", "test_error", "train_loss")
#: the fixed point counts as located when the chord correction is below this fraction of every free overlap's
#: standard error (what is left is added to the error in quadrature: at most 12 % more)
NOISE_FRACTION = 0.5
#: below this magnitude an overlap's standard error is held to rtol in absolute terms (the residual's floor)
_ERROR_FLOOR = 1e-4
#: relative step of the central differences of the start rule's Jacobian
_FD_STEP = 1e-3
#: a start rule's fixed point with ``q`` below this times ``rho`` is the trivial one, ``Q = 0`` (the ridge wins)
TRIVIAL_Q = 1e-9
#: ``q / rho`` at which the map is evaluated to solve the trivial point's width ``V`` (the limit ``q -> 0``)
TRIVIAL_EVAL_Q = 1e-14


#: The start rule's iteration stops where its residual hovers for this many iterations (``SESolver.hover_window``):
#: where it converges it does so in at most ~65 iterations (random points of the domain and the paper's), where it
#: hovers (large width V) it used to run its 400 iterations, 15-25 s, for a start the chord refines anyway.
START_HOVER_WINDOW = 30


def chord_start_solver() -> SESolver:
    """Settings of the start rule: tensor Gauss-Hermite with 12 nodes (the :class:`SESolver` default), with
    4 ring starts in the proximal search (as many local minima found as with 12 at these points, in half the
    time), stopped where its residual hovers (:data:`START_HOVER_WINDOW`)."""
    return SESolver(n_ring=4, hover_window=START_HOVER_WINDOW)


def _free_indices(hold: tuple) -> list[int]:
    """Indices into ``(q, m, V, theta)`` of the overlaps that are not pinned."""
    return [i for i, pinned in ((0, None), (1, hold[0]), (2, None), (3, hold[1])) if pinned is None]


#: Full evaluations of the pooled map kept per solve (:class:`_PooledMap` ``memo``).
_MEMO_KEPT = 4


class _PooledMap:
    """The map of the pooled rule, one block per scrambling: ``F(x)`` from the mean conjugates, ``F_k(x)`` and the
    conjugates and mean proximal value of every block."""

    def __init__(self, params, alpha, hold, order, seeds, solver, memo: OrderedDict | None = None):
        generators = symmetry_generators(params, hold)
        self.blocks = [se_nodes(Quadrature("sobol-sym", order, s), generators) for s in seeds]
        self.params, self.alpha, self.hold, self.solver = params, alpha, hold, solver
        self.warm = None
        self.teachers = [{} for _ in self.blocks]  # each block's last teacher diagonal (conjugates_and_energy)
        self.calls = 0
        # the last few full evaluations, by the state's bytes (shared by the maps of one solve, which restart
        # from the same point: a chord, the own Jacobian and the next chord all begin with a full search there)
        self.memo = OrderedDict() if memo is None else memo

    def __call__(self, x: Overlaps, full: bool):
        key = x.as_array().tobytes() if full else None
        if key in self.memo:
            out, self.warm = self.memo[key]
            self.memo.move_to_end(key)
            return out
        self.calls += 1
        hats, means, warm = [], [], []
        for k, (nodes, weights) in enumerate(self.blocks):
            hat, mean_M, w = conjugates_and_energy(self.params, self.alpha, x, nodes, weights, self.solver,
                                                   self.hold, warm=None if full or self.warm is None
                                                   else self.warm[k], teacher=self.teachers[k])
            hats.append(hat)
            means.append(mean_M)
            warm.append(w)
        self.warm = warm
        mean_hat = Conjugates(*np.mean([[h.q_hat, h.m_hat, h.V_hat, h.theta_hat] for h in hats], axis=0).tolist())
        fx = overlaps_from_conjugates(self.params, mean_hat)
        _check_state(fx, self.params.rho)
        out = fx.as_array(), mean_hat, float(np.mean(means)), hats, means
        if full:
            self.memo[key] = (out, warm)
            if len(self.memo) > _MEMO_KEPT:
                self.memo.popitem(last=False)
        return out


def _with_hold(x: np.ndarray, hold: tuple) -> np.ndarray:
    """``x`` (``(q, m, V, theta)``) with the pinned overlaps of ``hold`` set."""
    x = np.array(x, dtype=float)
    for i, pinned in ((1, hold[0]), (3, hold[1])):
        if pinned is not None:
            x[i] = pinned
    return x


#: The last few Jacobians of :func:`_start_jacobian`, by their arguments: the seed sets of one ``alpha`` in
#: ``attnlib.theory.branches.pooled_end.agreement_end`` start from the same point and need the same one.
_JACOBIANS: OrderedDict = OrderedDict()
_JACOBIANS_KEPT = 8


def _start_jacobian(params, alpha, x0: Overlaps, hold, free, solver) -> np.ndarray:
    """Jacobian of the start rule's map at ``x0`` on the free overlaps, by central differences in which every node
    follows its proximal minimum at ``x0`` by local descent (so that no node changes basin inside a difference).
    A deterministic function of its arguments, kept for the last :data:`_JACOBIANS_KEPT` of them (a copy is
    returned)."""
    key = cache_key("start-jacobian", params=params, alpha=float(alpha), x0=x0.as_array(), hold=list(hold),
                    free=list(free), solver=solver)
    if key not in _JACOBIANS:
        _JACOBIANS[key] = _difference_jacobian(params, alpha, x0, hold, free, solver)
        if len(_JACOBIANS) > _JACOBIANS_KEPT:
            _JACOBIANS.popitem(last=False)
    _JACOBIANS.move_to_end(key)
    return _JACOBIANS[key].copy()


def _difference_jacobian(params, alpha, x0: Overlaps, hold, free, solver) -> np.ndarray:
    """:func:`_start_jacobian` computed."""
    nodes, weights = se_nodes(solver.quadrature, symmetry_generators(params, hold))
    teacher = {}
    _, _, warm = conjugates_and_energy(params, alpha, x0, nodes, weights, solver, hold, teacher=teacher)
    warm = (warm[0], np.zeros(len(nodes), bool))

    def image(e):
        hat, _, _ = conjugates_and_energy(params, alpha, Overlaps.from_array(e), nodes, weights, solver, hold,
                                          warm=warm, teacher=teacher)
        return overlaps_from_conjugates(params, hat).as_array()

    return central_jacobian(image, x0.as_array(), free, _fd_steps(x0.as_array(), free, params.rho))


def _fd_steps(x: np.ndarray, free: list, rho: float) -> np.ndarray:
    """Steps of the central differences on the coordinates ``free`` of ``x = (q, m, V, theta)``: ``_FD_STEP``
    relative (floor 1e-3), shortened to a third of the distance to the edge of the domain (``q > 0``,
    ``V > 0``, ``theta^2 <= rho q``) so that both sides of every difference stay inside it: near the trivial
    point ``q -> 0`` where the ridge wins, and near perfect alignment ``theta^2 -> rho q`` at large ``alpha``."""
    x = np.asarray(x, dtype=float)
    q, V, theta = x[0], x[2], x[3]
    room = {0: q - theta**2 / rho, 1: np.inf, 2: V, 3: np.sqrt(rho * q) - abs(theta)}
    steps = _FD_STEP * np.maximum(np.abs(x[free]), 1e-3)
    return np.array([min(h, room[i] / 3.0) if room[i] > 0 else h for h, i in zip(steps, free)])


def _pooled_jacobian(pooled: "_PooledMap", x0: np.ndarray, free: list) -> np.ndarray:
    """Jacobian of the pooled rule's own map at ``x0`` on the free overlaps, by central differences in which every
    node follows its proximal minimum at ``x0`` by local descent (as :func:`_start_jacobian`); ``pooled.warm`` is
    left at ``x0``'s proximal points."""
    pooled(Overlaps.from_array(x0), True)
    base = [(h, np.zeros(len(h), bool)) for h, _ in pooled.warm]

    def image(e):
        pooled.warm = base
        return pooled(Overlaps.from_array(e), False)[0]

    J = central_jacobian(image, x0, free, _fd_steps(x0, free, pooled.params.rho))
    pooled.warm = base
    return J


def solve_chord(params: TaskParams, alpha: float, branch: str = "semantic", start: Overlaps | None = None,
                order: int = CHORD_ORDER, seeds=CHORD_SEEDS, rtol: float = ACCURATE_RTOL,
                max_order: int = CHORD_MAX_ORDER, tol: float = 1e-5, max_steps: int = 25,
                n_ring: int = 4, noise_fraction: float = NOISE_FRACTION,
                start_rule: bool = True, own_jacobian: bool = False) -> AccurateFixedPoint:
    """The fixed point of a branch under pooled scrambled Sobol rules, by chord-Newton steps, with its error.

    Parameters
    ----------
    params : TaskParams
        The task.
    alpha : float
        Sample complexity, in ``(0, inf)``.
    branch : {"semantic", "positional", "agnostic"}
        The branch.
    start : Overlaps, optional
        Start of the start rule's solve (default: the branch's point under that rule, found as a sweep finds it,
        ``follow_branch`` of ``attnlib.theory.studies.sweeps``).
    order : int
        log2 of the points of each ``"sobol-sym"`` scrambling to begin with (6 to 22).
    seeds : sequence of int
        At least two distinct scrambling seeds; the pooled rule has ``len(seeds) * 2**order`` points.
    rtol : float
        Target of the relative standard error of each of ``CHORD_FIELDS``; while it is missed, each rule is doubled, up to ``max_order``.
    max_order : int
        Largest ``order`` (``order`` to 22).
    tol : float
        Convergence when every overlap moves by less than ``tol`` relative (absolute below ``1e-4``), or when
        the chord correction is below ``noise_fraction`` times the standard error of every free overlap (the
        remaining correction is then added to the errors in quadrature); confirmed by a full proximal search.
    max_steps : int
        Chord steps at most per rule size.
    n_ring : int
        Ring starts of the global proximal search.
    noise_fraction : float
        See ``tol`` (in ``[0, 1]``; 0: ``tol`` only). The pooled map sums over finitely many nodes, each of which
        can switch between its two proximal minima, so below its quadrature error the fixed point is not
        defined more finely and the residual can stall there.
    start_rule : bool
        True: the chord starts at the start rule's fixed point (from ``start``), and goes on from ``start`` only
        where that fails. False (needs ``start``): it starts at ``start`` itself, the start rule giving only the
        step matrix (its Jacobian at ``start``): for a sweep along ``alpha`` near the end of a branch, where the
        start rule may have lost the branch that the pooled rule still has.
    own_jacobian : bool
        With ``start_rule=False``: the chord from ``start`` takes its step from the Jacobian of the pooled rule's own
        map there (central differences of its cheap evaluations: one full and ``2 k`` cheap evaluations of the
        pooled rule for ``k`` free overlaps) instead of the start rule's, which can be far off near the start rule's
        own fold (where that chord stalls, secant updates go on from where it stopped, as always). Formerly the start
        rule's chord ran first and this one only where it failed: beyond the continuation's trace the
        positional end's first chords failed in 17 of 21 solves (omega = 0.05), after 25 steps each; going to the
        own Jacobian at once gave the same positional ends to all digits at omega 0-0.2 in 25 % less time.

    Returns
    -------
    AccurateFixedPoint
        ``mean`` holds the pooled rule's fixed point and what it predicts, ``stderr`` the standard errors,
        ``runs`` is empty (no scrambling is solved on its own), ``order`` the final log2 points per scrambling.
        ``converged`` is False (with a :class:`~attnlib.exceptions.ConvergenceWarning`) when the chord did not
        reach ``tol``; ``precise`` is False (with a warning) when ``rtol`` was missed at ``max_order``. Where the
        branch is absent (from a cold start, the start rule's point has its defining overlap below
        ``VANISH_FLOOR * rho``: no search found the branch), the point that exists is solved with
        ``m = theta = 0`` held, at ``order`` without doublings (``precise`` may then be False without a warning:
        the verdict is the answer; ``branch="agnostic"`` holds that point to ``rtol``).
    """
    check_params(params, "solve_chord").require_two_tokens("solve_chord")
    return _solve(params, alpha, branch, start, order, seeds, rtol, max_order, tol, max_steps, n_ring,
                  noise_fraction, start_rule, own_jacobian)[0]


def accurate_result(params: TaskParams, alpha: float, branch: str, start: Overlaps | None = None) -> SEResult:
    """The default answer of :func:`attnlib.solve_state_evolution`: :func:`solve_chord` with its default
    settings, as an :class:`~attnlib.theory.model.state_evolution.SEResult` with the standard errors in ``stderr``, the
    pooled rule's conjugates at the fixed point, ``n_iter`` counting the pooled rule's map evaluations and
    ``residual`` the last relative change.

    Where the pooled solve cannot be carried out (a map evaluation leaves the domain of the equations, or a
    step matrix is singular), the answer is the start rule's fixed point, with ``converged=False`` and a warning
    that names the branch, the point and the failure; so it is where the chord ends unconverged farther from a fixed
    point (a larger residual) than the start rule's point, which then has not converged either (a chord that
    diverges can end outside the overlaps' admissible set). A converged fixed point that cannot be a student's
    (:func:`~attnlib.theory.model.status.impossible`: a negative training loss, ``q < sigma^2 m^2 + theta^2 /
    sigma^2``) is reported as not converged, with a warning."""
    base = _start_rule_point(params, alpha, branch, start)
    try:
        fp, hat, calls, residual = _solve(params, alpha, branch, start, CHORD_ORDER, CHORD_SEEDS, ACCURATE_RTOL,
                                          CHORD_MAX_ORDER, 1e-5, 25, 4, NOISE_FRACTION, base=base)
    except (ArithmeticError, np.linalg.LinAlgError) as exc:
        fallback = base
        warn_caller(f"the default rule's solve failed (branch={branch}, alpha={alpha:g}, sigma={params.sigma:g}, "
                    f"lambda={params.lam:g}, omega={params.omega:g}): {type(exc).__name__}: {exc}; the numbers are "
                    f"the start rule's ({fallback.rule or 'Gauss-Hermite'}) last iterate")
        return replace(fallback, converged=False)
    if not fp.converged and base.residual < residual:
        warn_caller(f"the default rule's chord ended unconverged (branch={branch}, alpha={alpha:g}, "
                    f"sigma={params.sigma:g}, lambda={params.lam:g}, omega={params.omega:g}) with residual "
                    f"{residual:.2g}; the numbers are the start rule's ({base.rule or 'Gauss-Hermite'}) last iterate, "
                    f"residual {base.residual:.2g}")
        return replace(base, converged=False)
    mean = fp.mean
    # Q -> -Q flips (m, theta): the representative with the branch's defining overlap non-negative (the pooled
    # chord can end a hair below zero where that overlap all but vanishes)
    sign = -1.0 if (mean["m"] if branch == "positional" else mean["theta"]) < 0 else 1.0
    rule = f"sobol-sym {len(fp.seeds)} x 2^{fp.order} seeds {','.join(str(s) for s in fp.seeds)}"
    result = SEResult(params=params, alpha=fp.alpha, branch=branch, q=mean["q"], m=sign * mean["m"], V=mean["V"],
                      theta=sign * mean["theta"], q_hat=hat.q_hat, m_hat=sign * hat.m_hat, V_hat=hat.V_hat,
                      theta_hat=sign * hat.theta_hat, test_error=mean["test_error"], train_loss=mean["train_loss"],
                      converged=fp.converged, n_iter=calls, residual=residual, seconds=fp.seconds, rule=rule,
                      stderr=dict(fp.stderr))
    why = impossible(params, result, result.stderr) if result.converged else None
    if why:
        warn_caller(f"the default rule's fixed point is not a student's (branch={branch}, alpha={alpha:g}, "
                    f"sigma={params.sigma:g}, lambda={params.lam:g}, omega={params.omega:g}): {why}; reported as "
                    f"not converged")
        result = replace(result, converged=False)
    return result


def _start_rule_point(params: TaskParams, alpha: float, branch: str, start: Overlaps | None) -> SEResult:
    """The chord's starting point: the branch's point under the start rule (:func:`chord_start_solver`), found as a
    sweep finds it (:func:`~attnlib.theory.solve.branch_points.follow_branch`, its discarded attempts silent)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return follow_branch(params, alpha, branch, start, chord_start_solver())


def _solve(params, alpha, branch, start, order, seeds, rtol, max_order, tol, max_steps, n_ring, noise_fraction,
           start_rule=True, own_jacobian=False, base: SEResult | None = None):
    """:func:`solve_chord`, returning also the pooled conjugates at the fixed point, the number of pooled map
    evaluations and the last residual; ``base``, where given, is the start rule's point (``follow_branch`` from
    ``start``), already solved."""
    t0 = time.perf_counter()
    alpha, seeds, order, max_order, rtol, tol, max_steps, noise_fraction, n_ring = _check_solve_arguments(
        alpha, branch, start, order, seeds, rtol, max_order, tol, max_steps, n_ring, noise_fraction, start_rule)
    start_solver = chord_start_solver()
    x0, hold, trivial, absent = _chord_start(params, alpha, branch, start, start_rule, base)
    if absent:
        max_order = order   # the verdict is the answer: the numbers of the point that exists at the first size
    free = [2] if trivial else _free_indices(hold)

    def start_step():
        return np.linalg.inv(np.eye(len(free)) - _start_jacobian(params, alpha, x0, hold, free, start_solver))

    own_first = own_jacobian and not start_rule
    # the start rule's step matrix; with the own Jacobian first, only where the secant updates need it
    step = None if own_first else start_step()
    solver = SESolver(n_ring=n_ring)
    x = x0.as_array()
    retry = None if start is None or not start_rule else _with_hold(start.as_array(), hold)
    calls = 0
    while True:
        memo = OrderedDict()  # full evaluations at this order, shared by the maps below
        pooled = _PooledMap(params, alpha, hold, order, seeds, solver, memo)
        first = step
        if own_first:
            # the pooled rule's own Jacobian at the start (the start rule's can be far off near its own fold)
            first = np.linalg.inv(np.eye(len(free)) - _pooled_jacobian(pooled, x, free))
            own_first = False
        x, out, converged, failure, left, used = _chord(pooled, x, first, free, tol, max_steps, noise_fraction)
        calls += pooled.calls
        if not converged and retry is not None:
            # the start rule's point lies too far off (or on another fixed point of that rule, near a fold):
            # go on from the given start, a point of the pooled rule's branch nearby when a sweep gives it
            pooled = _PooledMap(params, alpha, hold, order, seeds, solver, memo)
            x, out, converged, failure, left, used = _chord(pooled, retry, step, free, tol, max_steps,
                                                            noise_fraction)
            calls += pooled.calls
        retry = None
        if not converged and failure and "after" in failure and "chord steps" in failure:
            # the chord contracts too slowly (next to a fold): secant updates from where it stopped
            pooled = _PooledMap(params, alpha, hold, order, seeds, solver, memo)
            step = start_step() if step is None else step
            x, out, converged, failure, left, used = _chord(pooled, x, step, free, tol, max_steps,
                                                            noise_fraction, broyden=True)
            calls += pooled.calls
        step = used   # the response matrix of the error bars: the secant-updated one where it was used
        fx, hat, mean_M, hats, means = out
        mean, stderr = _estimate(params, alpha, x, hat, mean_M, hats, means, step, free, left)
        if trivial:
            mean, stderr = _trivial_estimate(params, mean, stderr)
        # relative errors, with the floor of the residual (1e-4) for an overlap that vanishes (m or theta
        # beyond the end of a branch)
        worst = max(stderr[k] / max(abs(mean[k]), _ERROR_FLOOR) for k in CHORD_FIELDS)
        if not converged or worst <= rtol or order >= max_order:
            break
        order += 1
    precise = converged and worst <= rtol
    where = (f"branch={branch}, alpha={alpha:g}, sigma={params.sigma:g}, lambda={params.lam:g}, "
             f"omega={params.omega:g}")
    if not converged:
        warn_caller(f"solve_chord did not converge ({where}): {failure}")
    elif not precise and not absent:
        warn_caller(f"solve_chord: relative standard error {worst:.2g} > rtol {rtol:g} with {len(seeds)} x "
                    f"2^{order} points ({where}); raise max_order")
    fp = AccurateFixedPoint(params=params, alpha=alpha, branch=branch, mean=mean, stderr=stderr, runs=(),
                            seeds=seeds, order=int(order), converged=converged, precise=precise,
                            seconds=time.perf_counter() - t0)
    return fp, hat, calls, _residual(x, fx)


def _chord_start(params, alpha, branch, start, start_rule, base) -> tuple:
    """``(x0, hold, trivial, absent)``: where the chord of :func:`_solve` starts, the overlaps it holds, and whether
    that is the trivial point ``Q = 0`` or, the branch being absent, the uninformed point."""
    hold = _hold(params, branch)
    if start_rule:
        point = base or _start_rule_point(params, alpha, branch, start)
        x0 = point.overlaps
    else:
        x0 = Overlaps.from_array(_with_hold(start.as_array(), hold))
    absent = x0.q > TRIVIAL_Q * params.rho and start_rule and start is None and _collapsed(params, branch, x0)
    if absent:
        # the branch is absent (the start rule's search, rescue included, ended on the uninformed point): solve the
        # point that exists on its own subspace, m = theta = 0 exactly, rather than leave the vanished overlap
        # free for the pooled rule's noise to give it a spurious value (and its error the rule's doublings); from
        # the start rule's own point of that subspace where the branch's search ended unconverged (it may have
        # wandered far from any fixed point)
        hold = (0.0, 0.0)
        if not point.converged:
            own = _start_rule_point(params, alpha, "agnostic", None)
            x0 = own.overlaps if own.converged or own.residual < point.residual else x0
        x0 = Overlaps(q=x0.q, m=0.0, V=x0.V, theta=0.0)
    trivial = x0.q <= TRIVIAL_Q * params.rho
    if trivial:
        # the trivial fixed point Q = 0 (the ridge wins): q = m = theta = 0 exactly, and only V is solved for, by
        # the same chord on the map evaluated at a vanishing q (its limit q -> 0 is regular; at q = 0 itself the
        # width's conjugate is 0/0)
        hold = (0.0, 0.0)
        x0 = Overlaps(q=TRIVIAL_EVAL_Q * params.rho, m=0.0, V=x0.V, theta=0.0)
    return x0, hold, trivial, absent


def _collapsed(params: TaskParams, branch: str, x: Overlaps) -> bool:
    """Has the semantic or positional branch's defining overlap vanished at ``x`` (below ``VANISH_FLOOR * rho``)?"""
    return branch in ("semantic", "positional") and defining_overlap(branch, x) < VANISH_FLOOR * params.rho


def _check_solve_arguments(alpha, branch, start, order, seeds, rtol, max_order, tol, max_steps, n_ring,
                           noise_fraction, start_rule) -> tuple:
    """The settings of :func:`solve_chord` checked (``ValueError`` naming the first invalid one), as
    ``(alpha, seeds, order, max_order, rtol, tol, max_steps, noise_fraction, n_ring)``."""
    alpha, seeds, order, max_order, rtol = check_rule_arguments(alpha, branch, seeds, order, max_order, rtol)
    tol = check_finite_scalar("tol", tol)
    if not 0 < tol < 1:
        raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
    max_steps = check_int("max_steps", max_steps, 1)
    noise_fraction = check_finite_scalar("noise_fraction", noise_fraction)
    if not 0 <= noise_fraction <= 1:
        raise ValueError(f"noise_fraction must lie in [0, 1], got {noise_fraction!r}")
    n_ring = check_int("n_ring", n_ring, 0)
    if start is not None and not isinstance(start, Overlaps):
        raise ValueError(f"start must be an Overlaps instance, got {type(start).__name__}")
    if not start_rule and start is None:
        raise ValueError("start_rule=False needs a start (the point the chord starts from)")
    return alpha, seeds, order, max_order, rtol, tol, max_steps, noise_fraction, n_ring


def _chord(pooled: _PooledMap, x: np.ndarray, step: np.ndarray, free: list, tol: float, max_steps: int,
           noise_fraction: float, broyden: bool = False):
    """Chord steps from ``x`` (a point where the pooled map is defined) until the fixed point is located, at a
    full proximal search: the residual is below ``tol``, or the chord correction ``(I - J)^{-1} (F(x) - x)`` is
    below ``noise_fraction`` of the standard error of every free overlap (the pooled map is a sum over finitely
    many nodes, each of which can switch basin: below its quadrature error the fixed point is not defined more
    finely, and the residual can stall or jump there). A step whose image leaves the domain is halved (up to 12
    times).

    The steps descend from the previous proximal points (a full search only near the jump); where they meet the
    criterion a full search at the same point confirms it or, when some node's global minimum has changed basin
    away from the jump, gives the proximal points from which the steps go on. With ``broyden`` the step matrix
    is updated after every step by Broyden's (good) secant update of the inverse Jacobian of ``F(x) - x``, for
    where the start rule's Jacobian contracts too slowly (next to a fold). Returns
    ``(x, pooled map's output at x, converged, failure, correction, step)``: the last point evaluated, the chord
    correction left there (zero where the residual met ``tol``) and the step matrix."""
    out = pooled(Overlaps.from_array(x), True)
    full = True
    res_prev = np.inf
    delta = np.zeros_like(x)
    step = np.array(step, dtype=float)
    for _ in range(max_steps):
        res = _residual(x, out[0])
        delta = np.zeros_like(x)
        delta[free] = step @ (out[0] - x)[free]
        noise = noise_fraction * _scrambling_spread(pooled.params, x, out[3], step, free)
        located = res < tol or bool(np.all(np.abs(delta[free]) <= noise[free]))
        if located:
            if full:
                return x, out, True, None, (np.zeros_like(x) if res < tol else delta), step
            out, full = pooled(Overlaps.from_array(x), True), True  # confirm with the full search
            res_prev = np.inf  # the next steps descend from the confirmed proximal points
            continue
        if res > 10.0 * res_prev:
            return x, out, False, f"the chord diverged (residual {res:.2e} after {res_prev:.2e})", delta, step
        res_prev = res
        for _ in range(12):
            try:
                cand = x + delta
                _check_state(Overlaps.from_array(cand), pooled.params.rho)
                out_new = pooled(Overlaps.from_array(cand), False)
                break
            except FloatingPointError:
                delta *= 0.5
        else:
            return x, out, False, "the chord step left the domain (q > 0, V > 0, theta^2 <= rho q)", delta, step
        if broyden:
            s_k = (cand - x)[free]
            y_k = (out_new[0] - cand)[free] - (out[0] - x)[free]
            hy = step @ y_k
            denom = s_k @ hy
            if abs(denom) > 1e-12 * np.linalg.norm(s_k) * np.linalg.norm(hy):
                step = step - np.outer(s_k + hy, s_k @ step) / denom   # secant: step @ y_k = -s_k
        x, out, full = cand, out_new, False
    return (x, out, False, f"residual {_residual(x, out[0]):.2e} > tol {tol:g} after {max_steps} chord steps",
            delta, step)


def _scrambling_spread(params: TaskParams, x: np.ndarray, hats, step: np.ndarray, free: list) -> np.ndarray:
    """Standard error of the overlaps ``x`` from the scramblings' first-order fixed points (shape ``(4,)``)."""
    per = scrambling_fixed_points(params, x, hats, step, free)
    return per.std(axis=0, ddof=1) / np.sqrt(len(per))


def scrambling_fixed_points(params: TaskParams, x: np.ndarray, hats, step: np.ndarray, free: list) -> np.ndarray:
    """Each scrambling's fixed point to first order, ``x + (I - J)^{-1} (F_k(x) - x)`` on the free overlaps, from
    its conjugates ``hats[k]`` at the pooled fixed point ``x``; shape ``(K, 4)``."""
    out = np.repeat(x[None, :], len(hats), axis=0)
    for k, hat_k in enumerate(hats):
        fk = overlaps_from_conjugates(params, hat_k).as_array()
        out[k, free] = x[free] + step @ (fk - x)[free]
    return out


def _admissible_test_error(params: TaskParams, x: np.ndarray) -> float:
    """``eps_g`` at the overlaps ``(q, m, V, theta)`` nearest to ``x`` that satisfy ``q > 0``, ``theta^2 <= rho q``."""
    q = max(float(x[0]), 1e-300)
    bound = np.sqrt(params.rho * q)
    return test_error_from_overlaps(params, q, float(x[1]), float(np.clip(x[3], -bound, bound)))


def _trivial_estimate(params: TaskParams, mean: dict, stderr: dict) -> tuple[dict, dict]:
    """The estimate at the trivial fixed point: ``q = m = theta = 0`` exactly (no error), the test error of the
    zero student exactly, ``V`` and the training loss as solved."""
    mean, stderr = dict(mean), dict(stderr)
    for k in ("q", "m", "theta"):
        mean[k], stderr[k] = 0.0, 0.0
    mean["test_error"], stderr["test_error"] = test_error_from_overlaps(params, 0.0, 0.0, 0.0), 0.0
    return mean, stderr


def _estimate(params, alpha, x, hat, mean_M, hats, means, step, free, left=None):
    """The pooled fixed point's quantities and their standard errors from the scramblings' linear response;
    a chord correction ``left`` at ``x`` (where the fixed point was located to within its noise) is added to
    the errors of the overlaps and of ``eps_g`` in quadrature (``eps_t`` is stationary: second order)."""
    ov = Overlaps.from_array(x)
    mean = dict(zip(("q", "m", "V", "theta"), x.tolist()))
    mean["test_error"] = test_error_from_overlaps(params, ov.q, ov.m, ov.theta)
    mean["train_loss"] = -_free_energy(params, alpha, ov, hat, mean_M)
    per = []
    for xk, hat_k, mean_k in zip(scrambling_fixed_points(params, x, hats, step, free), hats, means):
        # near the end of a branch the response of a scrambling can leave the domain (theta^2 > rho q): eps_g is
        # then taken at the nearest admissible overlaps, and the overlaps' own spread flags the point
        eps_g = _admissible_test_error(params, xk)
        per.append(list(xk) + [eps_g, -_free_energy(params, alpha, ov, hat_k, mean_k)])
    per = np.array(per)
    err = per.std(axis=0, ddof=1) / np.sqrt(len(per))
    if left is not None and np.any(left):
        shift = _admissible_test_error(params, x + left)
        err[:4] = np.hypot(err[:4], np.abs(left))
        err[4] = np.hypot(err[4], abs(shift - mean["test_error"]))
    return ({k: float(mean[k]) for k in ACCURATE_FIELDS},
            {k: float(v) for k, v in zip(ACCURATE_FIELDS, err.tolist())})

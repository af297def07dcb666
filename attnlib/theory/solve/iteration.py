"""The state evolution of ``L = 2``, rank 1, solved under one quadrature rule by damped, accelerated iteration.

:func:`iterate_state_evolution` iterates the map of :mod:`attnlib.theory.model.state_evolution` (book chapter 4) from a
start: a coarse rule's transient from a cold start, cheap steps (local proximal descents from the last minimisers)
confirmed by full proximal searches, damping and Anderson acceleration (:func:`_mix`, also used by the general
engine), and backtracking where an image leaves the domain. :func:`attnlib.solve_state_evolution` calls it for an
explicit single rule; the continuation, the branch followers and the traces call it directly.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ...exceptions import warn_caller
from ...params import TaskParams, check_alpha
from ..model.generalisation import test_error_from_overlaps
from ..model.state_evolution import (Conjugates, Overlaps, SEResult, SESolver, _check_state, _free_energy, _hold,
                                     _residual, conjugates_and_energy, default_start, overlaps_from_conjugates,
                                     se_nodes, symmetry_generators)

__all__ = ["iterate_state_evolution", "resolve_start", "START_WIDTHS", "STALL_WINDOW", "STALL_FACTOR", "STALL_ABOVE",
           "HOVER_BELOW"]


#: The iteration stops, unconverged, when its best residual over the last ``STALL_WINDOW`` iterations is no better
#: than ``STALL_FACTOR`` times the best before them (:func:`_stalled`).
STALL_WINDOW = 60
STALL_FACTOR = 0.9
#: ... and only while its best residual is above ``STALL_ABOVE`` times the tolerance.
STALL_ABOVE = 1e3

#: ``SESolver.hover_window`` stops an iteration only once its best residual is below this (near a fixed point: a
#: transient's residual can rise and fall for a while before it settles).
HOVER_BELOW = 1e-2

#: Where the image of the start leaves the domain, the start's width ``V`` is multiplied by each of these in turn.
START_WIDTHS = (0.25, 4.0, 1 / 16, 16.0, 1 / 64, 64.0, 1 / 256)


def iterate_state_evolution(params: TaskParams, alpha: float, branch: str = "semantic",
                            start: Overlaps | None = None, solver: SESolver | None = None,
                            record_history: bool = False, fix_m: float | None = None,
                            fix_theta: float | None = None) -> SEResult:
    """The fixed point of a branch under the single quadrature rule of ``solver`` (``L = 2``, rank 1), by the
    damped, Anderson-accelerated iteration of the equations (module docstring).

    :func:`attnlib.solve_state_evolution` calls it for an explicit ``solver``, a pinned overlap, the ``"free"``
    branch or a recorded history; the continuation and the branch followers call it directly. Arguments and
    result as there (``solver`` default :class:`SESolver`: Gauss-Hermite with 12 nodes per dimension);
    ``stderr`` is empty.
    """
    t0 = time.perf_counter()
    params.require_two_tokens("iterate_state_evolution")
    alpha = check_alpha(alpha)
    pinned = fix_m is not None or fix_theta is not None
    solver = solver or SESolver()
    hold = _hold(params, branch, fix_m, fix_theta)
    x = resolve_start(params, branch, start, hold)
    fine, coarse = _quadrature_rules(params, solver, hold, cold=start is None)
    out = _iterate(params, alpha, x, solver, hold, fine, coarse)
    result = _fixed_point_result(params, alpha, branch, out, pinned, record_history, t0, solver.quadrature.label)
    if not out.converged:
        why = out.failure or f"residual {out.residuals[-1]:.2e} > tol {solver.tol:g} after {out.n_iter} iterations"
        warn_caller(f"state evolution did not converge (branch={branch}, alpha={alpha:g}, "
                    f"omega={params.omega:g}): {why}")
    return result


def resolve_start(params: TaskParams, branch: str, start: Overlaps | None, hold: tuple) -> Overlaps:
    """The first iterate of :func:`iterate_state_evolution`: ``start`` (default: the branch's default start)
    with the pinned overlaps of ``hold`` set.

    Raises ``ValueError`` if ``start`` is not an :class:`Overlaps` or lies outside the domain.
    """
    x = start if start is not None else default_start(params, branch)
    if not isinstance(x, Overlaps):
        raise ValueError(f"start must be an Overlaps instance, got {type(x).__name__}")
    pin_m, pin_theta = hold
    x = Overlaps(q=x.q, m=x.m if pin_m is None else pin_m, V=x.V, theta=x.theta if pin_theta is None else pin_theta)
    try:
        _check_state(x, params.rho)
    except FloatingPointError as exc:
        raise ValueError(f"start must satisfy q > 0, V > 0, theta^2 <= rho q: {exc}") from None
    return x


def _quadrature_rules(params: TaskParams, solver: SESolver, hold: tuple, cold: bool):
    """Nodes and weights of the fine rule and, from a ``cold`` start, of the coarse one (else None), folded by
    the symmetries of the branch (:func:`symmetry_generators`)."""
    generators = symmetry_generators(params, hold)
    fine = se_nodes(solver.quadrature, generators)
    # the coarse transient only pays from a cold start; a warm start is already close to the fine fixed point
    coarse = se_nodes(solver.coarse_quadrature, generators) if solver.coarse_quadrature and cold else None
    return fine, coarse


class _Outcome(NamedTuple):
    """Where :func:`_iterate` stopped: the last iterate ``x`` with its conjugates ``hat`` and mean proximal
    value ``mean_M``, whether it converged (else ``failure``, or None when the iterations ran out), the
    iterations done and the residual of every accepted iteration."""

    x: Overlaps
    hat: Conjugates
    mean_M: float
    converged: bool
    failure: str | None
    n_iter: int
    residuals: list


def _evaluate(params: TaskParams, alpha: float, x: Overlaps, nodes: np.ndarray, weights: np.ndarray,
              solver: SESolver, hold: tuple, warm: tuple | None, cheap: bool):
    """One evaluation of the map at ``x``: a cheap step (local descent from ``warm``) if ``cheap``, confirmed
    by the full (deterministic) proximal search at the same point when it meets the tolerance.

    ``FloatingPointError`` when the image leaves the domain.

    Returns
    -------
    hat, mean_M, warm
        As :func:`conjugates_and_energy`.
    xa, fa : ndarray
        ``x`` and its image as arrays.
    res : float
        The residual.
    unconfirmed : bool
        True when a cheap step met the tolerance and the full search did not.
    """
    hat, mean_M, warm = conjugates_and_energy(params, alpha, x, nodes, weights, solver, hold,
                                              warm=warm if cheap else None)
    fx_ov = overlaps_from_conjugates(params, hat)
    _check_state(fx_ov, params.rho)
    xa, fa = x.as_array(), fx_ov.as_array()
    res = _residual(xa, fa)
    unconfirmed = False
    if res < solver.tol and cheap:
        # confirm with the full (deterministic) proximal search at the same point
        hat, mean_M, warm = conjugates_and_energy(params, alpha, x, nodes, weights, solver, hold)
        fx_ov = overlaps_from_conjugates(params, hat)
        _check_state(fx_ov, params.rho)
        fa = fx_ov.as_array()
        res = _residual(xa, fa)
        unconfirmed = res >= solver.tol
    return hat, mean_M, warm, xa, fa, res, unconfirmed


def _damped_step(xa: np.ndarray, fa: np.ndarray, damping: float) -> Overlaps:
    """The plain damped step ``(1 - damping) x + damping F(x)``."""
    return Overlaps.from_array((1 - damping) * xa + damping * fa)


def _next_iterate(xa: np.ndarray, fa: np.ndarray, hist_x: list, hist_f: list, solver: SESolver,
                  rho: float) -> Overlaps:
    """The next iterate from ``x`` and its image: the Anderson-mixed one (:func:`_mix`), or a plain damped step
    (with the mixing history cleared) if that leaves the domain."""
    cand = Overlaps.from_array(_mix(xa, fa, hist_x, hist_f, solver))
    try:
        _check_state(cand, rho)
    except FloatingPointError:
        hist_x.clear()
        hist_f.clear()
        cand = _damped_step(xa, fa, solver.damping)
    return cand


def _iterate(params: TaskParams, alpha: float, x: Overlaps, solver: SESolver, hold: tuple, fine: tuple,
             coarse: tuple | None) -> _Outcome:
    """The damped, Anderson-accelerated iteration of :func:`iterate_state_evolution` from ``x``.

    The ``coarse`` rule (if any) runs the transient and hands over to the ``fine`` one; cheap proximal steps
    are taken between full searches once the iterate moves little; an update that leaves the domain is
    backtracked; an accelerated step that makes the residual grow is rejected. When it does not converge,
    the conjugates and energy are those of the returned (last valid) point.
    """
    nodes, weights = coarse if coarse is not None else fine  # coarse rule for the transient
    warm = None  # proximal points of the previous iteration (cheap local steps between full searches)
    coarse_image = None  # F(x) of the coarse rule at the hand-over point
    accepted = None  # last accepted iterate and its image
    failed_confirmations = 0
    hist_x, hist_f = [], []
    residuals = []
    converged = False
    failure = None
    last_valid, n_backtrack = None, 0
    x0_V, n_rescaled = x.V, 0
    fine_from = 0  # residuals of the fine rule start here
    hat = mean_M = None
    it = 0
    for it in range(1, solver.max_iter + 1):
        # cheap steps (local descent from the last proximal points) only once the iterate moves little
        cheap = (warm is not None and failed_confirmations < 3 and bool(residuals)
                 and residuals[-1] < solver.cheap_below)
        try:
            hat, mean_M, warm, xa, fa, res, unconfirmed = _evaluate(params, alpha, x, nodes, weights, solver,
                                                                    hold, warm, cheap)
        except FloatingPointError as exc:
            back = _step_back(x, last_valid, x0_V, n_rescaled, n_backtrack)
            if back is None:
                failure = str(exc)
                break
            x = back
            n_rescaled, n_backtrack = (n_rescaled + 1, 0) if last_valid is None else (n_rescaled, n_backtrack + 1)
            hist_x.clear()
            hist_f.clear()
            warm = None
            continue
        failed_confirmations += unconfirmed
        last_valid, n_backtrack = xa, 0
        if coarse is not None and (res < solver.coarse_until or it >= solver.max_iter // 2):
            # switch to the fine rule (same x, next iteration); the proximal warm starts are dropped
            coarse = None
            nodes, weights = fine
            warm = None
            coarse_image = fa
            residuals.append(res)
            fine_from = len(residuals)
            continue
        if coarse_image is not None:
            # first fine evaluation, at the coarse fixed point: near it the fine map is the coarse one plus
            # a nearly constant offset, so the mixing history keeps its Jacobian information once its images
            # are shifted by that offset
            hist_f[:] = [f + (fa - coarse_image) for f in hist_f]
            coarse_image = None
        if residuals and res > solver.restart_factor * residuals[-1] and accepted is not None:
            # the accelerated step made things worse (the map is only piecewise smooth, and an extrapolation
            # can leave the basin of the fixed point being followed): reject it, take a plain damped step from
            # the last accepted iterate instead, and restart the mixing
            hist_x.clear()
            hist_f.clear()
            xa_prev, fa_prev = accepted
            accepted = None  # a rejected step is not rejected twice in a row
            x = _damped_step(xa_prev, fa_prev, solver.damping)
            warm = None
            continue
        accepted = (xa, fa)
        residuals.append(res)
        if res < solver.tol:
            converged = True  # x is a fixed point; hat and mean_M were computed at x
            break
        failure = _no_headway(residuals[fine_from:], solver)
        if failure:
            break
        x = _next_iterate(xa, fa, hist_x, hist_f, solver, params.rho)

    if not converged:  # conjugates and energy at the returned (last valid) point
        hat, mean_M, _ = conjugates_and_energy(params, alpha, x, nodes, weights, solver, hold)
    return _Outcome(x=x, hat=hat, mean_M=mean_M, converged=converged, failure=failure, n_iter=it,
                    residuals=residuals)


def _step_back(x: Overlaps, last_valid: np.ndarray | None, x0_V: float, n_rescaled: int,
               n_backtrack: int) -> Overlaps | None:
    """Where :func:`_iterate` goes when the image of ``x`` leaves the domain, or None to give up.

    At the start (no valid iterate yet) its width ``V`` is far from the fixed point's (a wide proximal step on a
    non-convex loss gives ``V_hat < -lambda/sigma^2``): the start again with the width rescaled by the next factor
    of :data:`START_WIDTHS`. Later (e.g. ``V_hat < -lambda/sigma^2`` on a non-convex stretch): half-way back towards
    the last valid iterate, up to 12 times in a row.
    """
    if last_valid is None:
        return replace(x, V=x0_V * START_WIDTHS[n_rescaled]) if n_rescaled < len(START_WIDTHS) else None
    if n_backtrack >= 12:
        return None
    return Overlaps.from_array(0.5 * (x.as_array() + last_valid))


def _stalled(residuals: list, tol: float) -> bool:
    """Has the iteration stopped making progress far from convergence: is its best residual still above
    :data:`STALL_ABOVE` times ``tol``, and the best of the last :data:`STALL_WINDOW` iterations no better than
    :data:`STALL_FACTOR` times the best before them? (A contraction that slow would need thousands of iterations;
    the cap of ``max_iter`` would stop it unconverged anyway, minutes later where the proximal searches are slow.
    Near the tolerance the residual hovers at the map's roughness, with dips below ``tol``: no stall is called
    there.)"""
    if len(residuals) <= STALL_WINDOW or min(residuals) <= STALL_ABOVE * tol:
        return False
    return min(residuals[-STALL_WINDOW:]) > STALL_FACTOR * min(residuals[:-STALL_WINDOW])


def _no_headway(residuals: list, solver: SESolver) -> str | None:
    """Why the iteration stops short of the tolerance (:func:`_stalled`, :func:`_hovering`), or None to go on."""
    if _stalled(residuals, solver.tol):
        return (f"the residual stalled: no better than {STALL_FACTOR:g} x its best ({min(residuals):.2e}) over the "
                f"last {STALL_WINDOW} iterations")
    if _hovering(residuals, solver.hover_window):
        return (f"the residual hovers: its best of the last {solver.hover_window} iterations is no better than half "
                f"the best before them ({min(residuals):.2e})")
    return None


def _hovering(residuals: list, window: int) -> bool:
    """Has the residual stopped falling near a fixed point, its best below :data:`HOVER_BELOW`
    (``SESolver.hover_window``; ``window`` 0: never)?"""
    if window <= 0 or len(residuals) < 2 * window or min(residuals) > HOVER_BELOW:
        return False
    return min(residuals[-window:]) > 0.5 * min(residuals[-2 * window:-window])


def _fixed_point_result(params: TaskParams, alpha: float, branch: str, out: _Outcome, pinned: bool,
                        record_history: bool, t0: float, rule: str = "") -> SEResult:
    """The :class:`SEResult` of the iteration's outcome ``out``: the free energy (``eps_t = -Phi``) and the test
    error at its last point, in the representative with the branch's defining overlap positive (unless an
    overlap is ``pinned``); ``seconds`` counted from ``t0``."""
    x, hat = out.x, out.hat
    phi = _free_energy(params, alpha, x, hat, out.mean_M)
    if not pinned and (x.theta < 0 if branch in ("semantic", "free") else x.m < 0):
        # Q -> -Q leaves the model invariant and flips (m, theta): report the representative with the
        # branch's defining overlap positive
        x = Overlaps(q=x.q, m=-x.m, V=x.V, theta=-x.theta)
        hat = Conjugates(hat.q_hat, -hat.m_hat, hat.V_hat, -hat.theta_hat)
    eps_g = test_error_from_overlaps(params, x.q, x.m, x.theta)
    residuals = out.residuals
    return SEResult(params=params, alpha=alpha, branch=branch, q=x.q, m=x.m, V=x.V, theta=x.theta,
                    q_hat=hat.q_hat, m_hat=hat.m_hat, V_hat=hat.V_hat, theta_hat=hat.theta_hat,
                    test_error=eps_g, train_loss=-phi, converged=out.converged, n_iter=out.n_iter,
                    residual=residuals[-1] if residuals else float("inf"),
                    seconds=time.perf_counter() - t0,
                    residual_history=tuple(residuals) if record_history else (), rule=rule)


def _mix(x: np.ndarray, fx: np.ndarray, hist_x: list, hist_f: list, solver: SESolver) -> np.ndarray:
    """Damped Anderson mixing of the fixed-point map (type II, small history)."""
    beta = solver.damping
    if solver.anderson == 0:
        return (1 - beta) * x + beta * fx
    hist_x.append(x.copy())
    hist_f.append(fx.copy())
    if len(hist_x) > solver.anderson + 1:
        hist_x.pop(0)
        hist_f.pop(0)
    if len(hist_x) < 2:
        return (1 - beta) * x + beta * fx
    X = np.array(hist_x)
    G = np.array(hist_f) - X  # residuals
    dG = np.diff(G, axis=0).T
    dX = np.diff(X, axis=0).T
    scale = np.maximum(np.abs(x), 1e-4)
    gamma, *_ = np.linalg.lstsq(dG / scale[:, None], G[-1] / scale, rcond=None)
    return x + beta * G[-1] - (dX + beta * dG) @ gamma

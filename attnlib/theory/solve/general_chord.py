"""Chord steps for the general state evolution: the fixed point under one rule from the Jacobian of the map under
another (:mod:`attnlib.theory.solve.general_state_evolution`).

The damped, Anderson-mixed iteration of :func:`~attnlib.theory.solve.general_state_evolution.solve_general` needs 15-25
maps per scrambling even from a start within the quadrature error of the fixed point (its residuals oscillate
before they fall). The fixed point of the map ``F`` under a new rule (a finer one, or another scrambling) lies
close to the one already found, and the maps under different rules differ by the quadrature error only, so their
Jacobians nearly agree. A chord step,

    x <- x + (I - J)^{-1} (F(x) - x),

with ``J`` the Jacobian of ``F`` under a coarse rule at its fixed point, converges linearly at the rate of the
Jacobians' difference: a few maps instead of twenty.

``J`` is taken by central differences of the map in the gauge the iteration uses near a fixed point (the canonical
one at rank ``r > 1``), every node following its own proximal minimum (local descents from the minimisers at the
fixed point): the map is then smooth, and the part of the derivative that comes from nodes switching minimum (a
small share of the nodes) is left out; the chord's rate absorbs it.
"""
from __future__ import annotations

import math

import numpy as np

from .differences import central_jacobian
from ..model.general_model import (GeneralOverlaps, _ScramblingOutcome, _block_residual, _block_scales,
                                   _check_domain, _image, _project)

__all__ = ["map_jacobian", "chord_fixed_point", "CHORD_MAX_STEPS", "CHORD_STEP"]

#: Chord steps at most per solve (each a map under the new rule), before the caller's iteration takes over.
CHORD_MAX_STEPS = 12

#: Relative step of the central differences, times the largest entry of the coordinate's block (floor 1e-4).
CHORD_STEP = 1e-4


def _sign_gauge(x, ref) -> np.ndarray:
    """Per coordinate of ``x.to_vector()``, the sign that takes a coordinate in the gauge of ``ref`` to that of
    ``x`` when the two differ by flips of student directions (``Q -> Q diag(s)``, the flips the solver applies
    to report a fixed point): ``s_j`` is the sign of the overlap of column ``j`` of ``[theta^T; M]`` in ``x``
    with that in ``ref`` (+1 where it vanishes)."""
    K, Kr = np.vstack([x.theta[None, :], x.M]), np.vstack([ref.theta[None, :], ref.M])
    s = np.where(np.einsum("ij,ij->j", K, Kr) < 0, -1.0, 1.0)
    ones = GeneralOverlaps.from_vector(np.ones(x.to_vector().size), x.L, x.rank)
    return ones.rotated(np.diag(s)).to_vector()


def map_jacobian(params, alpha: float, x, nodes, hold, G, prox, solver) -> np.ndarray:
    """The Jacobian of the map at ``x`` (coordinates of ``x.to_vector()``) under the rule ``nodes``, by central
    differences of relative step :data:`CHORD_STEP`, each evaluation by local descents from ``prox`` (the proximal
    minimisers at ``x``); coordinates held at zero by the branch get zero columns. ``FloatingPointError`` when a
    displaced point leaves the domain."""
    L, r = x.L, x.rank
    v0 = x.to_vector()
    held = _project(GeneralOverlaps.from_vector(np.ones_like(v0), L, r), hold).to_vector() == 0
    free = np.flatnonzero(~held)

    def image(v):
        xv = GeneralOverlaps.from_vector(v, L, r)
        return _image(params, alpha, xv, nodes, hold, G, prox, 0.0, solver.backend)[0].to_vector()

    # the images are projected on the branch: the rows of held coordinates are zero, like their columns
    J = np.zeros((v0.size, v0.size))
    J[np.ix_(free, free)] = central_jacobian(image, v0, free, CHORD_STEP * _block_scales(x)[free])
    return J


def chord_fixed_point(params, alpha: float, x, nodes, hold, G, J: np.ndarray, J_at, solver):
    """The fixed point under the rule ``nodes`` by chord steps with the Jacobian ``J`` (taken at ``J_at``, turned
    into the gauge of ``x`` where the two differ by flips of student directions) from ``x``.

    The first map is a full proximal search (a descent from the centres only, the iteration's cheap first step,
    lands on other minima at enough nodes to cost more steps than it saves), the next ones local descents from the
    last minimisers; a residual (:func:`~attnlib.theory.model.general_model._block_residual`) below
    ``solver.tol`` is confirmed by a full search (where that finds other minima the steps go on from them). Returns ``(outcome, x_last)``: ``outcome`` a converged ``_ScramblingOutcome`` or ``None`` where the
    chord failed (a step left the domain, the residual did not halve in two steps running, or
    :data:`CHORD_MAX_STEPS` were spent), ``x_last`` the last point whose map was taken (the caller's iteration
    goes on from there).
    """
    L, r = x.L, x.rank
    s = _sign_gauge(x, J_at)
    step = np.linalg.inv(np.eye(J.shape[0]) - s[:, None] * J * s[None, :])
    warm, best, n_maps, last = None, math.inf, 0, x
    stalled = 0
    for _ in range(CHORD_MAX_STEPS + 1):
        full = warm is None
        try:
            fx, ch = _image(params, alpha, x, nodes, hold, G, warm, solver.margin, solver.backend)
        except FloatingPointError:
            return None, last
        n_maps += 1
        last = x
        res = _block_residual(x, fx)
        if res < solver.tol:
            if full:
                return _ScramblingOutcome(x, ch, True, n_maps, res), x
            warm = None
            continue
        if full:  # a full search may switch minima at some nodes: the residual starts afresh from there
            best, stalled = res, 0
        else:
            stalled = stalled + 1 if res > 0.5 * best else 0
            if stalled >= 2:
                return None, x
            best = min(best, res)
        warm = ch.prox
        xa = x.to_vector()
        x = _project(GeneralOverlaps.from_vector(xa + step @ (fx.to_vector() - xa), L, r), hold)
        try:
            _check_domain(params, x)
        except FloatingPointError:
            return None, last
    return None, last

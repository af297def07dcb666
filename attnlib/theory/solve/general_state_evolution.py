"""The fixed point of the general state evolution (any ``L``, student rank ``r``): :func:`solve_general`.

The map is that of :mod:`attnlib.theory.model.general_model` (book :eq:`eq-general-fields` to
:eq:`eq-general-free-energy`); its expectations use the symmetrised scrambled Sobol rules of
:func:`~attnlib.theory.model.general_model.general_nodes`. The fixed point is solved under each of several independent
scramblings (damped, Anderson-accelerated iteration; local proximal descents from the last minimisers between full
searches, and a full search to confirm), and the answer is their mean with the standard error of the mean. The
rule is doubled while a relative standard error is above ``precision``.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ...exceptions import warn_caller
from ...params import TaskParams, check_alpha, check_int
from .general_chord import chord_fixed_point, map_jacobian
from ..model.general_model import (MAX_L, MAX_RANK, GeneralOverlaps, GeneralResult, GeneralSolver, _alignment,
                                   _block_residual, _check_domain, _hold, _image, _project, _rotate_channel,
                                   _ScramblingOutcome, general_channel, general_default_start, general_free_energy,
                                   general_nodes, general_test_error, simplex_gram)
from ..model.quadrature import scrambling_mean
from .iteration import _mix

__all__ = ["solve_general"]

#: Iterations without the residual halving after which the mixing history is restarted.
STALL = 12

#: Rank ``r > 1``: below this residual the iteration moves from the gauge aligned with the iterate to the
#: canonical gauge (:meth:`GeneralOverlaps.canonical`). Far from the fixed point the canonical gauge can jump (a
#: small ``theta`` fixes its first direction badly); near it the equations' flat direction along the orbit
#: ``Q -> Q O`` would let the aligned iteration drift.
CANONICAL_BELOW = 1e-2


def _solve_one(params, alpha, x, nodes, hold, G, solver: GeneralSolver) -> _ScramblingOutcome:
    """The damped, Anderson-accelerated iteration under one rule from ``x``: a first step by descents from the
    centres ``c``, full proximal searches every ``solver.full_every`` iterations and to confirm convergence,
    local descents from the last minimisers in between; an image that leaves the domain is backtracked half-way
    to the last valid iterate. At rank ``r > 1`` each image is first aligned with its iterate in the gauge
    (:func:`_align`), and below :data:`CANONICAL_BELOW` both are taken in the canonical gauge."""
    L, r = x.L, x.rank
    hist_x, hist_f = [], []
    warm, last_valid, ch = "centre", None, None  # the first step descends from the centres only
    res, it, since_full, n_back = math.inf, 0, 0, 0
    canonical = False  # rank > 1: images aligned to the iterate, then (near the fixed point) in the canonical gauge
    residuals = []
    for it in range(1, solver.max_iter + 1):
        full = warm is None or since_full >= solver.full_every - 1
        try:
            fx, ch = _image(params, alpha, x, nodes, hold, G, None if full else warm, solver.margin, solver.backend,
                            canonical)
        except FloatingPointError:
            if last_valid is None or n_back >= 12:
                break
            n_back += 1
            hist_x.clear()
            hist_f.clear()
            x = GeneralOverlaps.from_vector(0.5 * (x.to_vector() + last_valid), L, r)
            warm = None
            continue
        since_full = 0 if full else since_full + 1
        warm, n_back = ch.prox, 0
        xa, fa = x.to_vector(), fx.to_vector()
        last_valid = xa
        res = _block_residual(x, fx)
        if r > 1 and not canonical and res < CANONICAL_BELOW:
            # near the fixed point the canonical gauge is well defined: iterate there, where the orbit of
            # gauge-equivalent fixed points is one point (no flat direction to drift along)
            canonical = True
            hist_x.clear()
            hist_f.clear()
            x = _project(x.canonical(), hold)
            continue
        if res < solver.tol:
            if full:
                return _ScramblingOutcome(x, ch, True, it, res)
            warm = None  # confirm with a full search at the same point
            continue
        residuals.append(res)
        if len(residuals) > STALL and min(residuals[-STALL:]) > 0.5 * min(residuals[:-STALL]):
            # no progress over the last STALL iterations (Anderson mixing can stagnate on a map that is only
            # piecewise smooth): restart the history with plain damped steps
            hist_x.clear()
            hist_f.clear()
            residuals.clear()
            x = _project(GeneralOverlaps.from_vector((1 - solver.damping) * xa + solver.damping * fa, L, r), hold)
            continue
        cand = GeneralOverlaps.from_vector(_mix(xa, fa, hist_x, hist_f, solver), L, r)
        try:
            _check_domain(params, cand)
        except FloatingPointError:
            hist_x.clear()
            hist_f.clear()
            cand = GeneralOverlaps.from_vector((1 - solver.damping) * xa + solver.damping * fa, L, r)
        x = _project(cand, hold)
    if ch is None:
        raise FloatingPointError("the first iterate left the domain")
    return _ScramblingOutcome(x, ch, False, it, res)


def _check_engine(params: TaskParams, rank: int) -> int:
    rank = check_int("rank", rank, 1)
    if rank > MAX_RANK:
        raise ValueError(f"rank must lie in [1, {MAX_RANK}] for the general state evolution, got {rank}")
    if params.L > MAX_L:
        raise ValueError(f"L (the size of A) must lie in [2, {MAX_L}] for the general state evolution, "
                         f"got L = {params.L}")
    return rank


def _sign_flip(x: GeneralOverlaps, branch: str) -> np.ndarray:
    """At rank 1, ``Q -> -Q`` flips ``(M, theta)``: the gauge ``O = [[-1]]`` to the representative with
    ``theta >= 0`` (semantic, free) or the first nonzero entry of ``M`` positive (positional), else
    ``[[1]]``; the identity at rank ``r > 1`` (:func:`_common_gauge` fixes the gauge there)."""
    if x.rank != 1:
        return np.eye(x.rank)
    if branch in ("semantic", "free"):
        flip = x.theta[0] < 0
    else:
        nz = np.flatnonzero(np.abs(x.M[:, 0]) > 1e-15)
        flip = bool(nz.size) and x.M[nz[0], 0] < 0
    return -np.eye(1) if flip else np.eye(1)


def solve_general(params: TaskParams, alpha: float, branch: str = "semantic", rank: int = 1,
                  start: GeneralOverlaps | None = None, solver: GeneralSolver | None = None) -> GeneralResult:
    """The fixed point of the general state evolution (module docstring) on a branch, for the sequence length
    ``L`` of ``params.A`` and a student of rank ``rank``.

    Parameters
    ----------
    params : TaskParams
        The task (``L`` from the size of ``A``, at most ``MAX_L``).
    alpha : float
        Sample complexity, in ``(0, inf)``.
    branch : {"semantic", "positional", "agnostic", "free"}
        The invariant subspace to solve in.
    rank : int
        Student rank, in ``[1, MAX_RANK]`` (``MAX_L = 6``, ``MAX_RANK = 3``).
    start : GeneralOverlaps, optional
        Starting overlaps (default ``general_default_start`` of this module).
    solver : GeneralSolver, optional

    Returns
    -------
    GeneralResult
        The mean over the scramblings of ``solver.seeds`` with standard errors; ``converged=False`` when a
        scrambling's iteration did not converge or ended on an unphysical fixed point, ``precise=False`` when the
        precision target was missed at ``solver.max_order`` (either with a
        :class:`~attnlib.exceptions.ConvergenceWarning`). An unconverged result carries the last iterates' means;
        its errors are NaN where a scrambling's last iterate lies outside the domain (``D`` not positive
        definite, or ``theta^T q^-1 theta > rho``).
    """
    t0 = time.perf_counter()
    alpha = check_alpha(alpha)
    rank = _check_engine(params, rank)
    solver = solver or GeneralSolver()
    hold = _hold(branch)
    L, G = params.L, simplex_gram(params.L)
    x0 = start if start is not None else general_default_start(params, branch, rank)
    if not isinstance(x0, GeneralOverlaps) or x0.M.shape != (L, rank) or x0.q.shape != (rank, rank):
        raise ValueError(f"start must be GeneralOverlaps with M of shape ({L}, {rank}) and q of shape "
                         f"({rank}, {rank})")
    x0 = _project(x0.canonical(), hold)
    order, n_iter, outcomes = solver.order, 0, []
    jac = None  # (J, the point it was taken at): chord steps for the later scramblings and rules
    while True:
        outcomes, x = [], x0
        for seed in solver.seeds:
            nodes = general_nodes(L, rank, order, seed, hold)
            out = None
            if jac is not None:
                out, x = chord_fixed_point(params, alpha, x, nodes, hold, G, *jac, solver)
            if out is None:
                out = _solve_one(params, alpha, x, nodes, hold, G, solver)
            n_iter += out.n_iter
            if solver.chord and jac is None and out.converged:
                try:
                    jac = (map_jacobian(params, alpha, out.x, nodes, hold, G, out.ch.prox, solver), out.x)
                except FloatingPointError:
                    pass
            x = out.x  # the next scrambling starts from this one's fixed point
            if not out.converged:
                _refresh_channel(params, alpha, out, nodes, hold, solver)
            O = _sign_flip(out.x, branch)  # the overlaps and their conjugates flip together
            out.x, out.ch = out.x.rotated(O), _rotate_channel(out.ch, O)
            try:
                out.eps_g = general_test_error(params, out.x, nodes)
                out.eps_t = -general_free_energy(params, alpha, out.x, out.ch, G)
            except FloatingPointError:  # an unconverged iterate outside the domain: no errors there
                out.eps_g = out.eps_t = math.nan
            outcomes.append(out)
        _common_gauge(outcomes)
        mean, err = _pool(outcomes)
        ratio = _precision_ratio(mean, err, params, solver.precision)
        if ratio <= 1.0 or order >= solver.max_order:
            break
        order = _next_order(order, ratio, solver.max_order)
        x0 = GeneralOverlaps(mean["q"], mean["M"], mean["V"], mean["theta"])
    converged = all(o.converged for o in outcomes)
    # a fixed point with a negative training loss (eps_t is a sum of squares plus a ridge term) is not a minimum
    # of any risk: an unphysical solution of the equations, not an answer
    physical = all(o.eps_t >= 0 for o in outcomes)  # False also where eps_t is NaN (outside the domain)
    precise = _precise(mean, err, params, solver.precision)
    if not converged or not physical or not precise:
        what = ("a scrambling's iteration did not converge" if not converged
                else "a scrambling's fixed point has a negative training loss (unphysical)" if not physical
                else f"the relative standard error is above {solver.precision:g} at 2^{order} points")
        warn_caller(f"solve_general: {what} (L={L}, rank={rank}, {branch}, alpha={alpha:g}, "
                    f"omega={params.omega:g})")
    return GeneralResult(
        params=params, alpha=alpha, branch=branch, rank=rank, q=mean["q"], M=mean["M"], V=mean["V"],
        theta=mean["theta"], q_hat=mean["q_hat"], G_hat=mean["G_hat"], V_hat=mean["V_hat"],
        theta_hat=mean["theta_hat"], test_error=float(mean["test_error"]), train_loss=float(mean["train_loss"]),
        converged=converged and physical, precise=precise, n_iter=n_iter, seconds=time.perf_counter() - t0,
        rule=f"sobol-sym {len(solver.seeds)} x 2^{order} seeds {','.join(str(s) for s in solver.seeds)}",
        stderr=err, per_seed=tuple(o.x for o in outcomes),
        multi_fraction=float(np.mean([o.ch.prox.multi_fraction for o in outcomes])))


def _refresh_channel(params, alpha, out: _ScramblingOutcome, nodes, hold, solver: GeneralSolver) -> None:
    """An unconverged scrambling ends on its last iterate, whose conjugates may belong to another point (or to a
    failed update): recompute them there by a full search, when that point is inside the domain."""
    try:
        out.ch = general_channel(params, alpha, out.x, nodes, hold, None, solver.margin, solver.backend)
    except FloatingPointError:
        pass


def _common_gauge(outcomes) -> None:
    """At rank ``r > 1``, put every scrambling's fixed point (and conjugates) in one gauge: each aligned to the
    first (:func:`_alignment`), then all rotated together into the canonical gauge of their mean
    (:meth:`GeneralOverlaps.canonical_rotation`), so that means over scramblings are taken of comparable matrices."""
    if outcomes[0].x.rank == 1:
        return
    for o in outcomes[1:]:
        O = _alignment(o.x, outcomes[0].x)
        o.x, o.ch = o.x.rotated(O), _rotate_channel(o.ch, O)
    mean = GeneralOverlaps(*(np.mean([getattr(o.x, k) for o in outcomes], axis=0) for k in ("q", "M", "V", "theta")))
    O = mean.canonical_rotation()
    for o in outcomes:
        o.x, o.ch = o.x.rotated(O), _rotate_channel(o.ch, O)


def _pool(outcomes):
    vals = {
        "q": [o.x.q for o in outcomes], "M": [o.x.M for o in outcomes], "V": [o.x.V for o in outcomes],
        "theta": [o.x.theta for o in outcomes], "q_hat": [o.ch.q_hat for o in outcomes],
        "G_hat": [o.ch.G_hat for o in outcomes], "V_hat": [o.ch.V_hat for o in outcomes],
        "theta_hat": [o.ch.theta_hat for o in outcomes], "test_error": [o.eps_g for o in outcomes],
        "train_loss": [o.eps_t for o in outcomes]}
    pooled = {k: scrambling_mean(v) for k, v in vals.items()}
    return {k: m for k, (m, _) in pooled.items()}, {k: e for k, (_, e) in pooled.items()}


def _precision_ratio(mean, err, params, precision) -> float:
    """The largest standard error of an entry of ``q``, ``M`` and ``theta`` relative to ``precision`` times the
    largest entry of its array, and of ``eps_g`` and ``eps_t`` relative to ``precision`` times their values (a
    scale below ``1e-3 rho``, an array a symmetry holds at zero, is replaced by ``1e-3 rho``); ``inf`` where an
    error is NaN (an iterate outside the domain)."""
    floor = 1e-3 * params.rho
    worst = 0.0
    for k in ("q", "M", "theta", "test_error", "train_loss"):
        scale = max(float(np.max(np.abs(mean[k]))), floor)
        e = np.asarray(err[k], dtype=float)
        if not np.all(np.isfinite(e)):
            return math.inf
        worst = max(worst, float(np.max(e)) / (precision * scale))
    return worst


def _precise(mean, err, params, precision) -> bool:
    """Whether every standard error is within the target (:func:`_precision_ratio` at most 1)."""
    return _precision_ratio(mean, err, params, precision) <= 1.0


def _next_order(order: int, ratio: float, max_order: int) -> int:
    """The rule's order after one that missed the target by ``ratio`` (> 1): the standard error of a scrambled
    Sobol rule of an integrand with jumps falls at least as ``N^{-1/2}``, so ``2 log2(ratio)`` doublings are
    expected to suffice; at least one, at most up to ``max_order``. Skipping the intermediate rules saves their
    solves (each costs half the next)."""
    if not math.isfinite(ratio):
        return min(order + 1, max_order)
    return min(max(order + 1, order + math.ceil(2.0 * math.log2(ratio) - 1e-9)), max_order)

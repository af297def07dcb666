"""The state-evolution map of a branch as a residual in its free coordinates, and Newton's method on it.

A branch is a curve of fixed points ``x = F(x; alpha)`` of the state evolution (book chapter 4,
:ref:`sec-continuation`) with its symmetric overlap held at zero (:func:`attnlib.theory.model.state_evolution._hold`).
:class:`FixedPointMap` writes the map as the residual

    r(u, t) = U(F(x(u); e^t)) - u,     t = log alpha,

in the coordinates ``u = (log q, m/rho, log V, theta/rho)`` restricted to the branch's free overlaps
(:data:`FREE_OVERLAPS`), with its forward-difference Jacobian; :func:`newton_fixed_point` solves ``r = 0`` at fixed
``alpha`` (Broyden updates, step halving), which, unlike the damped iteration, also converges to fixed points that
repel the iteration. :class:`Continuation` holds the settings of both this Newton solve and the pseudo-arclength
continuation built on it (:mod:`attnlib.theory.branches.continuation`).

Every accepted point is a zero of ``r`` evaluated with the solver's deterministic global proximal search
(:func:`attnlib.theory.model.proximal.solve_prox`), so ``r`` is a fixed function; finite differences and Newton
iterations may evaluate it cheaply (each node's minimum followed by local descent, full search only near a tie;
:attr:`Continuation.cheap`), the last iterate being confirmed on the exact map. Without tie smoothing ``r`` is only
piecewise smooth: when the proximal point of a quadrature node switches between local minima the map jumps by about
that node's weight (~1e-6 relative at the default Gauss-Hermite order 12). The finite-difference step
(:attr:`Continuation.fd_step`) is chosen well above that level and the Newton tolerance at it; a rougher map (fewer
nodes) would need a smoother rule (more nodes, or Sobol points: pass ``SESolver(quadrature=Quadrature("sobol",
16))``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ...exceptions import warn_caller
from ...params import TaskParams, check_alpha, check_choice, check_finite_scalar, check_positive
from ..model.generalisation import test_error_from_overlaps
from ..model.state_evolution import (BRANCHES, Conjugates, Overlaps, SEResult, SESolver, _check_state, _free_energy,
                                     _hold, conjugates_and_energy, overlaps_from_conjugates, se_nodes,
                                     symmetry_generators)

__all__ = ["FREE_OVERLAPS", "Continuation", "FixedPointMap", "newton_fixed_point", "jacobian_determinant"]

#: The overlaps that each branch leaves free (the others are held at zero).
FREE_OVERLAPS = {"semantic": ("q", "V", "theta"), "positional": ("q", "m", "V"), "agnostic": ("q", "V"),
                 "free": ("q", "m", "V", "theta")}


@dataclass(frozen=True)
class Continuation:
    """Settings of the pseudo-arclength continuation (kept apart from the model and the SE solver).

    Parameters
    ----------
    solver : SESolver
        Quadrature and proximal search of every evaluation of ``F`` (its iteration settings are used only
        for the first point, see :func:`trace_branch`).
    ds : float
        First arclength step, in the units of ``z = (u, log alpha)``.
    ds_min, ds_max : float
        Bounds of the adaptive step; a step that needs more than ``slow_newton`` corrector iterations is
        shrunk, one that needs at most two is grown (by ``grow``).
    grow : float
        Step growth factor, ``> 1``.
    tol : float
        Newton tolerance on ``max |r|`` (relative change of ``q`` and ``V``, absolute change of ``m/rho`` and
        ``theta/rho``), above the jump level of the map (module docstring).
    fd_step : float
        Forward-difference step of the Jacobian, in ``z`` units.
    max_newton : int
        Corrector iterations at most per step.
    slow_newton : int
        Corrector iterations above which the next step is shrunk.
    max_steps : int
        Continuation steps at most, per direction.
    jacobian_every : int
        A fresh finite-difference Jacobian every this many steps (Broyden updates in between). With the global
        proximal search its differences are cheap evaluations (``FixedPointMap.evaluate``), a few per cent of
        an exact one each, so the default takes one at every step: the corrector then needs fewer iterations.
    max_skips : int
        Where the corrector fails even at ``ds_min`` (a jump of the map that the smoothing does not cover), the
        fixed point is solved at ``log alpha`` moved by ``skip_step`` (by Newton, else by the plain damped
        iteration) and the continuation resumes there if it is the same branch (no coordinate moved by more
        than ``max_skip_jump``); at most this many times per direction.
    skip_step, max_skip_jump : float
        See ``max_skips`` (in ``z`` units).
    cheap : bool
        Evaluate the finite differences and the corrector's iterations cheaply (``FixedPointMap.evaluate``
        with ``warm``: local descent, full search only near a tie), every accepted point being confirmed on the
        exact map; False: every evaluation is a full search (the slower reference of
        ``benchmarks/bench_theory.py``). Either way the points are zeros of the exact residual.
    confirm_back : float
        A turn of the curve in ``alpha`` counts as a fold only if the continuation then goes back by this much
        in ``log alpha`` (or runs into the vanishing of the overlap or the end of the range); a curve that
        turns again sooner is following a wiggle of the piecewise smooth map (a few quadrature nodes switching
        proximal minimum), and the branch is continued.
    """

    solver: SESolver = field(default_factory=SESolver)
    ds: float = 0.05
    ds_min: float = 2e-4
    ds_max: float = 0.25
    grow: float = 1.6
    tol: float = 2e-6
    fd_step: float = 1e-4
    max_newton: int = 8
    slow_newton: int = 4
    max_steps: int = 300
    jacobian_every: int = 1
    confirm_back: float = 0.04
    max_skips: int = 25
    skip_step: float = 0.015
    max_skip_jump: float = 0.1
    cheap: bool = True

    def __post_init__(self):
        for name in ("ds", "ds_min", "ds_max", "tol", "fd_step", "skip_step", "max_skip_jump"):
            v = check_finite_scalar(name, getattr(self, name))
            if not v > 0:
                raise ValueError(f"{name} must lie in (0, inf), got {v!r}")
        if not self.ds_min <= self.ds <= self.ds_max:
            raise ValueError(f"need ds_min <= ds <= ds_max, got {self.ds_min}, {self.ds}, {self.ds_max}")
        if not check_finite_scalar("grow", self.grow) > 1:
            raise ValueError(f"grow must lie in (1, inf), got {self.grow!r}")
        for name, lo in (("max_newton", 1), ("slow_newton", 1), ("max_steps", 1), ("jacobian_every", 1),
                         ("max_skips", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")


class FixedPointMap:
    """The state-evolution map of one branch in continuation coordinates.

    ``u = (log q, m/rho, log V, theta/rho)`` restricted to :data:`FREE_OVERLAPS` ``[branch]``; ``t = log alpha``.
    :meth:`residual` is ``U(F(x(u); e^t)) - u``; held overlaps are pinned at zero exactly as in
    :func:`attnlib.theory.solve.iteration.iterate_state_evolution`, with the quadrature folded by the same symmetries.
    """

    def __init__(self, params: TaskParams, branch: str, solver: SESolver | None = None, cheap: bool = True):
        check_choice("branch", branch, BRANCHES)
        self.params, self.branch = params, branch
        self.solver = solver or SESolver()
        self.hold = _hold(params, branch)
        self.free = FREE_OVERLAPS[branch]
        self.nodes, self.weights = se_nodes(self.solver.quadrature, symmetry_generators(params, self.hold))
        self.n_evaluations = 0
        self._teacher = {}  # the last teacher diagonal at these nodes (conjugates_and_energy)
        self._last = None  # (key, output) of the last exact evaluation
        # warm (cheap) evaluations follow each node's own minimum by local descent and search the nodes near a
        # tie fully (with the tie smoothing applied to them): for the small moves of a finite difference they
        # are the exact map
        self.cheap_jacobian = bool(cheap) and self.solver.prox_mode == "global"

    # --- coordinates
    def to_u(self, x: Overlaps) -> np.ndarray:
        rho = self.params.rho
        conv = {"q": lambda: math.log(x.q), "m": lambda: x.m / rho, "V": lambda: math.log(x.V),
                "theta": lambda: x.theta / rho}
        return np.array([conv[k]() for k in self.free])

    def to_x(self, u: np.ndarray) -> Overlaps:
        rho = self.params.rho
        vals = dict(zip(self.free, u))
        return Overlaps(q=math.exp(vals["q"]), m=vals.get("m", 0.0) * rho, V=math.exp(vals["V"]),
                        theta=vals.get("theta", 0.0) * rho)

    # --- the map
    def evaluate(self, u: np.ndarray, t: float, warm: tuple | None = None):
        """``(x, hat, mean_M, F(x), warm)`` at ``u``, ``alpha = e^t``; ``FloatingPointError`` outside the domain.

        Without ``warm`` the proximal step is the solver's full deterministic search (the exact map). With
        ``warm`` (the last item returned by an exact evaluation nearby) it is a local descent from those
        proximal points, with the full search (and the tie smoothing) kept for nodes near a jump: a cheaper
        evaluation that follows each node's minimum smoothly, used for the finite-difference Jacobians and the
        corrector's iterations (:attr:`Continuation.cheap`), never for an accepted point."""
        key = (tuple(np.asarray(u, float)), float(t))
        if warm is None and self._last is not None and self._last[0] == key:
            return self._last[1]
        x = self.to_x(u)
        _check_state(x, self.params.rho)
        self.n_evaluations += 1
        hat, mean_M, new_warm = conjugates_and_energy(self.params, math.exp(t), x, self.nodes, self.weights,
                                                      self.solver, self.hold, warm=warm, teacher=self._teacher)
        fx = overlaps_from_conjugates(self.params, hat)
        _check_state(fx, self.params.rho)
        out = (x, hat, mean_M, fx, new_warm)
        if warm is None:
            self._last = (key, out)
        return out

    def residual(self, u: np.ndarray, t: float, warm: tuple | None = None) -> np.ndarray:
        return self.to_u(self.evaluate(u, t, warm)[3]) - u

    def jacobian(self, u: np.ndarray, t: float, r0: np.ndarray, h: float) -> np.ndarray:
        """Forward-difference Jacobian ``[r_u, r_t]`` (shape ``k x (k+1)``) at ``(u, t)`` with ``r(u, t) = r0``
        (``r0`` from an exact evaluation at ``(u, t)``, whose proximal points warm-start the cheap
        evaluations of the differences). A step that leaves the domain is taken backwards instead."""
        k = len(u)
        warm = self.evaluate(u, t)[4] if self.cheap_jacobian else None
        J = np.empty((k, k + 1))
        for j in range(k + 1):
            for sgn in (1.0, -1.0):
                uu, tt = u.copy(), t
                if j < k:
                    uu[j] += sgn * h
                else:
                    tt += sgn * h
                try:
                    J[:, j] = sgn * (self.residual(uu, tt, warm) - r0) / h
                    break
                except FloatingPointError:
                    if sgn < 0:
                        raise
        return J

    def result(self, u: np.ndarray, t: float, residual: float, converged: bool, n_iter: int,
               seconds: float = 0.0) -> SEResult:
        """The fixed point at ``u`` as an :class:`~attnlib.theory.model.state_evolution.SEResult` (conjugates, ``eps_t``,
        ``eps_g``), in the representative with a non-negative defining overlap."""
        x, hat, mean_M, _, _ = self.evaluate(u, t)
        alpha = math.exp(t)
        phi = _free_energy(self.params, alpha, x, hat, mean_M)
        if (x.theta < 0 if self.branch in ("semantic", "free") else x.m < 0):
            x = Overlaps(q=x.q, m=-x.m, V=x.V, theta=-x.theta)
            hat = Conjugates(hat.q_hat, -hat.m_hat, hat.V_hat, -hat.theta_hat)
        eps_g = test_error_from_overlaps(self.params, x.q, x.m, x.theta)
        return SEResult(params=self.params, alpha=alpha, branch=self.branch, q=x.q, m=x.m, V=x.V, theta=x.theta,
                        q_hat=hat.q_hat, m_hat=hat.m_hat, V_hat=hat.V_hat, theta_hat=hat.theta_hat,
                        test_error=eps_g, train_loss=-phi, converged=converged, n_iter=n_iter,
                        residual=residual, seconds=seconds)


def jacobian_determinant(fmap: FixedPointMap, overlaps: Overlaps, alpha: float,
                         fd_step: float = 1e-4) -> tuple[float, float]:
    """``det r_u`` at a point of a branch, with its numerical noise.

    The determinant of the residual's Jacobian in the free overlaps (module docstring) changes sign at a
    fold, so near one it is small and its sign means something only where it stands above the error of its
    forward-difference estimate. That error (truncation, and the map's roughness at the scale of the step) is
    measured as the largest change of the determinant when the step is halved or doubled.

    Parameters
    ----------
    fmap : FixedPointMap
        The branch's map (its solver fixes the quadrature and the smoothing).
    overlaps : Overlaps
        The point (a fixed point of the branch, or near one).
    alpha : float
        Its sample complexity.
    fd_step : float
        The finite-difference step ``h`` (the continuation's :attr:`Continuation.fd_step`).

    Returns
    -------
    det, noise : float
        The determinant at step ``h`` and ``max |det(h') - det(h)|`` over ``h' = h/2, 2h``.
    """
    fd_step = check_positive("fd_step", fd_step)
    u, t = fmap.to_u(overlaps), math.log(check_alpha(alpha))
    r0 = fmap.residual(u, t)
    k = len(u)
    dets = [float(np.linalg.det(fmap.jacobian(u, t, r0, h)[:, :k])) for h in (fd_step, fd_step / 2, 2 * fd_step)]
    return dets[0], max(abs(d - dets[0]) for d in dets[1:])


def newton_fixed_point(params: TaskParams, alpha: float, branch: str, start: Overlaps,
                       settings: Continuation | None = None, fmap: FixedPointMap | None = None,
                       max_evaluations: int | None = None, give_up_after: int | None = None) -> SEResult:
    """A fixed point of ``branch`` at fixed ``alpha`` by Newton's method from ``start`` (finite-difference
    Jacobian, Broyden updates, step halving when the residual grows or the domain is left).

    Unlike damped iteration, Newton converges to a fixed point whatever its stability under the iteration,
    so it also finds fixed points that repel the state-evolution iteration (useful for ``branch="free"``
    started at the overlaps of a finite-d minimiser). ``converged=False`` (with a warning) if the tolerance
    of ``settings`` is not reached, or (given ``max_evaluations``) when the map has been evaluated that many times
    in this call (finite differences included) before it is, or (given ``give_up_after``) when after that many
    evaluations the residual has not fallen below half its value at the start (a search that makes no headway:
    where no fixed point lies near, e.g. where the map's image collapses to ``q -> 0``, the residual stays put).
    """
    t0 = time.perf_counter()
    settings = settings or Continuation()
    alpha = check_alpha(alpha)
    fmap = fmap or FixedPointMap(params, branch, settings.solver, settings.cheap)
    t = math.log(alpha)
    u = fmap.to_u(start)
    try:
        r = fmap.residual(u, t)
    except FloatingPointError as exc:
        raise ValueError(f"start is outside the domain of the state evolution: {exc}") from None
    J = fmap.jacobian(u, t, r, settings.fd_step)[:, :-1]
    first_evaluation = fmap.n_evaluations
    budget = math.inf if max_evaluations is None else first_evaluation + max_evaluations
    patience = math.inf if give_up_after is None else first_evaluation + give_up_after
    r_start = float(np.max(np.abs(r)))
    it = 0
    for it in range(1, 4 * settings.max_newton + 1):
        res = float(np.max(np.abs(r)))
        if res < settings.tol or fmap.n_evaluations >= budget or (
                fmap.n_evaluations >= patience and res > 0.5 * r_start):
            break
        du = -np.linalg.lstsq(J, r, rcond=None)[0]
        step, accepted = 1.0, False
        while step > 1e-3:
            try:
                r_new = fmap.residual(u + step * du, t)
            except FloatingPointError:
                step *= 0.5
                continue
            if np.max(np.abs(r_new)) < np.max(np.abs(r)) * (1 - 0.1 * step) or step <= 1e-3:
                accepted = True
                break
            step *= 0.5
        if not accepted:  # fresh Jacobian and one more try
            J = fmap.jacobian(u, t, r, settings.fd_step)[:, :-1]
            continue
        s = step * du
        J = J + np.outer(r_new - r - J @ s, s) / (s @ s)  # Broyden
        u, r = u + s, r_new
    res = float(np.max(np.abs(r)))
    converged = res < settings.tol
    if not converged:
        warn_caller(f"Newton did not converge (branch={branch}, alpha={alpha:g}, omega={params.omega:g}): "
                    f"residual {res:.2e} > tol {settings.tol:g}")
    return fmap.result(u, t, res, converged, it, time.perf_counter() - t0)



"""Pseudo-arclength continuation of the state-evolution fixed points along ``alpha``.

A branch is a curve of fixed points ``x = F(x; alpha)`` of the state evolution (book chapter 4,
:ref:`sec-continuation`) with its symmetric overlap held at zero (:func:`attnlib.theory.model.state_evolution._hold`).
Damped iteration follows it only while the fixed point attracts the iteration, and it slows down (or jumps
to another fixed point) where the branch ends. Here the fixed point is instead continued as a solution curve
of the residual

    r(u, t) = U(F(x(u); e^t)) - u = 0,     t = log alpha,

in the coordinates ``u = (log q, m/rho, log V, theta/rho)`` restricted to the branch's free overlaps
(:data:`~attnlib.theory.solve.newton.FREE_OVERLAPS`), by a tangent predictor and a Newton corrector on the augmented system
``[r(z); tau . (z - z_pred)] = 0``, ``z = (u, t)`` (Keller's pseudo-arclength method; Allgower & Georg,
*Introduction to Numerical Continuation Methods*, ch. 2). The Jacobian ``[r_u, r_t]`` is formed by forward
differences (``k + 1`` evaluations of ``F`` for ``k`` free overlaps) at every step
(:attr:`~attnlib.theory.solve.newton.Continuation.jacobian_every`) and updated by Broyden's rule within the
corrector. The tangent ``tau`` is its null vector, oriented like the previous one.

The residual, its Jacobian and the Newton solve are :mod:`attnlib.theory.solve.newton`'s.

How a branch ends (one definition, used everywhere in :mod:`attnlib`):

``"fold"``
    the curve turns back in ``alpha`` (``dt/ds`` changes sign) and the Jacobian of ``r`` in ``u`` is
    singular there (its determinant changes sign): a saddle-node, where the branch meets a second, unstable
    fixed point and both disappear. The fold's ``alpha`` is the vertex of a parabola through the three points
    around the turn.
``"vanishes"``
    the defining overlap (``theta`` for the semantic branch, ``m`` for the positional one) goes to zero
    continuously: the branch merges with the agnostic point ``m = theta = 0`` in a pitchfork (the symmetry
    ``Q -> -Q`` makes the overlap appear squared in the normal form), located by extrapolating the squared
    overlap linearly in ``alpha`` from the last points above :data:`VANISH_FLOOR`.
``"range"``
    the branch reached the end of the requested ``alpha`` range and goes on beyond it.
``"lost"``
    the corrector failed at the smallest step (reported with a warning; not a physical end).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...exceptions import ConvergenceWarning, warn_caller
from ...params import TaskParams, check_alpha
from ..solve.newton import Continuation, FixedPointMap, newton_fixed_point
from ..model.status import VANISH_FLOOR, defining_overlap
from ..model.state_evolution import Overlaps, SEResult
from ..solve.iteration import iterate_state_evolution

__all__ = ["END_KINDS", "BranchEnd", "BranchTrace", "continue_branch", "trace_branch"]

#: The kinds of branch end (module docstring).
END_KINDS = ("fold", "vanishes", "range", "lost")


def _null_vector(J: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
    """Unit null vector of the ``k x (k+1)`` matrix ``J``, oriented along ``previous`` (if given)."""
    _, _, vt = np.linalg.svd(J)
    tau = vt[-1]
    if previous is not None and tau @ previous < 0:
        tau = -tau
    return tau / np.linalg.norm(tau)


@dataclass(frozen=True)
class BranchEnd:
    """Where (and how) a continued branch stops: ``kind`` in ``END_KINDS`` (module docstring) and the
    ``alpha`` of the end (the fold's vertex, the extrapolated vanishing point, or the range limit)."""

    kind: str
    alpha: float
    detail: str = ""

    @property
    def physical(self) -> bool:
        """True for a fold or a continuous vanishing (not the end of the range, not a failure)."""
        return self.kind in ("fold", "vanishes")


def _corrector(fmap, z_pred, tau, J, settings, warm=None):
    """Newton on ``[r(z); tau . (z - z_pred)] = 0`` from ``z_pred`` with Broyden updates of ``J``.

    With ``warm`` (the proximal points of the exact evaluation at the last accepted point) the iterations
    evaluate the map cheaply (``FixedPointMap.evaluate``); a point that meets the tolerance there is
    confirmed by an exact evaluation, and if it fails the confirmation the iterations go on exactly. The
    accepted point is always a zero of the exact residual.

    Returns ``(z, r, J, n_iter)``, or None when it fails (domain left or no convergence)."""
    k = len(z_pred) - 1
    z = z_pred.copy()
    try:
        r = fmap.residual(z[:k], z[k], warm)
    except FloatingPointError:
        return None
    for it in range(1, settings.max_newton + 1):
        A = np.vstack([J, tau])
        rhs = -np.concatenate([r, [tau @ (z - z_pred)]])
        dz = np.linalg.solve(A, rhs)
        try:
            r_new = fmap.residual(z[:k] + dz[:k], z[k] + dz[k], warm)
        except FloatingPointError:
            return None
        J = J + np.outer(r_new - r - J @ dz, dz) / (dz @ dz)
        z, r = z + dz, r_new
        if np.max(np.abs(r)) < settings.tol and warm is not None:  # confirm on the exact map
            warm = None
            try:
                r = fmap.residual(z[:k], z[k])
            except FloatingPointError:
                return None
        if np.max(np.abs(r)) < settings.tol:
            return z, r, J, it
        if not np.all(np.isfinite(z)) or np.max(np.abs(dz)) > 0.5:
            return None
    return None


def continue_branch(params: TaskParams, branch: str, start: SEResult, direction: int,
                    alpha_range: tuple[float, float], settings: Continuation | None = None,
                    fmap: FixedPointMap | None = None, past_fold: int = 0):
    """Continue ``branch`` from the fixed point ``start`` towards increasing (``direction=+1``) or decreasing
    (``-1``) ``alpha``, until it ends (module docstring) or leaves ``alpha_range``.

    Parameters
    ----------
    past_fold : int
        Continuation steps to keep taking past a fold (they follow the unstable partner branch back; its
        points are marked ``stable_partner=False`` in the trace's table).

    Returns
    -------
    points : list of dict
        One row per accepted point (the start excluded): the :class:`SEResult` row plus ``s`` (arclength),
        ``dlogalpha_ds`` (the tangent's alpha component), ``det_ru`` (determinant of ``r_u``, from a fresh
        finite-difference Jacobian or its Broyden update; always a fresh one from a turn in alpha on),
        ``det_fresh`` (which of the two),
        ``newton_iter`` and ``partner`` (True past a fold).
    end : BranchEnd
    """
    settings = settings or Continuation()
    lo, hi = _check_direction_and_range(direction, alpha_range)
    fmap = fmap or FixedPointMap(params, branch, settings.solver, settings.cheap)
    k = len(fmap.free)
    floor = VANISH_FLOOR * params.rho
    z, tau, J = _start_tangent(fmap, start, direction, settings)
    ds, s = settings.ds, 0.0
    points, history = [], [(z.copy(), tau.copy(), start)]
    fold = _FoldWatch()
    end, since_fresh, skips = None, 0, 0
    heading = float(direction)  # the sign of the last move in alpha
    for _ in range(settings.max_steps):
        step, ds = _predict_correct(fmap, z, tau, J, ds, settings)
        if step is None and skips < settings.max_skips:
            # a rough spot of the map (a jump the smoothing does not cover): solve at a slightly different
            # alpha by Newton from the last point and resume from there if it is the same branch
            jumped = _skip(fmap, z, tau, k, settings, floor if branch in ("semantic", "positional") else None,
                           heading)
            if jumped is not None:
                skips += 1
                end = _range_end(math.exp(jumped[0][k]), lo, hi)
                if end is not None:
                    break
                s = _record_skip(fmap, jumped, z, s, fold.folded, points, history)
                heading = math.copysign(1.0, jumped[0][k] - z[k])
                z, tau, J = jumped
                ds = settings.ds
                continue
        if step is None:
            end = BranchEnd("lost", math.exp(z[k]), f"corrector failed at the smallest step {settings.ds_min:g}")
            warn_caller(f"continuation of the {branch} branch lost at alpha={math.exp(z[k]):.4g} "
                        f"(omega={params.omega:g})")
            break
        z_new, r, _, n_newton = step
        tau_new, J_new, since_fresh = _next_tangent(fmap, step, tau, since_fresh, settings)
        s += ds
        res = fmap.result(z_new[:k], z_new[k], float(np.max(np.abs(r))), True, n_newton)
        turned = _turned(z_new[k] - z[k], heading)
        if turned:
            heading = -heading
        det, det_fresh = _fold_determinant(fmap, z_new, r, J_new, since_fresh == 0, turned or fold.folded,
                                           settings)
        row = _point_row(res, s, tau_new[k], det, det_fresh, n_newton, fold.folded)
        end = _end_reached(branch, res, history[-1][2], points, floor, lo, hi)
        if end is not None:
            break
        points.append(row)
        fold.update(turned, row, points, history, z_new, float(z[k]), settings)
        if fold.done(past_fold):
            break
        history.append((z_new.copy(), tau_new.copy(), res))
        del history[:-3]
        z, tau, J = z_new, tau_new, J_new
        ds = _next_step_size(ds, n_newton, settings)
    else:
        end = BranchEnd("lost", math.exp(z[k]), f"max_steps={settings.max_steps} reached")
        warn_caller(f"continuation of the {branch} branch stopped after max_steps={settings.max_steps}")
    return points, fold.settle(points, end, past_fold)


def _check_direction_and_range(direction: int, alpha_range: tuple[float, float]) -> tuple[float, float]:
    """Check the ``direction`` and ``alpha_range`` of :func:`continue_branch`.

    Returns
    -------
    lo, hi : float
        The range, checked to be increasing.
    """
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 or -1, got {direction!r}")
    lo, hi = (check_alpha(a) for a in alpha_range)
    if not lo < hi:
        raise ValueError(f"alpha_range must be increasing, got {alpha_range}")
    return lo, hi


def _start_tangent(fmap: FixedPointMap, start: SEResult, direction: int, settings: Continuation):
    """Start-up of a continuation: the point, a fresh Jacobian and the tangent there.

    Returns
    -------
    z : ndarray
        ``(u, log alpha)`` of ``start``.
    tau, J : ndarray
        The unit tangent, oriented towards ``direction`` in ``alpha``, and the finite-difference Jacobian
        ``[r_u, r_t]``.
    """
    k = len(fmap.free)
    z = np.concatenate([fmap.to_u(start.overlaps), [math.log(start.alpha)]])
    r0 = fmap.residual(z[:k], z[k])
    J = fmap.jacobian(z[:k], z[k], r0, settings.fd_step)
    tau = _null_vector(J, None)
    if tau[k] * direction < 0:
        tau = -tau
    return z, tau, J


def _predict_correct(fmap: FixedPointMap, z: np.ndarray, tau: np.ndarray, J: np.ndarray, ds: float,
                     settings: Continuation):
    """Tangent predictor ``z + ds tau`` and corrector (:func:`_corrector`), the step halved until the corrector
    succeeds or the step falls below ``ds_min``.

    Returns
    -------
    step : tuple or None
        The corrector's ``(z, r, J, n_iter)``; None when it failed at every step length.
    ds : float
        The step length taken (below ``ds_min`` after a failure).
    """
    k = len(z) - 1
    warm = fmap.evaluate(z[:k], z[k])[4] if fmap.cheap_jacobian else None
    while ds >= settings.ds_min:
        out = _corrector(fmap, z + ds * tau, tau, J, settings, warm)
        if out is not None:
            return out, ds
        ds *= 0.5
    return None, ds


def _next_tangent(fmap: FixedPointMap, step: tuple, tau: np.ndarray, since_fresh: int, settings: Continuation):
    """Jacobian and tangent at a corrected point.

    The corrector's Broyden update serves as the next Jacobian; a fresh finite-difference one is taken every
    ``jacobian_every`` steps, after a slow corrector and to confirm a turn (a tangent that flips its alpha
    component).

    Returns
    -------
    tau, J : ndarray
        The unit tangent (oriented along the previous ``tau``) and the Jacobian.
    since_fresh : int
        Steps since the last fresh Jacobian (0 when ``J`` is fresh).
    """
    z_new, r, J_new, n_newton = step
    k = len(z_new) - 1
    since_fresh += 1
    tau_new = _null_vector(J_new, tau)
    if since_fresh >= settings.jacobian_every or n_newton > 2 or tau_new[k] * tau[k] < 0:
        J_new = fmap.jacobian(z_new[:k], z_new[k], r, settings.fd_step)
        tau_new = _null_vector(J_new, tau)
        since_fresh = 0
    return tau_new, J_new, since_fresh


def _turned(moved: float, heading: float) -> bool:
    """Whether a step that moved ``log alpha`` by ``moved`` turned back in ``alpha``.

    A turn in alpha: the points move against the current heading in alpha (one criterion only, so that one
    turn is counted once; the tangent changes sign within a step of the secant).
    """
    return abs(moved) > 1e-7 and moved * heading < 0


def _fold_determinant(fmap: FixedPointMap, z: np.ndarray, r: np.ndarray, J: np.ndarray, fresh: bool,
                      near_turn: bool, settings: Continuation) -> tuple[float, bool]:
    """``det r_u`` at a new point ``z`` (residual ``r``, Jacobian ``J``, ``fresh`` if it is a finite-difference one).

    From a turn on (``near_turn``), the determinant's sign is the verdict on the fold: take it from a fresh
    finite-difference Jacobian (a Broyden update carries the rounding of its whole history, and near the fold
    its determinant is at the level of that noise); the path keeps the Broyden matrix.

    Returns
    -------
    det : float
    det_fresh : bool
        Whether ``det`` comes from a fresh finite-difference Jacobian.
    """
    k = len(z) - 1
    if fresh or not near_turn:
        return float(np.linalg.det(J[:, :k])), fresh
    return float(np.linalg.det(fmap.jacobian(z[:k], z[k], r, settings.fd_step)[:, :k])), True


def _point_row(res: SEResult, s: float, dlogalpha_ds: float, det: float, det_fresh: bool, n_newton: int,
               partner: bool) -> dict:
    """The row of a continuation point (:func:`continue_branch`, Returns): the :class:`SEResult` row plus
    ``s``, ``dlogalpha_ds``, ``det_ru``, ``det_fresh``, ``newton_iter`` and ``partner``."""
    return {**res.as_row(), "s": s, "dlogalpha_ds": float(dlogalpha_ds), "det_ru": det, "det_fresh": det_fresh,
            "newton_iter": n_newton, "partner": partner}


def _record_skip(fmap: FixedPointMap, jumped: tuple, z: np.ndarray, s: float, partner: bool, points: list,
                 history: list) -> float:
    """Record the point ``jumped = (z, tau, J)`` reached by :func:`_skip` from ``z`` (arclength ``s``) in
    ``points`` and ``history``.

    Returns
    -------
    float
        The arclength at the new point (``s`` plus the distance jumped).
    """
    k = len(z) - 1
    z_j, tau_j, J_j = jumped
    r_j = fmap.residual(z_j[:k], z_j[k])
    res_j = fmap.result(z_j[:k], z_j[k], float(np.max(np.abs(r_j))), True, 0)
    s += float(np.linalg.norm(z_j - z))
    points.append(_point_row(res_j, s, tau_j[k], float(np.linalg.det(J_j[:, :k])), True, 0, partner))
    history.append((z_j.copy(), tau_j.copy(), res_j))
    del history[:-3]
    return s


def _range_end(alpha: float, lo: float, hi: float) -> BranchEnd | None:
    """The ``"range"`` end if ``alpha`` lies outside ``[lo, hi]``, else None."""
    if not (lo <= alpha <= hi):
        return BranchEnd("range", hi if alpha > hi else lo, "the branch goes on beyond the range")
    return None


def _end_reached(branch: str, res: SEResult, last: SEResult, points: list, floor: float, lo: float,
                 hi: float) -> BranchEnd | None:
    """End detection at a new point ``res`` (``last``: the previous point): the vanishing of the defining
    overlap (below ``floor``, or a change of its sign) or a point outside ``[lo, hi]``; None if neither."""
    if branch in ("semantic", "positional"):
        d_new = defining_overlap(branch, res)
        crossed = (res.theta if branch == "semantic" else res.m) * (
            (last.theta if branch == "semantic" else last.m)) < 0
        if d_new < floor or crossed:
            return _vanishing_end(points, last, branch, floor)
    return _range_end(res.alpha, lo, hi)


def _next_step_size(ds: float, n_newton: int, settings: Continuation) -> float:
    """Step-size control: grow the step (by ``grow``, up to ``ds_max``) after a corrector of at most two
    iterations, halve it (down to ``ds_min``) after one of more than ``slow_newton``."""
    return min(settings.ds_max, ds * settings.grow) if n_newton <= 2 else (
        max(settings.ds_min, ds * 0.5) if n_newton > settings.slow_newton else ds)


@dataclass
class _FoldWatch:
    """Fold and turn detection of :func:`continue_branch`.

    A turn of the curve in ``alpha`` makes a candidate fold; it is confirmed once the continuation has gone
    back by ``confirm_back`` in ``log alpha`` (then ``past_fold`` points of the partner are kept), and dropped
    as a wiggle of the piecewise smooth map if the curve turns again before.

    Attributes
    ----------
    folded : bool
        Past a turn (candidate or confirmed): new points belong to the unstable partner.
    extra : int
        Points recorded since the turn.
    candidate : tuple or None
        ``(alpha of a turn, index of its first point, log alpha there)`` until confirmed as a fold.
    confirmed : bool
        Whether the candidate is a fold.
    end : BranchEnd or None
        The confirmed fold.
    """

    folded: bool = False
    extra: int = 0
    candidate: tuple | None = None
    confirmed: bool = False
    end: BranchEnd | None = None

    def update(self, turned: bool, row: dict, points: list, history: list, z_new: np.ndarray, t_prev: float,
               settings: Continuation) -> None:
        """Account for the point just recorded (``row``, the last of ``points``, at ``z_new``; ``turned`` if the
        curve turned back in alpha since the previous point, at ``log alpha = t_prev``)."""
        k = len(z_new) - 1
        if self.confirmed:  # past a confirmed fold: record past_fold points of the partner, then stop
            self.extra += 1
        elif turned and self.candidate is not None:
            # the curve turned back again before it had gone back far: a wiggle of the (piecewise smooth) map,
            # not a fold; the points since the first turn belong to the branch after all
            for r_ in points[self.candidate[1]:]:
                r_["partner"] = False
            self.candidate, self.folded = None, False
        elif turned:
            self.candidate = (_fold_alpha(history, z_new, k), len(points) - 1, t_prev)
            self.folded = True
            row["partner"] = True
            self.extra = 0
        elif self.candidate is not None:
            self.extra += 1
            if abs(z_new[k] - self.candidate[2]) >= settings.confirm_back:
                self.confirmed = True
                self.end = BranchEnd("fold", self.candidate[0], "the branch turns back in alpha (dalpha/ds "
                                     f"changes sign) and goes on back by {settings.confirm_back:g} in log alpha")

    def done(self, past_fold: int) -> bool:
        """Whether the fold is confirmed and ``past_fold`` points past it were recorded."""
        return self.confirmed and self.extra >= past_fold

    def settle(self, points: list, end: BranchEnd | None, past_fold: int) -> BranchEnd:
        """The branch's end once the continuation stopped at ``end`` (None when it stopped on :meth:`done`),
        with the partner's points marked and those beyond ``past_fold`` past a confirmed fold dropped."""
        if self.confirmed:  # (the partner may have run into the range or the agnostic point before past_fold points)
            del points[self.candidate[1] + past_fold:]
            return self.end
        if self.candidate is not None:
            # the curve turned and then stopped before the turn was confirmed: the points after the turn stay out
            # of the branch itself; if it stopped at the range or on the vanishing of its overlap (the partner
            # running into the agnostic point), the turn is the branch's end; a failure stays a failure
            for r_ in points[self.candidate[1]:]:
                r_["partner"] = True
            if end.kind in ("range", "vanishes"):
                return BranchEnd("fold", self.candidate[0], f"the branch turns back in alpha; the continuation "
                                 f"past it ended ({end.kind}) before the turn was confirmed")
        return end


def _skip(fmap: "FixedPointMap", z: np.ndarray, tau: np.ndarray, k: int, settings: "Continuation",
          floor: float | None, heading: float):
    """Step over a rough spot: solve at fixed ``log alpha = z_k + skip_step * heading`` from the last point
    (``heading``: the sign of the last move in alpha; the tangent's own alpha component can point back where the
    corrector failed, and a skip along it would retrace the branch),
    by Newton and, if that fails, by the plain damped state-evolution iteration (which a jump of the map does
    not stop, as long as the fixed point attracts it). Returns ``(z, tau, J)`` at the new point if it is a
    point of the same branch (every coordinate within ``max_skip_jump`` of the last point's, the defining
    overlap above ``floor``), else None; the tangent there points the way the skip went."""
    t_new = z[k] + math.copysign(settings.skip_step, heading)
    x0 = fmap.to_x(z[:k])
    plain = replace(fmap.solver, anderson=0, max_iter=max(fmap.solver.max_iter, 300))
    candidates = (
        lambda: newton_fixed_point(fmap.params, math.exp(t_new), fmap.branch, x0, settings, fmap),
        lambda: iterate_state_evolution(fmap.params, math.exp(t_new), fmap.branch, start=x0, solver=plain),
    )
    for solve in candidates:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            try:
                res = solve()
            except (ValueError, FloatingPointError):
                continue
        if not res.converged:
            continue
        u = fmap.to_u(res.overlaps)
        if np.max(np.abs(u - z[:k])) > settings.max_skip_jump:
            continue
        if floor is not None and defining_overlap(fmap.branch, res) < floor:
            continue
        try:
            r = fmap.residual(u, t_new)
            J = fmap.jacobian(u, t_new, r, settings.fd_step)
        except FloatingPointError:
            continue
        tau_new = _null_vector(J, tau)
        if tau_new[k] * heading < 0:  # go on the way the skip went
            tau_new = -tau_new
        return np.concatenate([u, [t_new]]), tau_new, J
    return None


def _fold_alpha(history: list, z_new: np.ndarray, k: int) -> float:
    """``alpha`` at the vertex of the parabola ``log alpha(s)`` through the last two accepted points and the
    new one (the curve turned between them)."""
    ts = [h[0][k] for h in history[-2:]] + [z_new[k]]
    if len(ts) < 3:
        return float(math.exp(max(ts) if ts[-1] < ts[0] else min(ts)))
    # arclength positions of the three points (the last two steps)
    z_pts = [h[0] for h in history[-2:]] + [z_new]
    s_pts = np.cumsum([0.0] + [float(np.linalg.norm(z_pts[i + 1] - z_pts[i])) for i in range(2)])
    c2, c1, c0 = np.polyfit(s_pts, ts, 2)
    if c2 == 0:
        return float(math.exp(ts[1]))
    s_v = float(np.clip(-c1 / (2 * c2), s_pts[0], s_pts[-1]))
    return float(math.exp(c0 + c1 * s_v + c2 * s_v**2))


def _vanishing_end(points: list, last: SEResult, branch: str, floor: float) -> BranchEnd:
    """Where the defining overlap vanishes: the squared overlap, linear in ``alpha`` near a pitchfork, is
    extrapolated to zero from the last two points above the floor."""
    name = "theta" if branch == "semantic" else "m"
    pts = [(row["alpha"], row[name] ** 2) for row in points[-2:]]
    if len(pts) == 2 and pts[0][0] != pts[1][0] and pts[0][1] != pts[1][1]:
        (a1, y1), (a2, y2) = pts
        a_star = a2 - y2 * (a2 - a1) / (y2 - y1)
        # keep the extrapolation within one more step of the last point
        step = abs(a2 - a1)
        a_star = float(np.clip(a_star, a2 - 2 * step, a2 + 2 * step))
    else:
        a_star = float(last.alpha)
    return BranchEnd("vanishes", a_star, f"{name} -> 0 (pitchfork with the agnostic point)")


@dataclass(frozen=True)
class BranchTrace:
    """A branch followed by continuation both ways from a start, with its two ends.

    Attributes
    ----------
    params : TaskParams
    branch : str
    table : pandas.DataFrame
        One row per fixed point, sorted along the curve (increasing arclength from the lower end):
        the :class:`~attnlib.theory.model.state_evolution.SEResult` fields plus ``s``, ``dlogalpha_ds``, ``det_ru``,
        ``newton_iter`` and ``partner`` (True on the unstable partner past a fold).
    lower, upper : BranchEnd
        How the branch ends towards small and large ``alpha``.
    alpha_range : tuple
        The range searched.
    converged : bool
        False if the start did not converge or a direction was lost.
    seconds : float
    n_evaluations : int
        Evaluations of the state-evolution map.
    """

    params: TaskParams
    branch: str
    table: pd.DataFrame
    lower: BranchEnd
    upper: BranchEnd
    alpha_range: tuple
    converged: bool
    seconds: float
    n_evaluations: int

    @property
    def stable(self) -> pd.DataFrame:
        """The rows of the branch itself (without the unstable partner past a fold), sorted by ``alpha``."""
        return self.table[~self.table.partner].sort_values("alpha").reset_index(drop=True)

    @property
    def exists_between(self) -> tuple[float, float]:
        """The ``alpha`` interval ``(alpha_low, alpha_high)`` on which the branch exists (its two ends)."""
        return self.lower.alpha, self.upper.alpha

    def start_near(self, alpha: float) -> Overlaps:
        """Overlaps interpolated linearly (in ``log alpha``) between the two stable rows around ``alpha``, or
        the nearest row outside them: a predictor for a fixed point at ``alpha``."""
        st = self.stable
        a = st.alpha.to_numpy()
        if len(a) == 0:
            raise ValueError("the trace has no points")
        cols = ["q", "m", "V", "theta"]
        if alpha <= a[0] or alpha >= a[-1] or len(a) == 1:
            i = int(np.argmin(np.abs(np.log(a) - math.log(alpha))))
            return Overlaps(*st.loc[i, cols].astype(float))
        j = int(np.searchsorted(a, alpha))
        w = (math.log(alpha) - math.log(a[j - 1])) / (math.log(a[j]) - math.log(a[j - 1]))
        vals = (1 - w) * st.loc[j - 1, cols].to_numpy(float) + w * st.loc[j, cols].to_numpy(float)
        return Overlaps(*vals)


def trace_branch(params: TaskParams, branch: str, alpha0: float, alpha_range: tuple[float, float] = (0.2, 6.0),
                 settings: Continuation | None = None, start: Overlaps | None = None,
                 past_fold: int = 0) -> BranchTrace:
    """Follow ``branch`` by continuation from ``alpha0`` down and up to its ends within ``alpha_range``.

    The first point is found by the state-evolution iteration under ``settings.solver`` (as
    :func:`~attnlib.solve_state_evolution` with that solver, from ``start`` or the branch's default start) and
    polished by Newton; it must have its defining overlap
    above the floor (``VANISH_FLOOR * rho``), else ``ValueError`` (the branch does not exist at ``alpha0``:
    start where it is unambiguous).
    """
    params.require_two_tokens("trace_branch")
    t0 = time.perf_counter()
    settings = settings or Continuation()
    alpha0 = check_alpha(alpha0)
    lo, hi = (check_alpha(a) for a in alpha_range)
    if not lo <= alpha0 <= hi:
        raise ValueError(f"alpha0 must lie in alpha_range [{lo}, {hi}], got {alpha0}")
    fmap = FixedPointMap(params, branch, settings.solver, settings.cheap)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        first = iterate_state_evolution(params, alpha0, branch, start=start, solver=settings.solver)
        first = newton_fixed_point(params, alpha0, branch, first.overlaps, settings, fmap)
    if not first.converged:
        raise ValueError(f"no fixed point of the {branch} branch found at alpha0={alpha0:g} "
                         f"(omega={params.omega:g})")
    if branch in ("semantic", "positional") and defining_overlap(branch, first) < VANISH_FLOOR * params.rho:
        raise ValueError(f"the {branch} branch has vanished at alpha0={alpha0:g} (omega={params.omega:g}): its "
                         f"defining overlap is {defining_overlap(branch, first):.2e}; start where it exists")
    down, lower = continue_branch(params, branch, first, -1, (lo, hi), settings, fmap, past_fold)
    up, upper = continue_branch(params, branch, first, +1, (lo, hi), settings, fmap, past_fold)
    first_row = {**first.as_row(), "s": 0.0, "dlogalpha_ds": math.nan, "det_ru": math.nan, "det_fresh": False,
                 "newton_iter": first.n_iter, "partner": False}
    rows = [dict(r, s=-r["s"]) for r in reversed(down)] + [first_row] + up
    table = pd.DataFrame(rows)
    table["s"] -= table["s"].min()
    converged = lower.kind != "lost" and upper.kind != "lost"
    return BranchTrace(params=params, branch=branch, table=table.reset_index(drop=True), lower=lower,
                       upper=upper, alpha_range=(lo, hi), converged=converged,
                       seconds=time.perf_counter() - t0, n_evaluations=fmap.n_evaluations)

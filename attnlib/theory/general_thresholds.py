"""The thresholds ``alpha_c`` and ``alpha_l`` of the general state evolution (any ``L``, rank 1).

``alpha_c`` is the root of the training-loss gap ``eps_t(semantic) - eps_t(positional)`` between the two branches
of :func:`attnlib.theory.general_state_evolution.solve_general` (book :eq:`eq-thresholds`), ``alpha_l`` the root of
``eps_g - eps_lin`` on the branch that is the global minimum (semantic above ``alpha_c``, positional below), with
``eps_lin`` of book :eq:`eq-general-linear`. Each root is bracketed by the caller and found by the Illinois variant
of regula falsi in ``log alpha`` (every evaluation solves one or two fixed points, each the mean over the
solver's scramblings); the search stops when the bracket is narrower than ``xtol`` in ``log alpha`` or than the
root's own quadrature error, the standard error of the function divided by its slope. Cached on disk.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

from ..exceptions import ConvergenceWarning
from ..params import TaskParams, check_alpha, check_finite_scalar
from .general_state_evolution import GeneralSolver, solve_general
from .generalisation import linear_baseline_error

__all__ = ["GeneralThreshold", "general_threshold"]


@dataclass(frozen=True)
class GeneralThreshold:
    """A threshold of the general state evolution (:func:`general_threshold`).

    Attributes
    ----------
    name : str
        ``"alpha_c"`` or ``"alpha_l"``.
    alpha, err : float
        The root and its error (half the last bracket plus the quadrature error of the root, added in
        quadrature); NaN where the bracket holds no sign change (``reason`` says so).
    bracket : tuple of float
        The last bracket.
    n_evals : int
        Evaluations of the function.
    converged : bool
    reason : str
    seconds : float
    """

    name: str
    alpha: float
    err: float
    bracket: tuple
    n_evals: int
    converged: bool
    reason: str
    seconds: float

    def as_row(self) -> dict:
        return {"name": self.name, "alpha": self.alpha, "err": self.err, "bracket_lo": self.bracket[0],
                "bracket_hi": self.bracket[1], "n_evals": self.n_evals, "converged": self.converged,
                "reason": self.reason, "seconds": self.seconds}


def _value(params, alpha, name, solver, eps_lin, alpha_c):
    """The function whose root is the threshold, and its standard error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if name == "alpha_c":
            sem = solve_general(params, alpha, "semantic", solver=solver)
            pos = solve_general(params, alpha, "positional", solver=solver)
            ok = sem.converged and pos.converged
            return (sem.train_loss - pos.train_loss,
                    math.hypot(sem.stderr["train_loss"], pos.stderr["train_loss"]), ok)
        branch = "semantic" if alpha_c is None or alpha >= alpha_c else "positional"
        res = solve_general(params, alpha, branch, solver=solver)
        return res.test_error - eps_lin, float(res.stderr["test_error"]), res.converged


def general_threshold(params: TaskParams, name: str, bracket: tuple, solver: GeneralSolver | None = None,
                      alpha_c: float | None = None, xtol: float = 2e-3, max_evals: int = 10,
                      use_cache: bool = True) -> GeneralThreshold:
    """``alpha_c`` or ``alpha_l`` (module docstring) inside ``bracket = (lo, hi)``, for the ``L`` of ``params``
    and a rank-1 student.

    Parameters
    ----------
    params : TaskParams
    name : {"alpha_c", "alpha_l"}
    bracket : (float, float)
        ``0 < lo < hi``; the function must change sign between them.
    solver : GeneralSolver, optional
    alpha_c : float, optional
        For ``alpha_l``: the global minimum is the positional branch below it, the semantic one above (None: the
        semantic branch everywhere).
    xtol : float
        Bracket width in ``log alpha`` at which the search stops.
    max_evals : int
        Evaluations at most (the two ends included).
    """
    if name not in ("alpha_c", "alpha_l"):
        raise ValueError(f"name must be 'alpha_c' or 'alpha_l', got {name!r}")
    lo, hi = (check_alpha(a) for a in bracket)
    if not lo < hi:
        raise ValueError(f"bracket must satisfy lo < hi, got {bracket!r}")
    if not check_finite_scalar("xtol", xtol) > 0:
        raise ValueError(f"xtol must lie in (0, inf), got {xtol!r}")
    solver = solver or GeneralSolver()

    def compute():
        return _search(params, name, lo, hi, solver, alpha_c, xtol, max_evals).as_row()

    if not use_cache:
        return GeneralThreshold(**_unrow(compute()))
    from ..cache import cached
    return GeneralThreshold(**_unrow(cached("general-threshold", compute, params=params, name=name,
                                            bracket=(lo, hi), solver=solver, alpha_c=alpha_c, xtol=xtol,
                                            max_evals=max_evals)))


def _unrow(row: dict) -> dict:
    row = dict(row)
    row["bracket"] = (row.pop("bracket_lo"), row.pop("bracket_hi"))
    return row


def _search(params, name, lo, hi, solver, alpha_c, xtol, max_evals) -> GeneralThreshold:
    t0 = time.perf_counter()
    eps_lin = linear_baseline_error(params) if name == "alpha_l" else None
    (f_lo, e_lo, ok_lo), (f_hi, e_hi, ok_hi) = (_value(params, a, name, solver, eps_lin, alpha_c) for a in (lo, hi))
    n = 2

    def result(alpha, err, converged, reason):
        if not converged:
            warnings.warn(f"general_threshold: {name} (L={params.L}, omega={params.omega:g}): {reason}",
                          ConvergenceWarning, stacklevel=3)
        return GeneralThreshold(name=name, alpha=alpha, err=err, bracket=(lo, hi), n_evals=n, converged=converged,
                                reason=reason, seconds=time.perf_counter() - t0)

    if not (ok_lo and ok_hi):
        return result(math.nan, math.nan, False, "a fixed point at an end of the bracket did not converge")
    if f_lo * f_hi > 0:
        return result(math.nan, math.nan, False, f"no sign change in [{lo:g}, {hi:g}]")
    x_lo, x_hi = math.log(lo), math.log(hi)
    side = 0
    f_mid = e_mid = math.nan
    x_mid = 0.5 * (x_lo + x_hi)
    while n < max_evals:
        x_mid = x_hi - f_hi * (x_hi - x_lo) / (f_hi - f_lo)
        f_mid, e_mid, ok = _value(params, math.exp(x_mid), name, solver, eps_lin, alpha_c)
        n += 1
        if not ok:
            return result(math.nan, math.nan, False, f"a fixed point at alpha = {math.exp(x_mid):g} did not converge")
        if f_mid * f_hi > 0:
            x_hi, f_hi = x_mid, f_mid
            if side == 1:
                f_lo *= 0.5  # Illinois: keep the stale end from stalling the search
            side = 1
        else:
            x_lo, f_lo = x_mid, f_mid
            if side == -1:
                f_hi *= 0.5
            side = -1
        lo, hi = math.exp(x_lo), math.exp(x_hi)
        slope = abs((f_hi - f_lo) / (x_hi - x_lo)) if x_hi != x_lo else math.inf
        root_err = e_mid / slope if slope > 0 else math.inf  # in log alpha
        if x_hi - x_lo < xtol or x_hi - x_lo < 2 * root_err:
            break
    alpha = math.exp(x_mid)
    slope = abs((f_hi - f_lo) / (x_hi - x_lo)) if x_hi != x_lo else math.inf
    err_log = math.hypot(0.5 * (x_hi - x_lo), e_mid / slope if slope > 0 else math.inf)
    converged = x_hi - x_lo < max(xtol, 2 * (e_mid / slope if slope > 0 else math.inf))
    return result(alpha, alpha * err_log, converged, "" if converged else f"{max_evals} evaluations reached")

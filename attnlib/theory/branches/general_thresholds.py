"""The thresholds ``alpha_c`` and ``alpha_l`` of the general state evolution (any ``L``, rank 1).

``alpha_c`` is the root of the training-loss gap ``eps_t(semantic) - eps_t(positional)`` between the two branches
of :func:`attnlib.theory.solve.general_state_evolution.solve_general` (book :eq:`eq-thresholds`), ``alpha_l`` the root of
``eps_g - eps_lin`` on the branch that is the global minimum (semantic above ``alpha_c``, positional below), with
``eps_lin`` of book :eq:`eq-general-linear`. Each root is bracketed by the caller and found by the Illinois variant
of regula falsi in ``log alpha`` (every evaluation solves one or two fixed points, each the mean over the
solver's scramblings); the search stops when the bracket is narrower than ``xtol`` in ``log alpha`` or than the
root's own quadrature error, the standard error of the function divided by its slope. Without a bracket the
search first finds one by geometric steps from a guess (:func:`find_bracket`; both functions decrease with alpha
near their roots). Cached on disk.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np

from ...exceptions import ConvergenceWarning, warn_caller
from ...params import TaskParams, check_alpha, check_finite_scalar
from ..model.general_model import GeneralSolver
from ..solve.general_state_evolution import solve_general
from ..model.generalisation import linear_baseline_error
from .threshold import NO_ROOT, Threshold

__all__ = ["general_threshold", "find_bracket", "distinct_branch", "NO_ROOT", "AT_ALPHA_C"]

#: ``reason`` of an ``alpha_l`` equal to ``alpha_c``: the semantic branch beats the linear baseline as soon as it
#: is the global minimum
AT_ALPHA_C = "alpha_l = alpha_c"
#: shorter steps tried by the bracket search after a fixed point that did not converge
FAILED_STEP_RETRIES = 2
#: a branch's overlap below this fraction of its scale is the uninformed point, not the branch (``distinct_branch``)
DISTINCT = 1e-2


def distinct_branch(res) -> bool:
    """Whether a fixed point of :func:`attnlib.solve_general` is its branch's own and not the uninformed point the
    branches share at small ``alpha``: on the semantic branch ``|theta| >= DISTINCT rho``, on the positional one
    ``|M|_F/sqrt 2 >= DISTINCT sqrt(rho)``; other branches always are."""
    rho = res.params.rho
    if res.branch == "semantic":
        return float(np.linalg.norm(res.theta)) >= DISTINCT * rho
    if res.branch == "positional":
        return res.m >= DISTINCT * math.sqrt(rho)
    return True


def _value(params, alpha, name, solver, eps_lin, alpha_c):
    """The function whose root is the threshold, and its standard error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if name == "alpha_c":
            sem = solve_general(params, alpha, "semantic", solver=solver)
            pos = solve_general(params, alpha, "positional", solver=solver)
            ok = sem.converged and pos.converged and distinct_branch(sem) and distinct_branch(pos)
            return (sem.train_loss - pos.train_loss,
                    math.hypot(sem.stderr["train_loss"], pos.stderr["train_loss"]), ok)
        branch = "semantic" if alpha_c is None or alpha >= alpha_c else "positional"
        res = solve_general(params, alpha, branch, solver=solver)
        return res.test_error - eps_lin, float(res.stderr["test_error"]), res.converged


def general_threshold(params: TaskParams, name: str, bracket: tuple | None = None,
                      solver: GeneralSolver | None = None, alpha_c: float | None = None, xtol: float = 2e-3,
                      max_evals: int = 10, use_cache: bool = True, guess: float | None = None,
                      alpha_range: tuple = (0.1, 8.0), factor: float = 1.3) -> Threshold:
    """The threshold ``alpha_c`` or ``alpha_l`` of the general state evolution for a rank-one student.

    ``alpha_c`` is the root of ``eps_t(semantic) - eps_t(positional)`` between the branches of
    :func:`attnlib.solve_general` (book :eq:`eq-thresholds`), ``alpha_l`` the root of ``eps_g - eps_lin`` on the
    branch that is the global minimum (book :eq:`eq-general-linear`), for the ``L`` of ``params``. The root is
    sought inside ``bracket``, or in a bracket found by geometric steps from ``guess``, by the Illinois variant of
    regula falsi in ``log alpha``; it stops when the bracket is narrower than ``xtol`` or than twice the root's
    quadrature error (the standard error of the function over its slope). Cached on disk.

    Parameters
    ----------
    params : TaskParams
    name : {"alpha_c", "alpha_l"}
    bracket : (float, float), optional
        ``0 < lo < hi``; the function must change sign between them. Without it, ``guess`` is required and the
        bracket is found by ``find_bracket`` (module ``attnlib.theory.branches.general_thresholds``).
    solver : GeneralSolver, optional
    alpha_c : float, optional
        For ``alpha_l``: the global minimum is the positional branch below it, the semantic one above (None: the
        semantic branch everywhere).
    xtol : float
        Bracket width in ``log alpha`` at which the search stops.
    max_evals : int
        Evaluations of the root search at most (the two ends of the bracket included; the bracket search's
        evaluations are counted in ``n_evals`` too).
    guess, alpha_range, factor :
        For a search without ``bracket``: the first point, the range the bracket must lie in, and the ratio
        of successive points (``find_bracket``).

    Returns
    -------
    Threshold
        ``absent`` where the function keeps its sign over the range searched; for ``alpha_l`` with ``alpha_c``
        given, ``alpha = alpha_c`` (reason ``AT_ALPHA_C``) when the semantic branch is already below the
        linear baseline there.
    """
    if name not in ("alpha_c", "alpha_l"):
        raise ValueError(f"name must be 'alpha_c' or 'alpha_l', got {name!r}")
    if (bracket is None) == (guess is None):
        raise ValueError("give exactly one of bracket and guess")
    if bracket is not None:
        lo, hi = (check_alpha(a) for a in bracket)
        if not lo < hi:
            raise ValueError(f"bracket must satisfy lo < hi, got {bracket!r}")
        search = dict(bracket=(lo, hi))
    else:
        search = dict(guess=check_alpha(guess), alpha_range=_check_range(alpha_range),
                      factor=check_finite_scalar("factor", factor))
        if not search["factor"] > 1:
            raise ValueError(f"factor must lie in (1, inf), got {factor!r}")
    if not check_finite_scalar("xtol", xtol) > 0:
        raise ValueError(f"xtol must lie in (0, inf), got {xtol!r}")
    solver = solver or GeneralSolver()

    def compute():
        return _search(params, name, solver, alpha_c, xtol, max_evals, **search).as_row()

    if not use_cache:
        return Threshold.from_row(compute())
    from ...cache import cached
    return Threshold.from_row(cached("general-threshold", compute, params=params, name=name, solver=solver,
                                     alpha_c=alpha_c, xtol=xtol, max_evals=max_evals, **search))


def _check_range(alpha_range) -> tuple:
    try:
        lo, hi = (check_alpha(a) for a in alpha_range)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"alpha_range must be (lo, hi) with 0 < lo < hi, got {alpha_range!r}") from exc
    if not lo < hi:
        raise ValueError(f"alpha_range must satisfy lo < hi, got {alpha_range!r}")
    return lo, hi


def find_bracket(f, guess: float, alpha_range: tuple, factor: float = 1.3):
    """Bracket a root of a function that decreases through zero, by geometric steps from ``guess``.

    Parameters
    ----------
    f : callable
        ``f(alpha) -> (value, stderr, ok)``.
    guess : float
        First point; moved into ``alpha_range``.
    alpha_range : (float, float)
        The steps stop at its ends.
    factor : float
        Ratio of successive points (> 1): up while ``f > 0``, down while ``f < 0``. Where a fixed point does not
        converge, the step is shortened (halved in ``log alpha``, up to ``FAILED_STEP_RETRIES`` times).

    Returns
    -------
    (lo, f_lo), (hi, f_hi), n, reason
        ``f_lo = (value, stderr, ok)`` at ``lo`` and so at ``hi``; ``n`` evaluations. Where no sign change is
        found, ``lo = hi`` is the last point and ``reason`` says why (it starts with :data:`NO_ROOT` when the
        function kept its sign up to an end of the range); else ``reason`` is empty.
    """
    a_min, a_max = alpha_range
    a = min(max(guess, a_min), a_max)
    fa = f(a)
    n = 1
    if not fa[2]:
        return (a, fa), (a, fa), n, f"a fixed point at alpha = {a:g} did not converge or is not its branch's"
    up = fa[0] > 0
    while True:
        if (up and a >= a_max) or (not up and a <= a_min):
            side = "above" if fa[0] > 0 else "below"
            return ((a, fa), (a, fa), n,
                    f"{NO_ROOT} in [{min(guess, a):g}, {max(guess, a):g}]: the function stays {side} zero")
        b = min(a * factor, a_max) if up else max(a / factor, a_min)
        fb = f(b)
        n += 1
        for _ in range(FAILED_STEP_RETRIES):
            if fb[2]:
                break
            b = math.sqrt(a * b)  # a branch can end between the two points: a shorter step
            fb = f(b)
            n += 1
        if not fb[2]:
            return (b, fb), (b, fb), n, f"a fixed point at alpha = {b:g} did not converge or is not its branch's"
        if fa[0] * fb[0] <= 0:
            return ((a, fa), (b, fb), n, "") if up else ((b, fb), (a, fa), n, "")
        a, fa = b, fb


def _search(params, name, solver, alpha_c, xtol, max_evals, bracket=None, guess=None, alpha_range=None,
            factor=None) -> Threshold:
    t0 = time.perf_counter()
    eps_lin = linear_baseline_error(params) if name == "alpha_l" else None

    def f(alpha):
        return _value(params, alpha, name, solver, eps_lin, alpha_c)

    def result(alpha, err, converged, reason, lo, hi, n):
        if not converged:
            warn_caller(f"general_threshold: {name} (L={params.L}, omega={params.omega:g}): {reason}")
        return Threshold(name=name, alpha=alpha, err=err, bracket=(lo, hi), n_evals=n, converged=converged,
                         reason=reason, seconds=time.perf_counter() - t0)

    n = 0
    if bracket is None:
        if name == "alpha_l" and alpha_c is not None:
            # the global minimum is semantic from alpha_c on: alpha_l is not below it
            at_c = f(alpha_c)
            n = 1
            if not at_c[2]:
                return result(math.nan, math.nan, False, f"the fixed point at alpha_c = {alpha_c:g} did not converge",
                              alpha_c, alpha_c, n)
            if at_c[0] <= 0:
                return result(alpha_c, 0.0, True, f"{AT_ALPHA_C}: eps_g below eps_lin as soon as the semantic "
                              "branch is the global minimum", alpha_c, alpha_c, n)
            alpha_range = (max(alpha_range[0], alpha_c), max(alpha_range[1], alpha_c * factor))
            guess = max(guess, alpha_c)
        (lo, end_lo), (hi, end_hi), m, reason = find_bracket(f, guess, alpha_range, factor)
        n += m
        if reason:
            return result(math.nan, math.nan, False, reason, lo, hi, n)
    else:
        lo, hi = bracket
        end_lo, end_hi = f(lo), f(hi)
        n = 2
    (f_lo, e_lo, ok_lo), (f_hi, e_hi, ok_hi) = end_lo, end_hi
    if not (ok_lo and ok_hi):
        return result(math.nan, math.nan, False, "a fixed point at an end of the bracket did not converge or is not "
                      "its branch's", lo, hi, n)
    if f_lo * f_hi > 0:
        return result(math.nan, math.nan, False, f"{NO_ROOT} in [{lo:g}, {hi:g}]", lo, hi, n)
    x_lo, x_hi = math.log(lo), math.log(hi)
    side = 0
    e_mid = max(e_lo, e_hi)
    x_mid = x_hi - f_hi * (x_hi - x_lo) / (f_hi - f_lo) if f_hi != f_lo else 0.5 * (x_lo + x_hi)
    n0 = n
    while n - n0 < max_evals - 2:
        x_mid = x_hi - f_hi * (x_hi - x_lo) / (f_hi - f_lo)
        f_mid, e_mid, ok = f(math.exp(x_mid))
        n += 1
        if not ok:
            return result(math.nan, math.nan, False, f"a fixed point at alpha = {math.exp(x_mid):g} did not converge "
                          "or is not its branch's",
                          math.exp(x_lo), math.exp(x_hi), n)
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
        slope = abs((f_hi - f_lo) / (x_hi - x_lo)) if x_hi != x_lo else math.inf
        root_err = e_mid / slope if slope > 0 else math.inf  # in log alpha
        if x_hi - x_lo < xtol or x_hi - x_lo < 2 * root_err:
            break
    alpha = math.exp(x_mid)
    slope = abs((f_hi - f_lo) / (x_hi - x_lo)) if x_hi != x_lo else math.inf
    root_err = e_mid / slope if slope > 0 else math.inf
    err_log = math.hypot(0.5 * (x_hi - x_lo), root_err)
    converged = x_hi - x_lo < max(xtol, 2 * root_err)
    return result(alpha, alpha * err_log, converged, "" if converged else f"{max_evals} evaluations reached",
                  math.exp(x_lo), math.exp(x_hi), n)

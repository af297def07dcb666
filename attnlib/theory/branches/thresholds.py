"""The two thresholds on the continuation traces: ``alpha_c`` and ``alpha_l`` (book :eq:`eq-thresholds`).

* :func:`critical_alpha` (``alpha_c``): where the training losses ``eps_t`` of the semantic and positional
  branches are equal, searched only where both exist as distinct branches (defining overlaps above
  ``VANISH_FLOOR * rho``), bracketed on the traces (:func:`attnlib.branch_trace`) and refined by Brent's method
  on Newton-solved fixed points. The ``alpha`` grid a caller passes only sets the search range.
* :func:`linear_crossing_alpha` (``alpha_l``): where the test error of the global minimum (the branch of
  lowest ``eps_t``) falls below the linear baseline's ``eps_lin``.

Both raise :class:`~attnlib.exceptions.ThresholdNotFound` with the reason when there is no transition in the
range; the ``REASON_*`` templates are those reasons.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from ...cache import cached
from ...exceptions import ThresholdNotFound, warn_caller
from ...params import TaskParams, check_params
from .continuation import BranchTrace
from ..solve.newton import FixedPointMap
from ..model.generalisation import linear_baseline_error
from .traces import DEFAULT_RANGE, _interp, _range, _trace_range, branch_point, branch_trace, continuation_settings

__all__ = ["critical_alpha", "linear_crossing_alpha", "energy_gap", "energy_below", "REASON_ABSENT", "REASON_APART",
           "REASON_LOWER", "REASON_BELOW_END"]


def _coexistence(sem: BranchTrace, pos: BranchTrace) -> tuple[float, float]:
    lo = max(sem.lower.alpha, pos.lower.alpha, sem.stable.alpha.min(), pos.stable.alpha.min())
    hi = min(sem.upper.alpha, pos.upper.alpha, sem.stable.alpha.max(), pos.stable.alpha.max())
    return lo, hi


def energy_gap(params: TaskParams, alpha: float, solver=None, alpha_range=DEFAULT_RANGE,
               use_cache: bool = True) -> float:
    """``eps_t(semantic) - eps_t(positional)`` at ``alpha`` on the traced branches (negative where the
    semantic minimum is global); NaN where a branch does not exist."""
    settings = continuation_settings(solver)
    rng = _trace_range(*_range(alpha_range, None))
    sem = branch_trace(params, "semantic", rng, settings, use_cache)
    pos = branch_trace(params, "positional", rng, settings, use_cache)
    if sem is None or pos is None:
        return math.nan
    lo, hi = _coexistence(sem, pos)
    if not lo <= alpha <= hi:
        return math.nan
    return branch_point(sem, alpha, settings).train_loss - branch_point(pos, alpha, settings).train_loss


def _bracket(alphas, values):
    """First sign change (+ to -) of ``values`` along increasing ``alphas``; None if there is none."""
    for i in range(len(alphas) - 1):
        if values[i] > 0 >= values[i + 1]:
            return alphas[i], alphas[i + 1]
    return None


def _root(f, lo: float, hi: float, xtol: float) -> float:
    return float(brentq(f, lo, hi, xtol=xtol))


#: Why :func:`critical_alpha` found no transition (the start of its reason; :func:`semantic_takeover` reads them).
REASON_ABSENT = "the {branch} branch does not exist on"
REASON_APART = "the branches do not coexist on"
REASON_LOWER = "the {branch} branch has the lower training loss wherever both exist"
#: A crossing below the semantic end (both under the pooled rule) is one with the branch's unresolved tail of
#: small theta: the semantic branch is lower wherever it is resolved, and takes over at its end.
REASON_BELOW_END = "the crossing lies below the semantic branch's end under the same rule"


def critical_alpha(params: TaskParams, solver=None, alphas=None, xtol: float = 1e-4, use_cache: bool = True,
                   alpha_range=DEFAULT_RANGE) -> float:
    """``alpha_c``: where the semantic and positional training losses are equal (book :eq:`eq-thresholds`).

    Both branches are traced by continuation (:func:`branch_trace`); the gap ``eps_t(sem) - eps_t(pos)`` is
    bracketed on the traces' points where both branches exist as distinct branches (their coexistence
    interval) at its first change from + to -, and refined by Brent's method to ``xtol`` on Newton-solved
    fixed points (``branch_point``). ``alphas`` (a grid) or ``alpha_range`` only set the range searched,
    so any grid that brackets the transition gives the same value.

    Raises
    ------
    ThresholdNotFound
        With the reason: a branch does not exist in the range, the branches do not coexist, or the gap does
        not change sign where they do.
    """
    check_params(params, "critical_alpha").require_two_tokens("critical_alpha")
    settings = continuation_settings(solver)
    lo, hi = _range(alpha_range, alphas)

    def compute():
        sem = branch_trace(params, "semantic", _trace_range(lo, hi), settings, use_cache)
        pos = branch_trace(params, "positional", _trace_range(lo, hi), settings, use_cache)
        if sem is None or pos is None:
            missing = "semantic" if sem is None else "positional"
            return {"value": None, "reason": f"{REASON_ABSENT.format(branch=missing)} [{lo:g}, {hi:g}]"}
        c_lo, c_hi = _coexistence(sem, pos)
        c_lo, c_hi = max(c_lo, lo), min(c_hi, hi)
        if not c_lo < c_hi:
            return {"value": None, "reason": f"{REASON_APART} [{lo:g}, {hi:g}] (semantic on "
                    f"[{sem.lower.alpha:.4g}, {sem.upper.alpha:.4g}], positional on [{pos.lower.alpha:.4g}, "
                    f"{pos.upper.alpha:.4g}])"}
        grid = np.unique(np.concatenate([sem.stable.alpha, pos.stable.alpha]))
        grid = np.unique(np.concatenate([[c_lo, c_hi], grid[(grid > c_lo) & (grid < c_hi)]]))
        gap = _interp(sem, "train_loss", grid) - _interp(pos, "train_loss", grid)
        br = _bracket(grid, gap)
        if br is None:
            lower = "semantic" if gap.max() < 0 else "positional" if gap.min() > 0 else "neither"
            return {"value": None, "reason": f"{REASON_LOWER.format(branch=lower)} ([{c_lo:.4g}, {c_hi:.4g}]); "
                    f"no transition on [{lo:g}, {hi:g}]"}
        fmaps = {b: FixedPointMap(params, b, settings.solver, settings.cheap) for b in ("semantic", "positional")}

        def f(a):
            return (branch_point(sem, a, settings, fmaps["semantic"]).train_loss
                    - branch_point(pos, a, settings, fmaps["positional"]).train_loss)

        a, b = br
        try:
            value = _root(f, a, b, xtol)
        except ValueError:  # the refined ends lost the sign change: keep the interpolated root
            ga, gb = gap[list(grid).index(a)], gap[list(grid).index(b)]
            value = a + (b - a) * ga / (ga - gb)
            warn_caller(f"alpha_c: Newton-solved gap lost its sign change on [{a:.4g}, {b:.4g}]; "
                        f"interpolated root {value:.5g}")
        return {"value": value, "reason": ""}

    out = cached("alpha-c", compute, use_cache=use_cache, params=params, settings=settings, alpha_range=(lo, hi),
                 xtol=xtol)
    if out["value"] is None:
        raise ThresholdNotFound(f"alpha_c (omega={params.omega:g}): {out['reason']}")
    return float(out["value"])


def linear_crossing_alpha(params: TaskParams, solver=None, alphas=None, xtol: float = 1e-4,
                          use_cache: bool = True, alpha_range=DEFAULT_RANGE) -> float:
    """``alpha_l``: the smallest ``alpha`` where the global minimum's test error falls below ``eps_lin``.

    The global minimum is the positional branch below ``alpha_c`` and the semantic one above (if there is no
    transition in the range, the branch that has the lower ``eps_t`` wherever both exist, or the only one
    that exists). Its ``eps_g`` jumps at ``alpha_c``; if the jump already takes it below ``eps_lin``,
    ``alpha_l = alpha_c``. Crossings are bracketed on the traces and refined by Brent's method on
    Newton-solved fixed points.

    Raises
    ------
    ThresholdNotFound
        If the global minimum's test error stays above ``eps_lin`` on the range.
    """
    check_params(params, "linear_crossing_alpha").require_two_tokens("linear_crossing_alpha")
    settings = continuation_settings(solver)
    lo, hi = _range(alpha_range, alphas)

    def compute():
        eps_lin = linear_baseline_error(params)
        traces = {b: branch_trace(params, b, _trace_range(lo, hi), settings, use_cache)
                  for b in ("semantic", "positional")}
        try:
            a_c = critical_alpha(params, settings, xtol=xtol, use_cache=use_cache, alpha_range=(lo, hi))
        except ThresholdNotFound:
            a_c = None
        pieces = []  # (branch, from, to) of the global minimum, in increasing alpha
        sem, pos = traces["semantic"], traces["positional"]
        if a_c is not None:
            pieces = [("positional", max(lo, pos.lower.alpha), a_c), ("semantic", a_c, min(hi, sem.upper.alpha))]
        else:
            for b, tr in traces.items():
                if tr is not None:
                    other = traces["positional" if b == "semantic" else "semantic"]
                    if other is None or energy_below(tr, other):
                        pieces = [(b, max(lo, tr.lower.alpha), min(hi, tr.upper.alpha))]
        for b, a, z in pieces:
            tr = traces[b]
            if not a < z:
                continue
            grid = np.unique(np.concatenate([[a, z], tr.stable.alpha[(tr.stable.alpha > a) & (tr.stable.alpha < z)]]))
            err = _interp(tr, "test_error", grid) - eps_lin
            if b == "semantic" and a_c is not None and branch_point(tr, a, settings).test_error < eps_lin:
                return {"value": a, "reason": ""}
            br = _bracket(grid, err)
            if br is None:
                continue
            fmap = FixedPointMap(params, b, settings.solver, settings.cheap)
            try:
                value = _root(lambda x: branch_point(tr, x, settings, fmap).test_error - eps_lin, *br, xtol)
            except ValueError:
                i = list(grid).index(br[0])
                value = grid[i] + (grid[i + 1] - grid[i]) * err[i] / (err[i] - err[i + 1])
            return {"value": value, "reason": ""}
        return {"value": None, "reason": f"the global minimum's test error stays above eps_lin = {eps_lin:.4g} "
                f"on [{lo:g}, {hi:g}]"}

    out = cached("alpha-l", compute, use_cache=use_cache, params=params, settings=settings, alpha_range=(lo, hi),
                 xtol=xtol)
    if out["value"] is None:
        raise ThresholdNotFound(f"alpha_l (omega={params.omega:g}): {out['reason']}")
    return float(out["value"])


def energy_below(trace: BranchTrace, other: BranchTrace) -> bool:
    """Whether ``trace`` has the lower training loss than ``other`` on their coexistence interval (at its
    middle, in log alpha), or ``other`` does not coexist with it."""
    lo = max(trace.lower.alpha, other.lower.alpha)
    hi = min(trace.upper.alpha, other.upper.alpha)
    if not lo < hi:
        return True
    mid = np.array([math.sqrt(lo * hi)])
    return bool(_interp(trace, "train_loss", mid)[0] <= _interp(other, "train_loss", mid)[0])

"""The thresholds ``alpha_c`` and ``alpha_l`` under the default (pooled) rule.

The continuation (:mod:`attnlib.theory.branches.continuation`) places the thresholds on branches traced under one fast
rule (:data:`attnlib.theory.branches.traces.SMOOTH_QUADRATURE`), while the lower end of the semantic branch is placed under
the pooled rule of :func:`attnlib.solve_chord` (:mod:`attnlib.theory.branches.pooled_end`). Two rules can disagree by a
few tenths of a per cent in ``alpha``, enough for a transition to fall below the end of a branch it needs. Here
both thresholds are moved onto the pooled rule, with the continuation's values as the start:

* ``alpha_c``, the root of the training-loss gap ``g(alpha) = eps_t(semantic) - eps_t(positional)`` (book
  :eq:`eq-thresholds`), each branch's fixed point solved by chord steps from its continuation trace
  (``start_rule=False``); the first step is Newton's with the slope of the continuation's gap, the next ones
  secant steps, in ``log alpha``;
* ``alpha_l``, the root of ``eps_g - eps_lin`` on the branch that is the global minimum there (semantic above
  ``alpha_c``, positional below), the same way; ``alpha_l = alpha_c`` where the jump of the global minimum's test
  error at ``alpha_c`` already takes it below ``eps_lin``.

The iteration stops when a step is below ``xtol`` in ``log alpha`` or below the root's own quadrature error:
the standard error of ``g`` over the pooled rule's scramblings divided by the slope (below it the pooled rule does
not define the root more finely). A branch that the pooled rule does not find at a point (the chord does not
converge, or the defining overlap collapses below half of the trace's), or a root that leaves the coexistence
interval of the traces, ends the search without a value, with the reason.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np

from ...cache import cached
from ...exceptions import ConvergenceWarning, ThresholdNotFound, warn_caller
from ...params import TaskParams
from ..solve.chord import CHORD_ORDER
from .continuation import BranchTrace
from ..model.generalisation import linear_baseline_error
from .pooled_end import pooled_point, pooled_seeds
from .threshold import Threshold
from .thresholds import critical_alpha, linear_crossing_alpha
from .traces import DEFAULT_RANGE, _interp, _range, _trace_range, branch_trace, continuation_settings

__all__ = ["pooled_root", "pooled_thresholds", "phase_thresholds", "THRESHOLD_XTOL",
           "THRESHOLD_MAX_EVALS"]

#: Step (in ``log alpha``) below which the root search stops.
THRESHOLD_XTOL = 1e-4
#: Evaluations of the function at most (each solves one fixed point per branch involved).
THRESHOLD_MAX_EVALS = 8
#: A branch counts as found at a point where its defining overlap keeps this fraction of the trace's value there.
THRESHOLD_COLLAPSE = 0.5


def _fixed_point(params, alpha, branch, trace: BranchTrace, seeds, order):
    """The pooled fixed point of ``branch`` at ``alpha`` from the trace's nearest point, and whether the branch
    is found there (converged, defining overlap above the floor and at least half of the trace's)."""
    return pooled_point(params, alpha, branch, trace.start_near(alpha), seeds, order, THRESHOLD_COLLAPSE)


def pooled_root(params: TaskParams, name: str, start: float, slope: float, value, interval: tuple,
                xtol: float = THRESHOLD_XTOL, max_evals: int = THRESHOLD_MAX_EVALS) -> Threshold:
    """The root of ``value`` near ``start`` by a Newton step with ``slope``, then secant steps, in ``log alpha``.

    Parameters
    ----------
    params : TaskParams
        The task (for the messages).
    name : str
        Name of the threshold.
    start : float
        The continuation's root, in ``(0, inf)``.
    slope : float
        ``d value / d log alpha`` at ``start`` under the continuation's rule (nonzero, finite).
    value : callable
        ``alpha -> (f, f_err)`` under the pooled rule, or None where a branch it needs is not found.
    interval : tuple of float
        Where a root may lie (the coexistence interval of the traces, for instance).
    xtol : float
        Step in ``log alpha`` below which the search stops.
    max_evals : int
        Evaluations at most.

    Returns
    -------
    Threshold
        ``converged=False`` with a :class:`~attnlib.exceptions.ConvergenceWarning` when no root was found.
    """
    t0 = time.perf_counter()
    if not (math.isfinite(slope) and slope != 0):
        raise ValueError(f"slope must be finite and nonzero, got {slope!r}")
    lo, hi = (math.log(a) for a in interval)
    xs, fs = [], []
    x, n = math.log(start), 0
    reason, err = "", math.nan
    while True:
        if not lo <= x <= hi:
            reason = f"the root left the interval [{interval[0]:.4g}, {interval[1]:.4g}] at alpha = {math.exp(x):.4g}"
            break
        out = value(math.exp(x))
        n += 1
        if out is None:
            reason = f"a branch is not found under the pooled rule at alpha = {math.exp(x):.4g}"
            break
        f, f_err = out
        xs.append(x)
        fs.append(f)
        s = slope if len(xs) < 2 or fs[-1] == fs[-2] else (fs[-1] - fs[-2]) / (xs[-1] - xs[-2])
        if not (math.isfinite(s) and s * slope > 0):
            s = slope   # a secant of the wrong sign is noise: keep the continuation's slope
        dx = -f / s
        err = abs(f_err / s)
        if abs(dx) < max(xtol, err):
            x += dx
            return Threshold(name=name, alpha=math.exp(x), err=math.exp(x) * err, start=start, n_evals=n,
                             converged=True, reason="", seconds=time.perf_counter() - t0)
        if n >= max_evals:
            reason = f"no convergence in {max_evals} evaluations (last step {dx:.2g} in log alpha)"
            break
        x += dx
    warn_caller(f"pooled {name} (omega={params.omega:g}): {reason}; started from {start:.5g}")
    return Threshold(name=name, alpha=math.nan, err=math.nan, start=start, n_evals=n, converged=False, reason=reason,
                     seconds=time.perf_counter() - t0)


def _gap_slope(sem: BranchTrace, pos: BranchTrace, alpha: float, column: str, eps_lin: float | None = None,
               h: float = 0.01) -> float:
    """``d/d log alpha`` of the traces' gap (``column`` semantic minus positional, or ``column`` of ``sem``
    minus ``eps_lin``) at ``alpha``, by a central difference of the interpolated traces."""
    a = np.array([alpha * math.exp(-h), alpha * math.exp(h)])
    if eps_lin is None:
        g = _interp(sem, column, a) - _interp(pos, column, a)
    else:
        g = _interp(sem, column, a)
    return float((g[1] - g[0]) / (2 * h))


def pooled_thresholds(params: TaskParams, sem: BranchTrace, pos: BranchTrace, alpha_c: float, alpha_l: float,
                      seeds, eps_lin: float, order: int = CHORD_ORDER) -> dict:
    """``alpha_c`` and ``alpha_l`` under the pooled rule with ``seeds``, from the continuation's values.

    Parameters
    ----------
    params : TaskParams
        The task.
    sem, pos : BranchTrace or None
        The continuation's traces of the two branches (starts of the solves, slopes, coexistence interval); None
        for a branch the continuation does not find (then there is no ``alpha_c``, and ``alpha_l`` lies on the
        other branch).
    alpha_c, alpha_l : float
        The continuation's thresholds (NaN where it has none: the pooled one is then NaN too).
    seeds : sequence of int
        The pooled rule's seed set (:func:`attnlib.theory.branches.pooled_end.pooled_seeds`).
    eps_lin : float
        The linear baseline's test error.
    order : int
        log2 of the points per scrambling.

    Returns
    -------
    dict
        ``alpha_c``, ``alpha_c_err``, ``alpha_c_evals``, ``reason_alpha_c`` and the same for ``alpha_l``.
    """
    seeds = tuple(int(s) for s in seeds)
    out = {}
    cache = {}

    def point(alpha, branch):
        key = (round(math.log(alpha), 12), branch)
        if key not in cache:
            cache[key] = _fixed_point(params, alpha, branch, sem if branch == "semantic" else pos, seeds, order)
        return cache[key]

    def gap(alpha):
        (ok_s, s), (ok_p, p) = point(alpha, "semantic"), point(alpha, "positional")
        if not (ok_s and ok_p):
            return None
        return s.train_loss - p.train_loss, math.hypot(s.stderr["train_loss"], p.stderr["train_loss"])

    def record(name, res: Threshold | None, reason=""):
        out[name] = res.alpha if res is not None else math.nan
        out[f"{name}_err"] = res.err if res is not None else math.nan
        out[f"{name}_evals"] = res.n_evals if res is not None else 0
        out[f"reason_{name}"] = (res.reason if res is not None else reason)

    res_c = None
    if math.isfinite(alpha_c) and (sem is None or pos is None):
        record("alpha_c", None, "a branch is not traced")
    elif math.isfinite(alpha_c):
        lo = max(sem.lower.alpha, pos.lower.alpha, float(sem.stable.alpha.min()), float(pos.stable.alpha.min()))
        hi = min(sem.upper.alpha, pos.upper.alpha, float(sem.stable.alpha.max()), float(pos.stable.alpha.max()))
        slope = _gap_slope(sem, pos, alpha_c, "train_loss")
        res_c = pooled_root(params, "alpha_c", alpha_c, slope, gap, (lo, hi))
        record("alpha_c", res_c)
    else:
        record("alpha_c", None, "the continuation has no alpha_c")
    if not math.isfinite(alpha_l):
        record("alpha_l", None, "the continuation has no alpha_l")
        return out
    a_c = res_c.alpha if res_c is not None and res_c.converged else math.nan

    def at_alpha_c():   # alpha_l is the pooled alpha_c (the jump there takes the error below eps_lin)
        out.update({"alpha_l": a_c, "alpha_l_err": out["alpha_c_err"], "alpha_l_evals": 1, "reason_alpha_l": ""})
        return out

    if math.isfinite(alpha_c) and alpha_l <= alpha_c * (1 + 1e-9):
        # the continuation's alpha_l is its alpha_c: the jump already takes the error below eps_lin
        if math.isfinite(a_c):
            ok, s = point(a_c, "semantic")
            if ok and s.test_error < eps_lin:
                return at_alpha_c()
        record("alpha_l", None, "alpha_l = alpha_c under the continuation, and the pooled alpha_c is missing or "
                                "its semantic test error is above eps_lin")
        return out
    branch = "semantic" if not math.isfinite(alpha_c) or alpha_l > alpha_c else "positional"
    tr, other = (sem, pos) if branch == "semantic" else (pos, sem)
    if tr is None:
        record("alpha_l", None, f"the {branch} branch is not traced")
        return out

    def excess(alpha):
        ok, fp = point(alpha, branch)
        return (fp.test_error - eps_lin, fp.stderr["test_error"]) if ok else None

    if branch == "semantic" and math.isfinite(a_c) and alpha_l < a_c * math.exp(0.02):
        at_c = excess(a_c)   # close above alpha_c: the jump may already take the error below eps_lin
        if at_c is not None and at_c[0] < 0:
            return at_alpha_c()

    slope = _gap_slope(tr, other, alpha_l, "test_error", eps_lin=eps_lin)
    if branch == "semantic":
        lo_l = a_c if math.isfinite(a_c) else float(tr.stable.alpha.min())
        interval = (lo_l, float(tr.stable.alpha.max()))
    else:
        interval = (float(tr.stable.alpha.min()), a_c if math.isfinite(a_c) else float(tr.stable.alpha.max()))
    record("alpha_l", pooled_root(params, "alpha_l", alpha_l, slope, excess, interval))
    return out


def phase_thresholds(params: TaskParams, solver=None, alpha_range=None, use_cache: bool = True) -> dict:
    """:func:`pooled_thresholds` for one point of the phase diagram, cached.

    The branches are traced and the continuation's thresholds found as :func:`attnlib.theory.branches.thresholds.critical_alpha`
    and :func:`~attnlib.theory.branches.thresholds.linear_crossing_alpha` do (``solver`` and ``alpha_range`` as there); the
    pooled rule's seed set is :func:`attnlib.theory.branches.pooled_end.pooled_seeds` of the continuation rule's scrambling
    (its quadrature ``seed``), as for the semantic end. Returns the dict of :func:`pooled_thresholds`, plus the
    continuation's values as ``alpha_c_trace`` and ``alpha_l_trace`` (NaN where it has none).
    """
    settings = continuation_settings(solver)
    lo, hi = _range(DEFAULT_RANGE if alpha_range is None else alpha_range, None)
    cont = {}
    for name, fn in (("alpha_c", critical_alpha), ("alpha_l", linear_crossing_alpha)):
        try:
            cont[name] = fn(params, settings, use_cache=use_cache, alpha_range=(lo, hi))
        except ThresholdNotFound:
            cont[name] = math.nan
    seeds = pooled_seeds(int(settings.solver.quadrature.seed))

    def compute():
        rng = _trace_range(lo, hi)
        sem = branch_trace(params, "semantic", rng, settings, use_cache)
        pos = branch_trace(params, "positional", rng, settings, use_cache)
        if sem is None and pos is None:
            return {"alpha_c": math.nan, "alpha_c_err": math.nan, "alpha_c_evals": 0,
                    "reason_alpha_c": "no branch is traced", "alpha_l": math.nan, "alpha_l_err": math.nan,
                    "alpha_l_evals": 0, "reason_alpha_l": "no branch is traced"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return pooled_thresholds(params, sem, pos, cont["alpha_c"], cont["alpha_l"], seeds,
                                     linear_baseline_error(params))

    out = cached("pooled-thresholds", compute, use_cache=use_cache, params=params, seeds=seeds, settings=settings,
                 alpha_range=(lo, hi), start=(cont["alpha_c"], cont["alpha_l"]), order=CHORD_ORDER,
                 xtol=THRESHOLD_XTOL, max_evals=THRESHOLD_MAX_EVALS, collapse=THRESHOLD_COLLAPSE)
    out = {k: (float(v) if k.startswith("alpha_") else v) for k, v in out.items()}   # the cache keeps 'nan' as text
    return {**out, "alpha_c_trace": cont["alpha_c"], "alpha_l_trace": cont["alpha_l"]}

"""Where a branch ends under the default (pooled) rule.

The continuation (:mod:`attnlib.theory.continuation`) follows a branch under one fast rule (a single scrambled
Sobol rule with tie smoothing). Near the lower end of the semantic branch ``theta`` is small, many quadrature
nodes sit near a tie of the proximal problem, and the curve is S-shaped at the scale of that rule's error (a fold,
a short unstable stretch, and a stable tail of small ``theta`` that vanishes further down): whether a continuation
reports the fold or the tail's vanishing, and where, changes from one scrambling to the next (book chapter 6).
Here the end is placed under the default rule of :func:`attnlib.solve_state_evolution`, the pooled scrambled
Sobol rules of :func:`attnlib.solve_chord`, by a sweep that needs no tangent:

1. from a point of the branch well inside it (``alpha0``), ``log alpha`` moves towards the end in steps of
   ``step`` (growing where the overlap changes little), each fixed point solved by chord steps from the last one found (``start_rule=False``), until
   the branch is no longer found: the chord does not converge, the defining overlap (:func:`defining_overlap`)
   falls below ``VANISH_FLOOR * rho``, or it collapses, to less than ``collapse`` (one half) of its value at the
   last point found. The collapse is the fold seen from the pooled rule: past it the chord lands on the tail of
   small ``theta`` (a few 1e-3 at omega = 0.3), whose value differs between independent seed sets by many of
   their standard errors, i.e. that no rule here resolves;
2. the last interval is bisected (in ``log alpha``) down to ``resolution``;
3. at a pitchfork the squared overlap is linear in ``alpha``: if its line through the last two points found
   reaches zero inside the bracket, the end is there (``"vanishes"``); otherwise the branch stops with a finite
   overlap (``"fold"``) and the end is the middle of the bracket.

The end's error is the bracket's half-width plus the pooled rule's own error, which the spread over independent
seed sets measures (:func:`attnlib.theory.sweeps.phase_diagram` uses one seed set per scrambling of the
continuation's rule, :func:`pooled_seeds`).

Because each point of that sweep starts from the last one found, and the tail of small ``theta`` has several
fixed points of the pooled rule, the end depends on the sweep's steps (by up to 0.05 in ``alpha`` at small
``omega``). :func:`level_end` is path-independent: every fixed point is solved from the continuation's
interpolation at its own ``alpha``, and the end is where ``theta`` falls to a resolution level
(:data:`END_LEVEL` ``* rho``), bracketed and bisected. At sigma = 0.5, lambda = 0.01 and ten ``omega`` in
``[0, 0.45]`` its spread over three disjoint seed sets is at most 0.017 (the sweep's 0.031), with half the fixed
points (``benchmarks/bench_semantic_end.py``). It is not the phase diagram's method: the level is a fixed fraction
of ``rho``, calibrated there, and where ``theta`` rises gently from the end it cuts off a part of the branch that
the rule does resolve (sigma = 0.4, omega = 0: 0.733 against the sweep's 0.543; lambda = 0.03, omega = 0.4: 0.942
against 0.718; the continuation follows the branch down to the sweep's end in both).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..exceptions import ConvergenceWarning
from ..params import TaskParams, check_alpha, check_finite_scalar, check_int
from .chord import CHORD_ORDER, CHORD_SEEDS, solve_chord
from .continuation import VANISH_FLOOR, BranchTrace, defining_overlap
from .state_evolution import Overlaps

__all__ = ["PooledEnd", "pooled_end", "pooled_point", "pooled_seeds", "semantic_end", "level_end", "END_STEP", "END_RESOLUTION",
           "END_COLLAPSE", "END_START", "END_LEVEL"]

#: First sweep step towards the end, in ``log alpha``; it grows by half while the defining overlap changes by
#: less than a fifth per step, up to :data:`END_MAX_STEP`.
END_STEP = 0.08
#: Largest sweep step, in ``log alpha``.
END_MAX_STEP = 0.3
#: Width (in ``log alpha``) to which the last interval of the sweep is bisected.
END_RESOLUTION = 0.004
#: A defining overlap that falls below this fraction of its value at the last point found has collapsed (the
#: branch has ended at a fold between the two points). At a pitchfork (``theta^2`` linear in ``alpha``) the bisection
#: still closes in on the vanishing point: a step is accepted while it is shorter than 3/4 of the distance left.
END_COLLAPSE = 0.5


def pooled_point(params: TaskParams, alpha: float, branch: str, start, seeds, order: int, collapse: float):
    """The pooled rule's fixed point of ``branch`` at ``alpha`` by chord steps from ``start`` (overlaps with
    ``q, m, V, theta``: a point found, or a point of a trace), and whether the branch is found there: the chord
    converged and the defining overlap is at least ``VANISH_FLOOR * rho`` and at least ``collapse`` times its
    value at ``start``. Returns ``(found, fixed_point)``; the chord's convergence warning is silenced (``found``
    carries it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fp = solve_chord(params, alpha, branch, start=Overlaps(start.q, start.m, start.V, start.theta),
                         order=order, seeds=tuple(int(s) for s in seeds), max_order=order, start_rule=False)
    d = defining_overlap(branch, fp)
    found = fp.converged and d >= VANISH_FLOOR * params.rho and d >= collapse * defining_overlap(branch, start)
    return found, fp


def pooled_seeds(scrambling: int) -> tuple:
    """The pooled rule's seed set that goes with scrambling ``scrambling`` of the continuation's rule: four seeds,
    ``4 s + 3`` to ``4 s + 6`` (scrambling 0 gives the default rule's seeds ``3, 4, 5, 6``), so that the seed sets of
    different scramblings are disjoint."""
    scrambling = check_int("scrambling", scrambling, 0)
    return tuple(range(4 * scrambling + 3, 4 * scrambling + 7))


@dataclass(frozen=True)
class PooledEnd:
    """The end of a branch under the pooled rule (:func:`pooled_end`).

    Attributes
    ----------
    branch, side : str
        ``"semantic"`` or ``"positional"``; ``"lower"`` or ``"upper"`` end.
    alpha : float
        The end; where ``converged`` is False, the last ``alpha`` at which the branch was found (it exists at least
        that far), NaN if it was not found at all.
    kind : str
        ``"vanishes"`` or ``"fold"`` (module docstring), ``"lost"`` when no end was bracketed.
    bracket : tuple of float
        ``(alpha found, alpha not found)`` around the end, the last two points of the sweep and bisection.
    overlap : float
        The defining overlap at the last point found.
    seeds : tuple of int
    order : int
        log2 of the points per scrambling of the pooled rule.
    n_solves : int
        Fixed points solved.
    converged : bool
        Whether the end was bracketed.
    seconds : float
    """

    branch: str
    side: str
    alpha: float
    kind: str
    bracket: tuple
    overlap: float
    seeds: tuple
    order: int
    n_solves: int
    converged: bool
    seconds: float

    def as_row(self) -> dict:
        """A flat row for tables."""
        return {"branch": self.branch, "side": self.side, "alpha": self.alpha, "kind": self.kind,
                "bracket_lo": min(self.bracket), "bracket_hi": max(self.bracket), "overlap": self.overlap,
                "seeds": ",".join(str(s) for s in self.seeds), "order": self.order, "n_solves": self.n_solves,
                "converged": self.converged, "seconds": self.seconds}


def _check_sweep(branch, side, step, resolution, max_solves):
    """The checks :func:`pooled_end` and :func:`level_end` share: ``(step, resolution, max_solves)`` checked."""
    if branch not in ("semantic", "positional"):
        raise ValueError(f"branch must be 'semantic' or 'positional', got {branch!r}")
    if side not in ("lower", "upper"):
        raise ValueError(f"side must be 'lower' or 'upper', got {side!r}")
    step = check_finite_scalar("step", step)
    if not step > 0:
        raise ValueError(f"step must lie in (0, inf), got {step!r}")
    resolution = check_finite_scalar("resolution", resolution)
    if not 0 < resolution <= step:
        raise ValueError(f"resolution must lie in (0, step={step:g}], got {resolution!r}")
    return step, resolution, check_int("max_solves", max_solves, 2)


def pooled_end(params: TaskParams, branch: str, side: str, alpha0: float, start: Overlaps,
               seeds=CHORD_SEEDS, order: int = CHORD_ORDER, step: float = END_STEP,
               resolution: float = END_RESOLUTION, collapse: float = END_COLLAPSE,
               alpha_limit: float | None = None, max_solves: int = 40, max_back: int = 12) -> PooledEnd:
    """The ``side`` end of ``branch`` under the pooled rule, by a sweep from ``alpha0`` (module docstring).

    Parameters
    ----------
    params : TaskParams
        The task.
    branch : {"semantic", "positional"}
        The branch.
    side : {"lower", "upper"}
        Which end: the sweep lowers ``alpha`` for ``"lower"``, raises it for ``"upper"``.
    alpha0 : float
        A sample complexity inside the branch, in ``(0, inf)``.
    start : Overlaps or BranchTrace
        The branch's overlaps at ``alpha0`` or near them; or a continuation trace of the branch, whose
        interpolation (:meth:`BranchTrace.start_near`) starts the solve at ``alpha0`` and, if the pooled rule does
        not find the branch there, at up to ``max_back`` points further from the end (steps of ``step``).
    seeds : sequence of int
        Seeds of the pooled rule (at least two; :func:`pooled_seeds`).
    order : int
        log2 of the points per scrambling (fixed: no doubling, so that every point of the sweep has the same
        rule).
    step : float
        Sweep step in ``log alpha``, ``> 0``.
    resolution : float
        Bracket width in ``log alpha`` at which the bisection stops, in ``(0, step]``.
    collapse : float
        In ``[0, 1)``: a point whose defining overlap is below this fraction of the last found one's is not on the
        branch (module docstring).
    alpha_limit : float, optional
        The sweep stops there (default: ``alpha0`` times or divided by ``e^2``); the end is then ``"lost"``.
    max_solves : int
        Fixed points solved at most.
    max_back : int
        With a trace as ``start``: steps back from ``alpha0`` at most.

    Returns
    -------
    PooledEnd
        ``converged=False`` (with a :class:`~attnlib.exceptions.ConvergenceWarning`) when the branch is not
        found at ``alpha0``, or when the sweep reaches ``alpha_limit`` or ``max_solves`` before an end.
    """
    t0 = time.perf_counter()
    step, resolution, max_solves = _check_sweep(branch, side, step, resolution, max_solves)
    alpha0 = check_alpha(alpha0)
    if not isinstance(start, (Overlaps, BranchTrace)):
        raise ValueError(f"start must be an Overlaps or BranchTrace instance, got {type(start).__name__}")
    collapse = check_finite_scalar("collapse", collapse)
    if not 0 <= collapse < 1:
        raise ValueError(f"collapse must lie in [0, 1), got {collapse!r}")
    sign = -1.0 if side == "lower" else 1.0
    limit = alpha0 * math.exp(2.0 * sign) if alpha_limit is None else check_alpha(alpha_limit)
    if (limit - alpha0) * sign <= 0:
        raise ValueError(f"alpha_limit must lie {'below' if side == 'lower' else 'above'} alpha0={alpha0:g}, "
                         f"got {limit!r}")
    seeds = tuple(int(s) for s in seeds)
    n_solves = 0

    def solve(alpha, last):
        """The pooled fixed point at ``alpha`` from ``last`` (a point found, or the start), and whether it is on
        the branch."""
        nonlocal n_solves
        n_solves += 1
        return pooled_point(params, alpha, branch, last, seeds, order, collapse)

    def result(alpha, kind, bracket, overlap, converged):
        if not converged:
            warnings.warn(f"pooled_end: no {side} end of the {branch} branch bracketed from alpha0={alpha0:g} "
                          f"(omega={params.omega:g}; {kind})", ConvergenceWarning, stacklevel=3)
        return PooledEnd(branch=branch, side=side, alpha=alpha, kind=kind if converged else "lost",
                         bracket=bracket, overlap=overlap, seeds=seeds, order=int(order), n_solves=n_solves,
                         converged=converged, seconds=time.perf_counter() - t0)

    a = alpha0
    backs = max_back if isinstance(start, BranchTrace) else 0
    for back in range(backs + 1):
        ok, fp = solve(a, start.start_near(a) if isinstance(start, BranchTrace) else start)
        if ok or back == backs:
            break
        a = a * math.exp(-sign * step)  # not found: further inside, from the trace
    if not ok:
        return result(math.nan, "the branch is not found at alpha0", (a, a), math.nan, False)
    found = [(a, fp)]  # the points found, in sweep order
    if a != alpha0:  # found only further inside: the end lies within the last step back
        missed = a * math.exp(sign * step)
    else:
        missed = None
    h = step
    while missed is None:
        if len(found) >= 2:
            d1, d2 = (defining_overlap(branch, f) for _, f in found[-2:])
            if abs(d2 / d1 - 1) < 0.2:
                h = min(1.5 * h, END_MAX_STEP)
        a = a * math.exp(sign * h)
        if (a - limit) * sign > 0 or n_solves >= max_solves:
            last = found[-1]
            return result(last[0], "the sweep reached its limit", (last[0], last[0]),
                          defining_overlap(branch, last[1]), False)
        ok, fp = solve(a, found[-1][1])
        if ok:
            found.append((a, fp))
        else:
            missed = a
    while abs(math.log(missed / found[-1][0])) > resolution and n_solves < max_solves:
        mid = math.sqrt(missed * found[-1][0])
        ok, fp = solve(mid, found[-1][1])
        if ok:
            found.append((mid, fp))
        else:
            missed = mid
    a_in, fp_in = found[-1]
    bracket = (a_in, missed)
    overlap = defining_overlap(branch, fp_in)
    kind, end = "fold", math.sqrt(a_in * missed)
    if len(found) >= 2:
        (a1, f1), (a2, f2) = found[-2], found[-1]
        y1, y2 = defining_overlap(branch, f1) ** 2, defining_overlap(branch, f2) ** 2
        if y1 > y2 and a1 != a2:
            zero = a2 - y2 * (a2 - a1) / (y2 - y1)  # the squared overlap's line reaches zero
            if min(a_in, missed) <= zero <= max(a_in, missed):
                kind, end = "vanishes", zero
    return result(float(end), kind, bracket, overlap, True)


#: The sweep of :func:`semantic_end` starts where the trace's ``theta`` is this fraction of its value at the top of
#: the range: well inside the branch, above the scale on which the continuation's end scatters.
END_START = 0.5


def semantic_end(params: TaskParams, solver=None, alpha_range=None, use_cache: bool = True) -> dict | None:
    """The lower end of the semantic branch under the pooled rule, as a row of :meth:`PooledEnd.as_row`, cached.

    The branch is traced by continuation (:func:`attnlib.theory.sweeps.branch_trace`, with ``solver`` and
    ``alpha_range`` as there); the sweep of :func:`pooled_end` starts, from the trace's points, at the smallest
    ``alpha`` above which the trace's ``theta`` stays above :data:`END_START` of its value at the top of the range,
    with the seed set :func:`pooled_seeds` of the continuation rule's
    scrambling (its quadrature ``seed``). None where the branch is not found, or where it reaches the lower end
    of the range.
    """
    from ..cache import cached
    from .sweeps import DEFAULT_RANGE, _range, _trace_range, branch_trace, continuation_settings

    settings = continuation_settings(solver)
    lo, hi = _trace_range(*_range(DEFAULT_RANGE if alpha_range is None else alpha_range, None))
    trace = branch_trace(params, "semantic", (lo, hi), settings, use_cache)
    if trace is None or trace.lower.kind == "range":
        return None
    seeds = pooled_seeds(int(settings.solver.quadrature.seed))
    st = trace.stable
    theta = st.theta.abs().to_numpy()
    below = st.alpha.to_numpy()[theta < END_START * theta[-1]]
    alpha0 = float(below.max()) if len(below) else float(st.alpha.min())
    alpha0 = float(st.alpha[st.alpha > alpha0].min()) if (st.alpha > alpha0).any() else alpha0

    def compute():
        return pooled_end(params, "semantic", "lower", alpha0, trace, seeds=seeds, alpha_limit=lo).as_row()

    return cached("pooled-end", compute, use_cache=use_cache, params=params, branch="semantic", side="lower",
                  alpha0=alpha0, seeds=seeds, settings=settings, alpha_range=(lo, hi), order=CHORD_ORDER,
                  step=END_STEP, resolution=END_RESOLUTION, collapse=END_COLLAPSE)


#: The resolution level of :func:`level_end`: a defining overlap below ``END_LEVEL * rho`` is not resolved by the
#: pooled rule of order :data:`~attnlib.theory.chord.CHORD_ORDER` near the semantic end (independent seed sets agree
#: on ``theta`` to a few 1e-3 above it, and scatter by its own size below it: the tail of small ``theta``).
END_LEVEL = 0.12


def level_end(params: TaskParams, branch: str, side: str, trace: BranchTrace, seeds=CHORD_SEEDS,
              order: int = CHORD_ORDER, level: float = END_LEVEL, resolution: float = END_RESOLUTION,
              step: float = 0.02, max_solves: int = 16) -> PooledEnd:
    """Where the defining overlap of ``branch`` falls to ``level * rho`` on its ``side``, under the pooled rule:
    the end of the part of the branch that the rule resolves.

    Unlike :func:`pooled_end`, which follows the branch point by point (each fixed point solved from the last
    one found, so that where the tail of small ``theta`` has several fixed points the end depends on the sweep's
    steps), every fixed point here is solved from the continuation trace's interpolation at its own ``alpha``
    (:meth:`BranchTrace.start_near`): the answer depends on ``alpha`` only, not on the path. A point is *above*
    the level where the chord converges with the defining overlap at least ``level * rho``, else *below*. The
    first point is where the trace crosses the level (linear in the squared overlap); steps of ``step`` in
    ``log alpha``, doubling, bracket the crossing; bisection in ``log alpha`` closes the bracket to
    ``resolution``. Inside the final bracket the end is interpolated linearly in the squared overlap when the
    point below is a converged fixed point with an overlap of at least half the level (kind ``"level"``: the
    overlap crosses the level continuously); otherwise the overlap jumps there (kind ``"fold"``) and the end is
    the bracket's middle.

    The level is in units of ``rho`` and calibrated at sigma = 0.5, lambda = 0.01, where independent seed sets
    agree on ``theta`` above it; elsewhere the resolved part of a branch can reach below it, and the end found
    here then lies above the branch's resolved end (module docstring).

    Parameters
    ----------
    params : TaskParams
        The task.
    branch : {"semantic", "positional"}
        The branch (defining overlap ``theta`` or ``m``).
    side : {"lower", "upper"}
        The end towards small (``"lower"``) or large ``alpha``.
    trace : BranchTrace
        The branch traced by continuation (starts and the first guess).
    seeds : sequence of int
        Seeds of the pooled rule (:func:`pooled_seeds`).
    order : int
        log2 of the points per scrambling (fixed, no doubling).
    level : float
        In ``(VANISH_FLOOR, 1)``: the resolution level, in units of ``rho``.
    resolution : float
        Final bracket width in ``log alpha``, in ``(0, step]``.
    step : float
        First bracketing step in ``log alpha``, ``> 0``.
    max_solves : int
        Fixed points solved at most.

    Returns
    -------
    PooledEnd
        ``kind`` ``"level"`` or ``"fold"``; ``"lost"`` with ``converged=False`` (and a
        :class:`~attnlib.exceptions.ConvergenceWarning`) when no crossing was bracketed within ``max_solves``
        solves or the trace's range.
    """
    t0 = time.perf_counter()
    step, resolution, max_solves = _check_sweep(branch, side, step, resolution, max_solves)
    if not isinstance(trace, BranchTrace):
        raise ValueError(f"trace must be a BranchTrace instance, got {type(trace).__name__}")
    level = check_finite_scalar("level", level)
    if not VANISH_FLOOR < level < 1:
        raise ValueError(f"level must lie in ({VANISH_FLOOR:g}, 1), got {level!r}")
    seeds = tuple(int(s) for s in seeds)
    target = level * params.rho
    sign = -1.0 if side == "lower" else 1.0   # direction towards the end
    st = trace.stable
    a_tr = st.alpha.to_numpy(float)
    d_tr = np.array([defining_overlap(branch, r) for r in st.itertuples()])
    if len(a_tr) == 0:
        raise ValueError("the trace has no points")
    solved = {}

    def solve(alpha):
        """(above the level?, defining overlap, converged?) of the pooled fixed point at ``alpha``."""
        if alpha not in solved:
            fp = pooled_point(params, alpha, branch, trace.start_near(alpha), seeds, order, 0.0)[1]
            d = defining_overlap(branch, fp)
            solved[alpha] = (bool(fp.converged) and d >= target, d, bool(fp.converged))
        return solved[alpha]

    def result(alpha, kind, bracket, overlap, converged):
        if not converged:
            warnings.warn(f"level_end: no {side} end of the {branch} branch bracketed at level {level:g} rho "
                          f"(omega={params.omega:g}; {kind})", ConvergenceWarning, stacklevel=3)
        return PooledEnd(branch=branch, side=side, alpha=alpha, kind=kind if converged else "lost",
                         bracket=bracket, overlap=overlap, seeds=seeds, order=int(order), n_solves=len(solved),
                         converged=converged, seconds=time.perf_counter() - t0)

    # first guess: the trace's last crossing of the level towards the end (squared overlap linear in alpha)
    order_idx = np.argsort(a_tr)[::-1] if side == "lower" else np.argsort(a_tr)
    a_seq, d_seq = a_tr[order_idx], d_tr[order_idx]
    above = d_seq >= target
    if not above[0]:
        a0 = float(a_seq[0])
    elif above.all():
        a0 = float(a_seq[-1])
    else:
        k = int(np.argmin(above))
        y1, y2 = d_seq[k - 1] ** 2, d_seq[k] ** 2
        a0 = float(a_seq[k - 1] + (target ** 2 - y1) * (a_seq[k] - a_seq[k - 1]) / (y2 - y1))
    limit_lo, limit_hi = a_tr.min() * math.exp(-2.0), a_tr.max() * math.exp(2.0)
    # bracket: a_in above the level, a_out below it; from above the level step towards the end, from below away
    a, h = a0, step
    a_in, a_out = (a0, None) if solve(a0)[0] else (None, a0)
    direction = sign if a_in is not None else -sign
    while a_in is None or a_out is None:
        a = a * math.exp(direction * h)
        if not limit_lo <= a <= limit_hi or len(solved) >= max_solves:
            if a_in is None:
                return result(math.nan, "the branch is not resolved in the trace's range", (a_out, a_out),
                              solve(a_out)[1], False)
            return result(a_in, "the sweep reached its limit", (a_in, a_in), solve(a_in)[1], False)
        if solve(a)[0]:
            a_in = a
        else:
            a_out = a
        h *= 2
    while abs(math.log(a_out / a_in)) > resolution:
        if len(solved) >= max_solves:
            return result(a_in, "max_solves reached before the resolution", (a_in, a_out), solve(a_in)[1], False)
        mid = math.sqrt(a_in * a_out)
        if solve(mid)[0]:
            a_in = mid
        else:
            a_out = mid
    _, d_in, _ = solve(a_in)
    _, d_out, conv_out = solve(a_out)
    if conv_out and d_out >= 0.5 * target:   # crosses the level continuously (d_out < target <= d_in)
        y_in, y_out = d_in ** 2, d_out ** 2
        end, kind = a_in + (target ** 2 - y_in) * (a_out - a_in) / (y_out - y_in), "level"
    else:                                     # jumps across the level: a fold of the resolved branch
        end, kind = math.sqrt(a_in * a_out), "fold"
    return result(float(end), kind, (a_in, a_out), d_in, True)

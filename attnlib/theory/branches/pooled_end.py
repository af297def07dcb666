"""Where a branch ends under the default (pooled) rule.

The continuation (:mod:`attnlib.theory.branches.continuation`) follows a branch under one fast rule (a single scrambled
Sobol rule with tie smoothing). Near the lower end of the semantic branch ``theta`` is small, many quadrature
nodes sit near a tie of the proximal problem, and the curve is S-shaped at the scale of that rule's error (a fold,
a short unstable stretch, and a stable tail of small ``theta`` that vanishes further down): whether a continuation
reports the fold or the tail's vanishing, and where, changes from one scrambling to the next (book chapter 6).
Here the end is placed under the default rule of :func:`attnlib.solve_state_evolution`, the pooled scrambled
Sobol rules of :func:`attnlib.solve_chord`, in two ways. :func:`pooled_end` sweeps, with no tangent:

1. from a point of the branch well inside it (``alpha0``), ``log alpha`` moves towards the end in steps of
   ``step`` (growing where the overlap changes little), each fixed point solved by chord steps from the last one
   found (``start_rule=False``), until
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
seed sets measures.

Because each point of that sweep starts from the last one found, and the tail of small ``theta`` has several
fixed points of the pooled rule, the end depends on the sweep's steps (by up to 0.05 in ``alpha`` at small
``omega``). :func:`agreement_end` is path-independent: at each ``alpha`` the fixed points of three disjoint seed
sets (each of :data:`AGREEMENT_ORDER`, one doubling above the default rule's) are solved from the continuation's
interpolation at that ``alpha``, and the end is the last ``alpha`` at which they still agree (within
:data:`END_AGREEMENT` of their mean), bracketed and bisected: the end of the part of the branch that the rule
resolves, measured directly. :func:`semantic_end`, the phase diagram's semantic end (three disjoint seed sets per
scrambling of the continuation's rule, :func:`agreement_seeds`), uses it (``benchmarks/bench_semantic_end.py``
compares it with the sweep), and so does :func:`positional_end`, the positional branch's upper end where the
continuation stops inside the range (its single rule's wiggles stop it early): from the continuation's last point
the sets step on in growing steps, beyond the trace each set solved from its own fixed point at the nearest
agreement (halfway there first where its chord fails: a chord from too far off fails although the branch goes on,
which would end the branch wherever a step happened to be long). A fixed resolution level (the end where
``theta`` falls to a set fraction of ``rho``) was tried too and dropped: calibrated at one (sigma, lambda), it cuts
off resolved parts of the branch elsewhere (sigma = 0.4, omega = 0: 0.733 against 0.54-0.56 for both methods here).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ...cache import cached
from ...exceptions import ConvergenceWarning, warn_caller
from ...params import TaskParams, check_alpha, check_finite_scalar, check_int
from ..solve.chord import CHORD_ORDER, CHORD_SEEDS, solve_chord
from .continuation import BranchTrace
from ..model.status import VANISH_FLOOR, defining_overlap
from ..model.state_evolution import Overlaps
from .traces import DEFAULT_RANGE, _range, _trace_range, branch_trace, continuation_settings

__all__ = ["PooledEnd", "pooled_end", "pooled_point", "pooled_seeds", "semantic_end", "positional_end",
           "agreement_end", "agreement_seeds", "END_STEP", "END_RESOLUTION", "END_COLLAPSE", "END_AGREEMENT",
           "AGREEMENT_START", "AGREEMENT_ORDER", "AGREEMENT_RESOLUTION", "POSITIONAL_STEP", "POSITIONAL_MAX_STEP",
           "CHAIN_MIN_STEP"]

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


def pooled_point(params: TaskParams, alpha: float, branch: str, start, seeds, order: int, collapse: float,
                 own_jacobian: bool = False):
    """The pooled rule's fixed point of ``branch`` at ``alpha`` by chord steps from ``start`` (overlaps with
    ``q, m, V, theta``: a point found, or a point of a trace), and whether the branch is found there: the chord
    converged and the defining overlap is at least ``VANISH_FLOOR * rho`` and at least ``collapse`` times its
    value at ``start``. Returns ``(found, fixed_point)``; the chord's convergence warning is silenced (``found``
    carries it). ``own_jacobian`` as in :func:`attnlib.solve_chord`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fp = solve_chord(params, alpha, branch, start=Overlaps(start.q, start.m, start.V, start.theta),
                         order=order, seeds=tuple(int(s) for s in seeds), max_order=order, start_rule=False,
                         own_jacobian=own_jacobian)
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
        ``"vanishes"`` or ``"fold"`` (:func:`pooled_end`), ``"agreement"`` (:func:`agreement_end`), ``"lost"`` when
        no end was bracketed.
    bracket : tuple of float
        ``(alpha found, alpha not found)`` around the end, the last two points of the sweep and bisection.
    overlap : float
        The defining overlap at the last point found.
    train_loss : float
        The training loss ``eps_t`` there (:func:`agreement_end`: the sets' mean; NaN from :func:`pooled_end`).
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
    train_loss: float
    seeds: tuple
    order: int
    n_solves: int
    converged: bool
    seconds: float

    def as_row(self) -> dict:
        """A flat row for tables."""
        return {"branch": self.branch, "side": self.side, "alpha": self.alpha, "kind": self.kind,
                "bracket_lo": min(self.bracket), "bracket_hi": max(self.bracket), "overlap": self.overlap,
                "train_loss": self.train_loss,
                "seeds": ",".join(str(s) for s in self.seeds), "order": self.order, "n_solves": self.n_solves,
                "converged": self.converged, "seconds": self.seconds}


def _check_sweep(branch, side, step, resolution, max_solves):
    """The checks :func:`pooled_end` and :func:`agreement_end` share: ``(step, resolution, max_solves)`` checked."""
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
            warn_caller(f"pooled_end: no {side} end of the {branch} branch bracketed from alpha0={alpha0:g} "
                        f"(omega={params.omega:g}; {kind})")
        return PooledEnd(branch=branch, side=side, alpha=alpha, kind=kind if converged else "lost",
                         bracket=bracket, overlap=overlap, train_loss=math.nan, seeds=seeds, order=int(order),
                         n_solves=n_solves, converged=converged, seconds=time.perf_counter() - t0)

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


def _end_of_trace(params: TaskParams, branch: str, side: str, solver, alpha_range, use_cache: bool, key: str,
                  stops_inside, key_extra: dict, **options) -> dict | None:
    """:func:`agreement_end` of ``branch`` on its continuation trace (the phase diagram's settings and range, the
    seed sets :func:`agreement_seeds` of the continuation rule's scrambling; ``options`` passed on, ``edge=True``
    for the range's end on ``side``) as a cached row, under cache key ``key`` with every setting and
    ``key_extra``; None where the branch is not found or ``stops_inside(trace)`` is False."""
    settings = continuation_settings(solver)
    lo, hi = _trace_range(*_range(DEFAULT_RANGE if alpha_range is None else alpha_range, None))
    trace = branch_trace(params, branch, (lo, hi), settings, use_cache)
    if trace is None or not stops_inside(trace):
        return None
    sets = agreement_seeds(int(settings.solver.quadrature.seed))
    edge = {"upper": hi, "lower": lo}[side] if options.pop("edge", False) else None

    def compute():
        end = agreement_end(params, branch, side, trace, seed_sets=sets, edge=edge, **options)
        if branch == "positional" and _off_trace(end, trace):
            return None
        row = end.as_row()
        if branch == "positional":
            row["gap"] = _semantic_gap(params, row, sets, settings, (lo, hi), use_cache)
        return row

    key_options = {k: v for k, v in options.items() if k != "chain"}
    return cached(key, compute, use_cache=use_cache, params=params, branch=branch, side=side, seed_sets=sets,
                  settings=settings, alpha_range=(lo, hi), order=AGREEMENT_ORDER, tolerance=END_AGREEMENT,
                  resolution=AGREEMENT_RESOLUTION, **key_options, **key_extra)


def _off_trace(end: PooledEnd, trace: BranchTrace) -> bool:
    """Whether the seed sets agreed only away from the traced branch: an end inside the trace (below its last point
    towards the end) at which the sets' mean defining overlap is below :data:`END_COLLAPSE` times the trace's there.
    They then never resolved the traced branch near its end, and their agreement is on a collapsed value (the
    positional branch of the alternative A at omega = 0.1, whose m is ~0.02: the sets agree only at alpha = 0.2,
    on m = 0.005 against the trace's 0.015)."""
    if end.kind != "agreement":
        return False
    a = min(end.bracket) if end.side == "upper" else max(end.bracket)
    st = trace.stable.alpha
    inside = a < st.max() if end.side == "upper" else a > st.min()
    return bool(inside and end.overlap < END_COLLAPSE * defining_overlap(end.branch, trace.start_near(a)))


def _semantic_gap(params: TaskParams, row: dict, sets, settings, alpha_range, use_cache: bool) -> float:
    """``eps_t(semantic) - eps_t(positional)`` at the resolved side of a positional end ``row`` (positive: the
    positional branch is still the lower there), both the means of the seed sets ``sets``, the semantic fixed points
    solved from the semantic branch's continuation trace; NaN where the end was not placed or the semantic branch is
    not resolved there (a set does not converge, or its ``theta`` is below ``VANISH_FLOOR * rho``)."""
    alpha = row["bracket_lo"]
    if row["kind"] not in ("agreement", "range") or not math.isfinite(row["train_loss"]):
        return math.nan
    trace = branch_trace(params, "semantic", alpha_range, settings, use_cache)
    if trace is None or alpha < trace.stable.alpha.min():
        return math.nan
    losses = []
    for ss in sets:
        fp = pooled_point(params, alpha, "semantic", trace.start_near(alpha), ss, AGREEMENT_ORDER, 0.0)[1]
        if not (fp.converged and fp.mean["theta"] >= VANISH_FLOOR * params.rho):
            return math.nan
        losses.append(fp.mean["train_loss"])
    return float(np.mean(losses)) - row["train_loss"]


def semantic_end(params: TaskParams, solver=None, alpha_range=None, use_cache: bool = True) -> dict | None:
    """The lower end of the semantic branch under the pooled rule (:func:`agreement_end`), as a row of
    :meth:`PooledEnd.as_row`, cached.

    The branch is traced by continuation (:func:`attnlib.theory.branches.traces.branch_trace`, with ``solver`` and
    ``alpha_range`` as there); the end is the last ``alpha`` at which the three seed sets :func:`agreement_seeds`
    of the continuation rule's scrambling (its quadrature ``seed``) agree on the branch, each fixed point solved from
    the trace. None where the branch is not found, or where it reaches the lower end of the range.
    """
    return _end_of_trace(params, "semantic", "lower", solver, alpha_range, use_cache, "agreement-end",
                         lambda trace: trace.lower.kind != "range", {"start": AGREEMENT_START})


def positional_end(params: TaskParams, solver=None, alpha_range=None, use_cache: bool = True) -> dict | None:
    """The upper end of the positional branch under the pooled rule (:func:`agreement_end`), as a row of
    :meth:`PooledEnd.as_row`, cached.

    The branch is traced by continuation (:func:`attnlib.theory.branches.traces.branch_trace`, ``solver`` and
    ``alpha_range`` as there). Where the continuation stops inside the range (a fold or a lost branch: under its
    single rule, small S-shaped wiggles of the curve stop it early, by up to 0.2 in ``alpha`` at omega = 0.1),
    the end is the last ``alpha`` at which the three seed sets :func:`agreement_seeds` of the continuation rule's
    scrambling agree on ``m``: from the trace's last point, steps of :data:`POSITIONAL_STEP` growing by half up
    to :data:`POSITIONAL_MAX_STEP` while they agree, each set solved from its own fixed point at the nearest
    agreement (``chain`` of :func:`agreement_end`), up to the top of the range (kind ``"range"`` when
    they still agree there). None where the branch is not found, where the continuation reaches the top of the
    range, or where the sets agree only off the traced branch (at an ``alpha`` of the trace, on a defining overlap
    below half the trace's there): the continuation's own end stands there. The row has one more entry, ``gap``:
    the semantic minus the positional training loss at the end's resolved side (both the seed sets' means; NaN
    where the semantic branch is not resolved there), which says whether the positional branch is still the lower
    one where it ends (:func:`attnlib.theory.studies.sweeps.semantic_takeover`).
    """
    return _end_of_trace(params, "positional", "upper", solver, alpha_range, use_cache, "positional-end",
                         lambda trace: trace.upper.kind != "range", {}, step=POSITIONAL_STEP, grow=1.5,
                         max_step=POSITIONAL_MAX_STEP, edge=True, chain=True, max_solves=POSITIONAL_MAX_SOLVES)


#: Largest relative spread (``(max - min) / mean``) of the defining overlap over independent seed sets at which
#: :func:`agreement_end` counts them as agreeing. Above the semantic end the sets agree to ~10 % whatever the size
#: of ``theta`` (0.04 rho at sigma = 0.4, 0.15 rho at omega = 0.425); just below it they part by 50-130 %.
END_AGREEMENT = 0.25


def agreement_seeds(scrambling: int, n_sets: int = 3) -> tuple:
    """The ``n_sets`` disjoint seed sets of :func:`agreement_end` that go with scrambling ``scrambling`` of the
    continuation's rule: :func:`pooled_seeds` of ``n_sets * scrambling`` to ``n_sets * scrambling + n_sets - 1``, so
    that different scramblings use disjoint sets (scrambling 0 includes the default rule's seeds)."""
    scrambling = check_int("scrambling", scrambling, 0)
    n_sets = check_int("n_sets", n_sets, 2)
    return tuple(pooled_seeds(n_sets * scrambling + k) for k in range(n_sets))


#: log2 of the points per scrambling of the seed sets of :func:`agreement_end`: one doubling above the default
#: rule's. With the default rule's own order the end spreads over scramblings by up to 0.046 in alpha at sigma = 0.5,
#: lambda = 0.01 (the sets' fixed points near the end depend on the start), with this one by 0.013 at most at the
#: three omega where it spread most (``benchmarks/bench_semantic_end.py``).
AGREEMENT_ORDER = CHORD_ORDER + 1
#: Final bracket width of :func:`agreement_end`, in ``log alpha`` (1 %: 0.006 in alpha at the semantic end, a third
#: of the spread over scramblings).
AGREEMENT_RESOLUTION = 0.01
#: :func:`agreement_end` starts where the continuation trace's defining overlap falls to this fraction of ``rho``
#: (a first guess near the end, from above: below the end independent seed sets can agree by chance in the tail).
AGREEMENT_START = 0.15


#: Shortest step in ``log alpha`` from a seed set's own fixed point at an agreement to a point beyond the trace
#: (:func:`agreement_end` with ``chain``): a chord that fails from farther off is tried again from halfway.
CHAIN_MIN_STEP = 0.02
#: First step of :func:`positional_end` beyond the continuation's last point, in ``log alpha``.
POSITIONAL_STEP = 0.04
#: Longest step of :func:`positional_end` (the steps grow by half while the seed sets agree: the end can lie up to
#: 0.3 in ``log alpha`` beyond the continuation's last point, or the branch can reach the top of the range).
POSITIONAL_MAX_STEP = 0.16
#: Fixed points solved at most by :func:`positional_end` (beyond the trace a set whose chord fails is solved again
#: from nearer; 11-30 solves at sigma = 0.5, lambda = 0.01, omega 0.05-0.2).
POSITIONAL_MAX_SOLVES = 90


def _bracket_end(test, a0: float, sign: float, step: float, resolution: float, limits: tuple, exhausted,
                 grow: float = 1.0, max_step: float | None = None, edge: float | None = None):
    """Bracket and bisect, in ``log alpha``, where the path-independent predicate ``test(alpha)`` (True: the branch
    is resolved there) first turns False in the direction ``sign`` (-1: towards small ``alpha``). From ``a0``, equal
    steps of ``step`` go towards the end while the test holds (so that a chance True beyond the first False is never
    reached), or away from it until it holds, inside ``limits``; bisection then closes the bracket to
    ``resolution``. ``exhausted()`` says when the solve budget is spent. With ``grow > 1`` every step towards the
    end after one where the test held is ``grow`` times longer, up to ``max_step``. With ``edge`` (the end of the
    computed range in the direction ``sign``), the steps towards the end stop there: a test that holds at ``edge``
    ends the search (the branch reaches the range's end).

    Returns ``(a_in, a_out, why)``: the last ``alpha`` where the test holds and the first where it fails (None
    where not found), and an empty string, ``"range"`` when the test held at ``edge``, or the reason no bracket
    of width ``resolution`` was reached."""
    max_step = step if max_step is None else max_step
    a = a0
    a_in, a_out = (a0, None) if test(a0) else (None, a0)
    direction = sign if a_in is not None else -sign
    while a_in is None or a_out is None:
        a = a * math.exp(direction * step)
        if edge is not None and direction == sign and (a - edge) * sign >= 0:
            a = edge
        if not limits[0] <= a <= limits[1] or exhausted():
            why = ("the branch is not resolved in the trace's range" if a_in is None
                   else "the sweep reached its limit")
            return a_in, a_out, why
        if test(a):
            a_in = a
            if a == edge:
                return a_in, None, "range"
            if direction == sign:
                step = min(step * grow, max_step)
        else:
            a_out = a
    while abs(math.log(a_out / a_in)) > resolution:
        if exhausted():
            return a_in, a_out, "max_solves reached before the resolution"
        mid = math.sqrt(a_in * a_out)
        if test(mid):
            a_in = mid
        else:
            a_out = mid
    return a_in, a_out, ""


def agreement_end(params: TaskParams, branch: str, side: str, trace: BranchTrace, seed_sets=None,
                  order: int = AGREEMENT_ORDER, tolerance: float = END_AGREEMENT,
                  resolution: float = AGREEMENT_RESOLUTION,
                  step: float = 0.04, max_solves: int = 60, grow: float = 1.0, max_step: float | None = None,
                  edge: float | None = None, chain: bool = False) -> PooledEnd:
    """The ``side`` end of the part of ``branch`` that the pooled rule resolves: the last ``alpha`` towards the
    end at which independent seed sets of the rule still agree on the branch's fixed point.

    At each ``alpha`` every seed set's fixed point is solved by chord steps from the continuation trace's
    interpolation at that ``alpha`` (:meth:`BranchTrace.start_near`), so the answer depends on ``alpha`` and the
    trace only, not on a path (unlike :func:`pooled_end`, where each point starts from the last one found and, in
    the tail of small ``theta``, whose fixed points differ from one seed set to the next, the end depends on the
    sweep's steps). The
    sets *agree* when every chord converges, every defining overlap is at least ``VANISH_FLOOR * rho``, and their
    spread ``max - min`` is at most ``tolerance`` times their mean. Near the semantic end this is the rule's
    resolution measured directly: above the end independent sets agree on ``theta`` to ~10 % whatever its size,
    just below it they part at once (some collapse, others stay in a slowly falling tail). No level calibrated at
    one (sigma, lambda) is needed. Near the end a seed set can have several fixed points, and which one the chord
    reaches depends on the start, so that the end still depends on the trace, by up to 0.046 in ``alpha`` over
    scramblings under the default rule's order; the seed sets here are one doubling larger
    (:data:`AGREEMENT_ORDER`), which resolves the branch further down and brings that spread to 0.013 at most.

    The first ``alpha`` is where the trace's defining overlap falls to :data:`AGREEMENT_START` ``* rho`` (its end
    if it stays above); equal steps of ``step`` in ``log alpha`` go towards the end while the sets agree, or away
    from it until they do, and bisection in ``log alpha`` closes the bracket to ``resolution``. Stepping from the
    agreeing side matters: in the tail below the end the sets can agree by chance (a doubling bracket from the
    trace's own end found such points, with ``theta`` of 0.01-0.02 ``rho``, 0.03 below the end). The end is the
    bracket's geometric middle (kind ``"agreement"``); its error is the bracket's half-width plus the spread over
    other triples of seed sets (:func:`agreement_seeds` of other scramblings).

    Parameters
    ----------
    params : TaskParams
        The task.
    branch : {"semantic", "positional"}
        The branch (defining overlap ``theta`` or ``m``).
    side : {"lower", "upper"}
        The end towards small (``"lower"``) or large ``alpha``.
    trace : BranchTrace
        The branch traced by continuation (the starts and the first ``alpha``).
    seed_sets : sequence of sequences of int, optional
        At least two disjoint seed sets of the pooled rule (default :func:`agreement_seeds` ``(0)``).
    order : int
        log2 of the points per scrambling of every seed set (fixed, no doubling).
    tolerance : float
        Largest relative spread counted as agreement, in ``(0, 2)``.
    resolution : float
        Final bracket width in ``log alpha``, in ``(0, step]``.
    step : float
        First bracketing step in ``log alpha``, ``> 0``.
    max_solves : int
        Fixed points solved at most (all seed sets together).
    grow : float
        ``>= 1``: each step towards the end after one at which the sets agreed is this many times longer, up to
        ``max_step`` (for an end that can lie far beyond the trace's last point).
    max_step : float, optional
        Longest step in ``log alpha`` (default ``step``), ``>= step``.
    edge : float, optional
        The end of the computed range on ``side``: the steps stop there, and sets that agree at ``edge`` give the
        kind ``"range"`` (the branch reaches the end of the range; ``alpha = edge``).
    chain : bool
        Beyond the trace's last point on ``side`` (where :meth:`BranchTrace.start_near` has only that point), each
        set is solved from its own fixed point at the nearest ``alpha`` where the sets agreed; where its chord fails
        there, the sets are solved first halfway (recursively, down to steps of :data:`CHAIN_MIN_STEP`) and the set
        again from its fixed point there; and each set's defining overlap must be at least :data:`END_COLLAPSE`
        times the sets' mean at that agreement (a collapse past a fold is not the branch). Every chord takes its
        step from the pooled rule's own Jacobian at its start (``own_jacobian`` of :func:`attnlib.solve_chord`).
        The end can then depend on the steps taken beyond the trace, not only on ``alpha`` and the trace, but by
        less than the spread over scramblings: at omega = 0.05 (sigma = 0.5, lambda = 0.01, seed sets of
        scrambling 0) it is 1.082 from a trace lost at 0.763 and 1.049 from the same trace cut at 0.75 (spread
        over scramblings 0.067); with neither the halving nor the own Jacobian (an earlier version), 0.928 from the
        trace lost at 0.763 against 1.083 from one that folds at 1.078 (the same code, a proximal kernel differing
        at round-off).

    Returns
    -------
    PooledEnd
        ``seeds`` all the sets' seeds in order, ``overlap`` the sets' mean defining overlap at the last ``alpha``
        where they agree; kind ``"range"`` when they agree at ``edge``; ``"lost"`` with ``converged=False`` (and a
        :class:`~attnlib.exceptions.ConvergenceWarning`) when no change was bracketed within ``max_solves`` solves
        or the trace's range (``alpha`` then the last agreement found, NaN if none).
    """
    t0 = time.perf_counter()
    step, resolution, max_solves = _check_sweep(branch, side, step, resolution, max_solves)
    if not isinstance(trace, BranchTrace):
        raise ValueError(f"trace must be a BranchTrace instance, got {type(trace).__name__}")
    sets = agreement_seeds(0) if seed_sets is None else tuple(tuple(int(s) for s in ss) for ss in seed_sets)
    flat = [s for ss in sets for s in ss]
    if len(sets) < 2 or any(len(ss) < 2 for ss in sets) or len(set(flat)) != len(flat):
        raise ValueError(f"seed_sets must be at least two disjoint sets of at least two seeds, got {seed_sets!r}")
    tolerance = check_finite_scalar("tolerance", tolerance)
    if not 0 < tolerance < 2:
        raise ValueError(f"tolerance must lie in (0, 2), got {tolerance!r}")
    grow = check_finite_scalar("grow", grow)
    if not grow >= 1:
        raise ValueError(f"grow must lie in [1, inf), got {grow!r}")
    max_step = step if max_step is None else check_finite_scalar("max_step", max_step)
    if not max_step >= step:
        raise ValueError(f"max_step must lie in [step={step:g}, inf), got {max_step!r}")
    if edge is not None:
        edge = check_alpha(edge)
    sign = -1.0 if side == "lower" else 1.0   # direction towards the end
    st = trace.stable
    a_tr = st.alpha.to_numpy(float)
    if len(a_tr) == 0:
        raise ValueError("the trace has no points")
    floor = VANISH_FLOOR * params.rho
    solved = {}   # alpha -> (agree, mean defining overlap, the sets' fixed points)
    n_solves = 0
    outermost = a_tr.min() if side == "lower" else a_tr.max()

    def on_branch(fp, reference):
        """Converged, above the vanishing floor, and (beyond the trace, ``reference`` > 0) not collapsed from the
        mean defining overlap at the nearest agreement: past a fold the chord can land on the tail."""
        d = defining_overlap(branch, fp)
        return bool(fp.converged) and d >= floor and d >= END_COLLAPSE * reference

    def test(alpha):
        """Whether the seed sets agree at ``alpha`` (their mean overlap kept in ``solved``)."""
        nonlocal n_solves
        if alpha not in solved:
            start, ref = trace.start_near(alpha), None
            if chain and (alpha - outermost) * sign > 0:
                agreed = [a for a, v in solved.items() if v[0]]
                if agreed:
                    ref = min(agreed, key=lambda a: abs(math.log(a / alpha)))
            d, fps, ok = [], [], True
            for k, ss in enumerate(sets):
                near = ref
                if ref is None:
                    n_solves += 1
                    fp = pooled_point(params, alpha, branch, start, ss, order, 0.0, chain)[1]
                while near is not None:
                    # beyond the trace, whose last point can be too far off: from this set's own fixed point at
                    # the nearest agreement; where that fails, from a nearer one, the sets solved first halfway
                    # there (down to steps of CHAIN_MIN_STEP: a chord from too far off fails or collapses although
                    # the branch goes on)
                    f = solved[near][2][k]
                    n_solves += 1
                    fp = pooled_point(params, alpha, branch, Overlaps(f.q, f.m, f.V, f.theta), ss, order, 0.0,
                                      chain)[1]
                    if on_branch(fp, solved[ref][1]):
                        break
                    mid = math.sqrt(near * alpha)
                    near = mid if abs(math.log(alpha / near)) > 2.0 * CHAIN_MIN_STEP and test(mid) else None
                fps.append(fp)
                d.append(defining_overlap(branch, fp))
                ok = ok and on_branch(fp, 0.0 if ref is None else solved[ref][1])
                left = len(sets) - len(d)
                if not ok or max(d) - min(d) > tolerance * (sum(d) + left * max(d)) / len(sets):
                    # one set off the branch, or a spread that the remaining sets cannot bring within the
                    # tolerance (they cannot narrow it, and raise the mean most by lying at the largest value);
                    # with every set solved (left = 0) this is the agreement criterion itself
                    ok = False
                    break
            solved[alpha] = (ok, float(np.mean(d)), fps)
        return solved[alpha][0]

    d_tr = np.array([defining_overlap(branch, r) for r in st.itertuples()])
    seq = np.argsort(a_tr)[::-1] if side == "lower" else np.argsort(a_tr)   # from inside towards the end
    below = np.nonzero(d_tr[seq] < AGREEMENT_START * params.rho)[0]
    a0 = float(a_tr[seq][below[0]] if len(below) else a_tr[seq][-1])
    limits = (a_tr.min() * math.exp(-2.0), a_tr.max() * math.exp(2.0))
    if edge is not None and (a0 - edge) * sign > 0:
        a0 = edge
    a_in, a_out, why = _bracket_end(test, a0, sign, step, resolution, limits,
                                    lambda: n_solves + len(sets) > max_solves, grow, max_step, edge)
    converged = why in ("", "range")
    found = [a for a in (a_in, a_out) if a is not None]
    bracket = tuple(found) if len(found) == 2 else (found[0], found[0])
    if why == "range":
        end = edge
    elif converged:
        end = math.sqrt(a_in * a_out)
    else:
        end = math.nan if a_in is None else a_in
        warn_caller(f"agreement_end: no {side} end of the {branch} branch bracketed (omega={params.omega:g}; "
                    f"{why})")
    kind = "range" if why == "range" else "agreement" if converged else "lost"
    return PooledEnd(branch=branch, side=side, alpha=float(end), kind=kind,
                     bracket=tuple(float(b) for b in bracket),
                     overlap=solved[a_in][1] if a_in is not None else math.nan,
                     train_loss=(float(np.mean([f.mean["train_loss"] for f in solved[a_in][2]]))
                                 if a_in is not None else math.nan),
                     seeds=tuple(flat), order=int(order), n_solves=n_solves, converged=converged,
                     seconds=time.perf_counter() - t0)

"""Studies built on the branches: sweeps along ``alpha``, branch ends and the phase diagram.

Point-wise, by the state-evolution iteration (fast; default Gauss-Hermite rule):

* :func:`branch_curve` follows one branch along an ``alpha`` grid with warm starts
  (:func:`attnlib.theory.solve.branch_points.follow_branch`).
* :func:`alpha_sweep` gives both branches as a tidy :class:`pandas.DataFrame` (one row per point), cached.
* :func:`branch_curvature`: curvature of ``eps_t`` across a branch along its held overlap (a diagnostic).

On the continuation traces (:mod:`attnlib.theory.branches.traces`) and their thresholds (:mod:`attnlib.theory.branches.thresholds`):

* :func:`branch_ends` and :func:`phase_diagram` (over ``omega``, in parallel through joblib), with each branch's
  end and both thresholds also under the pooled default rule (:mod:`attnlib.theory.branches.pooled_end`,
  :mod:`attnlib.theory.branches.pooled_thresholds`).
* :func:`semantic_takeover`: where the global minimum becomes semantic, also when ``alpha_c`` is undefined
  (no positional branch, branches that do not coexist, one branch lower wherever both exist).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd

from ...cache import cached
from ...exceptions import ConvergenceWarning, ThresholdNotFound, warn_caller
from ...parallel import run_jobs
from ...params import TaskParams, check_choice, check_params
from ..solve.branch_points import follow_branch
from ..model.status import defining_overlap
from ..model.generalisation import linear_baseline_error
from ..branches.pooled_end import positional_end, semantic_end
from ..branches.pooled_thresholds import phase_thresholds
from ..solve.dispatch import solve_state_evolution
from ..model.state_evolution import Overlaps, SEResult, SESolver
from ..branches.thresholds import (REASON_ABSENT, REASON_APART, REASON_BELOW_END, REASON_LOWER, critical_alpha,
                                   linear_crossing_alpha)
from ..branches.traces import (DEFAULT_RANGE, _check_grid, _range, _trace_range, _with_scrambling, branch_trace,
                               continuation_settings)

__all__ = ["branch_curve", "alpha_sweep", "branch_curvature", "branch_ends", "phase_diagram", "summarise_phase_diagram",
           "semantic_takeover", "DEFAULT_ALPHA_GRID", "ENDED_KINDS", "TAKEOVER_KINDS"]

#: A coarse grid of ``alpha`` (for point-wise sweeps; thresholds use only its range).
DEFAULT_ALPHA_GRID = tuple(np.round(np.geomspace(0.25, 5.0, 16), 4))
#: Pinned value of the held overlap used to measure the curvature across a branch.
CURVATURE_STEP = 0.02


def branch_curve(params: TaskParams, alphas, branch: str, solver: SESolver | None = None,
                 start: Overlaps | None = None) -> list[SEResult]:
    """Solve one branch along ``alphas`` (in the order given), warm-starting each point from the previous
    converged one: by :func:`follow_branch` under ``solver``, or, with ``solver=None``, by the default rule of
    :func:`~attnlib.solve_state_evolution` (whose start rule's point is found by :func:`follow_branch` too)."""
    out = []
    for a in _check_grid(alphas):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)   # one warning per point, below
            res = (solve_state_evolution(params, float(a), branch, start=start) if solver is None
                   else follow_branch(params, float(a), branch, start, solver))
        if res.converged:
            start = res.overlaps
        else:
            warn_caller(f"{branch} branch did not converge at alpha={a:g} (omega={params.omega:g})")
        out.append(res)
    return out


def _curve_rows(params, alphas, branch, solver):
    return [r.as_row() for r in branch_curve(params, alphas, branch, solver)]


def _cached_curve(params, alphas, branch, solver, use_cache):
    """One branch curve of :func:`alpha_sweep`, cached (a module-level job for ``attnlib.parallel.run_jobs``)."""
    return cached("se-branch", lambda: _curve_rows(params, alphas, branch, solver), use_cache=use_cache,
                  params=params, alphas=alphas, branch=branch, solver=solver)


def alpha_sweep(params: TaskParams, alphas, branches=("semantic", "positional"),
                solver: SESolver | None = None, n_jobs: int = 1, use_cache: bool = True) -> pd.DataFrame:
    """Both (or the given) branches along an ``alpha`` grid, as a tidy table.

    Each branch is followed in increasing ``alpha`` with warm starts; the semantic branch is followed
    downwards from the largest ``alpha`` (it is easiest to find where it is the global minimum). Branches run
    in parallel through ``attnlib.parallel.run_jobs`` (``n_jobs``; ``$ATTNLIB_PARALLEL_BACKEND`` chooses where);
    each branch curve is cached on disk under every parameter.

    Each point is ``attnlib.theory.solve.branch_points.follow_branch``: where the iteration collapses onto the uninformed point
    (``m = theta = 0``) from a cold start or from a point of the branch, the branch is looked for by Newton's
    method before the uninformed point is accepted. A row whose defining overlap (``theta`` semantic, ``m``
    positional) vanishes is therefore the uninformed point where the branch was not found: beyond its end, as a
    rule (:func:`attnlib.branch_trace` locates the ends).

    ``solver=None`` (the default) solves every point with the default rule of
    :func:`~attnlib.solve_state_evolution` (pooled scrambled Sobol rules, :func:`attnlib.solve_chord`), with
    standard errors; an :class:`~attnlib.theory.model.state_evolution.SESolver` iterates its single rule instead
    (faster, with the bias the numerics appendix measures, and no error column).

    ``branches`` is a sequence of branch names (``"semantic"``, ``"positional"``, ``"agnostic"``) or one name.

    Returns
    -------
    pandas.DataFrame
        One row per (branch, alpha): overlaps, conjugates, ``test_error``, ``train_loss``, ``converged``,
        ``status`` (``"on-branch"``, ``"branch-absent"`` or ``"not-converged"``, :attr:`attnlib.SEResult.status`),
        map evaluations (``n_iter``), residual, seconds, the quadrature ``rule``, the task parameters and, with
        the default rule, the standard errors ``q_err, m_err, V_err, theta_err, test_error_err,
        train_loss_err``.
    """
    check_params(params, "alpha_sweep").require_two_tokens("alpha_sweep")
    if solver is not None and not isinstance(solver, SESolver):
        raise ValueError(f"solver must be an SESolver or None, got {type(solver).__name__}")
    grid = np.sort(_check_grid(alphas))
    branches = (branches,) if isinstance(branches, str) else tuple(branches)
    for b in branches:
        check_choice("branches", b, ("semantic", "positional", "agnostic"))

    jobs = [(_cached_curve, dict(params=params, alphas=grid[::-1] if b == "semantic" else grid, branch=b,
                                 solver=solver, use_cache=use_cache)) for b in branches]
    parts = run_jobs(jobs, n_jobs=n_jobs)
    df = pd.DataFrame([row for part in parts for row in part])
    return tidy_columns(df.sort_values(["branch", "alpha"]).reset_index(drop=True), params)


#: The leading columns of a sweep table after the task's parameters, in this order; the others follow as they come.
LEADING_COLUMNS = ("alpha", "branch", "status", "converged", "q", "m", "V", "theta", "test_error", "train_loss",
                   "q_err", "m_err", "V_err", "theta_err", "test_error_err", "train_loss_err")


def tidy_columns(df: pd.DataFrame, params: TaskParams) -> pd.DataFrame:
    """``df`` with its columns in the order of a tidy table: the task's parameters (``params.as_dict()``), then
    :data:`LEADING_COLUMNS`, then the rest (conjugates, solver diagnostics) in their order."""
    first = [c for c in (*params.as_dict(), *LEADING_COLUMNS) if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def branch_curvature(params: TaskParams, alpha: float, branch: str, solver: SESolver | None = None,
                     start: Overlaps | None = None, step: float = CURVATURE_STEP) -> float:
    """Curvature of the training loss across a branch, along its held overlap.

    ``kappa = (eps_t(pinned at step) - eps_t(branch)) / step^2``, the pinned overlap being ``m`` for the
    semantic branch and ``theta`` for the positional one (a constrained fixed point,
    :func:`~attnlib.solve_state_evolution` with ``fix_m`` / ``fix_theta``). ``kappa > 0``:
    the branch is a local minimum in that direction; ``kappa < 0``: a saddle. Both fixed points are solved under
    the one rule of ``solver`` (default :class:`~attnlib.theory.model.state_evolution.SESolver`), since a pinned
    point has no pooled-rule solver and the difference must not mix two rules.
    """
    if branch not in ("semantic", "positional"):
        raise ValueError(f"branch must be 'semantic' or 'positional', got {branch!r}")
    solver = solver or SESolver()
    base = solve_state_evolution(params, alpha, branch, start=start, solver=solver)
    x = base.overlaps
    if branch == "semantic":
        pinned = solve_state_evolution(params, alpha, branch, solver=solver, fix_m=step,
                                       start=Overlaps(x.q, step, x.V, x.theta))
    else:
        pinned = solve_state_evolution(params, alpha, branch, solver=solver, fix_theta=step,
                                       start=Overlaps(x.q, x.m, x.V, min(step, 0.5 * math.sqrt(params.rho * x.q))))
    if not (base.converged and pinned.converged):
        return math.nan
    return (pinned.train_loss - base.train_loss) / step**2


def branch_ends(params: TaskParams, solver=None, alpha_range=DEFAULT_RANGE, use_cache: bool = True) -> pd.DataFrame:
    """Where each branch ends and how (``attnlib.theory.branches.continuation.END_KINDS``; traced over ``alpha_range``
    widened to ``DEFAULT_RANGE``): one row per (branch, side) with ``kind``, ``alpha`` and the defining
    overlap at the last point of the branch."""
    check_params(params, "branch_ends").require_two_tokens("branch_ends")
    settings = continuation_settings(solver)
    rng = _trace_range(*_range(alpha_range, None))
    rows = []
    for b in ("semantic", "positional"):
        tr = branch_trace(params, b, rng, settings, use_cache)
        for side in ("lower", "upper"):
            if tr is None:
                rows.append({"branch": b, "side": side, "kind": "absent", "alpha": math.nan, "overlap": math.nan})
                continue
            end = getattr(tr, side)
            st = tr.stable
            last = st.iloc[0] if side == "lower" else st.iloc[-1]
            rows.append({"branch": b, "side": side, "kind": end.kind, "alpha": end.alpha,
                         "overlap": defining_overlap(b, last)})
    return pd.DataFrame(rows)


def _phase_point(params, settings, alpha_range, use_cache):
    row = {"omega": params.omega, "eps_lin": linear_baseline_error(params)}
    for name, fn in (("alpha_c", critical_alpha), ("alpha_l", linear_crossing_alpha)):
        try:
            row[name] = fn(params, settings, use_cache=use_cache, alpha_range=alpha_range)
            row[f"reason_{name}"] = ""
        except ThresholdNotFound as exc:
            row[name] = math.nan
            row[f"reason_{name}"] = str(exc)
    ends = branch_ends(params, settings, alpha_range, use_cache)
    for r in ends.itertuples():
        row[f"{r.branch}_{r.side}_alpha"] = r.alpha
        row[f"{r.branch}_{r.side}_kind"] = r.kind
    # the semantic branch's lower end under the pooled rule (the continuation's own beside it)

    row["semantic_lower_trace_alpha"] = row["semantic_lower_alpha"]
    row["semantic_lower_trace_kind"] = row["semantic_lower_kind"]
    end = semantic_end(params, settings, alpha_range, use_cache)
    if end is not None:
        row["semantic_lower_alpha"], row["semantic_lower_kind"] = end["alpha"], end["kind"]
    # likewise the positional branch's upper end, where the continuation stops inside the range

    row["positional_upper_trace_alpha"] = row["positional_upper_alpha"]
    row["positional_upper_trace_kind"] = row["positional_upper_kind"]
    pos = positional_end(params, settings, alpha_range, use_cache)
    row["positional_upper_gap"] = math.nan
    if pos is not None:
        row["positional_upper_alpha"], row["positional_upper_kind"] = pos["alpha"], pos["kind"]
        row["positional_upper_gap"] = pos["gap"]
    # the thresholds under the pooled rule too (the continuation's beside them, as alpha_c_trace, alpha_l_trace)

    thr = phase_thresholds(params, settings, alpha_range, use_cache)
    for name in ("alpha_c", "alpha_l"):
        row[f"{name}_trace"] = thr[f"{name}_trace"]
        row[name], row[f"{name}_pooled_err"] = thr[name], thr[f"{name}_err"]
        if not math.isfinite(thr[name]) and math.isfinite(thr[f"{name}_trace"]):
            row[f"reason_{name}"] = f"pooled rule: {thr[f'reason_{name}']}"
    end_alpha = row.get("semantic_lower_alpha", math.nan)
    if end is not None and math.isfinite(row["alpha_c"]) and row["alpha_c"] < end_alpha:
        row["reason_alpha_c"] = (f"alpha_c (omega={params.omega:g}): {REASON_BELOW_END} "
                                 f"({row['alpha_c']:.4g} < {end_alpha:.4g})")
        if row["alpha_l"] == row["alpha_c"]:   # alpha_l was the jump at that crossing
            row["reason_alpha_l"] = row["reason_alpha_c"].replace("alpha_c (", "alpha_l (", 1)
            row["alpha_l"] = row["alpha_l_pooled_err"] = math.nan
        row["alpha_c"] = row["alpha_c_pooled_err"] = math.nan
    return row


def phase_diagram(params: TaskParams, omegas, solver=None, alpha_range=DEFAULT_RANGE, n_jobs: int = -1,
                  progress: bool = False, use_cache: bool = True, scramblings: int = 1) -> pd.DataFrame:
    """``alpha_c(omega)``, ``alpha_l(omega)`` and the branch ends over a grid of ``omega``, as a tidy table.

    One row per ``omega`` (and per scrambling of the Sobol rule, column ``scrambling``, when
    ``scramblings > 1``: scramblings ``0 .. scramblings-1`` are independent randomisations of the quadrature,
    whose spread measures its error; ``summarise_phase_diagram`` averages them): ``eps_lin``, ``alpha_c``,
    ``alpha_l`` (NaN with the reason in ``reason_*`` when there is no transition in the range), ``found_*``, and
    for each branch and side the end's ``alpha`` and kind (``semantic_lower_alpha``, ``semantic_lower_kind``,
    ...): the continuation's (:func:`branch_ends`), except the semantic branch's lower end and, where the
    continuation stops inside the range, the positional branch's upper end, which are placed under the pooled rule
    (``attnlib.theory.branches.pooled_end.semantic_end`` and ``positional_end``, with the seed sets of the row's
    scrambling), the continuation's own being kept as ``semantic_lower_trace_alpha``, ``semantic_lower_trace_kind``,
    ``positional_upper_trace_alpha`` and ``positional_upper_trace_kind``.
    The thresholds, found first on the continuation's branches (:func:`critical_alpha`,
    :func:`linear_crossing_alpha`; kept as ``alpha_c_trace``, ``alpha_l_trace``), are then moved onto the pooled
    rule with the same seed set (``attnlib.theory.branches.pooled_thresholds.phase_thresholds``): ``alpha_c`` and
    ``alpha_l`` are the pooled rule's roots, ``alpha_c_pooled_err`` and ``alpha_l_pooled_err`` their quadrature
    errors; where the pooled search finds no root, NaN with the reason. A pooled ``alpha_c`` below the pooled
    semantic end is a crossing with the branch's unresolved tail: NaN, with the reason
    (``REASON_BELOW_END``; the semantic branch then takes over at its end, :func:`semantic_takeover`).
    Points run in parallel through
    ``attnlib.parallel.run_jobs`` (``n_jobs``).
    """
    check_params(params, "phase_diagram").require_two_tokens("phase_diagram")
    settings = continuation_settings(solver)
    if isinstance(scramblings, bool) or not isinstance(scramblings, (int, np.integer)) or scramblings < 1:
        raise ValueError(f"scramblings must be an integer >= 1, got {scramblings!r}")
    seeds = [settings.solver.quadrature.seed] if scramblings == 1 else list(range(scramblings))
    omegas = np.atleast_1d(np.asarray(omegas, dtype=float))
    rng = _range(alpha_range, None)
    jobs, labels = [], []
    for seed in seeds:
        st = settings if scramblings == 1 else _with_scrambling(settings, seed)
        for w in omegas:
            jobs.append((_phase_point, dict(params=replace(params, omega=float(w)), settings=st, alpha_range=rng,
                                            use_cache=use_cache)))
            labels.append(seed)
    df = pd.DataFrame(run_jobs(jobs, n_jobs=n_jobs, progress=progress, desc="phase diagram"))
    df.insert(1, "scrambling", labels)
    for name in ("alpha_c", "alpha_l"):
        df[f"found_{name}"] = np.isfinite(df[name])
    return df.sort_values(["omega", "scrambling"]).reset_index(drop=True)


def summarise_phase_diagram(df: pd.DataFrame) -> pd.DataFrame:
    """Average a :func:`phase_diagram` table over its scramblings: per ``omega`` the mean of every threshold
    over the scramblings where it was found and of every end ``alpha`` over the scramblings that found the
    end's most frequent kind (``*_kind``, with its count ``*_kind_n``), the standard error (``*_err``, NaN with
    one value) and the number of values averaged (``*_n``)."""
    rows = []
    value_cols = ["alpha_c", "alpha_l"] + [c for c in ("alpha_c_trace", "alpha_l_trace") if c in df] + [
        c for c in df.columns if c.endswith("_alpha")]
    kind_cols = [c for c in df.columns if c.endswith("_kind")]
    for w, sub in df.groupby("omega"):
        row = {"omega": float(w), "eps_lin": float(sub.eps_lin.iloc[0]), "scramblings": int(len(sub))}
        for c in value_cols:
            kind = f"{c[:-len('_alpha')]}_kind"
            use = sub
            if c.endswith("_alpha") and kind in sub:  # an end: averaged over the scramblings of the majority kind
                use = sub[sub[kind] == sub[kind].value_counts().index[0]]
            v = use[c].to_numpy(float)
            v = v[np.isfinite(v)]
            row[c] = float(v.mean()) if len(v) else math.nan
            row[f"{c}_err"] = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan
            row[f"{c}_n"] = int(len(v))
        for c in kind_cols:
            counts = sub[c].value_counts()
            row[c] = str(counts.index[0])
            row[f"{c}_n"] = int(counts.iloc[0])
        rows.append(row)
    return pd.DataFrame(rows)


#: Kinds of a branch end placed inside the computed range: the continuation's fold or vanishing, or the end
#: under the pooled rule where independent seed sets stop agreeing (``attnlib.theory.branches.pooled_end``).
ENDED_KINDS = ("fold", "vanishes", "agreement")
#: How :func:`semantic_takeover` found the switch of the global minimum to the semantic branch.
TAKEOVER_KINDS = ("crossing", "semantic end", "positional end", "beyond range", "undetermined")


def semantic_takeover(row) -> tuple[float, str]:
    """Where the global minimum of the state evolution becomes the semantic branch, read off one row of a
    :func:`phase_diagram` table (raw or summarised, with ``reason_alpha_c`` when ``alpha_c`` is missing).

    The global minimum at ``alpha`` is the existing branch of lowest ``eps_t``, or the uninformed point where
    neither exists. It becomes semantic

    * at ``alpha_c`` where the two training losses cross (``"crossing"``);
    * at the lower end of the semantic branch (``"semantic end"``) when there is no positional branch, when
      the branches do not coexist (the positional end below the semantic one), when the semantic branch is lower
      wherever both exist, or when the crossing
      lies below the semantic end (a crossing with the branch's unresolved tail): below that end
      the global minimum is positional or uninformed, above it semantic;
    * at the upper end of the positional branch (``"positional end"``: a fold, a vanishing or where seed sets
      stop agreeing, ``ENDED_KINDS``) when the positional branch is lower wherever both exist on the
      continuation's branches (or they do not coexist there, but the positional end, placed beyond the
      continuation, lies above the semantic end), ends inside the semantic branch's range and is still the lower
      at its end (``positional_upper_gap``, the semantic minus the positional training loss there, not
      negative): the global minimum jumps when the positional minimum disappears. Where that end lies below the
      semantic end (the thresholds are compared on the continuation's branches, whose semantic branch can reach
      below the pooled rule's semantic end), no resolved informed minimum exists between the two ends and the
      switch is at the semantic end (``"semantic end"``).

    Otherwise the switch lies beyond the range computed (``"beyond range"``: positional lower up to the top
    of the range) or cannot be placed (``"undetermined"``: no semantic branch; the positional branch's end was
    lost, so that it is unknown; or the semantic branch is already the lower at the positional end, so that the
    losses cross on the part of the positional branch beyond its continuation, where no crossing is searched).

    Returns
    -------
    (alpha, kind)
        ``alpha`` is NaN for the last two kinds; ``kind`` is one of ``TAKEOVER_KINDS``.
    """
    get = row.get if isinstance(row, dict) else (lambda k, default=None: getattr(row, k, default))
    ac = get("alpha_c")
    if ac is not None and np.isfinite(ac):
        return float(ac), "crossing"
    sem = get("semantic_lower_alpha")
    if sem is None or not np.isfinite(sem):
        return math.nan, "undetermined"
    reason = str(get("reason_alpha_c", "") or "")
    pos_kind = str(get("positional_upper_kind", "") or "")
    pos = float(get("positional_upper_alpha", math.nan)) if pos_kind in ENDED_KINDS else math.nan
    # branches that do not coexist on the continuation's traces can coexist beyond the positional trace's end,
    # up to the positional end that the seed sets place there
    apart = REASON_APART in reason and pos_kind == "agreement"
    if (REASON_ABSENT.format(branch="positional") in reason or REASON_LOWER.format(branch="semantic") in reason
            or REASON_BELOW_END in reason or pos_kind == "absent" or (REASON_APART in reason and not apart)):
        return float(sem), "semantic end"
    if REASON_LOWER.format(branch="positional") in reason or apart:
        if pos_kind in ENDED_KINDS:
            if pos < sem:   # no resolved informed minimum between the two ends: semantic from its end on
                return float(sem), "semantic end"
            gap = get("positional_upper_gap", math.nan)
            if gap is not None and np.isfinite(gap) and gap < 0:
                # the semantic branch is already the lower at the positional end: the training losses cross on the
                # part of the positional branch beyond its continuation, where no crossing was searched
                return math.nan, "undetermined"
            return pos, "positional end"
        return math.nan, "beyond range" if pos_kind == "range" else "undetermined"
    return math.nan, "undetermined"

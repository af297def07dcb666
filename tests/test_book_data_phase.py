"""The phase-diagram data of the book (book/data/phase_*.csv, branch_traces.csv, rs_validity.csv,
free_states.csv; written by scripts/regenerate_phase_data.py from the continuation-based functions of
attnlib.theory.studies.sweeps).

Checks the tables' columns and required values, their internal consistency (the summary is the mean of the
runs; thresholds lie where both branches exist; alpha_l >= alpha_c), physics (a stored trace point is a fixed
point of the state-evolution map; at a fold the curve turns back), the paper's reference point, and
recomputes a few entries with attnlib without the disk cache."""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import attnlib
from attnlib import ALTERNATIVE_A, Overlaps, TaskParams
from attnlib.theory.solve.newton import FixedPointMap
from attnlib.theory.studies.sweeps import ENDED_KINDS, summarise_phase_diagram
from attnlib.theory.branches.traces import continuation_settings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "book" / "data"
META = json.loads((DATA / "phase_meta.json").read_text())
STANDARD = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
ENDS = [f"{b}_{s}" for b in ("semantic", "positional") for s in ("lower", "upper")]
RUN_COLUMNS = (["omega", "scrambling", "eps_lin", "alpha_c", "reason_alpha_c", "alpha_l", "reason_alpha_l",
                "found_alpha_c", "found_alpha_l", "alpha_c_trace", "alpha_l_trace", "alpha_c_pooled_err",
                "alpha_l_pooled_err", "semantic_lower_trace_alpha", "semantic_lower_trace_kind",
                "positional_upper_trace_alpha", "positional_upper_trace_kind", "positional_upper_gap"]
               + [f"{e}_alpha" for e in ENDS] + [f"{e}_kind" for e in ENDS])

COLUMNS = {
    "phase_standard_runs.csv": RUN_COLUMNS,
    "phase_standard.csv": ["omega", "eps_lin", "scramblings", "alpha_c", "alpha_c_err", "alpha_l", "alpha_l_err",
                           "paper_alpha_c", "paper_alpha_l"] + [f"{e}_alpha" for e in ENDS]
                          + [f"{e}_kind" for e in ENDS],
    "phase_alternative.csv": RUN_COLUMNS,
    "phase_slices.csv": ["slice", "sigma", "lam"] + RUN_COLUMNS,
    "branch_traces.csv": ["A", "omega", "branch", "alpha", "q", "m", "V", "theta", "train_loss", "test_error",
                          "residual", "s", "dlogalpha_ds", "det_ru", "partner", "lower_kind", "lower_alpha",
                          "upper_kind", "upper_alpha"],
    "rs_validity.csv": ["omega", "alpha", "start", "fixed_point", "theory_loss", "fd_loss", "fd_loss_err", "z_loss",
                        "theory_overlap", "fd_overlap", "fd_overlap_err", "replicon", "tie_density"],
    "edge_solver_checks.csv": ["rule", "prox_mode", "omega", "alpha", "q", "m", "V", "train_loss", "rel_loss",
                               "converged", "residual"],
    "edge_profile.csv": ["omega", "alpha", "branch", "m", "q", "V", "train_loss", "rel_loss", "converged"],
    "free_states.csv": ["A", "omega", "alpha", "start", "d", "fd_q", "fd_m", "fd_theta", "free_converged", "free_m",
                        "free_theta", "positional_converged", "positional_m", "semantic_converged", "semantic_theta"],
}
REQUIRED = {  # columns that must never be NaN
    "phase_standard_runs.csv": ["omega", "eps_lin"],
    "phase_standard.csv": ["omega", "eps_lin", "alpha_c", "alpha_l"],
    "phase_alternative.csv": ["omega", "eps_lin"],
    "phase_slices.csv": ["sigma", "lam", "omega", "eps_lin"],
    "branch_traces.csv": ["alpha", "q", "m", "V", "theta", "train_loss", "test_error"],
    "rs_validity.csv": ["alpha", "theory_loss", "fd_loss", "theory_overlap", "fd_overlap", "replicon"],
    "free_states.csv": ["fd_q", "fd_m", "fd_theta"],
    "edge_solver_checks.csv": ["q", "m", "train_loss", "rel_loss"],
    "edge_profile.csv": ["m", "train_loss", "rel_loss"],
}


def load(name):
    return pd.read_csv(DATA / name, keep_default_na=True)


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_columns_and_required_values(name):
    df = load(name)
    assert len(df) > 0
    missing = set(COLUMNS[name]) - set(df.columns)
    assert not missing, f"{name}: missing columns {missing}"
    for col in REQUIRED[name]:
        assert df[col].notna().all(), f"{name}: NaN in required column {col}"
    if "found_alpha_c" in df:  # a threshold is NaN exactly when it was not found, and then a reason is given
        for q in ("alpha_c", "alpha_l"):
            assert (df[f"found_{q}"] == df[q].notna()).all()
            assert df.loc[~df[f"found_{q}"], f"reason_{q}"].fillna("").astype(str).str.len().gt(0).all()
    for col in [c for c in df.columns if c.endswith("_kind") and not c.endswith("_kind_n")]:
        # the semantic lower end under the pooled rule is where independent seed sets stop agreeing; so is the
        # positional upper end where the continuation stops inside the range (or it reaches the range's top)
        kinds = ({"agreement", "lost"} if col == "semantic_lower_kind"
                 else {"agreement", "range", "lost", "absent"} if col == "positional_upper_kind"
                 else {"fold", "vanishes", "range", "lost", "absent"})
        assert set(df[col].dropna()) <= kinds, col


def test_metadata():
    prov = META["provenance"]
    assert prov["script"] == "scripts/regenerate_phase_data.py"
    assert prov["attnlib_version"] == attnlib.__version__
    assert prov["quadrature"] == str(attnlib.theory.branches.traces.SMOOTH_QUADRATURE)
    for part in ("standard", "traces", "alternative", "slices", "validity", "solver"):
        assert META[part]["wall_time_s"] > 0, part
    cov = META["solver"]["prox_coverage"]  # the brute-force check of the proximal search at the edge
    assert cov["nodes"] > 0 and cov["share_worse"] == 0 and cov["max_deficit"] < 1e-12


def test_edge_checks_agree_on_the_loss_not_on_m():
    """At the edge point the quadrature rules agree on the training loss to < 1 % but not on m, and the
    profile in m is flat around the fixed point (its minimum), rising only far from it."""
    chk, prof = load("edge_solver_checks.csv"), load("edge_profile.csv")
    ok = chk[chk.converged]
    assert len(ok) >= 4 and (ok.rel_loss.max() - ok.rel_loss.min()) < 0.01 * ok.rel_loss.abs().mean()
    conv = prof[prof.converged].sort_values("m")
    i = int(conv.rel_loss.idxmin())
    assert 0.05 < conv.loc[i, "m"] < 0.22


def test_summary_is_the_mean_of_the_runs():
    runs, summary = load("phase_standard_runs.csv"), load("phase_standard.csv")
    assert (runs.groupby("omega").scrambling.nunique() == summary.set_index("omega").scramblings).all()
    again = summarise_phase_diagram(runs)
    for col in ("alpha_c", "alpha_c_err", "alpha_l", "alpha_c_trace", "semantic_lower_alpha", "positional_upper_alpha"):
        np.testing.assert_allclose(again[col], summary[col], rtol=1e-6, equal_nan=True, err_msg=col)  # %.10g


def test_standard_diagram_shape_and_reference_point():
    std = load("phase_standard.csv").sort_values("omega")
    assert np.all(np.diff(std.alpha_c) > -3 * std.alpha_c_err.max()), "alpha_c rises with omega"
    assert np.all(std.alpha_l >= std.alpha_c - 1e-9), "alpha_l >= alpha_c by definition"
    # the transition lies where both branches exist: above the end of the semantic branch
    assert np.all(std.alpha_c > std.semantic_lower_alpha)
    pos_end = std.positional_upper_kind.isin(ENDED_KINDS)
    assert np.all(std.alpha_c[pos_end] < std.positional_upper_alpha[pos_end])
    # the paper's values at omega = 0.3 (Cui et al. 2024): alpha_c = 1.24, alpha_l = 1.45, within 0.05
    row = std.loc[np.isclose(std.omega, 0.3)].iloc[0]
    assert abs(row.alpha_c - 1.24) < 0.05 and abs(row.alpha_l - 1.45) < 0.05
    assert row.paper_alpha_c == pytest.approx(1.241, abs=1e-3)


def test_trace_points_are_fixed_points_and_folds_turn_back():
    """Stored points of the standard traces at omega = 0.3 are stationary under the state-evolution map
    (residual below the continuation tolerance), and the semantic branch's lower end is a fold at which the
    curve turns back (dalpha/ds changes sign along the stored curve past it) or a vanishing of theta."""
    tr = load("branch_traces.csv")
    settings = continuation_settings()
    for branch, a in (("semantic", 1.5), ("positional", 1.0)):
        sub = tr[(tr.A == "standard") & np.isclose(tr.omega, 0.3) & (tr.branch == branch) & ~tr.partner]
        row = sub.loc[(sub.alpha - a).abs().idxmin()]
        fmap = FixedPointMap(STANDARD, branch, settings.solver)
        u = fmap.to_u(Overlaps(row.q, row.m, row.V, row.theta))
        assert np.max(np.abs(fmap.residual(u, math.log(row.alpha)))) < 5 * settings.tol, branch
    sem = tr[(tr.A == "standard") & np.isclose(tr.omega, 0.3) & (tr.branch == "semantic")]
    kind, end = sem.lower_kind.iloc[0], sem.lower_alpha.iloc[0]
    stable = sem[~sem.partner]
    assert kind in ("fold", "vanishes") and end <= stable.alpha.min() + 1e-9
    if kind == "vanishes":
        assert stable.sort_values("alpha").theta.iloc[0] < 0.1 * STANDARD.rho


def test_alternative_and_slices_are_consistent():
    alt = load("phase_alternative.csv")
    assert np.allclose(alt.eps_lin, [attnlib.linear_baseline_error(STANDARD.with_(A=ALTERNATIVE_A, omega=w))
                                     for w in alt.omega], rtol=1e-10)
    sl = load("phase_slices.csv")
    for r in sl.sample(3, random_state=0).itertuples():
        p = STANDARD.with_(sigma=r.sigma, lam=r.lam, omega=r.omega)
        assert r.eps_lin == pytest.approx(attnlib.linear_baseline_error(p), rel=1e-10)
    ok = sl[sl.found_alpha_c & sl.found_alpha_l]
    assert (ok.alpha_l >= ok.alpha_c - 1e-9).all()
    # a transition in at least 5 of the 12 rows: sigma = 0.4 at omega <= 0.2 and lambda = 0.03, where the positional
    # branch spans the range and crosses the semantic one. Where the positional branch ends inside the range,
    # whether it reaches the semantic one depends on where its continuation stops, which moves between machines
    # (lambda = 0.003, omega = 0.4: a fold at 0.932 on one CPU, the same code losing it at 1.008 on another, with
    # a crossing at 0.975 then), so those rows are not counted on.
    assert len(ok) >= 5


def test_validity_rows_follow_from_the_arbiter_table():
    """rs_validity's finite-d columns are the 1/d extrapolation of the arbiter table's seed means."""
    from attnlib.finite_d.arbiter import extrapolate_inverse_d

    val, arb = load("rs_validity.csv"), pd.read_csv(DATA / "arbiter_standard.csv")
    row = val[np.isclose(val.omega, 0.3) & np.isclose(val.alpha, 2.2) & (val.start == "positional")].iloc[0]
    sub = arb[np.isclose(arb.omega, 0.3) & np.isclose(arb.alpha, 2.2) & (arb.start == "positional")]
    g = (sub.train_loss - sub.train_loss_zero).groupby(sub.d)
    a, a_err, _, _ = extrapolate_inverse_d(np.array(sorted(g.groups)), g.mean().to_numpy(),
                                           (g.std(ddof=1) / np.sqrt(g.count())).to_numpy())
    assert row.fd_loss == pytest.approx(a, rel=1e-8) and row.fd_loss_err == pytest.approx(a_err, rel=1e-8)
    assert row.z_loss == pytest.approx((row.fd_loss - row.theory_loss) / row.fd_loss_err, rel=1e-6)  # %.10g
    assert (val.replicon > 0).all()


@pytest.mark.replay
def test_recompute_alpha_c_at_the_reference_point():
    """alpha_c at omega = 0.3 (scrambling 0), computed afresh (an empty disk cache), equals the stored run: the
    continuation's root (alpha_c_trace) and the pooled rule's (alpha_c).

    Tolerances: the continuation's root is found by Brent's method to xtol = 1e-4, on Newton-solved training
    losses that another machine rounds differently; the piecewise-smooth quadrature map (a node's proximal point
    switching minimum) turns that into a shift well below the spread over the rule's scramblings (7e-3 here),
    hence 2e-3. The pooled root stops once a step is below its own quadrature error (alpha_c_pooled_err), so a
    replay may land anywhere within a few of those: 2e-3 or three of them, whichever is larger."""
    from attnlib.theory.branches.pooled_thresholds import phase_thresholds

    runs = load("phase_standard_runs.csv")
    row = runs[np.isclose(runs.omega, 0.3) & (runs.scrambling == 0)].iloc[0]
    thr = phase_thresholds(STANDARD)
    assert thr["alpha_c_trace"] == pytest.approx(row.alpha_c_trace, abs=2e-3)
    assert thr["alpha_c"] == pytest.approx(row.alpha_c, abs=max(2e-3, 3 * row.alpha_c_pooled_err))


@pytest.mark.replay
def test_recompute_semantic_end_at_the_reference_point():
    """The semantic branch's lower end at omega = 0.3 (scrambling 0), computed afresh (an empty disk cache), lands
    within the end's own error of the stored run: the spread of the end over the table's three scramblings there
    (the largest of the table, 0.020), and at least one final bracket (AGREEMENT_RESOLUTION in log alpha).

    The end is where the three seed sets stop agreeing, bisected; each verdict at a bisection point near the end
    rests on chords near a fold of the pooled rule, whose proximal points can switch minimum with round-off, so
    another machine can reach a neighbouring bracket. Measured: under OpenBLAS's SkylakeX kernel (the machine
    that made the table) the same 0.7342; under its Sandybridge kernel the verdict at 0.7342 itself flips and the
    end is 0.7323 (bracket 0.7305-0.7342), a tenth of the spread. At omega = 0.425 both kernels gave the table's
    0.9470 to 1e-12."""
    from attnlib.theory.branches.pooled_end import AGREEMENT_RESOLUTION, semantic_end

    runs = load("phase_standard_runs.csv")
    at = runs[np.isclose(runs.omega, 0.3)]
    row = at[at.scrambling == 0].iloc[0]
    spread = at.semantic_lower_alpha.max() - at.semantic_lower_alpha.min()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        end = semantic_end(STANDARD)
    assert end["kind"] == row.semantic_lower_kind == "agreement" and end["converged"]
    assert math.log(end["bracket_hi"] / end["bracket_lo"]) <= AGREEMENT_RESOLUTION * 1.0001
    tol = max(spread, AGREEMENT_RESOLUTION * row.semantic_lower_alpha)
    assert end["alpha"] == pytest.approx(row.semantic_lower_alpha, abs=tol), (end["alpha"], spread)


def test_semantic_takeover_in_the_slices():
    """Where the global minimum turns semantic: at alpha_c when it exists, else at a branch end that the table
    itself records, never below the end of the semantic branch.

    alpha_c and the semantic end are both placed under the pooled rule with the row's seed set, and a crossing
    below the end is refused (reason_alpha_c says so; the takeover is then at the end): a crossing lies strictly
    above the end. Where the positional branch's upper end lies below the semantic end (alpha_c is searched on the
    continuation's branches, whose semantic branch can reach below the pooled semantic end), the takeover is at the
    semantic end, so that it never lies below it."""
    from attnlib.theory.studies.sweeps import semantic_takeover, TAKEOVER_KINDS
    from attnlib.theory.branches.thresholds import REASON_BELOW_END

    for name in ("phase_slices.csv", "phase_alternative.csv"):
        sl = load(name)
        for r in sl.itertuples():
            a, kind = semantic_takeover(r)
            assert kind in TAKEOVER_KINDS
            if np.isfinite(r.alpha_c):
                assert (a, kind) == (r.alpha_c, "crossing") and a > r.semantic_lower_alpha, (name, r.omega)
            elif kind == "semantic end":
                assert a == r.semantic_lower_alpha
            elif kind == "positional end":
                assert a == r.positional_upper_alpha and r.positional_upper_kind in ENDED_KINDS
            if REASON_BELOW_END in str(r.reason_alpha_c):
                assert kind == "semantic end", (name, r.omega)
            if np.isfinite(a):
                assert a >= r.semantic_lower_alpha, (name, r.omega, a, r.semantic_lower_alpha)
    for r in load("phase_slices.csv").itertuples():
        if semantic_takeover(r)[1] == "undetermined":
            # the losses cross beyond the continuation's trace, where no crossing is searched: only where the
            # positional end was carried past the trace and the semantic loss is the lower there (lambda = 0.003,
            # omega = 0.4, whose crossing lies at the positional end itself: gap -4e-7 on the machine that made
            # the table)
            assert r.positional_upper_alpha > r.positional_upper_trace_alpha and r.positional_upper_gap < 0
    assert all(semantic_takeover(r)[1] == "crossing" for r in load("phase_standard.csv").itertuples())

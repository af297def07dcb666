"""Branch curves, thresholds, branch ends and the phase-diagram sweep."""
import math
import time

import numpy as np
import pytest

from attnlib import (TaskParams, ThresholdNotFound, alpha_sweep, branch_curvature, branch_ends, critical_alpha,
                     linear_crossing_alpha, phase_diagram)
from attnlib import Overlaps, solve_state_evolution
from attnlib.theory.branches.traces import branch_point, branch_trace

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)


@pytest.fixture(scope="module")
def _shared_cache(tmp_path_factory):
    """One cache folder for the module: the continuation traces (a minute each) are shared by the tests."""
    return str(tmp_path_factory.mktemp("attnlib-cache"))


@pytest.fixture(autouse=True)
def _cache(_shared_cache, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", _shared_cache)


def test_alpha_sweep_is_tidy_and_cached():
    alphas = [1.0, 1.5, 2.0]
    t0 = time.perf_counter()
    df = alpha_sweep(P, alphas)
    first = time.perf_counter() - t0
    assert set(df.branch) == {"semantic", "positional"} and len(df) == 6
    for col in ("alpha", "q", "m", "V", "theta", "test_error", "train_loss", "converged", "omega", "sigma"):
        assert col in df.columns
    assert df.converged.all() and np.isfinite(df[["q", "m", "V", "theta"]].to_numpy()).all()
    t0 = time.perf_counter()
    again = alpha_sweep(P, alphas)
    assert time.perf_counter() - t0 < first  # read from the disk cache
    assert again.equals(df)
    # the training-loss gap changes sign between alpha = 1 and 2 (alpha_c ~ 1.24)
    gap = (df[df.branch == "semantic"].train_loss.to_numpy() - df[df.branch == "positional"].train_loss.to_numpy())
    assert gap[0] > 0 > gap[-1]


def test_no_crossing_raises_with_the_reason():
    """Above alpha_c both branches exist and the semantic one is lower everywhere: no transition there."""
    with pytest.raises(ThresholdNotFound, match="semantic branch has the lower training loss"):
        critical_alpha(P, alphas=(2.0, 3.0, 4.0))


def test_thresholds_at_the_reference_point_are_roots():
    """omega = 0.3: alpha_c and alpha_l near the paper's, alpha_l above alpha_c; at alpha_c the two
    training losses agree and at alpha_l the semantic test error equals eps_lin (roots, not grid points)."""
    from attnlib import linear_baseline_error

    a_c, a_l = critical_alpha(P), linear_crossing_alpha(P)
    assert abs(a_c - 1.24) < 0.05 and abs(a_l - 1.45) < 0.06 and a_l > a_c
    sem, pos = branch_trace(P, "semantic"), branch_trace(P, "positional")
    gap = branch_point(sem, a_c).train_loss - branch_point(pos, a_c).train_loss
    assert abs(gap) < 1e-4 * pos.table.train_loss.median()
    assert branch_point(sem, a_l).test_error == pytest.approx(linear_baseline_error(P), rel=1e-4)


def test_branch_ends_at_the_reference_point():
    """omega = 0.3: the semantic branch ends (a fold or a continuous vanishing) well below alpha_c, the
    positional one exists over the whole range."""
    ends = branch_ends(P).set_index(["branch", "side"])
    sem_low = ends.loc[("semantic", "lower")]
    assert sem_low.kind in ("fold", "vanishes") and 0.55 < sem_low.alpha < 0.9
    assert ends.loc[("semantic", "upper")].kind == "range"
    assert ends.loc[("positional", "lower")].kind == "range" and ends.loc[("positional", "upper")].kind == "range"


@pytest.mark.slow
@pytest.mark.parametrize("omega", [0.0, 0.1])
def test_alpha_c_does_not_depend_on_the_grid(omega):
    """The grid only sets the range searched: three grids that bracket the transition give alpha_c to 1e-3."""
    p = TaskParams(sigma=0.5, lam=0.01, omega=omega)
    grids = (np.geomspace(0.3, 3.0, 10), np.geomspace(0.25, 5.0, 16), np.linspace(0.35, 2.0, 7))
    values = [critical_alpha(p, alphas=g) for g in grids]
    assert max(values) - min(values) < 1e-3, values


def test_curvatures_are_positive_where_the_branches_are_minima():
    """Both branches are local minima along their held overlap on both sides of alpha_c."""
    assert branch_curvature(P, 2.0, "semantic") > 0
    assert branch_curvature(P, 1.0, "semantic") > 0
    assert branch_curvature(P, 1.0, "positional") > 0
    assert branch_curvature(P, 2.0, "positional") > 0


def test_phase_diagram_alpha_c_rises_with_omega():
    df = phase_diagram(P, [0.1, 0.3], n_jobs=2, alpha_range=(0.4, 2.5))
    assert list(df.omega) == [0.1, 0.3]
    assert df.found_alpha_c.all() and df.found_alpha_l.all()
    a_c, a_l = df.alpha_c.to_numpy(), df.alpha_l.to_numpy()
    assert a_c[0] < a_c[1] and np.all(a_l >= a_c - 1e-9)
    assert abs(a_c[1] - 1.24) < 0.05
    assert math.isclose(df.eps_lin[1], 0.001971, rel_tol=0.01)


def test_branch_following_stays_on_the_positional_branch():
    """Regression: at omega = 0.15 the Anderson-accelerated iteration (before its steps were safeguarded and
    sweeps used follow_branch) jumped from the positional branch onto the uninformed point (m = 0) at
    alpha ~ 0.83, which put alpha_c at 0.754 instead of ~0.823. Followed along alpha, the branch keeps m > 0
    there and agrees with plain damped iteration from the previous point."""
    from dataclasses import replace

    from attnlib import SESolver
    from attnlib.theory.studies.sweeps import DEFAULT_ALPHA_GRID

    p = TaskParams(sigma=0.5, lam=0.01, omega=0.15)
    grid = [a for a in DEFAULT_ALPHA_GRID if a <= 0.83]
    df = alpha_sweep(p, grid, branches=("positional",), solver=SESolver(), use_cache=False)
    last = df.iloc[-1]
    assert last.converged and last.m > 0.1
    plain = solve_state_evolution(p, float(last.alpha), "positional", start=Overlaps(*df.iloc[-2][["q", "m", "V", "theta"]]),
                                  solver=replace(SESolver(), anderson=0, max_iter=2000))
    assert plain.converged and abs(plain.m - last.m) < 1e-3


def test_sweep_follows_a_branch_that_repels_the_iteration():
    """Regression (a silent wrong answer): at omega = 0 every iteration from m > 0 flows to the uninformed point,
    so the positional sweep returned m ~ 1e-12 with converged=True at every alpha, although the branch exists
    there. follow_branch now looks for it by Newton's method. The point it returns at alpha = 0.55 is a fixed
    point of the positional equations (one undamped map step moves it by less than the solver's tolerance)
    with m clearly non-zero, and its training loss lies below that of the uninformed point."""
    from attnlib.theory.model.state_evolution import state_evolution_step

    from attnlib import SESolver

    p0 = TaskParams(sigma=0.5, lam=0.01, omega=0.0)
    single = SESolver()
    df = alpha_sweep(p0, [0.45, 0.5, 0.55], branches=("positional",), solver=single, use_cache=False)
    assert df.converged.all() and (df.m > 0.1).all()
    row = df.set_index("alpha").loc[0.55]
    x = Overlaps(*row[["q", "m", "V", "theta"]].astype(float))
    fx = state_evolution_step(p0, 0.55, x, solver=single, branch="positional")
    assert abs(fx.m - x.m) < 1e-5 and abs(fx.q - x.q) < 1e-5 * x.q and abs(fx.V - x.V) < 1e-5 * x.V
    uninformed = solve_state_evolution(p0, 0.55, "agnostic", solver=single)
    assert uninformed.converged and row.train_loss < uninformed.train_loss - 1e-5
    # the default rule, started from the single rule's point, finds the branch too (m differs by up to ~6 %:
    # at this edge the single rule's m is least accurate, book sec-accurate-rule)
    default = alpha_sweep(p0, [0.5, 0.55], branches=("positional",), use_cache=False)
    assert default.converged.all() and (default.m > 0.1).all() and (default.m_err > 0).all()
    assert np.allclose(default.m, df.m.iloc[1:], rtol=0.1)
    assert (default.train_loss < uninformed.train_loss - 1e-5).all()


def test_sweep_returns_the_uninformed_point_beyond_a_branch_end():
    """Where the positional branch does not exist (omega = 0, alpha = 3, far beyond its end), Newton finds
    nothing either and the sweep returns the uninformed point, converged: no branch is invented."""
    p0 = TaskParams(sigma=0.5, lam=0.01, omega=0.0)
    row = alpha_sweep(p0, [3.0], branches=("positional",), use_cache=False).iloc[0]
    assert row.converged and abs(row.m) < 1e-3 * p0.rho


def test_semantic_takeover_kinds():
    """Every way the global minimum can turn semantic, on made-up phase-table rows."""
    from attnlib.theory.studies.sweeps import semantic_takeover

    nan = float("nan")
    base = {"alpha_c": nan, "semantic_lower_alpha": 0.6, "positional_upper_alpha": 1.5,
            "positional_upper_kind": "fold", "reason_alpha_c": ""}

    def row(**kw):
        return {**base, **kw}

    assert semantic_takeover(row(alpha_c=1.2)) == (1.2, "crossing")
    assert semantic_takeover(row(reason_alpha_c="the positional branch does not exist on [0.2, 6]",
                                 positional_upper_kind="absent")) == (0.6, "semantic end")
    assert semantic_takeover(row(reason_alpha_c="the branches do not coexist on [0.2, 6]")) == (0.6, "semantic end")
    assert semantic_takeover(row(reason_alpha_c="the semantic branch has the lower training loss wherever both "
                                 "exist")) == (0.6, "semantic end")
    lower = "the positional branch has the lower training loss wherever both exist"
    assert semantic_takeover(row(reason_alpha_c=lower)) == (1.5, "positional end")
    # a positional end below the semantic end: no resolved informed minimum between them, semantic from its end
    assert semantic_takeover(row(reason_alpha_c=lower, positional_upper_alpha=0.55)) == (0.6, "semantic end")
    a, kind = semantic_takeover(row(reason_alpha_c=lower, positional_upper_kind="range"))
    assert math.isnan(a) and kind == "beyond range"
    a, kind = semantic_takeover(row(reason_alpha_c=lower, positional_upper_kind="lost"))
    assert math.isnan(a) and kind == "undetermined"
    a, kind = semantic_takeover(row(semantic_lower_alpha=nan))
    assert math.isnan(a) and kind == "undetermined"
    # a positional end placed by the seed sets beyond the continuation's trace: the branches coexist up to it, and
    # the training-loss gap at that end (semantic minus positional) says whether positional is still the lower
    apart = "the branches do not coexist on [0.2, 6]"
    assert semantic_takeover(row(reason_alpha_c=apart, positional_upper_kind="agreement")) == (1.5, "positional end")
    assert semantic_takeover(row(reason_alpha_c=apart, positional_upper_kind="agreement",
                                 positional_upper_alpha=0.55)) == (0.6, "semantic end")
    for reason in (apart, lower):
        assert semantic_takeover(row(reason_alpha_c=reason, positional_upper_kind="agreement",
                                     positional_upper_gap=2e-5)) == (1.5, "positional end")
        a, kind = semantic_takeover(row(reason_alpha_c=reason, positional_upper_kind="agreement",
                                        positional_upper_gap=-2e-5))
        assert math.isnan(a) and kind == "undetermined"

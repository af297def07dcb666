"""Branch curves, thresholds, spinodals and the phase-diagram sweep."""
import math
import time

import numpy as np
import pytest

from attnlib import (TaskParams, ThresholdNotFound, alpha_sweep, branch_curvature, critical_alpha,
                     phase_diagram, spinodal_alpha)
from attnlib import Overlaps, solve_state_evolution
from attnlib.sweeps import branch_exists

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))


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


def test_no_crossing_raises():
    with pytest.raises(ThresholdNotFound, match="do not cross"):
        critical_alpha(P, alphas=(2.0, 3.0, 4.0))


def test_curvatures_are_positive_where_the_branches_are_minima():
    """Both branches are local minima along their held overlap on both sides of alpha_c."""
    assert branch_curvature(P, 2.0, "semantic") > 0
    assert branch_curvature(P, 1.0, "semantic") > 0
    assert branch_curvature(P, 1.0, "positional") > 0
    assert branch_curvature(P, 2.0, "positional") > 0


def test_semantic_spinodal():
    """At omega = 0.3 the semantic branch, followed down in alpha, merges with the agnostic point
    (theta -> 0) between alpha ~ 0.55 and 0.8 (GH 12; the value depends on the quadrature, chapter 5), well
    below alpha_c; the positional branch exists on the whole grid."""
    grid = (0.4, 0.6, 0.8, 1.0, 1.4, 2.0)
    a_s = spinodal_alpha(P, "semantic", alphas=grid, xtol=0.01)
    assert 0.5 < a_s < 0.8
    # followed continuously from alpha = 1, the branch is still there just above a_s and gone below it
    ok, above = branch_exists(P, 0.8, "semantic", start=solve_state_evolution(P, 1.0, "semantic").overlaps)
    assert ok
    ok, above = branch_exists(P, a_s + 0.02, "semantic", start=above.overlaps)
    assert ok and above.theta > 1e-3 * P.rho
    ok, res = branch_exists(P, a_s - 0.05, "semantic", start=above.overlaps)
    assert not ok and abs(res.theta) < 1e-3 * P.rho
    assert spinodal_alpha(P, "positional", alphas=grid) is None


def test_phase_diagram_alpha_c_rises_with_omega():
    df = phase_diagram(P, [0.1, 0.3], n_jobs=2, alphas=(0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.7, 2.0, 2.5))
    assert list(df.omega) == [0.1, 0.3]
    assert df.found_alpha_c.all() and df.found_alpha_l.all()
    a_c, a_l = df.alpha_c.to_numpy(), df.alpha_l.to_numpy()
    assert a_c[0] < a_c[1] and np.all(a_l >= a_c - 1e-9)
    assert abs(a_c[1] - 1.24) < 0.05
    assert math.isclose(df.eps_lin[1], 0.001971, rel_tol=0.01)


def test_root_refinement_falls_back_with_a_warning():
    from attnlib import ConvergenceWarning
    from attnlib.sweeps import _refine_root

    assert abs(_refine_root(lambda a: 1.5 - a, 1.0, 2.0, 0.5, -0.5, 1e-8, "x") - 1.5) < 1e-7
    with pytest.warns(ConvergenceWarning, match="linear interpolation"):
        root = _refine_root(lambda a: 1.0, 1.0, 2.0, 0.3, -0.1, 1e-8, "x")  # recomputed ends lost the sign change
    assert abs(root - 1.75) < 1e-12


def test_branch_following_stays_on_the_positional_branch():
    """Regression: at omega = 0.15 the Anderson-accelerated iteration (before its steps were safeguarded and
    sweeps used follow_branch) jumped from the positional branch onto the uninformed point (m = 0) at
    alpha ~ 0.83, which put alpha_c at 0.754 instead of ~0.823. Followed along alpha, the branch keeps m > 0
    there and agrees with plain damped iteration from the previous point."""
    from dataclasses import replace

    from attnlib import SESolver
    from attnlib.sweeps import DEFAULT_ALPHA_GRID

    p = TaskParams(sigma=0.5, lam=0.01, omega=0.15)
    grid = [a for a in DEFAULT_ALPHA_GRID if a <= 0.83]
    df = alpha_sweep(p, grid, branches=("positional",), use_cache=False)
    last = df.iloc[-1]
    assert last.converged and last.m > 0.1
    plain = solve_state_evolution(p, float(last.alpha), "positional", start=Overlaps(*df.iloc[-2][["q", "m", "V", "theta"]]),
                                  solver=replace(SESolver(), anderson=0, max_iter=2000))
    assert plain.converged and abs(plain.m - last.m) < 1e-3

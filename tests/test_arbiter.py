"""The finite-d arbiter (attnlib.finite_d.arbiter): runs, tables, crossings with bootstrap errors, 1/d extrapolation."""
import math

import numpy as np
import pandas as pd
import pytest

from attnlib import TaskParams, simulate_erm
from attnlib.finite_d.arbiter import (arbiter_table, crossing_alpha, extrapolate_inverse_d, finite_d_critical_alpha,
                             finite_d_minimum, finite_d_theta_loss_alpha, loss_zero_theory)

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))


def synthetic_table(alpha_true=1.2, slope=30.0, noise=2e-4, seeds=8, ds=(1000, 2000, 4000), rng_seed=1):
    """Paired training losses whose seed-mean gap is 0.01 (alpha_true + slope/d - alpha) + noise."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for d in ds:
        for a in np.linspace(0.9, 1.5, 7):
            for s in range(seeds):
                base = rng.normal(0.003, 1e-4)  # shared by both starts on the same data
                gap = 0.01 * (alpha_true + slope / d - a) + rng.normal(0, noise)
                rows += [dict(d=d, alpha=a, seed=s, start="semantic", train_loss=base + gap, theta=0.1, sigma=0.5),
                         dict(d=d, alpha=a, seed=s, start="positional", train_loss=base, theta=0.0, sigma=0.5)]
    return pd.DataFrame(rows)


def test_crossing_alpha_linear_interpolation_and_direction():
    assert crossing_alpha([1, 2, 3], [1.0, -1.0, -2.0]) == pytest.approx(1.5)
    assert crossing_alpha([1, 2, 3], [-1.0, 1.0, 2.0], direction=+1) == pytest.approx(1.5)
    assert math.isnan(crossing_alpha([1, 2, 3], [1.0, 2.0, 3.0]))
    # noise: the crossing that misclassifies fewest points wins over an isolated early dip
    assert crossing_alpha([1, 2, 3, 4, 5, 6], [3, -0.1, 2, 1, -1, -2]) == pytest.approx(4.5)
    with pytest.raises(ValueError, match="direction"):
        crossing_alpha([1, 2], [1, -1], direction=0)


def test_extrapolation_recovers_a_linear_law_in_inverse_d():
    ds = np.array([1000, 2000, 4000, 8000])
    a, a_err, b, chi2 = extrapolate_inverse_d(ds, 1.2 + 30 / ds, np.full(4, 1e-3))
    assert a == pytest.approx(1.2, abs=1e-9) and b == pytest.approx(30, rel=1e-6) and chi2 < 1e-12
    assert 0 < a_err < 5e-3
    one = extrapolate_inverse_d([1000], [1.3], [0.01])
    assert one[:3] == (1.3, 0.01, 0.0)
    assert all(math.isnan(v) for v in extrapolate_inverse_d([1000], [math.nan], [0.01]))


def test_arbiter_recovers_a_known_crossing_with_an_honest_error():
    est = finite_d_critical_alpha(synthetic_table(), n_boot=400)
    assert est.found and list(est.per_d.d) == [1000, 2000, 4000]
    # per d: the root of 0.01 (1.2 + 30/d - alpha), within a few bootstrap errors
    for row in est.per_d.itertuples():
        assert abs(row.value - (1.2 + 30 / row.d)) < 4 * row.stderr + 2e-3
        assert 0 < row.stderr < 0.05
    assert abs(est.value - 1.2) < 4 * est.stderr + 2e-3
    assert est.slope == pytest.approx(30, abs=25)
    # more noise -> larger errors
    noisy = finite_d_critical_alpha(synthetic_table(noise=2e-3), n_boot=400)
    assert noisy.per_d.stderr.mean() > est.per_d.stderr.mean()


def test_theta_loss_threshold_on_a_synthetic_table():
    t = synthetic_table()
    t.loc[t.start == "semantic", "theta"] = 0.25 * np.clip(t.alpha - 1.0, 0, None)  # theta/rho = alpha - 1
    est = finite_d_theta_loss_alpha(t, floor=0.25, n_boot=50)
    assert est.value == pytest.approx(1.25, abs=1e-9)


def test_the_arbiter_needs_both_starts():
    t = synthetic_table()
    with pytest.raises(ValueError, match="both starts"):
        finite_d_critical_alpha(t[t.start == "semantic"])


def test_finite_d_minimum_matches_simulate_erm_and_is_cached():
    row = finite_d_minimum(P, 200, 1.5, "positional", seed=3)
    ref = simulate_erm(P, 200, 1.5, start="positional", seed=3, method="lbfgs", normalize_teacher=True,
                       n_test=100, keep_Q=False)
    assert row["converged"] and row["m"] == pytest.approx(ref.m, abs=1e-6)
    assert row["train_loss"] == pytest.approx(ref.train_loss, rel=1e-8)
    assert row["train_loss_zero"] > row["train_loss"]
    again = finite_d_minimum(P, 200, 1.5, "positional", seed=3)
    assert again == row
    with pytest.raises(ValueError, match="start"):
        finite_d_minimum(P, 200, 1.5, "random")
    with pytest.raises(ValueError, match="alpha"):
        finite_d_minimum(P, 200, -1.0)


def test_arbiter_table_is_tidy_and_zero_loss_matches_its_limit():
    t = arbiter_table(P, alphas=(1.0, 2.0), ds=(300,), seeds=(0, 1, 2, 3), n_jobs=2)
    assert len(t) == 2 * 4 * 2 and set(t.start) == {"semantic", "positional"}
    for col in ("alpha", "d", "seed", "start", "q", "m", "theta", "train_loss", "train_loss_zero", "converged"):
        assert col in t.columns
    # R(0)/d is the same for both starts on the same data, and its seed mean is close to its limit
    piv = t.pivot_table(index=["alpha", "seed"], columns="start", values="train_loss_zero")
    assert np.allclose(piv.semantic, piv.positional, rtol=0, atol=0)
    for a, sub in t.groupby("alpha"):
        assert sub.train_loss_zero.mean() == pytest.approx(loss_zero_theory(P, a), rel=0.05)
    with pytest.raises(ValueError, match="starts"):
        arbiter_table(P, alphas=(1.0,), ds=(100,), seeds=(0,), starts=("random",))

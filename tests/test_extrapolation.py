"""attnlib.finite_d.extrapolation: seed means extrapolated in 1/d, the minimisers a branch is compared with, and
the comparison with fixed points (synthetic tables whose limit is known)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnlib.finite_d.extrapolation import (branch_minimisers, compare_with_fixed_points, nearest_branch_comparison,
                                           seed_mean_extrapolation)

DS = (1000, 2000, 4000)


def _synthetic(limit: float, slope: float, noise: float, n_seeds: int = 6, seed: int = 0) -> pd.DataFrame:
    """Runs whose value is ``limit + slope/d`` plus Gaussian noise of ``noise/sqrt(d/1000)`` per seed."""
    rng = np.random.default_rng(seed)
    rows = [dict(case="X", alpha=1.0, branch="semantic", start="semantic", d=d, seed=s,
                 train_loss=limit + slope / d + noise * np.sqrt(1000 / d) * rng.standard_normal())
            for d in DS for s in range(n_seeds)]
    return pd.DataFrame(rows)


def test_noise_free_values_extrapolate_exactly():
    t = _synthetic(0.01, 3.0, 0.0)
    fit = seed_mean_extrapolation(t, "train_loss")
    assert fit["inf"] == pytest.approx(0.01, rel=1e-9) and fit["slope"] == pytest.approx(3.0, rel=1e-7)
    assert fit["by_d"][4000] == pytest.approx(0.01 + 3.0 / 4000) and fit["n_seeds"] == 6


def test_the_extrapolation_error_covers_the_limit():
    """Over many synthetic tables the limit lies within two errors of the fit about 95 % of the time (the errors
    are seed standard errors, the fit weighted by them)."""
    z = []
    for k in range(200):
        fit = seed_mean_extrapolation(_synthetic(0.01, 3.0, 2e-4, seed=k), "train_loss")
        z.append((fit["inf"] - 0.01) / fit["inf_err"])
    inside = np.mean(np.abs(z) < 2)
    assert 0.85 < inside <= 1.0


def test_branch_minimisers_keep_runs_on_their_branch_and_the_lowest_free_one():
    t = pd.DataFrame([
        dict(case="L3", d=1000, alpha=1.0, seed=0, start="semantic", branch="semantic", train_loss=1.0),
        dict(case="L3", d=1000, alpha=1.0, seed=0, start="positional", branch="semantic", train_loss=1.0),
        dict(case="L3", d=1000, alpha=1.0, seed=1, start="positional", branch="positional", train_loss=2.0),
        dict(case="r2", d=1000, alpha=1.0, seed=0, start="semantic", branch="free", train_loss=3.0),
        dict(case="r2", d=1000, alpha=1.0, seed=0, start="random", branch="free", train_loss=2.5),
        dict(case="r2", d=1000, alpha=1.0, seed=1, start="positional", branch="free", train_loss=4.0)])
    kept = branch_minimisers(t)
    assert len(kept) == 4
    assert set(kept[kept.case == "L3"].start) == {"semantic", "positional"}
    assert (kept[kept.case == "L3"].start == kept[kept.case == "L3"].branch).all()
    free = kept[kept.case == "r2"].set_index("seed")
    assert free.loc[0].start == "random" and free.loc[1].start == "positional"
    with pytest.raises(ValueError, match="lacks the columns"):
        branch_minimisers(t.drop(columns="branch"))


def test_comparison_finds_agreement_and_a_shifted_theory():
    fd = _synthetic(0.01, 3.0, 2e-4, seed=1)
    theory = pd.DataFrame([dict(case="X", alpha=1.0, branch="semantic", train_loss=0.01, train_loss_err=1e-6)])
    ok = compare_with_fixed_points(fd, theory, quantities=("train_loss",)).iloc[0]
    assert abs(ok.z) < 3 and ok.d_max == 4000 and ok.n_d == 3 and ok.n_seeds == 6
    assert ok.fd_dmax == pytest.approx(fd[fd.d == 4000].train_loss.mean())
    shifted = theory.assign(train_loss=0.01 + 20 * ok.fd_inf_err)
    bad = compare_with_fixed_points(fd, shifted, quantities=("train_loss",)).iloc[0]
    assert bad.z < -10 and bad.rel_diff < 0
    with pytest.raises(ValueError, match="no theory row"):
        compare_with_fixed_points(fd, theory.assign(alpha=2.0), quantities=("train_loss",))
    with pytest.raises(ValueError, match="one row per"):
        compare_with_fixed_points(fd, pd.concat([theory, theory]), quantities=("train_loss",))


def test_nearest_branch_comparison_keeps_the_runs_that_stayed_and_recovers_each_branch():
    """Two branches with known limits: the runs from each start extrapolate to their branch's values, and a run
    from the positional start that ended near the semantic fixed point is not counted as a positional one."""
    rng = np.random.default_rng(3)
    fixed = {"semantic": dict(q=0.2, m=0.01, theta=0.15, test_error=0.004, train_loss=0.006),
             "positional": dict(q=0.05, m=0.25, theta=0.0, test_error=0.009, train_loss=0.007)}
    rows = []
    for start, f in fixed.items():
        for d in DS:
            for s in range(5):
                noise = 1e-4 * np.sqrt(1000 / d) * rng.standard_normal(5)
                rows.append(dict(case=0, alpha=1.3, start=start, d=d, seed=s, q=f["q"] + 2 / d + noise[0],
                                 m=(-1) ** s * (f["m"] + noise[1]), theta=(-1) ** s * (f["theta"] + noise[2]),
                                 test_error_cv=f["test_error"] + 1 / d + noise[3], train_loss=f["train_loss"] + noise[4]))
    # a positional start that left for the semantic minimum
    rows.append(dict(case=0, alpha=1.3, start="positional", d=4000, seed=9, q=0.2, m=0.0, theta=0.15,
                     test_error_cv=0.004, train_loss=0.006))
    theory = pd.DataFrame([dict(case=0, alpha=1.3, branch=b, **f) for b, f in fixed.items()])
    table = nearest_branch_comparison(pd.DataFrame(rows), theory).set_index(["branch", "quantity"])
    assert table.loc[("positional", "q"), "kept"] == 15 and table.loc[("semantic", "q"), "kept"] == 15
    for (branch, quantity), row in table.iterrows():
        assert abs(row.z) < 4, (branch, quantity, row.z)
    assert table.loc[("semantic", "overlap"), "theory"] == 0.15 and table.loc[("positional", "overlap"), "theory"] == 0.25
    shifted = theory.assign(test_error=theory.test_error * 1.2)
    bad = nearest_branch_comparison(pd.DataFrame(rows), shifted).set_index(["branch", "quantity"])
    assert (bad.xs("test_error", level="quantity").z < -10).all()

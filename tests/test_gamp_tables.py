"""The GAMP tables of attnlib.finite_d.gamp: gamp_tracking_table (GAMP's overlaps next to its state evolution,
iteration by iteration) and gamp_fixed_point_table (GAMP's fixed point against L-BFGS), and their disk cache.

Reference task of the paper (book/data/paper_reference.csv; sigma = 0.5, lambda = 0.01, omega = 0.3,
standard A), alpha = 2.
"""
import json

import numpy as np
import pandas as pd
import pytest

import attnlib.cache as cache_mod
import attnlib.finite_d.gamp_tables as gamp_tables
from attnlib import gamp_fixed_point_table, gamp_tracking_table
from attnlib.exceptions import CacheWarning
from attnlib.params import TaskParams
from attnlib.theory.model.quadrature import Quadrature

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
ALPHA = 2.0
OVERLAPS = ("m", "theta", "q", "V")
N_TRACK = 12
# a small, cheap configuration for the cache tests (values not checked against the theory)
SMALL = dict(d=100, alpha=ALPHA, seeds=(0, 1), n_iter=3, quadrature=Quadrature("gauss-hermite", 6))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def calls(monkeypatch):
    """Count the GAMP and state-evolution runs the tables start (the tables look these names up in gamp_tables)."""
    counts = {"gamp": 0, "se": 0}
    real_gamp, real_se = gamp_tables.run_gamp, gamp_tables.state_evolution_iterates

    def counting_gamp(*args, **kwargs):
        counts["gamp"] += 1
        return real_gamp(*args, **kwargs)

    def counting_se(*args, **kwargs):
        counts["se"] += 1
        return real_se(*args, **kwargs)

    monkeypatch.setattr(gamp_tables, "run_gamp", counting_gamp)
    monkeypatch.setattr(gamp_tables, "state_evolution_iterates", counting_se)
    return counts


@pytest.fixture(scope="module")
def table():
    """d = 1000, seed 0, both starts, default state-evolution quadrature, not cached."""
    return gamp_tracking_table(P, d=1000, alpha=ALPHA, seeds=(0,), n_iter=N_TRACK, use_cache=False)


def test_tracking_table_schema(table):
    assert len(table) == 2 * (N_TRACK + 1)
    assert list(table.columns[:5]) == ["start", "d", "alpha", "seed", "t"]
    for k in OVERLAPS:
        assert f"{k}_gamp" in table and f"{k}_se" in table
    for start, g in table.groupby("start"):
        assert list(g.t) == list(range(N_TRACK + 1))
        first = g.iloc[0]
        # both start from the same overlaps (GAMP's initial Q has them exactly)
        for k in OVERLAPS:
            assert first[f"{k}_gamp"] == pytest.approx(first[f"{k}_se"], rel=1e-9, abs=1e-12), (start, k)
        # conjugates belong to the step that produced iterate t: none at t = 0
        assert g[["m_hat_gamp", "V_hat_gamp", "m_hat_se", "V_hat_se"]].iloc[0].isna().all()
        assert not g.drop(index=g.index[0]).isna().any().any()
    assert np.allclose(table.rho_hat, P.sigma**2, rtol=1e-12)  # normalised teacher


def _max_dev(g, k):
    return float(np.max(np.abs(g[f"{k}_gamp"] - g[f"{k}_se"])))


def test_gamp_tracked_by_state_evolution_semantic(table):
    g = table[table.start == "semantic"]
    # iteration by iteration, within the finite-size fluctuations at d = 1000 (measured, seed 0: theta 0.0024,
    # q 0.0028, m 0.011 (the state evolution keeps m = 0), V 0.8 %, V_hat 5.5 %)
    assert _max_dev(g, "theta") < 0.01
    assert _max_dev(g, "q") < 0.01
    assert _max_dev(g, "m") < 0.03
    assert np.max(np.abs(g.V_gamp / g.V_se - 1)) < 0.03
    assert np.max(np.abs(g.m_se)) < 1e-8  # m = 0 is preserved by the state evolution (to round-off)
    # the empirical conjugate V_hat (Stein's lemma in the SE, divergence with jumps in GAMP)
    assert np.nanmax(np.abs(g.V_hat_gamp / g.V_hat_se - 1)) < 0.15
    # both approach the semantic fixed point (paper reference value: theta = 0.1586)
    assert g.theta_se.iloc[-1] == pytest.approx(0.1586, rel=0.05)
    assert g.theta_gamp.iloc[-1] == pytest.approx(0.1586, rel=0.08)


def test_gamp_tracked_by_state_evolution_positional(table):
    g = table[table.start == "positional"]
    # measured, seed 0: m 0.012, q 0.003, theta 0.0066, V 7.6 %
    assert np.max(np.abs(g.theta_se)) < 1e-8  # theta = 0 is preserved exactly by the state evolution
    assert np.max(np.abs(g.theta_gamp)) < 0.015
    assert _max_dev(g, "m") < 0.03
    assert _max_dev(g, "q") < 0.01
    assert np.max(np.abs(g.V_gamp / g.V_se - 1)) < 0.12
    assert g.m_se.iloc[-1] == pytest.approx(0.2586, rel=0.05)


def test_tracking_table_is_cached_and_recomputes_corrupt_and_changed_keys(cache_dir, calls, monkeypatch):
    first = gamp_tracking_table(P, **SMALL)
    assert calls == {"gamp": 4, "se": 2}                     # 2 starts x 2 seeds, one SE per start
    files = sorted(cache_dir.glob(f"{gamp_tables.TRACK_NAMESPACE}-*.json"))
    assert len(files) == 4 and len(list(cache_dir.glob(f"{gamp_tables.SE_NAMESPACE}-*.json"))) == 2
    # everything read back: no new runs, identical table
    again = gamp_tracking_table(P, **SMALL)
    assert calls == {"gamp": 4, "se": 2}
    pd.testing.assert_frame_equal(again, first)
    # a corrupt file and a file whose stored key differs are reported and recomputed (only those)
    files[0].write_text("{ not json")
    doc = json.loads(files[1].read_text())
    doc["key"] = "gamp-track-someone-else"
    files[1].write_text(json.dumps(doc))
    with pytest.warns(CacheWarning):
        resumed = gamp_tracking_table(P, **SMALL)
    assert calls == {"gamp": 6, "se": 2}
    pd.testing.assert_frame_equal(resumed, first)
    # a changed parameter is a different key: recomputed, different numbers
    other = gamp_tracking_table(P, **{**SMALL, "seeds": (0,)}, damping=0.5)
    assert calls == {"gamp": 8, "se": 4}
    assert not np.allclose(other.q_se, first[first.seed == 0].q_se.to_numpy())
    # so is a changed library (the fingerprint is part of every key)
    monkeypatch.setattr(cache_mod, "library_fingerprint", lambda: "edited-attnlib")
    gamp_tracking_table(P, **SMALL)
    assert calls == {"gamp": 12, "se": 6}


def test_fixed_point_table_small_d(cache_dir, calls):
    fp = gamp_fixed_point_table(P, d=300, alpha=ALPHA, starts="semantic", seeds=(0,))
    assert calls["gamp"] == 1 and len(fp) == 1
    row = fp.iloc[0]
    assert row.converged_gamp and row.converged_lbfgs and row.converged_lbfgs_named
    assert row.grad_norm_gamp < 1e-6
    # L-BFGS from GAMP's start and from Q = Q* end at the same minimum; GAMP's fixed point (a stationary point
    # of the GLM surrogate) is close to it and has a slightly higher finite-d risk
    assert row.dist_lbfgs == pytest.approx(row.dist_lbfgs_named, abs=1e-5)
    assert row.dist_lbfgs < 0.1
    for k in ("m", "theta", "q"):
        assert abs(row[f"{k}_gamp"] - row[f"{k}_lbfgs"]) < 0.01, k
    assert row.train_loss_lbfgs <= row.train_loss_gamp < row.train_loss_lbfgs * 1.01
    # cached
    again = gamp_fixed_point_table(P, d=300, alpha=ALPHA, starts="semantic", seeds=(0,))
    assert calls["gamp"] == 1
    pd.testing.assert_frame_equal(again, fp)


@pytest.mark.parametrize("kwargs, name", [
    ({"starts": "random"}, "starts"),
    ({"starts": []}, "starts"),
    ({"d": []}, "d"),
    ({"d": 0}, "d"),
    ({"seeds": -1}, "seeds"),
    ({"n_iter": 0}, "n_iter"),
    ({"alpha": 0.0}, "alpha"),
    ({"damping": 0.0}, "damping"),
    ({"prox_mode": "local"}, "prox_mode"),
    ({"quadrature": 12}, "quadrature"),
])
def test_tracking_table_bad_input_names_the_parameter(kwargs, name, cache_dir):
    with pytest.raises(ValueError, match=name):
        gamp_tracking_table(P, **{"d": 50, "n_iter": 1, **kwargs})


@pytest.mark.parametrize("kwargs, name", [
    ({"starts": "random"}, "starts"),
    ({"gamp_options": {"random": {}}}, "gamp_options"),
    ({"gamp_options": {"semantic": {"tol": 1e-3}}}, "gamp_options"),
    ({"params": {"sigma": 0.5}}, "params"),
])
def test_fixed_point_table_bad_input_names_the_parameter(kwargs, name, cache_dir):
    args = {"params": P, "d": 50, **kwargs}
    with pytest.raises(ValueError, match=name):
        gamp_fixed_point_table(**args)

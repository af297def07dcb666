"""The phase-diagram data of book/06-phase-diagram.md (written by scripts/regenerate_phase_data.py).

Checks the CSVs' columns and required values, and recomputes a few entries with attnlib (same solver as the
script) against the stored values. Tolerances reflect solver and quadrature noise: 2e-3 absolute on
thresholds (Brent's ``xtol`` is 1e-4; the fixed points are converged to 1e-6 relative), 1 % on errors.
"""
from __future__ import annotations

import json
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import attnlib
from attnlib.sweeps import DEFAULT_ALPHA_GRID

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "book" / "data"
sys.path.insert(0, str(ROOT / "scripts"))
from regenerate_phase_data import BASE, make_solver  # noqa: E402

META = json.loads((DATA / "phase_meta.json").read_text())
SOLVER = make_solver(META["solver"]["order"])

COLUMNS = {
    "phase_standard.csv": ["omega", "alpha_c", "alpha_l", "eps_lin", "spinodal_semantic", "spinodal_positional",
                           "found_alpha_c", "found_alpha_l", "spinodal_semantic_status",
                           "spinodal_positional_status"],
    "phase_alternative.csv": ["omega", "alpha_c", "alpha_l", "eps_lin", "spinodal_semantic",
                              "spinodal_positional", "found_alpha_c", "found_alpha_l"],
    "phase_heatmap.csv": ["omega", "alpha", "eps_t_semantic", "eps_t_positional", "eps_t_gap", "eps_g_semantic",
                          "eps_g_positional", "theta_semantic", "m_positional", "global_branch", "eps_g_global",
                          "eps_lin", "lin_minus_global", "converged_semantic", "converged_positional"],
    "phase_semantic_edge.csv": ["omega", "edge_lo", "edge_hi", "spinodal_semantic_fine", "spinodal_status"],
    "phase_semantic_branch.csv": ["omega", "alpha", "q", "theta", "train_loss", "test_error", "converged"],
    "dual_minima_curvature.csv": ["alpha", "theta", "q", "kappa", "converged"],
    "phase_slices.csv": ["slice", "sigma", "lam", "omega", "alpha_c", "alpha_l", "eps_lin", "found_alpha_c",
                         "found_alpha_l"],
}
REQUIRED = {  # columns that must never be NaN
    "phase_standard.csv": ["omega", "eps_lin"],
    "phase_alternative.csv": ["omega", "eps_lin"],
    "phase_heatmap.csv": ["omega", "alpha", "eps_t_semantic", "eps_t_positional", "eps_t_gap", "eps_g_global",
                          "eps_lin", "lin_minus_global"],
    "phase_slices.csv": ["sigma", "lam", "omega", "eps_lin"],
    "phase_semantic_edge.csv": ["omega", "spinodal_status"],
    "phase_semantic_branch.csv": ["omega", "alpha", "theta", "train_loss"],
    "dual_minima_curvature.csv": ["alpha", "theta", "kappa"],
}


def load(name):
    return pd.read_csv(DATA / name)


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_columns_and_required_values(name):
    df = load(name)
    assert len(df) > 0
    missing = set(COLUMNS[name]) - set(df.columns)
    assert not missing, f"{name}: missing columns {missing}"
    for col in REQUIRED[name]:
        assert df[col].notna().all(), f"{name}: NaN in required column {col}"
    if "found_alpha_c" in df:   # a threshold is NaN exactly when it was not found
        assert (df.found_alpha_c == df.alpha_c.notna()).all()
        assert (df.found_alpha_l == df.alpha_l.notna()).all()


def test_metadata():
    assert META["attnlib_version"] == attnlib.__version__
    assert META["generated_by"] == "scripts/regenerate_phase_data.py"
    for name in COLUMNS:
        assert name in META["files"]


def test_standard_diagram_shape():
    std = load("phase_standard.csv")
    ok = std[std.found_alpha_c]
    assert len(ok) >= 0.7 * len(std)
    assert np.all(np.diff(ok.sort_values("omega").alpha_c) > -2e-3), "alpha_c should rise with omega"
    both = std[std.found_alpha_c & std.found_alpha_l]
    assert np.all(both.alpha_l >= both.alpha_c - 1e-6), "alpha_l >= alpha_c by definition"
    # spec section 4: paper reference at omega = 0.3
    row = std.loc[(std.omega - 0.3).abs().idxmin()]
    assert abs(row.alpha_c - 1.24) < 0.05 and abs(row.alpha_l - 1.45) < 0.05


def test_heatmap_consistency():
    hm = load("phase_heatmap.csv")
    sem = hm.global_branch == "semantic"
    assert (sem == (hm.eps_t_gap < 0)).all()
    eg = np.where(sem, hm.eps_g_semantic, hm.eps_g_positional)
    np.testing.assert_allclose(hm.eps_g_global, eg, rtol=1e-12)
    np.testing.assert_allclose(hm.lin_minus_global, hm.eps_lin - hm.eps_g_global, atol=1e-12)
    assert set(np.round(hm.alpha.unique(), 4)) == set(np.round(DEFAULT_ALPHA_GRID, 4))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_recompute_alpha_c_standard():
    """alpha_c at omega = 0.15 (not cached: fresh computation without the disk cache)."""
    std = load("phase_standard.csv")
    row = std.loc[(std.omega - 0.15).abs().idxmin()]
    p = attnlib.TaskParams(**{**BASE, "omega": float(row.omega)})
    a_c = attnlib.critical_alpha(p, solver=SOLVER, use_cache=False)
    assert abs(a_c - row.alpha_c) < 2e-3


def test_recompute_heatmap_cell():
    """One heat-map cell (both branches at one (alpha, omega)) without the cache, within 1 %."""
    hm = load("phase_heatmap.csv")
    row = hm.loc[((hm.omega - 0.2).abs() + (hm.alpha - 1.5).abs()).idxmin()]
    p = attnlib.TaskParams(**{**BASE, "omega": float(row.omega)})
    out = {}
    for b in ("semantic", "positional"):
        r = attnlib.solve_state_evolution(p, float(row.alpha), b, solver=SOLVER)
        assert r.converged
        out[b] = r
    np.testing.assert_allclose(out["semantic"].train_loss, row.eps_t_semantic, rtol=1e-2)
    np.testing.assert_allclose(out["positional"].train_loss, row.eps_t_positional, rtol=1e-2)
    np.testing.assert_allclose(out["semantic"].test_error, row.eps_g_semantic, rtol=1e-2)
    np.testing.assert_allclose(out["positional"].test_error, row.eps_g_positional, rtol=1e-2)
    np.testing.assert_allclose(attnlib.linear_baseline_error(p), row.eps_lin, rtol=1e-6)


def test_recompute_alternative_and_slice_point():
    """alpha_c of the alternative A, by the sign of the training-loss gap 2e-3 on either side of the stored
    value (4 fixed points instead of a whole sweep), eps_lin of one (sigma, lambda) slice point and alpha_c of
    another, the same way."""
    from attnlib.sweeps import energy_gap

    alt = load("phase_alternative.csv")
    found = alt[alt.found_alpha_c]
    row = found.iloc[len(found) // 2]
    p = attnlib.TaskParams(**{**BASE, "omega": float(row.omega)}, A=attnlib.ALTERNATIVE_A)
    assert energy_gap(p, float(row.alpha_c) - 2e-3, SOLVER) > 0 > energy_gap(p, float(row.alpha_c) + 2e-3, SOLVER)
    sl = load("phase_slices.csv")
    srow = sl[sl.slice == "lam"].iloc[0]
    ps = replace(attnlib.TaskParams(**BASE), omega=float(srow.omega), lam=float(srow.lam), sigma=float(srow.sigma))
    np.testing.assert_allclose(attnlib.linear_baseline_error(ps), srow.eps_lin, rtol=1e-6)
    # alpha_c of one slice, by the sign of the gap on either side (the largest lambda, middle omega: a crossing
    # well inside both branches, reached from cold starts as well as along the sweep)
    big = sl[(sl.slice == "lam") & (sl.lam == sl.lam.max()) & sl.found_alpha_c]
    crow = big.iloc[len(big) // 2]
    pc = replace(attnlib.TaskParams(**BASE), omega=float(crow.omega), lam=float(crow.lam), sigma=float(crow.sigma))
    assert energy_gap(pc, float(crow.alpha_c) - 2e-3, SOLVER) > 0 > energy_gap(pc, float(crow.alpha_c) + 2e-3, SOLVER)


def test_recompute_semantic_branch_and_curvature():
    """One point of the fine semantic branch and one curvature of chapter 5, away from the branch's end."""
    br = load("phase_semantic_branch.csv")
    row = br.loc[((br.omega - 0.3).abs() + (br.alpha - 1.2).abs()).idxmin()]
    p = attnlib.TaskParams(**{**BASE, "omega": float(row.omega)})
    r = attnlib.solve_state_evolution(p, float(row.alpha), "semantic", solver=SOLVER)
    np.testing.assert_allclose(r.theta, row.theta, rtol=1e-2)
    np.testing.assert_allclose(r.train_loss, row.train_loss, rtol=1e-2)
    cv = load("dual_minima_curvature.csv")
    crow = cv.loc[(cv.alpha - 1.2).abs().idxmin()]
    k = attnlib.branch_curvature(attnlib.TaskParams(**BASE), float(crow.alpha), "semantic", SOLVER)
    np.testing.assert_allclose(k, crow.kappa, rtol=2e-2)


def test_semantic_edge_below_alpha_c():
    """The semantic branch must exist (as a fixed point) at alpha_c, i.e. end below it."""
    std = load("phase_standard.csv")
    edge = load("phase_semantic_edge.csv").merge(std[["omega", "alpha_c"]], on="omega")
    both = edge.dropna(subset=["edge_hi", "alpha_c"])
    assert len(both) > 0
    assert (both.edge_hi <= both.alpha_c * 1.12).all()

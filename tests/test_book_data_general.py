"""The committed tables of the chapter on longer sequences and wider students (book/data/general_*.csv, written
by scripts/regenerate_general_data.py): their provenance, a replay of one fixed point, one finite-d minimiser and
the thresholds' consistency with the grid, and the physics the chapter states (finite d on the theory's
branches, the rank-two minimum below both rank-one branches)."""
from __future__ import annotations

import importlib.util
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnlib import solve_general
from attnlib.exceptions import ConvergenceWarning

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "book" / "data"


def _script():
    spec = importlib.util.spec_from_file_location("regen_general", ROOT / "scripts" / "regenerate_general_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()
THEORY = pd.read_csv(DATA / "general_theory.csv")
FD = pd.read_csv(DATA / "general_finite_d.csv")
THR = pd.read_csv(DATA / "general_thresholds.csv")


def test_tables_have_their_sidecars_and_grids():
    for stem in ("general_theory", "general_finite_d", "general_thresholds"):
        meta = json.loads((DATA / f"{stem}.json").read_text())
        assert meta["script"] == "scripts/regenerate_general_data.py" and meta["n_rows"] > 0
    l3 = THEORY[THEORY.case == "L3"]
    assert sorted(l3.alpha.unique()) == list(SCRIPT.ALPHAS_L3) and set(l3.branch) == {"semantic", "positional"}
    assert sorted(THEORY[THEORY.case == "rank2"].alpha) == list(SCRIPT.ALPHAS_RANK2)
    assert (THEORY[THEORY.converged].train_loss > 0).all()  # a converged fixed point is physical
    assert len(FD) == len(SCRIPT.DS) * len(SCRIPT.ALPHAS_L3) * len(SCRIPT.SEEDS) * 2 and FD.converged.all()
    assert np.allclose(np.array(json.loads((DATA / "general_theory.json").read_text())["params"]["A"]),
                       SCRIPT.three_token_params().A_array)


def test_a_theory_row_replays():
    """The L = 3 semantic fixed point at alpha = 2 recomputed equals the table's within four standard errors
    (another machine rounds differently; the scramblings are the same)."""
    row = THEORY[(THEORY.case == "L3") & (THEORY.branch == "semantic") & np.isclose(THEORY.alpha, 2.0)].iloc[0]
    assert bool(row.precise)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = solve_general(SCRIPT.three_token_params(), 2.0, "semantic")
    assert res.train_loss == pytest.approx(row.train_loss, abs=4 * row.train_loss_err + 1e-9)
    assert res.test_error == pytest.approx(row.test_error, abs=4 * row.test_error_err + 1e-9)
    assert bool(row.converged)


def test_a_finite_d_row_replays():
    """One L-BFGS minimiser (d = 500, alpha = 1, seed 0, positional start) recomputed: the same minimum to the
    stopping rule's precision."""
    row = FD[(FD.d == 500) & np.isclose(FD.alpha, 1.0) & (FD.seed == 0) & (FD.start == "positional")].iloc[0]
    new = SCRIPT.finite_d_row(500, 1.0, 0, "positional")
    assert new["train_loss"] == pytest.approx(row.train_loss, rel=1e-6)
    assert new["q"] == pytest.approx(row.q, rel=1e-4) and new["m_norm"] == pytest.approx(row.m_norm, rel=1e-4)


def test_thresholds_lie_where_the_grid_changes_sign():
    """alpha_c is inside the grid interval where the training-loss gap of the L = 3 branches changes sign, and
    alpha_l where the global minimum's test error crosses eps_lin."""
    l3 = THEORY[THEORY.case == "L3"].pivot(index="alpha", columns="branch")
    thr = THR.set_index("name")
    ac = thr.loc["alpha_c"]
    assert bool(ac.converged) and ac.bracket_lo <= ac.alpha <= ac.bracket_hi and ac.err < 0.05 * ac.alpha
    gap = (l3.train_loss.semantic - l3.train_loss.positional)
    below, above = gap[gap.index <= ac.alpha], gap[gap.index >= ac.alpha]
    assert (below > 0).all() and (above < 0).all()
    if "alpha_l" in thr.index and math.isfinite(thr.loc["alpha_l"].alpha):
        al = thr.loc["alpha_l"]
        eps_lin = float(THEORY[THEORY.case == "L3"].eps_lin.iloc[0])
        glob = np.where(l3.index >= ac.alpha, l3.test_error.semantic, l3.test_error.positional) - eps_lin
        assert al.bracket_lo <= al.alpha <= al.bracket_hi
        assert (glob[l3.index > al.alpha] < 0).all()


def test_finite_d_lies_on_the_theory_branches():
    """At d = 2000 every finite-d minimiser's training loss is within 3 % of the theory's fixed point of the
    branch its overlaps point to (L = 3), and the paired gaps change sign where the theory's does."""
    fd = FD.assign(branch=np.where(FD.theta > 0.25 * FD.m_norm, "semantic", "positional"))
    l3 = THEORY[THEORY.case == "L3"]
    big = fd[fd.d == 2000].merge(l3[["alpha", "branch", "train_loss"]], on=["alpha", "branch"], suffixes=("", "_th"))
    assert len(big) == (fd.d == 2000).sum()
    assert ((big.train_loss - big.train_loss_th).abs() / big.train_loss_th).max() < 0.03


def test_rank_two_minimum_is_below_both_rank_one_branches_and_matches_finite_d():
    """Every converged rank-2 fixed point (most of the grid) has a training loss below both rank-1 branches and
    within 6 % of the finite-d rank-2 minimisers (d = 1000, the lowest of three starts per seed)."""
    r2 = THEORY[THEORY.case == "rank2"].set_index("alpha")
    assert r2.converged.sum() >= len(r2) - 2
    r2 = r2[r2.converged]
    r1 = THEORY[THEORY.case == "L2"].pivot(index="alpha", columns="branch", values="train_loss")
    assert (r2.train_loss < r1.min(axis=1).reindex(r2.index)).all()
    fd = pd.read_csv(DATA / "finite_d_rank2.csv")
    best = fd.loc[fd.groupby(["alpha", "seed"]).train_loss.idxmin()].groupby("alpha").train_loss.mean()
    rel = ((best.reindex(r2.index) - r2.train_loss) / r2.train_loss).abs()
    assert rel.max() < 0.06  # d = 1000: finite-size deviations of a few per cent, as at rank one

"""attnlib.book.static_explorer: the JSON payload that the book page embeds, and its HTML wrapper."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from attnlib.book.explorer_grid import EXAMPLE_INPUTS
from attnlib.book.phase_table import LINE_COLUMNS
from attnlib.book.static_explorer import SIGNIFICANT_DIGITS, StaticExplorer, explorer_payload, static_explorer


def fake_grid() -> pd.DataFrame:
    """A full 2 x 3 x 2 grid with made-up but distinct numbers (the payload only reshapes and rounds)."""
    rng = np.random.default_rng(0)
    rows = []
    for w in (0.1, 0.3):
        for b in ("semantic", "positional"):
            for a in (0.5, 1.0, 2.0):
                row = dict(omega=w, alpha=a, branch=b, sigma=0.5, lam=0.01, converged=True,
                           exists=not (b == "semantic" and a == 0.5 and w == 0.1), eps_lin=0.002 + w / 100,
                           q=rng.random(), m=0.0 if b == "semantic" else rng.random(),
                           theta=rng.random() if b == "semantic" else 0.0,
                           test_error=rng.random() / 100 + (0.01 if w == 0.3 else 0.0),  # > eps_lin at 0.3
                           # the semantic loss crosses below the positional one between alpha = 1 and 2
                           train_loss=a / 1000 * (1.0 if b == "positional" else 1.5 if a < 1.5 else 0.5))
                for k in ("S11_mean", "S22_mean", "T11_mean", "T22_mean"):
                    row[k] = 0.5 + 0.1 * w if k.startswith("T") else rng.random()
                for j in range(len(EXAMPLE_INPUTS)):
                    for k in ("S11", "S22"):
                        row[f"{k}_ex{j}"] = rng.random()
                    row[f"T11_ex{j}"], row[f"T22_ex{j}"] = 0.6 + j / 10 + w, 0.4 - j / 10 + w
                rows.append(row)
    g = pd.DataFrame(rows)
    # the phase table's lines at each omega (made up; NaN: no threshold / no end)
    lines = {0.1: dict(alpha_c=1.3, alpha_l=1.6, semantic_end=0.7, positional_end=0.9),
             0.3: dict(alpha_c=np.nan, alpha_l=2.2, semantic_end=0.8, positional_end=np.nan)}
    for k in LINE_COLUMNS:
        g[k] = g.omega.map(lambda w, k=k: lines[w][k])
    loss = g.train_loss.where(g.exists, np.inf)
    g["is_global"] = g.exists & (loss == loss.groupby([g.omega, g.alpha]).transform("min"))
    return g


def test_payload_reshapes_and_rounds_the_grid():
    g = fake_grid()
    p = explorer_payload(g, initial=dict(omega=0.28, alpha=1.1))
    assert p["omega"] == [0.1, 0.3] and p["alpha"] == [0.5, 1.0, 2.0]
    assert p["initial"] == {"omega_index": 1, "alpha_index": 1}
    for (w, a, b), row in g.set_index(["omega", "alpha", "branch"]).iterrows():
        i, j = p["omega"].index(w), p["alpha"].index(a)
        e = p["branches"][b]
        assert e["eps_g"][i][j] == pytest.approx(row.test_error, rel=10 ** (1 - SIGNIFICANT_DIGITS))
        assert e["eps_t"][i][j] == pytest.approx(row.train_loss, rel=10 ** (1 - SIGNIFICANT_DIGITS))
        assert e["theta"][i][j] == pytest.approx(row.theta, rel=10 ** (1 - SIGNIFICANT_DIGITS))
        assert e["exists"][i][j] == int(row.exists)
        assert e["S_mean"][i][j] == pytest.approx([row.S11_mean, row.S22_mean], rel=1e-6)
        assert e["S_ex"][i][j][1] == pytest.approx([row.S11_ex1, row.S22_ex1], rel=1e-6)
        assert p["teacher"]["ex"][i][0] == pytest.approx([row.T11_ex0, row.T22_ex0])
        assert p["eps_lin"][i] == pytest.approx(row.eps_lin)
        assert (p["global"][i][j] == b) == bool(row.is_global)
    # the thresholds and ends are the grid's phase-table columns, per omega (not read off the losses)
    assert p["alpha_c"] == [1.3, None] and p["alpha_l"] == [1.6, 2.2]     # NaN travels as null, never as NaN
    assert p["semantic_end"] == [0.7, 0.8] and p["positional_end"] == [0.9, None]
    assert p["version"] == 2


def test_payload_needs_the_phase_table_columns():
    g = fake_grid()
    with pytest.raises(ValueError, match="phase-table columns"):
        explorer_payload(g.drop(columns="positional_end"))
    g.loc[0, "alpha_c"] = 9.0      # one row of omega = 0.1 disagrees with the others
    with pytest.raises(ValueError, match="constant"):
        explorer_payload(g)


def test_payload_rejects_an_incomplete_grid():
    g = fake_grid()
    with pytest.raises(ValueError, match="one row per"):
        explorer_payload(g.iloc[1:])
    with pytest.raises(ValueError, match="examples"):
        explorer_payload(g, examples=[(1.0, 1.0)])


def test_html_embeds_parseable_json():
    se = static_explorer(fake_grid())
    html = se._repr_html_()
    assert html.startswith('<div class="attnlib-explorer"')
    blob = re.search(r'<script type="application/json" class="attnlib-explorer-data">(.*?)</script>', html, re.S)
    assert json.loads(blob.group(1)) == se.payload
    assert "make_explorer" in repr(se) and "2 omega x 3 alpha" in repr(se)
    tricky = StaticExplorer({"omega": [], "alpha": [], "params": {}, "note": "</script><b>"})
    assert "</script><b>" not in tricky.to_json() and json.loads(tricky.to_json())["note"] == "</script><b>"

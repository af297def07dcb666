"""The quadrature-rule study (attnlib.theory.studies.rule_study; book/data/rule_study_*.csv from
scripts/regenerate_rule_study.py): schema and sidecars of the committed tables, a replay of one deterministic
(Gauss-Hermite) row, argument validation, and a check that the scrambled rule is unbiased.

A failure of the replay after a change of attnlib's numerics means the tables must be regenerated
(``python scripts/regenerate_rule_study.py``).
"""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnlib.params import TaskParams
from attnlib.theory.model.quadrature import Quadrature
from attnlib.theory.studies.rule_study import (FIXED_POINT_FIELDS, IMAGE_FIELDS, fixed_point_errors, map_image,
                                               map_image_errors)
from attnlib.theory.model.state_evolution import Overlaps

from one_thread import load_script

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "book" / "data"
regen = load_script("regenerate_rule_study.py", "regen_rule_study")

MAP_COLUMNS = (["sigma", "lam", "omega", "alpha", "branch", "q0", "m0", "V0", "theta0", "rule", "order", "seed",
                "n_points", "n_nodes", "seconds"] + list(IMAGE_FIELDS)
               + [f"{p}_{f}" for p in ("err", "ref", "ref_rse") for f in IMAGE_FIELDS] + ["reference"])
FIXED_COLUMNS = (["sigma", "lam", "omega", "alpha", "branch", "role", "rule", "order", "seed", "n_points", "q", "m",
                  "V", "theta", "test_error", "train_loss", "seconds", "converged", "n_iter", "residual"]
                 + [f"{p}_{f}" for p in ("dev", "ref", "ref_rse") for f in FIXED_POINT_FIELDS] + ["reference"])
POSITIONAL = TaskParams(sigma=0.5, lam=0.01, omega=0.3)


def load(stem):
    return pd.read_csv(DATA / f"{stem}.csv"), json.loads((DATA / f"{stem}.json").read_text())


def rule_keys(rules):
    return sorted((r.rule, r.order, r.seed) for r in rules)


@pytest.mark.parametrize("stem, columns", [("rule_study_map", MAP_COLUMNS),
                                           ("rule_study_fixed_points", FIXED_COLUMNS)])
def test_schema_and_sidecar(stem, columns):
    df, meta = load(stem)
    assert list(df.columns) == columns
    n_rules = len(regen.RULES) + (len(regen.FIXED_POINT_REFERENCE) if stem.endswith("points") else 0)
    assert len(df) == meta["n_rows"] == len(regen.POINTS) * n_rules
    assert meta["table"] == stem and meta["citation"] == "cui2024phase"
    assert meta["script"] == "scripts/regenerate_rule_study.py"
    for word in ("relative error", "reference", "n_points", "seconds", "2^20" if stem.endswith("map") else "2^19"):
        assert word.lower() in meta["description"].lower(), word
    points = sorted(zip(df.omega, df.alpha, df.branch))
    for point in regen.POINTS:
        assert points.count(point) == n_rules, point
    for (omega, alpha, branch), g in df.groupby(["omega", "alpha", "branch"]):
        cand = g if stem.endswith("map") else g[g.role == "candidate"]
        assert sorted(zip(cand.rule, cand.order, cand.seed)) == rule_keys(regen.RULES)
        # the reference is one per point; a held overlap has relative error / deviation exactly 0
        prefix = "err" if stem.endswith("map") else "dev"
        held = "theta" if branch == "positional" else "m"
        assert (g[held] == 0).all() and (g[f"{prefix}_{held}"] == 0).all() and (g[f"ref_{held}"] == 0).all()
        assert g[[c for c in g.columns if c.startswith("ref_")]].nunique().max() == 1
    assert (df.seconds > 0).all() and np.isfinite(df.select_dtypes("number")).all().all()
    gh = df.rule == "gauss-hermite"
    assert (df.n_points[gh] == df.order[gh] ** 4).all() and (df.n_points[~gh] == 2 ** df.order[~gh]).all()


def test_relative_errors_match_the_stored_values():
    df, _ = load("rule_study_map")
    for f in ("q", "V", "mean_M"):  # never zero (m and theta are held at zero on one branch each)
        np.testing.assert_allclose(df[f"err_{f}"], (df[f] - df[f"ref_{f}"]) / df[f"ref_{f}"].abs(), atol=1e-9)
    fp, _ = load("rule_study_fixed_points")
    ref = fp[fp.role == "reference"].groupby(["omega", "alpha", "branch"])["q"].mean()
    got = fp.groupby(["omega", "alpha", "branch"])["ref_q"].first()
    np.testing.assert_allclose(got.loc[ref.index], ref, rtol=1e-9)


def test_gauss_hermite_row_replays():
    df, _ = load("rule_study_map")
    row = df[(df.omega == 0.3) & (df.alpha == 2.0) & (df.branch == "positional") & (df.rule == "gauss-hermite")
             & (df.order == 12)].iloc[0]
    x = Overlaps(q=row.q0, m=row.m0, V=row.V0, theta=row.theta0)
    img = map_image(TaskParams(sigma=row.sigma, lam=row.lam, omega=row.omega), row.alpha, row.branch, x,
                    Quadrature("gauss-hermite", 12))
    assert img["n_nodes"] == row.n_nodes
    for f in IMAGE_FIELDS:
        np.testing.assert_allclose(img[f], row[f], rtol=1e-6, atol=1e-12, err_msg=f)


def test_argument_validation():
    x = Overlaps(q=0.05, m=0.25, V=11.0, theta=0.0)
    gh = [Quadrature("gauss-hermite", 4)]
    with pytest.raises(ValueError, match="branch must be one of"):
        map_image_errors(POSITIONAL, 2.0, "semantik", x, gh)
    with pytest.raises(ValueError, match="rules must be a non-empty sequence"):
        map_image_errors(POSITIONAL, 2.0, "positional", x, [])
    with pytest.raises(ValueError, match=r"rules\[1\] must be a Quadrature"):
        map_image_errors(POSITIONAL, 2.0, "positional", x, gh + ["gh12"])
    with pytest.raises(ValueError, match="reference must be a randomised rule"):
        map_image_errors(POSITIONAL, 2.0, "positional", x, gh, reference=Quadrature("gauss-hermite", 8))
    with pytest.raises(ValueError, match="reference_seeds must be"):
        map_image_errors(POSITIONAL, 2.0, "positional", x, gh, reference_seeds=(0,))
    with pytest.raises(ValueError, match="reference_seeds must be distinct"):
        map_image_errors(POSITIONAL, 2.0, "positional", x, gh, reference_seeds=(1, 1))
    with pytest.raises(ValueError, match="alpha"):
        map_image_errors(POSITIONAL, -1.0, "positional", x, gh)
    with pytest.raises(ValueError, match="overlaps must"):
        map_image_errors(POSITIONAL, 2.0, "positional", Overlaps(q=-0.1, m=0.2, V=1.0, theta=0.0), gh)
    with pytest.raises(ValueError, match="params must be a TaskParams"):
        map_image_errors({"omega": 0.3}, 2.0, "positional", x, gh)
    with pytest.raises(ValueError, match="branch must be one of"):
        fixed_point_errors(POSITIONAL, 2.0, "free", gh, gh * 2)
    with pytest.raises(ValueError, match="reference_rules must hold at least 2"):
        fixed_point_errors(POSITIONAL, 2.0, "positional", gh, gh)


def test_scrambled_rule_is_unbiased():
    """The mean of eight 2^12-point 'sobol-sym' images (different scramblings) lies within 5 standard errors of
    the committed 2^20 reference; and the scramblings do differ (a rule that ignored its seed would fail)."""
    df, _ = load("rule_study_map")
    row = df[(df.omega == 0.3) & (df.alpha == 2.0) & (df.branch == "positional")].iloc[0]
    params = TaskParams(sigma=row.sigma, lam=row.lam, omega=row.omega)
    x = Overlaps(q=row.q0, m=row.m0, V=row.V0, theta=row.theta0)
    imgs = np.array([[map_image(params, row.alpha, row.branch, x, Quadrature("sobol-sym", 12, s))[f]
                      for f in ("q", "m", "V", "mean_M")] for s in range(8)])
    mean, se = imgs.mean(axis=0), imgs.std(axis=0, ddof=1) / np.sqrt(len(imgs))
    ref = np.array([row[f"ref_{f}"] for f in ("q", "m", "V", "mean_M")])
    ref_se = np.array([row[f"ref_rse_{f}"] for f in ("q", "m", "V", "mean_M")]) * np.abs(ref)
    assert (se > 1e-6 * np.abs(ref)).all(), se
    assert (np.abs(mean - ref) < 5 * np.hypot(se, ref_se)).all(), (mean - ref) / np.hypot(se, ref_se)


def test_summary_is_the_worst_deviation_and_the_averaged_mean():
    table, _ = load("rule_study_fixed_points")
    from attnlib.theory.studies.rule_study import rule_study_summary
    summary = rule_study_summary(table, averaged=(("sobol-sym", 16),))
    cand = table[table.role == "candidate"]
    gh12 = summary[(summary.rule == "gauss-hermite") & (summary.order == 12)].iloc[0]
    rows = cand[(cand.rule == "gauss-hermite") & (cand.order == 12)]
    for k in FIXED_POINT_FIELDS:
        assert gh12[f"worst_{k}"] == pytest.approx(rows[f"dev_{k}"].abs().max())
    mean_row = summary[summary.scramblings > 1].iloc[0]
    sub = cand[(cand.rule == "sobol-sym") & (cand.order == 16)]
    worst = 0.0
    for _, g in sub.groupby(["omega", "alpha", "branch"]):
        ref = g.ref_q.iloc[0]
        worst = max(worst, abs(g.q.mean() / ref - 1))
    assert mean_row.worst_q == pytest.approx(worst)
    assert mean_row.scramblings == 3
    # averaging three scramblings beats each of them
    one = summary[(summary.rule == "sobol-sym") & (summary.order == 16) & (summary.scramblings == 1)].iloc[0]
    assert mean_row.worst_q < one.worst_q
    with pytest.raises(ValueError, match="averaged"):
        rule_study_summary(table, averaged=(("sobol-sym", 11),))
    with pytest.raises(ValueError, match="table must be"):
        rule_study_summary(table.drop(columns="dev_q"))


def test_summary_takes_the_cost_of_a_map_step_from_the_map_table():
    from attnlib.theory.studies.rule_study import rule_study_summary
    table, _ = load("rule_study_fixed_points")
    maps, _ = load("rule_study_map")
    summary = rule_study_summary(table, averaged=(("sobol-sym", 17),), map_table=maps)
    assert (summary.map_seconds > 0).all()
    one = summary[(summary.rule == "sobol-sym") & (summary.order == 17) & (summary.scramblings == 1)].iloc[0]
    three = summary[summary.scramblings == 3].iloc[0]
    assert three.map_seconds == pytest.approx(3 * one.map_seconds)
    with pytest.raises(ValueError, match="map_table lacks"):
        rule_study_summary(table, map_table=maps[maps.rule == "gauss-hermite"])


def test_scrambling_mean_is_the_mean_and_its_standard_error():
    from attnlib.theory.model.quadrature import scrambling_mean
    vals = np.array([[1.0, 10.0], [2.0, 10.0], [4.0, 10.0]])
    mean, se = scrambling_mean(vals)
    assert mean.tolist() == [7 / 3, 10.0]
    assert se[0] == pytest.approx(np.std([1, 2, 4], ddof=1) / np.sqrt(3)) and se[1] == 0.0
    with pytest.raises(ValueError, match="at least 2 scramblings"):
        scrambling_mean([[1.0, 2.0]])

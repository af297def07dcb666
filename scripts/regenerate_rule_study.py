#!/usr/bin/env python
"""Regenerate the quadrature-rule study (book/data/rule_study_map.csv, rule_study_fixed_points.csv + sidecar JSON).

Candidate rules of the state evolution's 4-d Gaussian expectations (:mod:`attnlib.theory.studies.rule_study`): tensor
Gauss-Hermite of order 8, 12, 16, 24 and symmetrised scrambled Sobol (``"sobol-sym"``) with 2^14 and 2^16 points
(scrambling seeds 0, 1, 2) and 2^17 points (seeds 3, 4, 5: the rules of ``attnlib.solve_accurately``), at the reference task (sigma = 0.5, lambda = 0.01, standard A) at

* omega = 0.3, alpha in {1.25, 2}, branches positional and semantic;
* one edge point, omega = 0, alpha = 0.55, positional.

Per point, first the fixed-point table (:func:`~attnlib.theory.studies.rule_study.fixed_point_errors`; reference: the mean
of the "sobol-sym" 2^19 fixed points of seeds 0, 1, 2, warm-started from the median of the candidates' fixed
points), then the map-level table (:func:`~attnlib.theory.studies.rule_study.map_image_errors`) at the overlaps of the
"sobol-sym" 2^16 seed-0 fixed point (reference: "sobol-sym" 2^20, seeds 0, 1, 2). One process, one BLAS thread.

Usage::

    python scripts/regenerate_rule_study.py [--out book/data]
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import attnlib
from attnlib import fixed_point_errors, library_fingerprint, map_image_errors, Overlaps, Quadrature, TaskParams
from attnlib.book import ACCURATE_ORDER, ACCURATE_SEEDS, FIXED_POINT_FIELDS, IMAGE_FIELDS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"

SIGMA, LAM = 0.5, 0.01
#: (omega, alpha, branch)
POINTS = [(0.3, 1.25, "positional"), (0.3, 1.25, "semantic"), (0.3, 2.0, "positional"), (0.3, 2.0, "semantic"),
          (0.0, 0.55, "positional")]
SEEDS = (0, 1, 2)
RULES = ([Quadrature("gauss-hermite", n) for n in (8, 12, 16, 24)]
         + [Quadrature("sobol-sym", k, s) for k in (14, 16) for s in SEEDS]
         + [Quadrature("sobol-sym", ACCURATE_ORDER, s) for s in ACCURATE_SEEDS])   # attnlib.solve_accurately
#: fixed-point reference: mean over these scramblings
FIXED_POINT_REFERENCE = [Quadrature("sobol-sym", 19, s) for s in SEEDS]
#: map-level reference (seeds SEEDS)
MAP_REFERENCE = Quadrature("sobol-sym", 20)
#: the rule whose fixed point gives the map-level evaluation point
MAP_POINT_RULE = Quadrature("sobol-sym", 16, 0)
CITATION = "cui2024phase"


def _rel_text(kind):
    return (f"Relative error means (value - reference) / |reference|, signed, the reference being the mean over the "
            f"3 scramblings (seeds 0, 1, 2) of {kind}; an overlap held at exactly zero by the branch (theta on the "
            f"positional branch, m on the semantic one) has relative error 0. ")


DESCRIPTIONS = {
    "rule_study_map": (
        "Error and cost of one evaluation of the state-evolution map x -> F(x) (book chapter 4) with candidate "
        "quadrature rules of its 4-d Gaussian expectation over the nodes (xi, eta): tensor Gauss-Hermite of order "
        "8, 12, 16, 24 (order^4 points) and the symmetrised scrambled Sobol rule 'sobol-sym' with 2^14 and 2^16 "
        "points (scrambling seeds 0, 1, 2) and 2^17 points (seeds 3, 4, 5, the rules of attnlib.solve_accurately). Task sigma = 0.5, lambda = 0.01, standard A; points (omega, alpha, "
        "branch) = (0.3, 1.25 and 2, positional and semantic) and the edge point (0, 0.55, positional). The map "
        "is evaluated at the fixed point of 'sobol-sym' 2^16 seed 0 of each point. Reference: 'sobol-sym' 2^20, "
        "mean over seeds 0, 1, 2. " + _rel_text("'sobol-sym' 2^20") +
        "Columns: sigma, lam, omega, alpha, branch (the point); q0, m0, V0, theta0 (the overlaps where the map is "
        "evaluated); rule, order (Gauss-Hermite: nodes per dimension; Sobol: log2 of the point count), seed "
        "(scrambling seed, ignored by Gauss-Hermite); n_points (points of the unfolded rule); n_nodes (nodes "
        "evaluated after folding by the branch's symmetries); seconds (wall time of one map evaluation on one "
        "core, best of 2); q, m, V, theta (the one-step image F(x)) and mean_M (E[M], the mean proximal value); "
        "err_<f> (relative error of f in q, m, V, theta, mean_M); ref_<f> (the reference mean); ref_rse_<f> "
        "(the reference's standard error, std over seeds / sqrt(3), relative to |ref_<f>|); reference (label)."),
    "rule_study_fixed_points": (
        "The fixed point of the state evolution (book chapter 4, solve_state_evolution with SESolver(quadrature="
        "rule), default settings, tol 1e-6) computed with candidate quadrature rules: tensor Gauss-Hermite of "
        "order 8, 12, 16, 24, 'sobol-sym' 2^14 and 2^16 (seeds 0, 1, 2) and 2^17 (seeds 3, 4, 5, the rules "
        "averaged by attnlib.solve_accurately), each from the branch's point under the default rule (Gauss-Hermite "
        "12) and found as a sweep finds it (attnlib.theory.solve.branch_points.follow_branch: the iteration, and Newton's "
        "method where the branch repels the iteration, as the positional branch does at omega = 0); and the "
        "reference rules, 'sobol-sym' 2^19 seeds 0, 1, 2, warm-started from the element-wise median of the "
        "candidates' converged fixed points. Task sigma = 0.5, lambda = 0.01, standard A; points "
        "(omega, alpha, branch) = (0.3, 1.25 and 2, positional and semantic) and (0, 0.55, positional). "
        + _rel_text("'sobol-sym' 2^19") +
        "Columns: sigma, lam, omega, alpha, branch; role ('candidate' or 'reference'); rule, order, seed, n_points "
        "(points of the unfolded rule); q, m, V, theta (fixed-point overlaps), test_error (eps_g), train_loss "
        "(eps_t); seconds (wall time of the solve on one core); converged, n_iter, residual (of the solver); "
        "dev_<f> (relative deviation of f in q, m, theta, test_error, train_loss from the reference mean); "
        "ref_<f> (the reference mean); ref_rse_<f> (its standard error over the 3 seeds, relative to "
        "|ref_<f>|); reference (label)."),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    fixed, maps, walls = [], [], {"rule_study_fixed_points": 0.0, "rule_study_map": 0.0}
    for omega, alpha, branch in POINTS:
        params = TaskParams(sigma=SIGMA, lam=LAM, omega=omega)
        t0 = time.perf_counter()
        fp = fixed_point_errors(params, alpha, branch, RULES, FIXED_POINT_REFERENCE)
        walls["rule_study_fixed_points"] += time.perf_counter() - t0
        fixed.append(fp)
        row = fp[(fp.role == "candidate") & (fp.rule == MAP_POINT_RULE.rule) & (fp.order == MAP_POINT_RULE.order)
                 & (fp.seed == MAP_POINT_RULE.seed)].iloc[0]
        x = Overlaps(q=row.q, m=row.m, V=row.V, theta=row.theta)
        t0 = time.perf_counter()
        mp = map_image_errors(params, alpha, branch, x, RULES, reference=MAP_REFERENCE, reference_seeds=SEEDS)
        walls["rule_study_map"] += time.perf_counter() - t0
        maps.append(mp)
        print(f"omega={omega} alpha={alpha} {branch}: {time.perf_counter() - t_all:.0f} s so far", flush=True)
    tables = {"rule_study_fixed_points": pd.concat(fixed, ignore_index=True),
              "rule_study_map": pd.concat(maps, ignore_index=True)}
    for stem, df in tables.items():
        # 12 significant digits: the replay test compares Gauss-Hermite images at 1e-6 relative
        df.to_csv(args.out / f"{stem}.csv", index=False, float_format="%.12g")
        meta = dict(table=stem, description=DESCRIPTIONS[stem],
                    source="Computed with attnlib (attnlib.theory.studies.rule_study) by scripts/regenerate_rule_study.py.",
                    citation=CITATION, script="scripts/regenerate_rule_study.py",
                    function=f"attnlib.theory.studies.rule_study.{'map_image_errors' if stem.endswith('map') else 'fixed_point_errors'}",
                    attnlib_version=attnlib.__version__, attnlib_fingerprint=library_fingerprint(),
                    params=dict(sigma=SIGMA, lam=LAM, A=[list(a) for a in TaskParams().A]),
                    points=[dict(omega=o, alpha=a, branch=b) for o, a, b in POINTS],
                    rules=[dict(rule=r.rule, order=r.order, seed=r.seed) for r in RULES],
                    reference=(dict(rule=MAP_REFERENCE.rule, order=MAP_REFERENCE.order, seeds=list(SEEDS))
                               if stem.endswith("map") else
                               dict(rule=FIXED_POINT_REFERENCE[0].rule, order=FIXED_POINT_REFERENCE[0].order,
                                    seeds=list(SEEDS))),
                    fields=list(IMAGE_FIELDS if stem.endswith("map") else FIXED_POINT_FIELDS),
                    blas_threads=1, numba_threads=1, n_jobs=1, n_rows=len(df),
                    wall_time_s=round(walls[stem], 1), python=sys.version.split()[0], numpy=np.__version__,
                    machine=platform.machine(), generated=time.strftime("%Y-%m-%dT%H:%M:%S"))
        if stem.endswith("map"):
            meta["evaluation_point"] = dict(rule=MAP_POINT_RULE.rule, order=MAP_POINT_RULE.order,
                                            seed=MAP_POINT_RULE.seed)
        (args.out / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{stem}: {len(df)} rows in {walls[stem]:.0f} s", flush=True)
    print(f"total wall time {time.perf_counter() - t_all:.0f} s", flush=True)


if __name__ == "__main__":
    main()

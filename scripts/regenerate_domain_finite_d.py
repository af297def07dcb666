#!/usr/bin/env python
"""Regenerate the finite-d check away from the paper's point (book chapter 7, "Away from the paper's point"):
book/data/finite_d_domain.csv (one row per run) and finite_d_domain_theory.csv (one row per point and branch),
each with its sidecar JSON.

Points: drawn at random (seed :data:`SEED`) from a part of ``attnlib.DOMAIN`` where finite-d runs are affordable
and both minima are common (:data:`BOX`: sigma and lambda log-uniform, omega and the diagonal of A uniform, alpha
log-uniform), kept when the default solve finds **both** branches there (``status == "on-branch"``), until
:data:`N_POINTS` are kept. At each point, L-BFGS on the exact empirical risk from the semantic and the positional
start (``attnlib.erm_sweep``; the teacher normalised to ``||Q*||^2 = d``), at the sizes :data:`DS` and the seeds
:data:`SEEDS`; each run cached on disk under ``$ATTNLIB_CACHE_DIR``, so an interrupted run resumes.

Usage::

    python scripts/regenerate_domain_finite_d.py [--n-jobs 2]
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from attnlib import DOMAIN, TaskParams, branch_curvature, erm_sweep, provenance, solve_state_evolution

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"

SEED = 2026
#: the part of the domain sampled: (low, high) of sigma, lambda, omega, alpha (A's diagonal over the whole domain)
BOX = {"sigma": (0.3, 1.2), "lam": (1e-3, 0.1), "omega": (0.0, 0.6), "alpha": (0.5, 4.0)}
N_POINTS = 6
MAX_DRAWS = 80
DS = [500, 1000, 2000, 4000]
SEEDS = [0, 1, 2]
BRANCHES = ("semantic", "positional")


def draw_points(seed: int = SEED, box: dict = BOX, n_points: int = N_POINTS, max_draws: int = MAX_DRAWS):
    """The first ``n_points`` random points of ``box`` where the default solve finds both branches; returns
    ``(points, theory, n_draws)``: ``points`` a list of ``(TaskParams, alpha)``, ``theory`` one row per point and
    branch (the default solve's overlaps, errors and their standard errors, and ``curvature``, the training loss's
    curvature across the branch, :func:`attnlib.branch_curvature`: negative where the fixed point is a saddle of
    the full problem, which descent leaves)."""
    rng = np.random.default_rng(seed)

    def log_uniform(lo, hi):
        return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))

    points, theory, draws = [], [], 0
    while len(points) < n_points and draws < max_draws:
        draws += 1
        a11, a22 = rng.uniform(*DOMAIN["A_entry"], size=2)
        params = TaskParams(sigma=log_uniform(*box["sigma"]), lam=log_uniform(*box["lam"]),
                            omega=float(rng.uniform(*box["omega"])),
                            A=((float(a11), 1.0 - float(a11)), (1.0 - float(a22), float(a22))))
        alpha = log_uniform(*box["alpha"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = {b: solve_state_evolution(params, alpha, b) for b in BRANCHES}
        if any(r.status != "on-branch" for r in results.values()):
            continue
        case = len(points)
        points.append((params, alpha))
        for branch, r in results.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                curvature = branch_curvature(params, alpha, branch)
            theory.append({"case": case, "alpha": alpha, "branch": branch, "sigma": params.sigma, "lam": params.lam,
                           "omega": params.omega, "A11": params.A[0][0], "A22": params.A[1][1],
                           "q": r.q, "m": abs(r.m), "theta": abs(r.theta), "test_error": r.test_error,
                           "train_loss": r.train_loss, "converged": r.converged, "status": r.status,
                           "curvature": curvature,
                           **{f"{k}_err": r.stderr.get(k, 0.0)
                              for k in ("q", "m", "theta", "test_error", "train_loss")}})
    return points, pd.DataFrame(theory), draws


def run_finite_d(points, n_jobs: int) -> pd.DataFrame:
    """L-BFGS from both starts at every point, size and seed: one tidy row per run."""
    frames = []
    for case, (params, alpha) in enumerate(points):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = erm_sweep(params, alphas=[alpha], ds=DS, seeds=SEEDS, starts=list(BRANCHES), methods=["lbfgs"],
                             n_jobs=n_jobs, normalize_teacher=True)
        df = pd.DataFrame([{k: v for k, v in row.items() if k not in ("A", "q_cols", "m_cols", "theta_cols")}
                           for row in rows])
        df.insert(0, "case", case)
        df["A11"], df["A22"] = params.A[0][0], params.A[1][1]
        frames.append(df)
        print(f"case {case}: {len(df)} runs", flush=True)
    return pd.concat(frames, ignore_index=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    points, theory, draws = draw_points()
    print(f"{len(points)} points with both branches in {draws} draws ({time.perf_counter() - t0:.0f} s)", flush=True)
    runs = run_finite_d(points, args.n_jobs)
    wall = time.perf_counter() - t0
    assert not runs.select_dtypes("number").isna().any().any(), "NaN in the finite-d runs"
    args.out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.out / "finite_d_domain.csv", index=False, float_format="%.17g")
    theory.to_csv(args.out / "finite_d_domain_theory.csv", index=False, float_format="%.17g")
    meta = dict(table="finite_d_domain", script="scripts/regenerate_domain_finite_d.py", seed=SEED, box=BOX,
                a_entry=list(DOMAIN["A_entry"]), n_points=len(points), n_draws=draws, ds=DS, seeds=SEEDS,
                starts=list(BRANCHES), method="lbfgs", options={"normalize_teacher": True}, blas_threads=1,
                n_jobs=args.n_jobs, n_rows=len(runs), wall_time_s=round(wall, 1), **provenance())
    (args.out / "finite_d_domain.json").write_text(json.dumps(meta, indent=2) + "\n")
    meta_theory = {**meta, "table": "finite_d_domain_theory", "n_rows": len(theory),
                   "solver": "attnlib.solve_state_evolution, default rule"}
    (args.out / "finite_d_domain_theory.json").write_text(json.dumps(meta_theory, indent=2) + "\n")
    print(f"finite_d_domain: {len(runs)} runs in {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()

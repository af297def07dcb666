#!/usr/bin/env python
"""Regenerate the finite-d ERM data of book chapter 7 (book/data/finite_d_*.csv + sidecar JSON).

Every run is one call of :func:`attnlib.simulate_erm` through :func:`attnlib.erm_sweep` (joblib, each
point cached on disk under ``$ATTNLIB_CACHE_DIR``, so an interrupted run resumes). The minimiser is
L-BFGS on the exact empirical risk (it reaches the same minimum as the paper's gradient descent; the
``gd_vs_lbfgs`` table checks this at one point). The teacher is normalised (``||Q*||^2 = d``) so that the
finite-d runs are compared with the theory at ``rho = sigma^2``.

Tables written (one tidy row per run):

* ``finite_d_alpha_d1000.csv``: d = 1000, alpha grid, semantic and positional starts, seeds 0-2;
* ``finite_d_fss_alpha1.5.csv``: alpha = 1.5, d in 100 .. 2000, both starts, seeds 0-2;
* ``finite_d_random_d100.csv``: d = 100, random starts, alpha grid, seeds 0-19;
* ``finite_d_random_starts.csv``: random starts around alpha_c (alpha = 1, 1.25, 1.6), d = 100, 300, 1000,
  seeds 0-19, gradient descent with the paper's protocol (lr 0.15, 5000 steps) and L-BFGS;
* ``finite_d_rank2.csv``: rank-2 student, d = 1000, the alpha grid of ``alpha``, three starts, seeds 0-2;
* ``finite_d_gd_vs_lbfgs.csv``: d = 1000, alpha = 2, both starts, seed 0, GD (paper protocol) and L-BFGS.

BLAS is limited to one thread per process (joblib workers do this anyway), so a run is reproducible
bit for bit by ``tests/test_book_data_finite_d.py``.

Usage::

    python scripts/regenerate_finite_d_data.py [--n-jobs 2] [--only alpha fss random random_d rank2 gd]
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import time
import warnings
from pathlib import Path

import pandas as pd

from attnlib import erm_sweep, provenance, TaskParams

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"

PARAMS = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
COMMON = dict(normalize_teacher=True)

#: name -> (grid keyword arguments of erm_sweep, extra simulate_erm options)
TABLES = {
    "alpha": ("finite_d_alpha_d1000", dict(alphas=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5], ds=[1000],
                                           seeds=[0, 1, 2], starts=["semantic", "positional"],
                                           methods=["lbfgs"]), {}),
    "fss": ("finite_d_fss_alpha1.5", dict(alphas=[1.5], ds=[100, 200, 500, 1000, 2000], seeds=[0, 1, 2],
                                          starts=["semantic", "positional"], methods=["lbfgs"]), {}),
    "random": ("finite_d_random_d100", dict(alphas=[0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0],
                                            ds=[100], seeds=list(range(20)), starts=["random"],
                                            methods=["lbfgs"]), {}),
    "random_d": ("finite_d_random_starts", dict(alphas=[1.0, 1.25, 1.6], ds=[100, 300, 1000],
                                                 seeds=list(range(20)), starts=["random"], methods=["gd", "lbfgs"]),
                 {"lr": 0.15, "steps": 5000}),
    "rank2": ("finite_d_rank2", dict(alphas=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5], ds=[1000], seeds=[0, 1, 2],
                                     starts=["semantic", "positional", "random"], methods=["lbfgs"]),
              {"rank": 2}),
    "gd": ("finite_d_gd_vs_lbfgs", dict(alphas=[2.0], ds=[1000], seeds=[0], starts=["semantic", "positional"],
                                        methods=["gd", "lbfgs"]), {"lr": 0.15, "steps": 5000}),
}


def tidy(rows):
    """Rows of ERMResult.as_dict -> DataFrame: per-column overlaps expanded, the matrix A dropped."""
    out = []
    for row in rows:
        row = dict(row)
        row.pop("A")
        for k in ("q_cols", "m_cols", "theta_cols"):
            vals = row.pop(k)
            for j, v in enumerate(vals):
                row[f"{k[:-5]}_{j + 1}"] = v
        out.append(row)
    return pd.DataFrame(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", choices=list(TABLES), default=list(TABLES))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        stem, grid, extra = TABLES[name]
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = erm_sweep(PARAMS, n_jobs=args.n_jobs, **grid, **COMMON, **extra)
        wall = time.perf_counter() - t0
        df = tidy(rows)
        assert not df.select_dtypes("number").isna().any().any(), f"NaN in {stem}"
        df.to_csv(args.out / f"{stem}.csv", index=False, float_format="%.17g")
        meta = dict(table=stem, script="scripts/regenerate_finite_d_data.py",
                    params=dict(sigma=PARAMS.sigma, lam=PARAMS.lam, omega=PARAMS.omega,
                                A=[list(a) for a in PARAMS.A]),
                    grid=grid, options={**COMMON, **extra}, blas_threads=1, n_jobs=args.n_jobs,
                    n_rows=len(df), wall_time_s=round(wall, 1), **provenance())
        (args.out / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{stem}: {len(df)} runs in {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()

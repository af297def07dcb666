#!/usr/bin/env python
"""Regenerate the GAMP data of book chapter 4 (book/data/gamp_*.csv + sidecar JSON).

Both tables come from :mod:`attnlib.finite_d.gamp` at the reference task (sigma = 0.5, lambda = 0.01, omega = 0.3,
standard A), alpha = 2, teacher normalised (``||Q*||^2 = d``), d in {1000, 2000, 4000}, both named starts:

* ``gamp_tracking.csv``: :func:`attnlib.gamp_tracking_table`, seeds 0-11, GAMP's overlaps for 20 iterations
  (scalar damping 0.3) next to its state evolution; the state evolution uses 2^16 scrambled Sobol points
  (:data:`SE_QUADRATURE`), because on the positional start the integrands jump and the default tensor
  Gauss-Hermite rule is off by a few per cent there (book chapter 4, section "Quadrature");
* ``gamp_fixed_points.csv``: :func:`attnlib.gamp_fixed_point_table`, seeds 0-3, GAMP run to its fixed point
  and the L-BFGS minimum of the finite-d risk (from GAMP's start and from ``simulate_erm``'s named start).

Every run is cached on disk under ``$ATTNLIB_CACHE_DIR`` (an interrupted run resumes). BLAS and numba use
one thread per process, so ``tests/test_book_data_gamp.py`` can recompute rows in the same setting.

Usage::

    python scripts/regenerate_gamp_data.py [--n-jobs 2] [--only tracking fixed_points]
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import platform
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np

import attnlib
from attnlib import gamp_fixed_point_table, gamp_tracking_table, library_fingerprint, Quadrature, TaskParams

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"

PARAMS = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
#: the state evolution's rule in the tracking table
SE_QUADRATURE = Quadrature("sobol", 16)
#: name -> (file stem, table function, keyword arguments)
TABLES = {
    "tracking": ("gamp_tracking", gamp_tracking_table,
                 dict(d=[1000, 2000, 4000], alpha=2.0, starts=["semantic", "positional"], seeds=list(range(12)),
                      n_iter=20, damping=0.3, normalize_teacher=True, quadrature=SE_QUADRATURE)),
    "fixed_points": ("gamp_fixed_points", gamp_fixed_point_table,
                     dict(d=[1000, 2000, 4000], alpha=2.0, starts=["semantic", "positional"], seeds=[0, 1, 2, 3],
                          damping=0.3, normalize_teacher=True)),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", choices=list(TABLES), default=list(TABLES))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        stem, func, kwargs = TABLES[name]
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = func(PARAMS, **kwargs, n_jobs=args.n_jobs)
        wall = time.perf_counter() - t0
        # 10 significant digits: far finer than the finite-size effects the tables measure
        df.to_csv(args.out / f"{stem}.csv", index=False, float_format="%.10g")
        meta = dict(table=stem, script="scripts/regenerate_gamp_data.py", function=f"attnlib.{func.__name__}",
                    attnlib_version=attnlib.__version__,
                    attnlib_fingerprint=library_fingerprint(),
                    params=dict(sigma=PARAMS.sigma, lam=PARAMS.lam, omega=PARAMS.omega,
                                A=[list(a) for a in PARAMS.A]),
                    arguments={k: (asdict(v) if k == "quadrature" else v) for k, v in kwargs.items()},
                    blas_threads=1, numba_threads=1, n_jobs=args.n_jobs,
                    n_rows=len(df), wall_time_s=round(wall, 1), python=sys.version.split()[0],
                    numpy=np.__version__, machine=platform.machine(),
                    generated=time.strftime("%Y-%m-%dT%H:%M:%S"))
        (args.out / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{stem}: {len(df)} rows in {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Regenerate the finite-d arbiter data of the book (book/data/arbiter_*.csv + sidecar JSON).

Every run is one L-BFGS minimisation of the empirical risk from the semantic start (``Q = Q*``) or the
positional start (``Q = 1_d/sqrt d``) on a normalised teacher, through :func:`attnlib.finite_d.arbiter.arbiter_table`
(joblib, each run cached on disk under ``$ATTNLIB_CACHE_DIR``, so an interrupted run resumes). Tables (one
tidy row per run):

* ``arbiter_standard.csv``: standard A; at omega in {0, 0.1, 0.2, 0.3, 0.4} 7 alphas around the transition
  (the finite-d alpha_c, chapters 5 and 6), d = 1000, 2000, 4000, seeds 0-3; at omega in {0, 0.3} also alpha in
  {0.3, 0.45, 0.6, 0.8} (d up to 4000) and {1, 1.3, 1.7, 2.2, 3} (d = 1000, 2000), where the theory stops or
  starts describing finite d (chapter 7); plus d = 8000 at omega = 0, alpha in {0.45, 0.6, 0.8}, seeds 0-1; and
  at omega = 0 (where theory and paper differ most) seeds 4-7 at d = 4000 and a d = 8000 column (the five
  middle alphas of the crossing window, seeds 0-5);
* ``arbiter_alternative.csv``: the alternative A, omega in {0.05, 0.1, 0.15, 0.2, 0.3}, alpha in
  {0.5, 1, 1.5, 2}, d = 2000, 4000, seeds 0-1 (chapter 6);
* ``arbiter_gamp.csv``: standard A, omega = 0, alpha in {0.45, 0.5384} (points of the standard grid),
  d = 2000, 4000, seeds 0-2, both starts, each minimisation started from 100 iterations of GAMP (``via_gamp=True``; chapter 8).

BLAS is limited to one thread per process, so a run is reproducible bit for bit
(``tests/test_book_data_arbiter.py`` recomputes some).

Usage::

    python scripts/regenerate_arbiter_data.py [--n-jobs 2] [--only standard alternative gamp]
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

from attnlib import ALTERNATIVE_A, arbiter_table, provenance, TaskParams

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"
STANDARD = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
ALTERNATIVE = STANDARD.with_(A=ALTERNATIVE_A)

#: Centre of the alpha window of the crossing table at each omega (near the finite-d transition).
CROSSING_CENTRES = {0.0: 0.58, 0.1: 0.72, 0.2: 0.9, 0.3: 1.22, 0.4: 1.72}


#: The wide alpha grid at omega in RS_OMEGAS: small alphas (where theory and finite d part) with d up to 4000,
#: larger ones with d up to 2000.
RS_SMALL_ALPHAS = (0.3, 0.45, 0.6, 0.8)
RS_LARGE_ALPHAS = (1.0, 1.3, 1.7, 2.2, 3.0)
RS_OMEGAS = (0.0, 0.3)


def crossing_alphas(omega: float) -> np.ndarray:
    return np.round(CROSSING_CENTRES[omega] * np.geomspace(0.8, 1.25, 7), 4)


def standard_jobs():
    for w in CROSSING_CENTRES:
        alphas = crossing_alphas(w)
        if w in RS_OMEGAS:
            alphas = np.union1d(alphas, RS_SMALL_ALPHAS)
        yield dict(params=STANDARD.with_(omega=w), alphas=alphas, ds=(1000, 2000, 4000), seeds=range(4))
        if w in RS_OMEGAS:
            large = [a for a in RS_LARGE_ALPHAS if a not in set(np.round(alphas, 4))]
            yield dict(params=STANDARD.with_(omega=w), alphas=large, ds=(1000, 2000), seeds=range(4))
    yield dict(params=STANDARD.with_(omega=0.0), alphas=(0.45, 0.6, 0.8), ds=(8000,), seeds=range(2))
    # omega = 0, where theory (0.61) and paper (0.55) differ most: more seeds at d = 4000 and a d = 8000 column
    yield dict(params=STANDARD.with_(omega=0.0), alphas=crossing_alphas(0.0), ds=(4000,), seeds=range(4, 8))
    yield dict(params=STANDARD.with_(omega=0.0), alphas=crossing_alphas(0.0)[1:6], ds=(8000,), seeds=range(6))


def alternative_jobs():
    for w in (0.05, 0.1, 0.15, 0.2, 0.3):
        yield dict(params=ALTERNATIVE.with_(omega=w), alphas=(0.5, 1.0, 1.5, 2.0), ds=(2000, 4000), seeds=range(2))


def gamp_jobs():
    yield dict(params=STANDARD.with_(omega=0.0), alphas=(0.45, 0.5384), ds=(2000, 4000), seeds=range(3),
               via_gamp=True)


PARTS = {"standard": ("arbiter_standard", standard_jobs), "alternative": ("arbiter_alternative", alternative_jobs),
         "gamp": ("arbiter_gamp", gamp_jobs)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", choices=list(PARTS), default=list(PARTS))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        stem, jobs = PARTS[name]
        t0 = time.perf_counter()
        grids = list(jobs())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = pd.concat([arbiter_table(n_jobs=args.n_jobs, progress=True, **g) for g in grids],
                           ignore_index=True)
        wall = time.perf_counter() - t0
        assert df.converged.all(), f"{stem}: {int((~df.converged).sum())} runs did not converge"
        df.to_csv(args.out / f"{stem}.csv", index=False, float_format="%.17g")
        meta = dict(table=stem, script="scripts/regenerate_arbiter_data.py",
                    grids=[dict(params=g["params"].as_dict(), alphas=[float(a) for a in g["alphas"]],
                                ds=list(g["ds"]), seeds=list(g["seeds"]), via_gamp=g.get("via_gamp", False))
                           for g in grids],
                    method="L-BFGS (attnlib.finite_d.simulation.minimize_lbfgs), normalised teacher", blas_threads=1,
                    n_jobs=args.n_jobs, n_rows=len(df), wall_time_s=round(wall, 1), **provenance())
        (args.out / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{stem}: {len(df)} runs in {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()

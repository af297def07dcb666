#!/usr/bin/env python
"""Regenerate the fixed points of the static explorer (book/data/explorer_fixed_points.csv + sidecar JSON).

Both branches of the state evolution at every point of the explorer's grid (``attnlib.book.explorer_grid``:
``GRID_OMEGAS`` x ``GRID_ALPHAS``, sigma = 0.5, lambda = 0.01, standard A) under the library's default rule
(pooled scrambled Sobol rules solved by chord-Newton steps, with standard errors; ``attnlib.alpha_sweep``),
each branch followed along alpha with warm starts (the semantic one downwards). ``explorer_grid`` reads these
rows instead of recomputing them; the attention maps, the phase table's lines and the global minimum are added
there.

Usage::

    python scripts/regenerate_explorer_data.py [--out book/data] [--n-jobs 2]
"""
import argparse
import json
import time
from pathlib import Path

from attnlib import provenance, STANDARD_A
from attnlib.book import explorer_fixed_points, EXPLORER_POINTS_CSV, FIXED_POINT_COLUMNS, GRID_ALPHAS, GRID_OMEGAS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"
SIGMA, LAM = 0.5, 0.01

DESCRIPTION = (
    "Fixed points of the state evolution (book chapter 4) on the grid of the static explorer (chapter 9): "
    "omega in GRID_OMEGAS (0 to 0.9 in steps of 0.05), alpha in GRID_ALPHAS (40 values, geometric from 0.25 "
    "to 5), sigma = 0.5, lambda = 0.01, standard A, both branches, each followed along alpha with warm starts "
    "(the semantic branch downwards from alpha = 5) by attnlib.alpha_sweep under the library's default rule "
    "(four pooled scramblings of the symmetrised Sobol rule, 2^15 points each, doubled up to 2^18 where a "
    "relative standard error exceeds 1e-3; attnlib.solve_chord). Where a branch was not found (below the end "
    "of the semantic branch, as a rule) the row is the uninformed point (defining overlap ~ 0). Columns: "
    "omega, alpha, branch; q, m, V, theta (overlaps; m is held at 0 on the semantic branch, theta on the "
    "positional one), test_error (eps_g), train_loss (eps_t), converged; sigma, lam; q_err, m_err, V_err, "
    "theta_err, test_error_err, train_loss_err (standard errors of the pooled rule, from the spread of its "
    "scramblings); A11, A12, A21, A22 (the positional matrix).")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--n-jobs", type=int, default=2)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    df = explorer_fixed_points(GRID_OMEGAS, GRID_ALPHAS, SIGMA, LAM, STANDARD_A, n_jobs=args.n_jobs)
    wall = time.perf_counter() - t0
    df.to_csv(args.out / EXPLORER_POINTS_CSV, index=False, float_format="%.10g")
    meta = dict(table=EXPLORER_POINTS_CSV[:-4], description=DESCRIPTION,
                source="Computed with attnlib by scripts/regenerate_explorer_data.py.", citation="cui2024phase",
                script="scripts/regenerate_explorer_data.py",
                function="attnlib.book.explorer_grid.explorer_fixed_points",
                params=dict(sigma=SIGMA, lam=LAM, A=[list(a) for a in STANDARD_A]),
                omegas=list(GRID_OMEGAS), alphas=list(GRID_ALPHAS), columns=list(FIXED_POINT_COLUMNS),
                n_rows=len(df), n_unconverged=int((~df.converged).sum()), n_jobs=args.n_jobs,
                wall_time_s=round(wall, 1), **provenance())
    (args.out / f"{EXPLORER_POINTS_CSV[:-4]}.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{len(df)} rows in {wall:.0f} s ({int((~df.converged).sum())} not converged)", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Regenerate the edge verdict's tables (book/data/edge_construction.csv, edge_theory.csv, edge_semantic.csv,
edge_semantic_theory.csv + sidecar JSON).

At omega = 0 (sigma = 0.5, lambda = 0.01, standard A) and alpha in {0.5, 0.5384, 0.58, 0.62}, the positional
sector:

* theory (edge_theory): the positional fixed point converged in the quadrature (attnlib.solve_accurately, rules up
  to 2^17 points), its training loss relative to Q = 0, and at alpha = 0.5384 the profile of the relative training
  loss with m pinned (attnlib.finite_d.construction.accurate_pinned_profile, Sobol-sym 2^17, 3 scramblings);
* finite d (edge_construction): on each training set, descent from the positional start, L-BFGS with m pinned at
  the theory's fixed point from the descent minimum and from 3 random starts in the sector, free descent released
  from the lowest of those (attnlib.finite_d.construction.sector_minima); at alpha = 0.5384 also the pinned
  profile over the m of the theory's profile. d = 1000 (8 seeds), 2000 (6), 4000 (4), 8000 (3 at alpha = 0.5384,
  else 2) and 16000 (2 seeds, alpha = 0.5384 only).

At omega = 0.3, below the end of the theory's semantic branch, the semantic sector with m held at 0 (the
theory's semantic subspace), at the alphas of the authors' semantic rows (0.457, 0.569): the theory's profile
with theta pinned (edge_semantic_theory) and the finite-d one (edge_semantic; the authors' theta as the target;
d = 1000 (6 seeds), 2000 (4), 4000 (3), 8000 (2)).

Usage::

    python scripts/regenerate_edge_construction.py [--out book/data] [--n-jobs 2]
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
from pathlib import Path

import numpy as np
import pandas as pd

import attnlib
from attnlib import (accurate_pinned_profile, construction_table, ConvergenceWarning, library_fingerprint,
                     loss_zero_theory, Overlaps, solve_accurately, TaskParams)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"
SIGMA, LAM, OMEGA = 0.5, 0.01, 0.0
ALPHAS = (0.5, 0.5384, 0.58, 0.62)
#: the alpha of the profile (the edge point of chapter 8's solver checks)
PROFILE_ALPHA = 0.5384
#: pinned m of the profile, besides the theory's fixed point
PROFILE_M = (0.0, 0.05, 0.1, 0.125, 0.175, 0.2, 0.225)
DS = {1000: range(8), 2000: range(6), 4000: range(4), 8000: range(2)}
DS_PROFILE = {**DS, 8000: range(3), 16000: range(2)}
#: the semantic sector at omega = 0.3, below the end of the theory's semantic branch: the alphas of the authors'
#: semantic rows there, each with the authors' theta as the pinned target, m held at 0 (the theory's semantic
#: subspace)
OMEGA_SEM = 0.3
THETA_PROFILE = (0.0, 0.02, 0.04, 0.06, 0.08)
DS_SEM = {1000: range(6), 2000: range(4), 4000: range(3), 8000: range(2)}
N_RESTARTS = 3
THEORY_MAX_ORDER = 17
CITATION = "cui2024phase"

DESCRIPTIONS = {
    "edge_theory": (
        "The theory's positional sector at omega = 0 (sigma = 0.5, lambda = 0.01, standard A). Rows with kind "
        "'fixed point': the positional fixed point at each alpha, the mean over 3 scramblings (seeds 3, 4, 5) of "
        "Sobol-sym 2^17 rules (attnlib.solve_accurately with max_order 17), with standard errors; rows with kind "
        "'profile': at alpha = 0.5384 the fixed point with m pinned (attnlib.finite_d.construction."
        "accurate_pinned_profile, the same rules). Columns: omega, alpha, kind, m, q, V, train_loss (eps_t), "
        "rel_loss (eps_t minus the training loss of Q = 0, attnlib.finite_d.arbiter.loss_zero_theory), and their "
        "standard errors *_err, converged, precise (fixed points: every relative standard error below 1e-3)."),
    "edge_construction": (
        "Finite-d minimisers of the empirical risk in the positional sector at omega = 0 (sigma = 0.5, "
        "lambda = 0.01, standard A; teacher normalised to ||Q*||^2 = d; the training sets of the arbiter tables, "
        "same seeds), by attnlib.finite_d.construction.sector_minima: method 'descent' (L-BFGS from the positional "
        "start Q = 1_d/sqrt d), 'pinned' (L-BFGS with m = (1_d . Q)/d held at pin, started from the descent "
        "minimum), 'restart' (m held at the theory's fixed point, from random starts with q = 0.045 and no "
        "component along Q*), 'released' (free L-BFGS from the lowest minimum at the target). Columns: task "
        "parameters, d, n, alpha, seed, sector, method, restart (index, -1 otherwise), target (the theory's m), "
        "pin (held m; empty for free runs), q, m, theta, train_loss, train_loss_zero (Q = 0 on the same data), "
        "rel_loss, grad_norm (projected for pinned runs), converged, n_iter, seconds; hold_other (empty: the "
        "other overlap, theta, is free)."),
    "edge_semantic_theory": (
        "The theory's semantic sector at omega = 0.3 (sigma = 0.5, lambda = 0.01, standard A) below the end of "
        "its semantic branch, at the alphas of the authors' semantic rows there (0.457, 0.569): the fixed point "
        "with theta pinned and m = 0 (the semantic branch's subspace; attnlib.finite_d.construction."
        "accurate_pinned_profile, Sobol-sym 2^17, mean over 3 scramblings with standard errors). Columns: omega, "
        "alpha, branch, theta, q, V, train_loss, rel_loss (minus the training loss of Q = 0), their standard "
        "errors *_err, converged, rule; authors_theta (the authors' theta at that alpha)."),
    "edge_semantic": (
        "Finite-d minimisers of the empirical risk in the semantic sector at omega = 0.3 (sigma = 0.5, "
        "lambda = 0.01, standard A; teacher normalised), by attnlib.finite_d.construction.sector_minima with "
        "hold_other = 0: method 'descent' (L-BFGS from the semantic start Q = Q*, m and theta free), 'pinned' "
        "(theta = sigma^2 (Q* . Q)/d held at pin and m held at 0, from the descent minimum), 'restart' (the same "
        "at the target, the authors' theta, from random starts), 'released' (free L-BFGS from the lowest minimum "
        "at the target). Columns as in edge_construction; hold_other = 0 (the held m)."),
}


def theory_table(params):
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fps = {a: solve_accurately(params, a, "positional", max_order=THEORY_MAX_ORDER) for a in ALPHAS}
    for a, fp in fps.items():
        zero = loss_zero_theory(params, a)
        rows.append({"omega": OMEGA, "alpha": a, "kind": "fixed point", "m": fp.m, "q": fp.q, "V": fp.V,
                     "train_loss": fp.train_loss, "rel_loss": fp.train_loss - zero, "m_err": fp.stderr["m"],
                     "q_err": fp.stderr["q"], "V_err": fp.stderr["V"], "train_loss_err": fp.stderr["train_loss"],
                     "rel_loss_err": fp.stderr["train_loss"], "converged": fp.converged, "precise": fp.precise})
        print(f"theory alpha={a}: m/s2 {fp.m / SIGMA**2:.4f} +- {fp.stderr['m'] / SIGMA**2:.4f}", flush=True)
    fp = fps[PROFILE_ALPHA]
    start = Overlaps(fp.q, fp.m, fp.V, 0.0)
    prof = accurate_pinned_profile(params, PROFILE_ALPHA, "positional", sorted(PROFILE_M + (fp.m,)), start)
    for r in prof.itertuples():
        rows.append({"omega": OMEGA, "alpha": PROFILE_ALPHA, "kind": "profile", "m": r.m, "q": r.q, "V": r.V,
                     "train_loss": r.train_loss, "rel_loss": r.rel_loss, "m_err": 0.0, "q_err": r.q_err,
                     "V_err": r.V_err, "train_loss_err": r.train_loss_err, "rel_loss_err": r.rel_loss_err,
                     "converged": r.converged, "precise": True})
    return pd.DataFrame(rows), {a: fps[a].m for a in ALPHAS}


def semantic_tables(n_jobs):
    from attnlib.book import authors_tables

    params = TaskParams(sigma=SIGMA, lam=LAM, omega=OMEGA_SEM)
    auth = authors_tables()
    auth = auth[np.isclose(auth.omega, OMEGA_SEM) & (auth.branch == "semantic") & auth.alpha.between(0.45, 0.596)]
    targets = {float(r.alpha): float(r.theta) for r in auth.itertuples()}
    t0 = time.perf_counter()
    rows = []
    for a, th in targets.items():
        prof = accurate_pinned_profile(params, a, "semantic", sorted(THETA_PROFILE + (th,)),
                                       Overlaps(0.044, 0.0, 28.0, th))
        rows.append(prof.assign(authors_theta=th))
    theory = pd.concat(rows, ignore_index=True)
    t_theory = time.perf_counter() - t0
    t0 = time.perf_counter()
    fd = construction_table(params, list(targets), list(targets.values()), {d: list(s) for d, s in DS_SEM.items()},
                            None, sector="semantic", profile=THETA_PROFILE, n_restarts=N_RESTARTS, hold_other=0.0,
                            n_jobs=n_jobs, progress=True)
    return theory, t_theory, fd, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--part", choices=("all", "positional", "semantic"), default="all",
                    help="regenerate both sectors' tables (default) or one sector's")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    walls, tables = {}, []
    if args.part in ("all", "positional"):
        params = TaskParams(sigma=SIGMA, lam=LAM, omega=OMEGA)
        t0 = time.perf_counter()
        theory, targets = theory_table(params)
        walls["edge_theory"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        others = [a for a in ALPHAS if a != PROFILE_ALPHA]
        fd = pd.concat([
            construction_table(params, [PROFILE_ALPHA], [targets[PROFILE_ALPHA]],
                               {d: list(s) for d, s in DS_PROFILE.items()}, None, profile=PROFILE_M,
                               n_restarts=N_RESTARTS, n_jobs=args.n_jobs, progress=True),
            construction_table(params, others, [targets[a] for a in others], {d: list(s) for d, s in DS.items()},
                               None, n_restarts=N_RESTARTS, n_jobs=args.n_jobs, progress=True)], ignore_index=True)
        fd = fd.sort_values(["alpha", "d", "seed", "method", "restart", "pin"]).reset_index(drop=True)
        walls["edge_construction"] = time.perf_counter() - t0
        tables += [("edge_theory", theory), ("edge_construction", fd)]
    if args.part in ("all", "semantic"):
        sem_theory, walls["edge_semantic_theory"], sem_fd, walls["edge_semantic"] = semantic_tables(args.n_jobs)
        tables += [("edge_semantic_theory", sem_theory), ("edge_semantic", sem_fd)]
    for stem, df in tables:
        df.to_csv(args.out / f"{stem}.csv", index=False, float_format="%.12g")
        meta = dict(table=stem, description=DESCRIPTIONS[stem],
                    source="Computed with attnlib (attnlib.finite_d.construction) by "
                           "scripts/regenerate_edge_construction.py.",
                    citation=CITATION, script="scripts/regenerate_edge_construction.py",
                    params=dict(sigma=SIGMA, lam=LAM, omega=OMEGA_SEM if "semantic" in stem else OMEGA,
                                A=[list(a) for a in TaskParams().A]),
                    alphas=list(ALPHAS), profile_alpha=PROFILE_ALPHA, profile_m=list(PROFILE_M),
                    ds={str(d): list(s) for d, s in DS.items()},
                    ds_profile={str(d): list(s) for d, s in DS_PROFILE.items()}, n_restarts=N_RESTARTS,
                    theta_profile=list(THETA_PROFILE), ds_semantic={str(d): list(s) for d, s in DS_SEM.items()},
                    theory_max_order=THEORY_MAX_ORDER, attnlib_version=attnlib.__version__,
                    attnlib_fingerprint=library_fingerprint(), blas_threads=1, n_jobs=args.n_jobs, n_rows=len(df),
                    wall_time_s=round(walls[stem], 1), python=sys.version.split()[0], numpy=np.__version__,
                    machine=platform.machine(), generated=time.strftime("%Y-%m-%dT%H:%M:%S"))
        (args.out / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{stem}: {len(df)} rows in {walls[stem]:.0f} s", flush=True)


if __name__ == "__main__":
    main()

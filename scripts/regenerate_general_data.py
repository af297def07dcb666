#!/usr/bin/env python
"""Regenerate the tables of the chapter on longer sequences and wider students (book/data/general_theory.csv,
general_finite_d.csv, general_thresholds.csv + sidecar JSON).

* general_theory: fixed points of the general state evolution (attnlib.solve_general, default GeneralSolver:
  four scramblings of a symmetrised Sobol rule, doubled up to 2^14 points while a relative standard error is above
  2e-3) for L = 3 tokens, rank 1, A = softmax_row(a a^T) with a = (1, 0, -1), semantic and positional branches;
  and for L = 2 at rank 2, the free branch (the split minimum), beside the rank-1 branches of the L = 2 solver
  (attnlib.solve_state_evolution, its default rule). sigma = 0.5, lambda = 0.01, omega = 0.3.
* general_finite_d: L-BFGS minimisers of the empirical risk at L = 3 (simplex encodings, teacher normalised),
  d = 500, 1000, 2000, seeds 0-2, from the semantic and the positional start.
* general_thresholds: alpha_c and alpha_l at L = 3 (attnlib.theory.branches.general_thresholds), bracketed by the theory
  grid.

Usage::

    python scripts/regenerate_general_data.py [--out book/data] [--n-jobs 2]
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import math
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import attnlib
from attnlib import (ConvergenceWarning, general_threshold, GeneralSolver, library_fingerprint, linear_baseline_error,
                     run_jobs, simulate_erm, softmax_rows, solve_general, solve_state_evolution, TaskParams)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"
SIGMA, LAM, OMEGA = 0.5, 0.01, 0.3
#: the positional vector of the 3-token teacher: A = softmax_row(a a^T)
A_VECTOR = (1.0, 0.0, -1.0)
ALPHAS_L3 = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
#: the sample complexities of chapter 7's rank-2 runs (book/data/finite_d_rank2.csv)
ALPHAS_RANK2 = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5)
DS = (500, 1000, 2000)
SEEDS = (0, 1, 2)
N_TEST = 20000
CITATION = "cui2024phase"


def three_token_params() -> TaskParams:
    a = np.array(A_VECTOR)
    A = softmax_rows(np.outer(a, a))
    return TaskParams(sigma=SIGMA, lam=LAM, omega=OMEGA, A=tuple(map(tuple, A.tolist())))


DESCRIPTIONS = {
    "general_theory": (
        "Fixed points of the state evolution beyond the paper's case (sigma = 0.5, lambda = 0.01, omega = 0.3). "
        "case 'L3': L = 3 tokens, rank 1, A = softmax_row(a a^T) with a = (1, 0, -1), semantic and positional "
        "branches, by attnlib.solve_general (default GeneralSolver: 4 scramblings of a symmetrised Sobol rule, "
        "doubled up to 2^14 points while a relative standard error is above 2e-3). case 'rank2': L = 2, rank 2, "
        "the free branch (attnlib.solve_general). case 'L2': L = 2, rank 1, the paper's branches by "
        "attnlib.solve_state_evolution (its default rule). Columns: case, L, rank, branch, alpha, train_loss, "
        "test_error and their standard errors *_err, q_trace (tr q), theta_norm (|theta|), m_norm (the Frobenius "
        "norm of M over sqrt 2; |m| at L = 2, rank 1), eps_lin, converged (the iteration converged on a physical "
        "fixed point), precise (every relative standard error within the rule's target; L = 2 rows: the two-token "
        "solver's flag), rule, seconds. The rank-2 fixed points (rules up to 2^13 points, 150 iterations per "
        "scrambling) are followed from alpha = 1 up and down in alpha, each started from the last converged one."),
    "general_finite_d": (
        "Finite-d minimisers of the empirical risk at L = 3 tokens (A as in general_theory, simplex positional "
        "encodings, teacher normalised to ||Q*||^2 = d), rank 1, by attnlib.simulate_erm with L-BFGS from the "
        "semantic start (Q = Q*) and the positional start (Q along the encodings' principal direction of A); "
        "d = 500, 1000, 2000, seeds 0-2, 20 000 test samples. Columns: d, alpha, seed, start, q, theta, m_norm "
        "(|M|/sqrt 2 with M = P Q/sqrt d), train_loss, test_error, test_error_stderr, converged."),
    "general_thresholds": (
        "alpha_c and alpha_l of the general state evolution at L = 3 (A as in general_theory), rank 1, by "
        "attnlib.theory.branches.general_thresholds.general_threshold, bracketed by the theory grid of general_theory. "
        "Columns: L, omega, name, alpha, err, bracket_lo, bracket_hi, n_evals, converged, reason, seconds."),
}


def theory_row(case: str, alpha: float, branch: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if case == "L2":
            p = TaskParams(sigma=SIGMA, lam=LAM, omega=OMEGA)
            r = solve_state_evolution(p, alpha, branch)
            return dict(case=case, L=2, rank=1, branch=branch, alpha=alpha, train_loss=r.train_loss,
                        train_loss_err=r.stderr["train_loss"], test_error=r.test_error,
                        test_error_err=r.stderr["test_error"], q_trace=r.q, theta_norm=abs(r.theta),
                        m_norm=abs(r.m), eps_lin=linear_baseline_error(p), converged=r.converged,
                        precise=r.converged, rule=r.rule, seconds=r.seconds)
        p = three_token_params()
        r = solve_general(p, alpha, branch)
    return _row(case, p, alpha, branch, r)


#: the rank-2 solver: rules up to 2^13 points per scrambling (the standard errors of the losses are then below
#: 1e-3 relative), 150 iterations per scrambling and rule
RANK2_SOLVER = GeneralSolver(max_order=13, max_iter=150)
#: the rank-2 branch is followed from here, up and down in alpha
RANK2_FROM = 1.0


def rank2_chain(alphas) -> list:
    """The rank-2 free branch along ``alphas`` in the given order, each fixed point started from the last
    converged one (from the default start the iteration can land on an unphysical solution at large alpha)."""
    p = TaskParams(sigma=SIGMA, lam=LAM, omega=OMEGA)
    rows, start = [], None
    for alpha in alphas:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            r = solve_general(p, alpha, "free", rank=2, start=start, solver=RANK2_SOLVER)
        if r.converged:
            start = r.overlaps
        rows.append(_row("rank2", p, alpha, "free", r))
    return rows


def _row(case, p, alpha, branch, r) -> dict:
    return dict(case=case, L=p.L, rank=r.rank, branch=branch, alpha=alpha, train_loss=r.train_loss,
                train_loss_err=float(r.stderr["train_loss"]), test_error=r.test_error,
                test_error_err=float(r.stderr["test_error"]), q_trace=float(np.trace(r.q)),
                theta_norm=float(np.linalg.norm(r.theta)), m_norm=r.m, eps_lin=linear_baseline_error(p),
                converged=r.converged, precise=r.precise, rule=r.rule, seconds=r.seconds)


def finite_d_row(d: int, alpha: float, seed: int, start: str) -> dict:
    p = three_token_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        r = simulate_erm(p, d=d, alpha=alpha, start=start, seed=seed, method="lbfgs", n_test=N_TEST,
                         normalize_teacher=True, keep_Q=True)
    from attnlib import make_teacher, seed_streams
    teacher = make_teacher(p, d, seed_streams(seed)["teacher"], normalize_teacher=True)
    M = teacher.P @ np.asarray(r.Q).reshape(d, -1) / math.sqrt(d)
    return dict(d=d, alpha=alpha, seed=seed, start=start, q=r.q, theta=abs(r.theta),
                m_norm=float(np.linalg.norm(M) / math.sqrt(2.0)), train_loss=r.train_loss, test_error=r.test_error,
                test_error_stderr=r.test_error_stderr, converged=r.converged)


def threshold_row(name: str, bracket: tuple, alpha_c: float | None) -> dict:
    p = three_token_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = general_threshold(p, name, bracket, alpha_c=alpha_c, use_cache=False)
    return dict(L=3, omega=OMEGA, **t.as_row())


def _bracket(theory: pd.DataFrame, column: str, target_sem, target_pos=None):
    """The first grid interval where the function changes sign (NaN pair where none)."""
    l3 = theory[theory.case == "L3"].pivot(index="alpha", columns="branch", values=column).sort_index()
    if target_pos is None:
        f = (l3.semantic - l3.positional).to_numpy()
    else:
        f = np.where(l3.index >= target_pos, l3.semantic, l3.positional) - target_sem
    a = l3.index.to_numpy()
    for i in range(len(a) - 1):
        if np.isfinite(f[i]) and np.isfinite(f[i + 1]) and f[i] * f[i + 1] <= 0:
            return float(a[i]), float(a[i + 1])
    return math.nan, math.nan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--n-jobs", type=int, default=2)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    walls, tables = {}, []

    t0 = time.perf_counter()
    jobs = [(theory_row, dict(case="L3", alpha=a, branch=b)) for b in ("positional", "semantic") for a in ALPHAS_L3]
    jobs += [(theory_row, dict(case="L2", alpha=a, branch=b)) for b in ("semantic", "positional") for a in ALPHAS_RANK2]
    up = [a for a in ALPHAS_RANK2 if a >= RANK2_FROM]
    down = [a for a in sorted(ALPHAS_RANK2, reverse=True) if a < RANK2_FROM]
    jobs[:0] = [(rank2_chain, dict(alphas=up)), (rank2_chain, dict(alphas=[RANK2_FROM] + down))]  # longest first
    out = run_jobs(jobs, n_jobs=args.n_jobs, progress=True, desc="theory")
    theory = pd.DataFrame(out[0] + out[1][1:] + out[2:])  # the second chain's first point repeats the first's
    theory = theory.sort_values(["case", "branch", "alpha"]).reset_index(drop=True)
    walls["general_theory"] = time.perf_counter() - t0
    tables.append(("general_theory", theory))

    t0 = time.perf_counter()
    jobs = [(finite_d_row, dict(d=d, alpha=a, seed=s, start=st)) for d in DS for a in ALPHAS_L3 for s in SEEDS
            for st in ("semantic", "positional")]
    fd = pd.DataFrame(run_jobs(jobs, n_jobs=args.n_jobs, progress=True, desc="finite d"))
    walls["general_finite_d"] = time.perf_counter() - t0
    tables.append(("general_finite_d", fd))

    t0 = time.perf_counter()
    ac_bracket = _bracket(theory, "train_loss", None)
    eps_lin = float(theory[theory.case == "L3"].eps_lin.iloc[0])
    rows = [threshold_row("alpha_c", ac_bracket, None)] if math.isfinite(ac_bracket[0]) else []
    alpha_c = rows[0]["alpha"] if rows and math.isfinite(rows[0]["alpha"]) else None
    al_bracket = _bracket(theory, "test_error", eps_lin, alpha_c if alpha_c is not None else -math.inf)
    if math.isfinite(al_bracket[0]):
        rows.append(threshold_row("alpha_l", al_bracket, alpha_c))
    thresholds = pd.DataFrame(rows)
    walls["general_thresholds"] = time.perf_counter() - t0
    tables.append(("general_thresholds", thresholds))

    for stem, df in tables:
        df.to_csv(args.out / f"{stem}.csv", index=False, float_format="%.12g")
        meta = dict(table=stem, description=DESCRIPTIONS[stem],
                    source="Computed with attnlib (attnlib.theory.solve.general_state_evolution, attnlib.simulate_erm) by "
                           "scripts/regenerate_general_data.py.",
                    citation=CITATION, script="scripts/regenerate_general_data.py",
                    params=dict(sigma=SIGMA, lam=LAM, omega=OMEGA, a=list(A_VECTOR),
                                A=[list(r) for r in three_token_params().A]),
                    alphas_L3=list(ALPHAS_L3), alphas_rank2=list(ALPHAS_RANK2), ds=list(DS), seeds=list(SEEDS),
                    n_test=N_TEST, attnlib_version=attnlib.__version__, attnlib_fingerprint=library_fingerprint(),
                    blas_threads=1, n_jobs=args.n_jobs, n_rows=len(df), wall_time_s=round(walls[stem], 1),
                    python=sys.version.split()[0], numpy=np.__version__, machine=platform.machine(),
                    generated=time.strftime("%Y-%m-%dT%H:%M:%S"))
        (args.out / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{stem}: {len(df)} rows in {walls[stem]:.0f} s", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Regenerate the thresholds against omega and L of the chapter on longer sequences and wider students
(book/data/general_phase_grid.csv, general_phase.csv, general_phase_finite_d.csv, general_branches.csv,
general_self_finite_d.csv, general_fixed_points_finite_d.csv, general_fixed_point_theory.csv,
general_fixed_points.csv + sidecar JSON).

* general_phase_grid: both rank-1 branches of the general state evolution (attnlib.solve_general, rules up to 2^13
  points per scrambling, four scramblings) on a grid of alpha, for the family at L = 3, 4.
* general_phase: alpha_c (refined by attnlib.theory.branches.general_thresholds inside the grid's bracket) and alpha_l
  (bracketed from a guess) for the family A = softmax_row(a a^T), a = (1, ..., -1) evenly spaced, at L = 3, 4;
  at L = 2 by the two-token solver (attnlib.theory.branches.thresholds.critical_alpha, linear_crossing_alpha).
  sigma = 0.5, lambda = 0.01, omega = 0.1, 0.2, 0.3, 0.4.
* general_phase_finite_d: L-BFGS minimisers of the empirical risk (attnlib.simulate_erm, simplex encodings, teacher
  normalised) from the semantic and the positional start, d = 500, 1000, seeds 0-2, on a grid of alpha, for the
  family at L = 3, 4.
* general_branches: rank-one fixed points of both branches for the family at omega = 0.3 (why the thresholds move
  with L) and for a three-token matrix a rank-one student cannot represent (A = 0.2 + 0.4 I: each token attends
  most to itself) on a grid of alpha.
* general_self_finite_d: finite-d minimisers for the self-attending matrix at student rank 1 and 2.
* general_fixed_points_finite_d: L-BFGS minimisers at d = 1000, 2000, 4000 (seeds 0-3) beside fixed points of the
  general state evolution (L = 3 at omega = 0.3, L = 4 at omega = 0.4, rank 1, both branches; rank 2 at L = 2),
  three alpha each; general_fixed_point_theory: the fixed points there (rules up to 2^15 points);
  general_fixed_points: the seed means extrapolated in 1/d against the fixed points (attnlib.finite_d.extrapolation).

Usage::

    python scripts/regenerate_general_phase.py [--out book/data] [--n-jobs 2] [--tables general_phase ...]
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
from attnlib import (ConvergenceWarning, critical_alpha, distinct_branch, general_nodes, general_test_error,
                     general_threshold, GeneralOverlaps, GeneralSolver, library_fingerprint, linear_baseline_error,
                     linear_crossing_alpha, NO_ROOT, positional_encodings, run_jobs, simulate_erm, softmax_rows,
                     TaskParams, ThresholdNotFound)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"
SIGMA, LAM = 0.5, 0.01
OMEGAS = (0.1, 0.2, 0.3, 0.4)
#: case -> sequence length (the family softmax_row(a a^T)) or the self-attending three-token matrix
CASES = {"L2": 2, "L3": 3, "L4": 4, "L3-self": 3}
#: the self-attending matrix: weight SELF_WEIGHT on the token itself, the rest spread evenly
SELF_WEIGHT = 0.6
#: fixed points of the threshold searches: rules up to 2^13 points per scrambling (the standard errors are part of
#: each threshold's error)
SOLVER = GeneralSolver(max_order=13)
#: the finite-d grid, the same for every case
ALPHAS_FD = (0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.1, 1.35, 1.6)
DS = (500, 1000)
SEEDS = (0, 1, 2)
N_TEST = 10000
#: the cases whose thresholds the general engine computes (L = 2: the two-token solver), on this grid first
GRID_CASES = ("L3", "L4")
GRID_ALPHAS = (0.1, 0.15, 0.2, 0.3, 0.45, 0.65, 0.9, 1.25, 1.75, 2.5)
FD_CASES = ("L3", "L4")
#: the branches at a few alpha (why the thresholds move with L), at this omega
BRANCH_OMEGA = 0.3
BRANCH_ALPHAS = (0.5, 1.0, 1.5)
#: the self-attending matrix: omega, grid, and the positional start's direction of tokens (two tokens attending
#: to themselves, the middle one uniformly: where finite-d descent from the principal direction ends)
SELF_OMEGA = 0.3
SELF_ALPHAS = (0.3, 0.45, 0.6, 0.75, 0.9, 1.2, 1.5)
SELF_START_M = (1.0, 0.0, -1.0)
#: finite d against the fixed points, extrapolated in 1/d: case -> (omega, student rank, alphas, starts). L3 at
#: omega = 0.3 and L4 at omega = 0.4 (where descent from the positional start stays on its branch over the whole
#: range), and a rank-2 student at L = 2 with the paper's A (as general_theory's case 'rank2'); the fixed points
#: are general_fixed_point_theory's (FIXED_POINT_SOLVER)
FIXED_POINT_CASES = {"L3": (0.3, 1, (0.65, 0.9, 1.25), ("semantic", "positional")),
                     "L4": (0.4, 1, (0.65, 0.9, 1.25), ("semantic", "positional")),
                     "rank2": (0.3, 2, (0.75, 1.25, 2.0), ("semantic", "positional", "random"))}
FIXED_POINT_DS = (1000, 2000, 4000)
FIXED_POINT_SEEDS = (0, 1, 2, 3)
FIXED_POINT_TABLES = ("general_fixed_points_finite_d", "general_fixed_point_theory", "general_fixed_points")
#: the rule (2^GE_ORDER points, one scrambling) of the Gaussian-equivalent test error of a finite-d minimiser
GE_ORDER = 15
#: the quantities compared with the fixed points
FIXED_POINT_QUANTITIES = ("train_loss", "test_error", "test_error_ge", "q_trace", "theta_norm", "m_norm")
CITATION = "cui2024phase"


def case_A(case: str) -> np.ndarray:
    """The teacher's positional matrix of a case (module docstring)."""
    L = CASES[case]
    if case.endswith("-self"):
        off = (1.0 - SELF_WEIGHT) / (L - 1)
        return np.full((L, L), off) + (SELF_WEIGHT - off) * np.eye(L)
    a = np.linspace(1.0, -1.0, L)
    return softmax_rows(np.outer(a, a))


def case_params(case: str, omega: float) -> TaskParams:
    if case == "rank2":  # the paper's two-token task, as in general_theory
        return TaskParams(sigma=SIGMA, lam=LAM, omega=omega)
    return TaskParams(sigma=SIGMA, lam=LAM, omega=omega, A=tuple(map(tuple, case_A(case).tolist())))


def grid_bracket(grid: pd.DataFrame, case: str, omega: float):
    """The bracket of alpha_c on the grid: scanning down from the largest alpha, the first interval where the
    training-loss gap of the two branches changes sign, among the points where both fixed points converged and
    are their branch's own (not the uninformed point). Returns ``(bracket, interval, reason)``: ``bracket`` is
    ``(lo, hi)`` or None; without one, ``interval`` is the range of alpha where both branches are distinct (None
    where one never is) and ``reason`` says which branch is the lower there."""
    g = grid[(grid.case == case) & np.isclose(grid.omega, omega) & grid.converged & grid.distinct]
    piv = g.pivot(index="alpha", columns="branch", values="train_loss").sort_index()
    for branch in ("semantic", "positional"):
        if branch not in piv.columns:
            return None, None, (f"{NO_ROOT} on the grid: the {branch} branch is nowhere distinct from the "
                                "uninformed point")
    piv = piv.dropna()
    if len(piv) < 2:
        return None, None, f"{NO_ROOT} on the grid: both branches are distinct at fewer than two points"
    a, gap = piv.index.to_numpy(), (piv.semantic - piv.positional).to_numpy()
    for i in range(len(a) - 1, 0, -1):
        if gap[i] * gap[i - 1] <= 0:
            return (float(a[i - 1]), float(a[i])), None, ""
    lower = "semantic" if gap[0] < 0 else "positional"
    return None, (float(a[0]), float(a[-1])), (f"{NO_ROOT} on the grid: the {lower} branch has the lower training "
                                              f"loss wherever both are distinct ([{a[0]:g}, {a[-1]:g}])")


def theory_rows(case: str, omega: float, bracket, interval, bracket_reason: str) -> list:
    """alpha_c (refined inside its grid bracket), then alpha_l above it (bracketed from a guess), by the general
    engine."""
    p = case_params(case, omega)
    base = dict(case=case, method="general", L=p.L, omega=omega, eps_lin=linear_baseline_error(p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if bracket is not None:
            tc = general_threshold(p, "alpha_c", bracket=bracket, solver=SOLVER)
            row_c = dict(base, **tc.as_row(), absent=tc.absent)
            ac = tc.alpha if math.isfinite(tc.alpha) else None
        else:
            lo, hi = interval if interval is not None else (math.nan, math.nan)
            row_c = dict(base, name="alpha_c", alpha=math.nan, err=math.nan, bracket_lo=lo,
                         bracket_hi=hi, n_evals=0, converged=False, reason=bracket_reason,
                         seconds=0.0, absent=bracket_reason.startswith(NO_ROOT))
            ac = None
        semantic_only = ("the semantic branch has the lower" in bracket_reason
                         or "the positional branch is nowhere distinct" in bracket_reason)
        if ac is None and not semantic_only:
            # no alpha_c, and the semantic branch is not the global minimum on the grid: no alpha_l computed
            return [row_c, dict(base, name="alpha_l", alpha=math.nan, err=math.nan, bracket_lo=math.nan,
                                bracket_hi=math.nan, n_evals=0, converged=False,
                                reason="not computed: no alpha_c on the grid", seconds=0.0, absent=False)]
        tl = general_threshold(p, "alpha_l", guess=1.3 * ac if ac else 1.0, alpha_c=ac, solver=SOLVER)
    return [row_c, dict(base, **tl.as_row(), absent=tl.absent)]


def two_token_rows(omega: float) -> list:
    """The L = 2 member of the family by the two-token solver's default (continuation and Newton-solved roots)."""
    p = case_params("L2", omega)
    rows = []
    for name, fn in (("alpha_c", critical_alpha), ("alpha_l", linear_crossing_alpha)):
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                alpha, reason = fn(p), ""
        except ThresholdNotFound as exc:
            alpha, reason = math.nan, str(exc)
        rows.append(dict(case="L2", method="two-token", L=2, omega=omega, eps_lin=linear_baseline_error(p), name=name,
                         alpha=alpha, err=math.nan, bracket_lo=math.nan, bracket_hi=math.nan, n_evals=0,
                         converged=bool(np.isfinite(alpha)), reason=reason, seconds=time.perf_counter() - t0,
                         absent=not np.isfinite(alpha)))
    return rows


def finite_d_row(case: str, omega: float, d: int, alpha: float, seed: int, start: str) -> dict:
    p = case_params(case, omega)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        r = simulate_erm(p, d=d, alpha=alpha, start=start, seed=seed, method="lbfgs", n_test=N_TEST,
                         normalize_teacher=True, keep_Q=True)
    M = positional_encodings(d, p.L) @ np.asarray(r.Q).reshape(d, -1) / math.sqrt(d)  # the teacher's encodings
    m_norm = float(np.linalg.norm(M) / math.sqrt(2.0))
    return dict(case=case, L=p.L, omega=omega, d=d, alpha=alpha, seed=seed, start=start, q=r.q, theta=abs(r.theta),
                m_norm=m_norm, branch="semantic" if abs(r.theta) > 0.25 * m_norm else "positional",
                train_loss=r.train_loss, test_error=r.test_error, test_error_stderr=r.test_error_stderr,
                eps_lin=linear_baseline_error(p), converged=r.converged)


DESCRIPTIONS = {
    "general_phase_grid": (
        "Both rank-one branches of the general state evolution (attnlib.solve_general, four scramblings of rules up "
        "to 2^13 points) for the family A = softmax_row(a a^T), a evenly spaced from 1 to -1, at L = 3, 4, omega = "
        "0.1-0.4, on a grid of alpha. Columns: case, L, omega, alpha, branch, train_loss, train_loss_err, test_error, "
        "test_error_err, q, theta (|theta|), m_norm (|M|/sqrt 2), M (JSON), eps_lin, converged, distinct (the fixed "
        "point is its branch's and not the uninformed point: attnlib.theory.branches.general_thresholds.distinct_branch), "
        "precise, rule, seconds."),
    "general_phase": (
        "Thresholds of a rank-one student against omega and the sequence length (sigma = 0.5, lambda = 0.01). "
        "Cases: 'L2', 'L3', 'L4': A = softmax_row(a a^T) with a evenly spaced from 1 to -1. method 'general' (L = 3, "
        "4): attnlib.theory.branches.general_thresholds.general_threshold (alpha_c refined inside the first bracket of "
        "general_phase_grid, scanning down from the largest alpha, where both branches converged and are distinct; "
        "alpha_l above it, bracketed from a guess by geometric steps; fixed points by attnlib.solve_general with four "
        "scramblings of rules up to 2^13 points); method 'two-token' (L = 2): "
        "attnlib.theory.branches.thresholds.critical_alpha and linear_crossing_alpha (the L = 2 solver's default). Columns: case, "
        "method, L, omega, eps_lin, name, alpha, err, bracket_lo, bracket_hi, n_evals, converged, reason, seconds, "
        "absent (no sign change in the range searched: no threshold there)."),
    "general_phase_finite_d": (
        "Finite-d minimisers of the empirical risk for the cases of general_phase at L = 3, 4 (attnlib.simulate_erm, "
        "L-BFGS from the semantic start Q = Q* and the positional start along the encodings' principal direction of "
        "A; simplex encodings, teacher normalised), d = 500, 1000, seeds 0-2, 10 000 test samples. Columns: case, "
        "L, omega, d, alpha, seed, start, q, theta, m_norm (|M|/sqrt 2, M = P Q/sqrt d), branch (semantic where "
        "theta > |M|/(4 sqrt 2)), train_loss, test_error, test_error_stderr, eps_lin, converged."),
    "general_branches": (
        "Rank-one fixed points of the general state evolution (attnlib.solve_general, four scramblings of rules up to "
        "2^13 points): the family's cases L2, L3, L4 at omega = 0.3 and alpha = 0.5, 1, 1.5, both branches; the "
        "self-attending three-token matrix (case L3-self, A = 0.2 + 0.4 I) at omega = 0.3 on a grid of alpha, the "
        "semantic branch and the positional one started along M ~ (1, 0, -1). Columns: case, L, omega, alpha, branch, "
        "train_loss, train_loss_err, test_error, test_error_err, q, theta (|theta|), m_norm (|M|/sqrt 2), M (JSON), "
        "eps_lin, converged, precise, rule, seconds."),
    "general_self_finite_d": (
        "Finite-d minimisers for the self-attending three-token matrix (A = 0.2 + 0.4 I, omega = 0.3; attnlib."
        "simulate_erm, L-BFGS, simplex encodings, teacher normalised) at student rank 1 and 2, from the semantic, "
        "positional and random starts, d = 500, 1000, seeds 0-2, 10 000 test samples. Columns: d, alpha, seed, start, "
        "rank, train_loss, test_error, test_error_stderr, theta_norm (|theta| over the columns), m_norm "
        "(|M|_F/sqrt 2), score_eig1 >= score_eig2 (the eigenvalues of the positional scores M M^T on the sum-zero "
        "directions), eps_lin, converged."),
    "general_fixed_points_finite_d": (
        "Finite-d minimisers of the empirical risk beside fixed points of the general state evolution, for the "
        "extrapolation in 1/d (attnlib.simulate_erm, L-BFGS, simplex encodings, teacher normalised; d = 1000, "
        "2000, 4000, seeds 0-3, 10 000 test samples): case 'L3' (the family at L = 3, omega = 0.3) and 'L4' (L = 4, "
        "omega = 0.4), rank 1, from the semantic and the positional start at alpha = 0.65, 0.9, 1.25; case 'rank2' "
        "(L = 2, the paper's A, omega = 0.3), a rank-2 student from the semantic, positional and random starts at "
        "alpha = 0.75, 1.25, 2. Columns: case, L, rank, omega, d, alpha, seed, start, q_trace (sigma^2 tr Q^T Q/d), "
        "theta_norm (|theta| over the columns), m_norm (|M|_F/sqrt 2, M = P Q/sqrt d), branch (rank 1: semantic "
        "where theta_norm > m_norm/4; rank 2: free), train_loss, test_error (Monte Carlo over the test set), "
        "test_error_stderr, test_error_ge (the state evolution's test error at the minimiser's overlaps: Gaussian "
        "equivalence, exact up to O(1/d), on one scrambling of 2^15 points), overlaps (JSON: q = sigma^2 Q^T Q/d, "
        "M, theta), converged."),
    "general_fixed_point_theory": (
        "The fixed points compared with the finite-d minimisers of general_fixed_points_finite_d (attnlib."
        "solve_general; four scramblings of rules from 2^12 up to 2^15 points while a relative standard error is "
        "above 2e-3): cases L3, L4 (rank 1, semantic and positional branches) and rank2 (the free branch), at the "
        "same alpha. Columns: case, omega, alpha, branch, train_loss, train_loss_err, test_error, test_error_err, "
        "q_trace (tr q), theta_norm (|theta|), m_norm (|M|_F/sqrt 2), converged, precise, rule, seconds."),
    "general_fixed_points": (
        "The minimisers of general_fixed_points_finite_d against the fixed points of general_fixed_point_theory, "
        "by attnlib.finite_d.extrapolation.compare_with_fixed_points: per case, alpha, branch and quantity, the "
        "seed means per d fitted by a + b/d (weighted, error scaled by the fit's chi2) and the "
        "intercept against the theory. Minimisers compared (attnlib.finite_d.extrapolation.branch_minimisers): rank "
        "1, each start's where it stayed on its own branch; rank 2, the lowest training loss of the three starts per "
        "training set. Columns: case, alpha, branch, quantity (train_loss, test_error, test_error_ge, q_trace, "
        "theta_norm, m_norm; an overlap the branch holds at zero is left out), theory, theory_err, d_max, "
        "fd_dmax, fd_dmax_err, fd_inf, fd_inf_err (the extrapolation), slope, chi2, n_d, n_seeds, "
        "rel_diff (fd_inf/theory - 1), z ((fd_inf - theory) over the combined error), omega, "
        "theory_converged, theory_precise."),
}


def _theory_fixed_point(case: str, omega: float, alpha: float, branch: str, start_M=None) -> dict:
    """One rank-1 fixed point of the general engine, as a row; ``start_M``: the positional start's direction of
    tokens (default: the engine's, the principal direction of A)."""
    from attnlib import solve_general
    from attnlib import general_default_start
    p = case_params(case, omega)
    start = None
    if start_M is not None:
        x0 = general_default_start(p, branch)
        u = np.asarray(start_M, float)
        start = type(x0)(q=x0.q, M=0.25 * math.sqrt(2.0) * (u / np.linalg.norm(u))[:, None], V=x0.V, theta=x0.theta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        r = solve_general(p, alpha, branch, start=start, solver=SOLVER)
    return dict(case=case, L=p.L, omega=omega, alpha=alpha, branch=branch, train_loss=r.train_loss,
                train_loss_err=float(r.stderr["train_loss"]), test_error=r.test_error,
                test_error_err=float(r.stderr["test_error"]), q=float(r.q[0, 0]), theta=float(abs(r.theta[0])),
                m_norm=r.m, M=json.dumps(np.round(r.M[:, 0], 6).tolist()), eps_lin=linear_baseline_error(p),
                converged=r.converged, distinct=distinct_branch(r), precise=r.precise, rule=r.rule, seconds=r.seconds)


def self_finite_d_row(d: int, alpha: float, seed: int, start: str, rank: int) -> dict:
    """A finite-d minimiser for the self-attending three-token matrix, with the spectrum of its positional
    scores ``M M^T`` on the sum-zero directions (two at L = 3: a rank-one student has one nonzero eigenvalue)."""
    p = case_params("L3-self", SELF_OMEGA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        r = simulate_erm(p, d=d, alpha=alpha, start=start, seed=seed, method="lbfgs", n_test=N_TEST,
                         normalize_teacher=True, keep_Q=True, rank=rank)
    M = positional_encodings(d, p.L) @ np.asarray(r.Q).reshape(d, -1) / math.sqrt(d)
    ev = np.sort(np.linalg.eigvalsh(M @ M.T))[::-1]
    return dict(d=d, alpha=alpha, seed=seed, start=start, rank=rank, train_loss=r.train_loss,
                test_error=r.test_error, test_error_stderr=r.test_error_stderr,
                theta_norm=float(np.linalg.norm(r.theta_cols)), m_norm=float(np.linalg.norm(M) / math.sqrt(2.0)),
                score_eig1=float(ev[0]), score_eig2=float(ev[1]), eps_lin=linear_baseline_error(p),
                converged=r.converged)


def fixed_point_finite_d_row(case: str, d: int, alpha: float, seed: int, start: str) -> dict:
    """A finite-d minimiser of :data:`FIXED_POINT_CASES` with the rotation-invariant overlaps the general engine
    reports: ``q_trace = sigma^2 tr(Q^T Q)/d``, ``theta_norm`` (over the columns) and ``m_norm = |M|_F/sqrt 2``;
    with the Monte-Carlo test error, ``test_error_ge``: the state evolution's test error at the minimiser's
    overlaps (Gaussian equivalence, exact up to ``O(1/d)``; attnlib.theory.solve.general_state_evolution.
    general_test_error on a rule of 2^GE_ORDER points), free of the test set's sampling error."""
    omega, rank = FIXED_POINT_CASES[case][:2]
    p = case_params(case, omega)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        r = simulate_erm(p, d=d, alpha=alpha, start=start, seed=seed, method="lbfgs", n_test=N_TEST,
                         normalize_teacher=True, keep_Q=True, rank=rank)
    Q = np.asarray(r.Q).reshape(d, -1)
    M = positional_encodings(d, p.L) @ Q / math.sqrt(d)
    m_norm = float(np.linalg.norm(M) / math.sqrt(2.0))
    theta_norm = float(np.linalg.norm(r.theta_cols))
    q = p.sigma ** 2 * Q.T @ Q / d
    x = GeneralOverlaps(q=q, M=M, V=np.eye(rank), theta=np.array(r.theta_cols))
    test_error_ge = general_test_error(p, x, general_nodes(p.L, rank, GE_ORDER, 3))
    if rank == 1:
        branch = "semantic" if theta_norm > 0.25 * m_norm else "positional"
    else:
        branch = "free"
    return dict(case=case, L=p.L, rank=rank, omega=omega, d=d, alpha=alpha, seed=seed, start=start,
                q_trace=float(sum(r.q_cols)), theta_norm=theta_norm, m_norm=m_norm, branch=branch,
                train_loss=r.train_loss, test_error=r.test_error, test_error_stderr=r.test_error_stderr,
                test_error_ge=test_error_ge,
                overlaps=json.dumps(dict(q=np.round(q, 8).tolist(), M=np.round(M, 8).tolist(),
                                         theta=np.round(np.array(r.theta_cols), 8).tolist())),
                converged=r.converged)


def build_grid(n_jobs, out):
    jobs = [(_theory_fixed_point, dict(case=c, omega=w, alpha=a, branch=b)) for b in ("positional", "semantic")
            for c in GRID_CASES[::-1] for w in OMEGAS for a in GRID_ALPHAS]  # longest first
    rows = pd.DataFrame(run_jobs(jobs, n_jobs=n_jobs, progress=True, desc="grid"))
    return rows.sort_values(["case", "omega", "branch", "alpha"])


def build_phase(n_jobs, out):
    grid = pd.read_csv(out / "general_phase_grid.csv")
    jobs = []
    for c in GRID_CASES[::-1]:
        for w in OMEGAS:
            bracket, interval, reason = grid_bracket(grid, c, w)
            jobs.append((theory_rows, dict(case=c, omega=w, bracket=bracket, interval=interval, bracket_reason=reason)))
    jobs += [(two_token_rows, dict(omega=w)) for w in OMEGAS]
    rows = run_jobs(jobs, n_jobs=n_jobs, progress=True, desc="thresholds")
    return pd.DataFrame([r for rs in rows for r in rs]).sort_values(["case", "method", "omega", "name"])


def build_phase_finite_d(n_jobs, out):
    jobs = [(finite_d_row, dict(case=c, omega=w, d=d, alpha=a, seed=s, start=st)) for d in sorted(DS, reverse=True)
            for c in FD_CASES for w in OMEGAS for a in ALPHAS_FD for s in SEEDS for st in ("semantic", "positional")]
    fd = pd.DataFrame(run_jobs(jobs, n_jobs=n_jobs, progress=True, desc="finite d"))
    return fd.sort_values(["case", "omega", "d", "alpha", "seed", "start"])


def build_branches(n_jobs, out):
    jobs = [(_theory_fixed_point, dict(case=c, omega=BRANCH_OMEGA, alpha=a, branch=b))
            for c in ("L2", "L3", "L4") for a in BRANCH_ALPHAS for b in ("positional", "semantic")]
    jobs += [(_theory_fixed_point, dict(case="L3-self", omega=SELF_OMEGA, alpha=a, branch="semantic"))
             for a in SELF_ALPHAS]
    jobs += [(_theory_fixed_point, dict(case="L3-self", omega=SELF_OMEGA, alpha=a, branch="positional",
                                        start_M=SELF_START_M)) for a in SELF_ALPHAS]
    jobs.sort(key=lambda j: (j[1]["branch"] != "positional", -CASES[j[1]["case"]]))  # longest first
    out = pd.DataFrame(run_jobs(jobs, n_jobs=n_jobs, progress=True, desc="branches"))
    return out.sort_values(["case", "branch", "alpha"])


def build_self_finite_d(n_jobs, out):
    jobs = [(self_finite_d_row, dict(d=d, alpha=a, seed=s, start=st, rank=r)) for d in sorted(DS, reverse=True)
            for r in (2, 1) for a in SELF_ALPHAS for s in SEEDS for st in ("semantic", "positional", "random")]
    fd = pd.DataFrame(run_jobs(jobs, n_jobs=n_jobs, progress=True, desc="self, finite d"))
    return fd.sort_values(["rank", "d", "alpha", "seed", "start"])


def build_fixed_points_finite_d(n_jobs, out):
    jobs = [(fixed_point_finite_d_row, dict(case=c, d=d, alpha=a, seed=s, start=st))
            for d in sorted(FIXED_POINT_DS, reverse=True) for c, (_, _, alphas, starts) in FIXED_POINT_CASES.items()
            for a in alphas for s in FIXED_POINT_SEEDS for st in starts]  # largest first
    fd = pd.DataFrame(run_jobs(jobs, n_jobs=n_jobs, progress=True, desc="fixed points, finite d"))
    return fd.sort_values(["case", "d", "alpha", "seed", "start"])


#: the solver of the fixed points compared with finite d: rules up to 2^15 points per scrambling (the grid's 2^13
#: missed the precision target on the positional branch at L = 3)
FIXED_POINT_SOLVER = GeneralSolver(order=12, max_order=15, max_iter=150)


def fixed_point_theory_row(case: str, alpha: float, branch: str) -> dict:
    """One fixed point of :data:`FIXED_POINT_CASES` by :data:`FIXED_POINT_SOLVER`, with the finite-d table's
    rotation-invariant overlaps."""
    from attnlib import solve_general
    omega, rank = FIXED_POINT_CASES[case][:2]
    p = case_params(case, omega)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        r = solve_general(p, alpha, branch, rank=rank, solver=FIXED_POINT_SOLVER)
    return dict(case=case, omega=omega, alpha=alpha, branch=branch, train_loss=r.train_loss,
                train_loss_err=float(r.stderr["train_loss"]), test_error=r.test_error,
                test_error_err=float(r.stderr["test_error"]), q_trace=float(np.trace(r.q)),
                theta_norm=float(np.linalg.norm(r.theta)), m_norm=r.m, converged=r.converged, precise=r.precise,
                rule=r.rule, seconds=r.seconds)


def build_fixed_point_theory(n_jobs, out):
    jobs = [(fixed_point_theory_row, dict(case=c, alpha=a, branch=b))
            for c, (_, rank, alphas, _) in FIXED_POINT_CASES.items() for a in alphas
            for b in (("free",) if rank > 1 else ("semantic", "positional"))]
    rows = pd.DataFrame(run_jobs(jobs, n_jobs=n_jobs, progress=True, desc="fixed points, theory"))
    return rows.sort_values(["case", "branch", "alpha"])


def fixed_point_theory(out) -> pd.DataFrame:
    """general_fixed_point_theory with the test error also under the name of the finite-d Gaussian-equivalent
    one (the same quantity of the theory)."""
    th = pd.read_csv(out / "general_fixed_point_theory.csv")
    return th.assign(test_error_ge=th.test_error, test_error_ge_err=th.test_error_err)


def build_fixed_points(n_jobs, out):
    from attnlib import branch_minimisers, compare_with_fixed_points
    fd = branch_minimisers(pd.read_csv(out / "general_fixed_points_finite_d.csv"))
    theory = fixed_point_theory(out)
    table = compare_with_fixed_points(fd, theory, quantities=FIXED_POINT_QUANTITIES)
    flags = theory[["case", "alpha", "branch", "omega", "converged", "precise"]].rename(
        columns={"converged": "theory_converged", "precise": "theory_precise"})
    return table.merge(flags, on=["case", "alpha", "branch"], how="left").sort_values(
        ["case", "branch", "alpha", "quantity"])


BUILDERS = {"general_phase_grid": build_grid, "general_phase": build_phase,
            "general_phase_finite_d": build_phase_finite_d,
            "general_branches": build_branches, "general_self_finite_d": build_self_finite_d,
            "general_fixed_points_finite_d": build_fixed_points_finite_d,
            "general_fixed_point_theory": build_fixed_point_theory, "general_fixed_points": build_fixed_points}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--tables", nargs="+", choices=list(BUILDERS), default=list(BUILDERS),
                    help="tables to regenerate, in order (general_phase reads general_phase_grid)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for stem in args.tables:
        t0 = time.perf_counter()
        df = BUILDERS[stem](args.n_jobs, args.out).reset_index(drop=True)
        wall = time.perf_counter() - t0
        df.to_csv(args.out / f"{stem}.csv", index=False, float_format="%.12g")
        meta = dict(table=stem, description=DESCRIPTIONS[stem],
                    source="Computed with attnlib (attnlib.theory.branches.general_thresholds, attnlib.solve_general, "
                           "attnlib.simulate_erm) by scripts/regenerate_general_phase.py.",
                    citation=CITATION, script="scripts/regenerate_general_phase.py",
                    params=dict(sigma=SIGMA, lam=LAM, omegas=list(OMEGAS), self_weight=SELF_WEIGHT,
                                self_omega=SELF_OMEGA, branch_omega=BRANCH_OMEGA,
                                A={c: case_A(c).tolist() for c in CASES}),
                    solver=dict(order=SOLVER.order, max_order=SOLVER.max_order, seeds=list(SOLVER.seeds),
                                precision=SOLVER.precision),
                    grid_alphas=list(GRID_ALPHAS), alphas_fd=list(ALPHAS_FD), branch_alphas=list(BRANCH_ALPHAS),
                    self_alphas=list(SELF_ALPHAS),
                    ds=list(FIXED_POINT_DS if stem in FIXED_POINT_TABLES else DS),
                    seeds=list(FIXED_POINT_SEEDS if stem in FIXED_POINT_TABLES else SEEDS), n_test=N_TEST,
                    fixed_point_cases={c: dict(omega=w, rank=r, alphas=list(a), starts=list(st))
                                       for c, (w, r, a, st) in FIXED_POINT_CASES.items()},
                    attnlib_version=attnlib.__version__, attnlib_fingerprint=library_fingerprint(),
                    blas_threads=1, n_jobs=args.n_jobs, n_rows=len(df), wall_time_s=round(wall, 1),
                    python=sys.version.split()[0], numpy=np.__version__, machine=platform.machine(),
                    generated=time.strftime("%Y-%m-%dT%H:%M:%S"))
        (args.out / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{stem}: {len(df)} rows in {wall:.0f} s", flush=True)


if __name__ == "__main__":
    main()

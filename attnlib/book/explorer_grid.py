"""The grid behind the static explorer of the published page (book chapter 9).

:func:`explorer_grid` precomputes both branches of the state evolution on an ``omega x alpha`` grid (one tidy
table, through :func:`attnlib.alpha_sweep`, cached), with the attention maps of :func:`attention_maps`;
:mod:`attnlib.book.static_explorer` embeds the table in the page, where plain JavaScript draws it.
:func:`grid_thresholds` reads ``alpha_c`` and ``alpha_l`` off a grid's own training losses, as a diagnostic of
the grid against the phase table (:mod:`attnlib.book.phase_table`).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from ..parallel import run_jobs
from ..params import STANDARD_A, TaskParams
from ..theory.model.attention import attention_diagonal, teacher_diagonal
from ..theory.model.generalisation import POSITION_SIGNS, linear_baseline_error
from ..theory.model.quadrature import Quadrature
from ..theory.model.state_evolution import SESolver
from ..theory.studies.sweeps import alpha_sweep
from .book_data import book_data_dir
from .phase_table import (BRANCHES, LINE_COLUMNS, branch_exists, log_crossing, phase_boundary, phase_lines,
                          table_applies, table_covers, table_omegas)

__all__ = ["GRID_OMEGAS", "GRID_ALPHAS", "EXAMPLE_INPUTS", "EXPLORER_POINTS_CSV", "FIXED_POINT_COLUMNS",
           "attention_maps", "explorer_fixed_points", "committed_fixed_points", "explorer_grid", "grid_thresholds"]

#: ``omega`` values of the static explorer: 0 to 0.9 in steps of 0.05 (19 values); the book's page uses those
#: inside the rows of the phase table (:func:`table_omegas`), where it has thresholds and branch ends.
GRID_OMEGAS = tuple(float(w) for w in np.round(np.linspace(0.0, 0.9, 19), 4))
#: ``alpha`` values of the static explorer: 40 values, geometric from 0.25 to 5.
GRID_ALPHAS = tuple(float(a) for a in np.round(np.geomspace(0.25, 5.0, 40), 4))
#: Example inputs of the attention maps, as teacher pre-activations ``h*`` in units of ``sqrt(rho)``: token
#: contents of opposite sign (the teacher's content part attends to the own token) and of the same sign,
#: unequal (token 1 attends to token 2).
EXAMPLE_INPUTS = ((1.5, -1.5), (0.5, 2.0))
#: Rule of the two-dimensional Gaussian averages of the attention maps (smooth integrands).
_MAP_RULE = Quadrature("gauss-hermite", 40)
#: The committed fixed points of the grid under the default rule (book data; scripts/regenerate_explorer_data.py).
EXPLORER_POINTS_CSV = "explorer_fixed_points.csv"
#: Columns of a fixed-point row of the grid (the ``*_err`` ones: standard errors of the default rule).
FIXED_POINT_COLUMNS = ("omega", "alpha", "branch", "q", "m", "V", "theta", "test_error", "train_loss", "converged",
                       "sigma", "lam", "q_err", "m_err", "V_err", "theta_err", "test_error_err", "train_loss_err")


def attention_maps(params: TaskParams, q, m, theta, examples=EXAMPLE_INPUTS) -> dict:
    """Mean attention of a student with overlaps ``(q, m, theta)`` and of the teacher, over all inputs and on
    example inputs.

    In the Gaussian representation (book :eq:`eq-gaussian-fields`) the student's and the teacher's pre-activations are
    ``h = sqrt(q) xi + m s`` and ``h* ~ N(0, rho I_2)`` with ``Cov(h_l, h*_l) = theta``, so given the teacher's
    ``h*`` the student's ``h`` is Gaussian, ``h | h* ~ N(m s + (theta/rho) h*, (q - theta^2/rho) I_2)``.
    An example input is given by its ``h* = sqrt(rho) z`` (``z`` in ``examples``); on it the teacher attends
    with ``T(h*)`` and the student, on average over what its ``h`` does not share with ``h*``, with
    ``E[S(h) | h*]``. A 2x2 attention matrix is row-stochastic, so only its diagonal is returned.

    ``q``, ``m``, ``theta`` may be arrays of one shape ``(...)`` (one student each).

    Returns
    -------
    dict
        ``"S_mean"`` ``(..., 2)``: ``E[S_11], E[S_22]``; ``"S_ex"`` ``(..., k, 2)``: ``E[S | h*]`` on the ``k``
        examples; ``"T_mean"`` ``(2,)``: ``E[T_11], E[T_22]``; ``"T_ex"`` ``(k, 2)``: ``T(h*)`` on the examples.
    """
    q, m, theta = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (q, m, theta)))
    if np.any(~np.isfinite(q) | ~np.isfinite(m) | ~np.isfinite(theta)) or np.any(q < 0):
        raise ValueError("q, m and theta must be finite, with q in [0, inf)")
    rho = params.rho
    if np.any(theta**2 > rho * q * (1 + 1e-9) + 1e-300):
        raise ValueError("overlaps must satisfy theta^2 <= rho q (Cauchy-Schwarz)")
    z = np.asarray(examples, dtype=float).reshape(-1, 2)
    h_star_ex = math.sqrt(rho) * z                                     # (k, 2)
    x, w = _MAP_RULE.points(2)                                          # (N, 2), (N,)
    s = POSITION_SIGNS
    e = (...,) + (None,) * 2                                            # broadcast the overlaps over (N, 2)
    h = np.sqrt(q)[e] * x + m[e] * s                                    # (..., N, 2)
    S_mean = np.einsum("...nl,n->...l", attention_diagonal(h), w)
    resid = np.sqrt(np.maximum(q - theta**2 / rho, 0.0))
    e3 = (...,) + (None,) * 3
    h_ex = (m[e3] * s + (theta / rho)[e3] * h_star_ex[:, None, :]
            + resid[e3] * x[None, :, :])                                # (..., k, N, 2)
    S_ex = np.einsum("...knl,n->...kl", attention_diagonal(h_ex), w)
    T_mean = w @ teacher_diagonal(math.sqrt(rho) * x, params)
    T_ex = teacher_diagonal(h_star_ex, params)
    return {"S_mean": S_mean, "S_ex": S_ex, "T_mean": T_mean, "T_ex": T_ex}


def _quiet_curve(params, alphas, branch, solver, use_cache):
    """One branch of :func:`attnlib.alpha_sweep`, warnings silenced (a job for ``attnlib.parallel.run_jobs``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return alpha_sweep(params, alphas, branches=(branch,), solver=solver, use_cache=use_cache)


def explorer_fixed_points(omegas=GRID_OMEGAS, alphas=GRID_ALPHAS, sigma: float = 0.5, lam: float = 0.01,
                          A=STANDARD_A, solver: SESolver | None = None, n_jobs: int = 2,
                          use_cache: bool = True) -> pd.DataFrame:
    """Both branches at every ``(omega, alpha)`` of a grid: :func:`attnlib.alpha_sweep` per ``omega`` and branch
    (``solver=None``: the default rule, with standard errors; each curve cached on disk), one joblib task per
    curve. Returns the rows' :data:`FIXED_POINT_COLUMNS` (the ``*_err`` ones NaN under a single rule) and the
    ``A`` entries, sorted by ``omega, branch, alpha``."""
    params_of = {float(w): TaskParams(sigma=float(sigma), lam=float(lam), omega=float(w), A=A)
                 for w in np.atleast_1d(np.asarray(omegas, dtype=float))}
    # one job per (omega, branch), so that both workers stay busy (branch curves take unequal times)
    jobs = [(_quiet_curve, dict(params=params_of[w], alphas=alphas, branch=b, solver=solver, use_cache=use_cache))
            for w in params_of for b in BRANCHES]
    curves = run_jobs(jobs, n_jobs=n_jobs)
    df = pd.concat(curves, ignore_index=True)
    for c in FIXED_POINT_COLUMNS:
        if c not in df:
            df[c] = np.nan
    a_cols = [c for c in df.columns if c.startswith("A") and c[1:].isdigit()]
    df = df[list(FIXED_POINT_COLUMNS) + a_cols].copy()
    df["converged"] = df["converged"].astype(bool)
    return df.sort_values(["omega", "branch", "alpha"]).reset_index(drop=True)


def committed_fixed_points(omegas, alphas, sigma: float, lam: float, A, table: pd.DataFrame | None = None
                           ) -> pd.DataFrame | None:
    """The rows of the committed grid (``table``, default the book data's :data:`EXPLORER_POINTS_CSV`) at these
    ``omegas`` and ``alphas``, for both branches, if the table holds every one of them for this ``sigma``,
    ``lambda`` and ``A``; else None (compute them)."""
    if table is None:
        try:
            table = pd.read_csv(book_data_dir() / EXPLORER_POINTS_CSV)
        except (FileNotFoundError, OSError, ValueError, pd.errors.ParserError):
            return None
    if not set(FIXED_POINT_COLUMNS) <= set(table.columns):
        return None
    a = np.asarray(A, dtype=float)
    keep = np.isclose(table.sigma, sigma) & np.isclose(table.lam, lam)
    for i in range(2):
        for j in range(2):
            col = f"A{i + 1}{j + 1}"
            keep &= np.isclose(table[col], a[i, j]) if col in table else False
    sub = table[keep]
    omegas = np.atleast_1d(np.asarray(omegas, dtype=float))
    alphas = np.atleast_1d(np.asarray(alphas, dtype=float))
    rows = []
    for w in omegas:
        for b in BRANCHES:
            curve = sub[np.isclose(sub.omega, w) & (sub.branch == b)]
            pick = [np.flatnonzero(np.isclose(curve.alpha.to_numpy(), x, rtol=0, atol=1e-9)) for x in alphas]
            if any(len(k) != 1 for k in pick):
                return None
            rows.append(curve.iloc[[k[0] for k in pick]].assign(omega=float(w)))
    df = pd.concat(rows, ignore_index=True)
    df["converged"] = df["converged"].astype(bool)
    return df.sort_values(["omega", "branch", "alpha"]).reset_index(drop=True)


def _defining_overlap(df: pd.DataFrame) -> np.ndarray:
    return np.where(df.branch == "semantic", df.theta.abs(), df.m.abs())


def explorer_grid(omegas=GRID_OMEGAS, alphas=GRID_ALPHAS, sigma: float = 0.5, lam: float = 0.01,
                  A=STANDARD_A, solver: SESolver | None = None, examples=EXAMPLE_INPUTS, n_jobs: int = 2,
                  use_cache: bool = True, phase: pd.DataFrame | None = None) -> pd.DataFrame:
    """Both branches of the state evolution on an ``omega x alpha`` grid, with what the explorer shows.

    The fixed points are the default rule's (``solver=None``): read from the committed grid
    (``committed_fixed_points`` of this module) where it holds every point asked for, else computed by
    ``explorer_fixed_points`` (each branch followed along ``alphas`` with warm starts by
    :func:`attnlib.alpha_sweep`, every curve cached on disk; about a second per point). An explicit ``solver``
    computes them under its single rule. To each fixed point are added the linear baseline ``eps_lin``, the
    thresholds and branch ends of the phase table at
    its ``omega`` (``phase``, by default ``phase_boundary``; ``phase_lines``), whether the branch
    exists there (``branch_exists``: inside its range in the table), whether it is the global minimum, and
    its attention maps (``attention_maps``).

    Where the table does not apply (``table_applies``: other ``sigma``, ``lambda`` or ``A``) the lines are
    NaN and a branch exists wherever its fixed point converged with its overlap not collapsed (``found``).

    Returns
    -------
    pandas.DataFrame
        One row per ``(omega, alpha, branch)``: ``FIXED_POINT_COLUMNS`` (``omega, alpha, branch, q, m, V,
        theta, test_error, train_loss, converged, sigma, lam`` and the standard errors ``*_err``, NaN under a
        single rule), ``found`` (converged, defining overlap not collapsed), ``exists``, ``is_global``, ``eps_lin``, ``alpha_c, alpha_l, semantic_end, positional_end`` (NaN: none), the mean
        attention diagonals ``S11_mean, S22_mean`` (student) and ``T11_mean, T22_mean`` (teacher), and for each
        example ``j`` ``S11_ex{j}, S22_ex{j}, T11_ex{j}, T22_ex{j}``; sorted by ``omega, branch, alpha``.
        ``is_global`` marks the existing branch of lower training loss at each point.

    Raises
    ------
    ValueError
        If ``omegas`` is empty, or the table applies but some ``omega`` lies outside its rows (restrict the grid
        with ``table_omegas``).
    """
    omegas = np.atleast_1d(np.asarray(omegas, dtype=float))
    if omegas.size == 0:
        raise ValueError("omegas must contain at least one value")
    params_of = {float(w): TaskParams(sigma=float(sigma), lam=float(lam), omega=float(w), A=A) for w in omegas}
    if phase is None:
        phase = phase_boundary()[0]
    applies = table_applies(phase, next(iter(params_of.values())))
    if applies and not table_covers(omegas, phase).all():
        raise ValueError(f"omegas {sorted(set(omegas) - set(table_omegas(omegas, phase)))} lie outside the phase "
                         f"table's rows ({phase.omega.min():g} to {phase.omega.max():g}): use table_omegas")
    lines = phase_lines(phase, omegas).set_index("omega") if applies else None
    fixed = committed_fixed_points(omegas, alphas, sigma, lam, A) if solver is None else None
    if fixed is None:
        fixed = explorer_fixed_points(omegas, alphas, sigma, lam, A, solver, n_jobs, use_cache)
    parts = []
    for w, params in params_of.items():
        df = fixed[np.isclose(fixed.omega, w)][list(FIXED_POINT_COLUMNS)].copy()
        df["omega"] = w
        line = lines.loc[w] if applies else None
        df["found"] = branch_exists("semantic", df.alpha, _defining_overlap(df), df.converged, params.rho)
        df["exists"] = False
        for b in BRANCHES:
            sel = (df.branch == b).to_numpy()
            df.loc[sel, "exists"] = branch_exists(b, df.alpha[sel], _defining_overlap(df)[sel],
                                                  df.converged[sel], params.rho, line)
        df["exists"] = df["exists"].astype(bool)
        for k in LINE_COLUMNS:
            df[k] = float(line[k]) if applies else np.nan
        df["eps_lin"] = linear_baseline_error(params)
        maps = attention_maps(params, df.q.to_numpy(), df.m.to_numpy(), df.theta.to_numpy(), examples)
        df["S11_mean"], df["S22_mean"] = maps["S_mean"][:, 0], maps["S_mean"][:, 1]
        df["T11_mean"], df["T22_mean"] = maps["T_mean"][0], maps["T_mean"][1]
        for j in range(maps["T_ex"].shape[0]):
            df[f"S11_ex{j}"], df[f"S22_ex{j}"] = maps["S_ex"][:, j, 0], maps["S_ex"][:, j, 1]
            df[f"T11_ex{j}"], df[f"T22_ex{j}"] = maps["T_ex"][j, 0], maps["T_ex"][j, 1]
        parts.append(df)
    grid = pd.concat(parts, ignore_index=True)
    loss = grid.train_loss.where(grid.exists, np.inf)
    best = loss.groupby([grid.omega, grid.alpha]).transform("min")
    grid["is_global"] = grid.exists & (loss == best)
    # a tie (equal losses to the last digit) keeps the semantic branch only
    dup = grid[grid.is_global].duplicated(["omega", "alpha"], keep="first")
    grid.loc[dup[dup].index, "is_global"] = False
    return grid.sort_values(["omega", "branch", "alpha"]).reset_index(drop=True)


def grid_thresholds(grid: pd.DataFrame) -> pd.DataFrame:
    """``alpha_c`` and ``alpha_l`` at each ``omega``, read off an :func:`explorer_grid` table.

    ``alpha_c``: the first sign change (+ to -) of ``eps_t(semantic) - eps_t(positional)`` where both branches
    exist; ``alpha_l``: the first where the global minimum's ``eps_g`` falls below ``eps_lin``. Both are
    linearly interpolated in ``log alpha`` between grid points (the grid's resolution, not Brent's
    refinement of :func:`attnlib.critical_alpha`); NaN where there is no crossing on the grid.
    """
    rows = []
    for w, g in grid.groupby("omega", sort=True):
        sem = g[g.branch == "semantic"].set_index("alpha").sort_index()
        pos = g[g.branch == "positional"].set_index("alpha").sort_index()
        a = sem.index.to_numpy()
        both = (sem.exists & pos.exists).to_numpy()
        gap = np.where(both, (sem.train_loss - pos.train_loss).to_numpy(), np.nan)
        glob = g[g.is_global].groupby("alpha").first().reindex(a)
        above_lin = (glob.test_error - glob.eps_lin).to_numpy()
        rows.append(dict(omega=float(w), alpha_c=log_crossing(a, gap), alpha_l=log_crossing(a, above_lin)))
    return pd.DataFrame(rows)

"""The phase table of book chapter 6 as the single source of thresholds and branch ends for the explorer.

``phase_standard.csv`` in the book's data folder (:func:`attnlib.book_data_dir`; pseudo-arclength continuation
with a smooth rule, sigma = 0.5, lambda = 0.01, standard A) gives at each of its ``omega`` the thresholds
``alpha_c`` and ``alpha_l`` and where the branches end: the semantic branch towards small ``alpha``
(``semantic_lower_alpha``), the positional one towards large ``alpha`` where ``positional_upper_kind`` says it
ends inside the computed range (:data:`END_KINDS`; otherwise it runs to the end of the range). The explorer grid and
the widget read the lines from here (:func:`phase_lines`, linear in ``omega`` between rows), never from their
own solutions: a branch exists at a point only inside its range in the table (:func:`branch_exists`).
"""
from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..params import STANDARD_A, TaskParams
from ..theory.solve.dispatch import solve_state_evolution
from ..theory.model.state_evolution import SESolver
from ..theory.model.status import VANISH_FLOOR
from .book_data import book_data_dir

__all__ = ["PHASE_TABLE_CSV", "PHASE_TABLE_PARAMS", "END_KINDS", "END_COLUMNS", "LINE_COLUMNS", "ABSENT_BELOW", "BRANCHES",
           "phase_boundary", "coarse_phase_boundary", "table_applies", "table_omegas", "phase_lines",
           "branch_exists", "table_covers", "log_crossing"]

#: The phase table of book chapter 6, in the book's data folder (:func:`attnlib.book_data_dir`).
PHASE_TABLE_CSV = "phase_standard.csv"
#: Parameters the phase table was computed for.
PHASE_TABLE_PARAMS = dict(sigma=0.5, lam=0.01, A=STANDARD_A)
#: Kinds of a branch end inside the computed range, as chapter 6 draws them: a fold, a vanishing, the end where
#: independent seed sets of the pooled rule stop agreeing, or the point where the search lost the branch (it
#: exists at least that far). The other kind, ``range``: the branch reaches the end of the computed range.
END_KINDS = ("fold", "vanishes", "agreement", "lost")
#: Columns of :func:`phase_lines`.
LINE_COLUMNS = ("alpha_c", "alpha_l", "semantic_end", "positional_end")
#: Columns of the phase table that hold the branch ends.
END_COLUMNS = {"semantic_lower_alpha", "positional_upper_alpha", "positional_upper_kind"}
#: A branch whose defining overlap (``theta`` semantic, ``m`` positional) is below this times ``rho`` has
#: merged with the uninformed fixed point: the branch is not there, whatever the table says.
ABSENT_BELOW = VANISH_FLOOR

BRANCHES = ("semantic", "positional")


def phase_boundary(csv_path: Path | str | None = None) -> tuple[pd.DataFrame, str]:
    """The phase table of chapter 6 (``csv_path``, default :data:`PHASE_TABLE_CSV` in the book's data folder)
    if it is readable and has ``alpha_c``, sorted by ``omega``, and a description of its source; else the
    coarse fallback :func:`coarse_phase_boundary` (``omega``, ``alpha_c`` only: no branch ends, so
    :func:`table_applies` is false for it)."""
    if csv_path is not None:
        paths = [Path(csv_path)]
    else:
        try:
            paths = [book_data_dir() / PHASE_TABLE_CSV]
        except FileNotFoundError:
            paths = []
    for path in paths:
        if not path.is_file():
            continue
        try:
            df = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.ParserError):
            continue
        if {"omega", "alpha_c"} <= set(df.columns) and df["alpha_c"].notna().any():
            return df.sort_values("omega").reset_index(drop=True), f"{path.name} (chapter 6)"
    return coarse_phase_boundary(), "coarse fallback (6 alphas per omega, interpolated)"


def table_applies(table: pd.DataFrame | None, params: TaskParams) -> bool:
    """Whether ``table`` is a phase table with branch ends computed for ``params``' ``sigma``, ``lambda`` and
    ``A`` (:data:`PHASE_TABLE_PARAMS`)."""
    if table is None or not END_COLUMNS <= set(table.columns) or not len(table):
        return False
    p = PHASE_TABLE_PARAMS
    return (math.isclose(params.sigma, p["sigma"]) and math.isclose(params.lam, p["lam"])
            and np.allclose(np.asarray(params.A, dtype=float), np.asarray(p["A"], dtype=float)))


def table_covers(omegas, table: pd.DataFrame) -> np.ndarray:
    """Boolean array: which ``omegas`` lie within the range of the table's rows."""
    w = np.asarray(omegas, dtype=float)
    return (w >= table.omega.min() - 1e-9) & (w <= table.omega.max() + 1e-9)


def table_omegas(omegas, table: pd.DataFrame) -> tuple:
    """The ``omegas`` inside the range of the table's rows (where :func:`phase_lines` has values)."""
    w = np.asarray(omegas, dtype=float)
    return tuple(float(v) for v in w[table_covers(w, table)])


def _interpolate(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """``fp`` at ``x``: a row's value where ``x`` is one of the ``xp``; between two rows, linear in ``x`` where
    both rows have a value (NaN otherwise); NaN outside ``[xp[0], xp[-1]]``."""
    out = np.full(len(x), np.nan)
    for k, v in enumerate(x):
        hit = np.flatnonzero(np.isclose(xp, v, rtol=0, atol=1e-9))
        if hit.size:
            out[k] = fp[hit[0]]
            continue
        i = int(np.searchsorted(xp, v))
        if 0 < i < len(xp) and np.isfinite(fp[i - 1]) and np.isfinite(fp[i]):
            t = (v - xp[i - 1]) / (xp[i] - xp[i - 1])
            out[k] = (1 - t) * fp[i - 1] + t * fp[i]
    return out


def phase_lines(table: pd.DataFrame, omegas) -> pd.DataFrame:
    """Thresholds and branch ends of the phase table at ``omegas``.

    Columns ``omega``, ``alpha_c``, ``alpha_l``, ``semantic_end`` (the table's ``semantic_lower_alpha``: the
    semantic branch exists above it) and ``positional_end`` (``positional_upper_alpha`` where
    ``positional_upper_kind`` is in :data:`END_KINDS`: the positional branch exists below it; NaN where it
    does not end in the computed range). At an ``omega`` of the table, the row's values; between two rows,
    linear interpolation in ``omega`` where both rows have a value, NaN otherwise (no threshold, no end); NaN
    outside the table's rows.
    """
    t = table.sort_values("omega")
    xp = t.omega.to_numpy(dtype=float)
    cols = {"alpha_c": t.alpha_c.to_numpy(dtype=float),
            "alpha_l": (t.alpha_l if "alpha_l" in t else pd.Series(np.nan, index=t.index)).to_numpy(dtype=float)}
    if END_COLUMNS <= set(t.columns):
        cols["semantic_end"] = t.semantic_lower_alpha.to_numpy(dtype=float)
        cols["positional_end"] = np.where(t.positional_upper_kind.isin(END_KINDS),
                                          t.positional_upper_alpha.to_numpy(dtype=float), np.nan)
    else:
        cols["semantic_end"] = cols["positional_end"] = np.full(len(t), np.nan)
    w = np.atleast_1d(np.asarray(omegas, dtype=float))
    return pd.DataFrame({"omega": w, **{k: _interpolate(w, xp, v) for k, v in cols.items()}})


def branch_exists(branch: str, alpha, overlap, converged, rho: float, line=None) -> np.ndarray:
    """Whether ``branch`` exists at each ``alpha``.

    The fixed point must have converged with its defining ``overlap`` (``theta`` semantic, ``m`` positional)
    at least :data:`ABSENT_BELOW` times ``rho``; with ``line`` (one row of :func:`phase_lines`, or a dict with
    ``semantic_end`` and ``positional_end``) the point must also lie inside the branch's range in the phase
    table: ``alpha >= semantic_end`` for the semantic branch (a missing end: not known to exist),
    ``alpha <= positional_end`` for the positional one (a missing end: no end).
    """
    if branch not in BRANCHES:
        raise ValueError(f"branch must be 'semantic' or 'positional', got {branch!r}")
    alpha = np.asarray(alpha, dtype=float)
    found = np.asarray(converged, dtype=bool) & (np.abs(np.asarray(overlap, dtype=float)) >= ABSENT_BELOW * rho)
    if line is None:
        return found
    if branch == "semantic":
        end = float(line["semantic_end"])
        inside = alpha >= end if math.isfinite(end) else np.zeros(alpha.shape, bool)
    else:
        end = float(line["positional_end"])
        inside = alpha <= end if math.isfinite(end) else np.ones(alpha.shape, bool)
    return found & inside


@functools.lru_cache(maxsize=4)
def coarse_phase_boundary(sigma: float = 0.5, lam: float = 0.01,
                          omegas: tuple = (0.0, 0.15, 0.3, 0.4)) -> pd.DataFrame:
    """``alpha_c(omega)`` at a few ``omega``: both branches (default solver, warm-started along ``alpha``;
    the semantic one downwards from large ``alpha``) on a coarse grid of 6 ``alpha``, and log-linear
    interpolation of the training-loss gap at its sign change (a sketch good to a few hundredths; about a
    minute or two; memoised). Only used when the phase table is missing."""
    solver = SESolver()
    alphas = np.geomspace(0.4, 2.6, 6)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for w in omegas:
            p = TaskParams(sigma=sigma, lam=lam, omega=float(w))
            et = {}
            for b in BRANCHES:
                start, vals = None, {}
                for a in (alphas[::-1] if b == "semantic" else alphas):
                    r = solve_state_evolution(p, float(a), b, solver=solver, start=start)
                    start = r.overlaps if r.converged else None
                    vals[float(a)] = r.train_loss if r.converged else np.nan
                et[b] = np.array([vals[float(a)] for a in alphas])
            rows.append(dict(omega=float(w), alpha_c=log_crossing(alphas, et["semantic"] - et["positional"])))
    return pd.DataFrame(rows)



def log_crossing(x: np.ndarray, f: np.ndarray) -> float:
    """First sign change of ``f`` from + to - along increasing ``x`` (both finite there), linearly
    interpolated in ``log x``; NaN if there is none."""
    for i in range(len(x) - 1):
        if np.isfinite(f[i]) and np.isfinite(f[i + 1]) and f[i] > 0 >= f[i + 1]:
            t = f[i] / (f[i] - f[i + 1])
            return float(np.exp(np.log(x[i]) + t * np.log(x[i + 1] / x[i])))
    return math.nan

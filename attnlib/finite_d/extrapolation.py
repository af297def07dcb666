"""Finite-d minimisers against fixed points of the state evolution, extrapolated in ``1/d``, for any sequence
length and student rank.

A table of finite-``d`` minimisers (one row per run: ``d``, ``seed``, the keys that name a fixed point, and the
measured quantities) is reduced to seed means per ``d`` with their standard errors; each quantity is then fitted
by ``a + b/d`` (:func:`attnlib.finite_d.arbiter.extrapolate_inverse_d`, weighted, its error scaled by the fit's
``chi2``) and the intercept ``a`` compared with the theory's value: ``z = (a - theory) / sqrt(err_a^2 +
err_theory^2)``. Which minimiser a fixed point is compared with is for the caller to say; :func:`branch_minimisers`
gives the usual choice (rank one: each start's minimiser where it stayed on its own branch; a wider student: the
lowest training loss over the starts, per training set).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .arbiter import extrapolate_inverse_d

__all__ = ["seed_mean_extrapolation", "branch_minimisers", "compare_with_fixed_points", "nearest_branch_comparison"]

#: the quantities :func:`compare_with_fixed_points` compares by default (columns of both tables)
QUANTITIES = ("train_loss", "test_error", "q_trace", "theta_norm", "m_norm")


def seed_mean_extrapolation(table: pd.DataFrame, values) -> dict:
    """Seed means of ``values`` (a column name of ``table`` or a Series aligned with it) per ``d``, their standard
    errors over seeds, and the fit ``a + b/d``.

    Returns a dict: ``inf`` (``a``), ``inf_err``, ``slope`` (``b``), ``chi2``, ``by_d`` and ``err_by_d`` (seed
    means and their standard errors, keyed by ``d``), ``n_seeds`` (the fewest seeds at any ``d``).
    """
    values = table[values] if isinstance(values, str) else values
    g = values.groupby(table.d)
    ds = np.array(sorted(g.groups))
    mean = g.mean().reindex(ds).to_numpy()
    err = (g.std(ddof=1) / np.sqrt(g.count())).reindex(ds).to_numpy()
    a, a_err, b, chi2 = extrapolate_inverse_d(ds, mean, err)
    return {"inf": a, "inf_err": a_err, "slope": b, "chi2": chi2, "by_d": dict(zip(ds.tolist(), mean.tolist())),
            "err_by_d": dict(zip(ds.tolist(), err.tolist())), "n_seeds": int(g.count().min()) if len(ds) else 0}


def branch_minimisers(table: pd.DataFrame, group=("case", "d", "alpha", "seed")) -> pd.DataFrame:
    """The minimisers to compare with a branch's fixed point.

    Rows whose ``branch`` is ``"free"`` (a student of rank above one, whose fixed point is the lowest-loss one):
    per ``group`` (one training set) the row of lowest ``train_loss`` over the starts. Other rows: those whose
    ``start`` equals their ``branch`` (the minimiser stayed on the branch it was started on; one that left for
    the other branch is not a measurement of either).
    """
    missing = [c for c in (*group, "branch", "start", "train_loss") if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing}")
    free = table[table.branch == "free"]
    best = free.loc[free.groupby(list(group)).train_loss.idxmin()] if len(free) else free
    kept = table[(table.branch != "free") & (table.start == table.branch)]
    return pd.concat([kept, best]).sort_values([*group, "branch"]).reset_index(drop=True)


def compare_with_fixed_points(finite_d: pd.DataFrame, theory: pd.DataFrame, keys=("case", "alpha", "branch"),
                              quantities=QUANTITIES) -> pd.DataFrame:
    """Every group of ``keys`` in ``finite_d`` against the row of ``theory`` with the same keys, per quantity.

    Parameters
    ----------
    finite_d : pandas.DataFrame
        Minimisers (already selected, e.g. by :func:`branch_minimisers`): ``keys``, ``d``, ``seed`` and the
        ``quantities``.
    theory : pandas.DataFrame
        One row per key: the ``quantities`` and, where known, their standard errors ``<quantity>_err`` (taken as
        zero where absent).
    keys, quantities : sequence of str

    Returns
    -------
    pandas.DataFrame
        One row per key and quantity: the keys, ``quantity``, ``theory``, ``theory_err``, ``d_max``,
        ``fd_dmax`` and ``fd_dmax_err`` (seed mean at the largest ``d``), ``fd_inf`` and ``fd_inf_err`` (the
        ``1/d`` extrapolation), ``slope``, ``chi2``, ``n_d``, ``n_seeds``, ``rel_diff = fd_inf/theory - 1`` and
        ``z = (fd_inf - theory)/sqrt(fd_inf_err^2 + theory_err^2)``. A quantity whose theory value is exactly
        zero (an overlap the branch holds at zero, which at finite ``d`` is of order ``d^{-1/2}``, not a ``1/d``
        correction) is left out. Keys without a theory row raise ``ValueError``.
    """
    keys, quantities = list(keys), list(quantities)
    th = theory.set_index(keys)
    if not th.index.is_unique:
        raise ValueError(f"theory must hold one row per {keys}")
    rows = []
    for key, sub in finite_d.groupby(keys):
        if key not in th.index:
            raise ValueError(f"no theory row for {dict(zip(keys, key))}")
        t = th.loc[key]
        d_max = int(sub.d.max())
        for name in quantities:
            value = float(t[name])
            if value == 0.0:  # held at zero by the branch: at finite d of order d^-1/2, not a 1/d correction
                continue
            fit = seed_mean_extrapolation(sub, name)
            err = float(t[f"{name}_err"]) if f"{name}_err" in th.columns and np.isfinite(t[f"{name}_err"]) else 0.0
            scale = math.hypot(fit["inf_err"], err)
            rows.append({**dict(zip(keys, key)), "quantity": name, "theory": value, "theory_err": err,
                         "d_max": d_max, "fd_dmax": fit["by_d"][d_max], "fd_dmax_err": fit["err_by_d"][d_max],
                         "fd_inf": fit["inf"], "fd_inf_err": fit["inf_err"], "slope": fit["slope"],
                         "chi2": fit["chi2"], "n_d": len(fit["by_d"]), "n_seeds": fit["n_seeds"],
                         "rel_diff": fit["inf"] / value - 1.0,
                         "z": (fit["inf"] - value) / scale if scale > 0 else math.nan})
    return pd.DataFrame(rows)


def nearest_branch_comparison(runs: pd.DataFrame, theory: pd.DataFrame, keys=("case", "alpha"),
                              quantities=("test_error", "train_loss", "q", "overlap")) -> pd.DataFrame:
    """Two-token, rank-one minimisers from the semantic and the positional start against the fixed points of
    both branches at the same point: each run is kept as a measurement of its start's branch when its overlaps
    ``(|m|, |theta|)`` lie nearer that branch's fixed point than the other's (it stayed in its basin), and the
    kept runs are compared with the branch by :func:`compare_with_fixed_points` (extrapolated in ``1/d``).

    Parameters
    ----------
    runs : pandas.DataFrame
        One row per run: ``keys``, ``start`` (``"semantic"`` or ``"positional"``), ``d``, ``seed``, ``m``,
        ``theta``, ``q``, ``train_loss`` and ``test_error_cv`` (compared as ``test_error``).
    theory : pandas.DataFrame
        One row per ``keys`` and ``branch`` (both branches at every point): ``m``, ``theta``, ``q``,
        ``test_error``, ``train_loss`` and their standard errors ``<name>_err``.

    Returns
    -------
    pandas.DataFrame
        :func:`compare_with_fixed_points`'s table over ``(*keys, "branch")``, where ``overlap`` is the branch's
        defining overlap (``|theta|`` semantic, ``|m|`` positional), plus ``kept``, the runs kept per row.
    """
    keys = list(keys)
    th = theory.assign(overlap=np.where(theory.branch == "semantic", theory.theta.abs(), theory.m.abs()),
                       overlap_err=np.where(theory.branch == "semantic", theory.get("theta_err", 0.0),
                                            theory.get("m_err", 0.0)))
    fixed = th.set_index([*keys, "branch"])
    if not fixed.index.is_unique:
        raise ValueError(f"theory must hold one row per {keys} and branch")
    other = {"semantic": "positional", "positional": "semantic"}

    def distance(row, branch):
        f = fixed.loc[(*[row[k] for k in keys], branch)]
        return math.hypot(abs(row["m"]) - abs(f["m"]), abs(row["theta"]) - abs(f["theta"]))

    stayed = np.array([distance(row, row["start"]) < distance(row, other[row["start"]])
                       for _, row in runs.iterrows()], dtype=bool)
    kept = runs[stayed].assign(branch=runs.start[stayed], test_error=runs.test_error_cv[stayed],
                               overlap=np.where(runs.start[stayed] == "semantic", runs.theta[stayed].abs(),
                                                runs.m[stayed].abs()))
    table = compare_with_fixed_points(kept, th, (*keys, "branch"), quantities)
    counts = kept.groupby([*keys, "branch"]).size().rename("kept").reset_index()
    return table.merge(counts, on=[*keys, "branch"], how="left")

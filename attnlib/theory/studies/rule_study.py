"""Accuracy and cost of candidate quadrature rules of the state evolution.

The expectations of the state evolution (:mod:`attnlib.theory.model.state_evolution`) are 4-dimensional Gaussian
integrals over the nodes ``(xi, eta)``. On the positional branch the proximal point jumps between local minima
on a surface in node space, so the integrands are discontinuous there and tensor Gauss-Hermite rules converge
erratically with their order; the semantic branch is smooth. This module measures candidate rules
(:class:`~attnlib.theory.model.quadrature.Quadrature`) against a reference made of several scramblings of a large
symmetrised Sobol rule (``"sobol-sym"``, unbiased for every scrambling seed, so the spread over seeds gives a
standard error), at two levels:

* :func:`map_image_errors`: one evaluation of the map ``x -> F(x)`` at given overlaps (the image
  ``(q, m, V, theta)`` and the mean proximal value ``E[M]``), with its wall time;
* :func:`fixed_point_errors`: the fixed point of the state evolution computed with each rule, and what it
  predicts (test error, training loss), with the wall time of the solve.

"Relative error" is ``(value - reference) / |reference|``, signed, the reference being the mean over the
reference's scramblings; an overlap held at exactly zero by the branch has relative error 0.
"""
from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from ...exceptions import ConvergenceWarning
from ...params import TaskParams, check_alpha, check_seeds
from ..model.quadrature import Quadrature, scrambling_mean
from ..model.state_evolution import (BRANCHES, Overlaps, SESolver, _hold, conjugates_and_energy,
                                     overlaps_from_conjugates, se_nodes, symmetry_generators)
from ..solve.branch_points import follow_branch

__all__ = ["IMAGE_FIELDS", "FIXED_POINT_FIELDS", "FIXED_POINT_BRANCHES", "map_image", "map_image_errors",
           "fixed_point_errors", "rule_point_count", "rule_study_summary"]

#: Quantities of the one-step image compared by :func:`map_image_errors` (``mean_M`` is ``E[M]``).
IMAGE_FIELDS = ("q", "m", "V", "theta", "mean_M")
#: Quantities of a fixed point compared by :func:`fixed_point_errors`.
FIXED_POINT_FIELDS = ("q", "m", "theta", "test_error", "train_loss")
#: Branches :func:`fixed_point_errors` accepts (``"free"`` needs a start and has no fixed representative).
FIXED_POINT_BRANCHES = ("semantic", "positional", "agnostic")


def rule_point_count(rule: Quadrature) -> int:
    """Number of points of the unfolded 4-d rule: ``order**4`` (Gauss-Hermite) or ``2**order`` (Sobol)."""
    return int(rule.order) ** 4 if rule.rule == "gauss-hermite" else 2 ** int(rule.order)


# --------------------------------------------------------------------------------------------- validation
def _check_params(params) -> TaskParams:
    if not isinstance(params, TaskParams):
        raise ValueError(f"params must be a TaskParams instance, got {type(params).__name__}")
    return params


def _check_branch(branch, allowed: tuple) -> str:
    if branch not in allowed:
        raise ValueError(f"branch must be one of {allowed}, got {branch!r}")
    return branch


def _check_rule(name: str, rule) -> Quadrature:
    if not isinstance(rule, Quadrature):
        raise ValueError(f"{name} must be a Quadrature instance (rule one of 'gauss-hermite', 'sobol', "
                         f"'sobol-sym'), got {type(rule).__name__}")
    return rule


def _check_rules(name: str, rules) -> tuple:
    if isinstance(rules, Quadrature) or not isinstance(rules, Sequence) or len(rules) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of Quadrature instances, got {rules!r}")
    return tuple(_check_rule(f"{name}[{i}]", r) for i, r in enumerate(rules))


def _check_reference(reference) -> Quadrature:
    reference = _check_rule("reference", reference)
    if reference.rule == "gauss-hermite":
        raise ValueError("reference must be a randomised rule, one of ('sobol', 'sobol-sym') (its scramblings "
                         "give the standard error), got 'gauss-hermite'")
    return reference


def _check_overlaps(overlaps, params: TaskParams, hold: tuple) -> Overlaps:
    if not isinstance(overlaps, Overlaps):
        raise ValueError(f"overlaps must be an Overlaps instance, got {type(overlaps).__name__}")
    pin_m, pin_theta = hold
    x = Overlaps(q=float(overlaps.q), m=float(overlaps.m) if pin_m is None else pin_m, V=float(overlaps.V),
                 theta=float(overlaps.theta) if pin_theta is None else pin_theta)
    if not (np.isfinite(x.as_array()).all() and x.q > 0 and x.V > 0 and x.theta**2 <= params.rho * x.q):
        raise ValueError(f"overlaps must be finite with q > 0, V > 0 and theta^2 <= rho q, got {overlaps}")
    return x


# ------------------------------------------------------------------------------------------------- helpers
def _relative(value: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Signed relative deviation ``(value - ref)/|ref|``; 0 where both are exactly 0 (a held overlap)."""
    value, ref = np.asarray(value, float), np.asarray(ref, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (value - ref) / np.abs(ref)
    return np.where((ref == 0.0) & (value == 0.0), 0.0, rel)


def map_image(params: TaskParams, alpha: float, branch: str, overlaps: Overlaps, rule: Quadrature,
              solver: SESolver | None = None) -> dict:
    """One evaluation of the state-evolution map with one rule.

    Parameters
    ----------
    params : TaskParams
        The task.
    alpha : float
        Sample complexity, in ``(0, inf)``.
    branch : {"semantic", "positional", "agnostic", "free"}
        Fixes the held overlaps (and the symmetries that fold the rule, :func:`symmetry_generators`).
    overlaps : Overlaps
        Where the map is evaluated (held overlaps are set to zero).
    rule : Quadrature
        The rule.
    solver : SESolver, optional
        Proximal settings (its ``quadrature`` is replaced by ``rule``); default ``SESolver()``.

    Returns
    -------
    dict
        The image ``q, m, V, theta``, ``mean_M`` (``E[M]``), ``n_nodes`` (nodes evaluated after folding) and
        ``seconds`` (wall time of this evaluation, node generation included unless cached).
    """
    params = _check_params(params)
    alpha = check_alpha(alpha)
    hold = _hold(params, _check_branch(branch, BRANCHES))
    x = _check_overlaps(overlaps, params, hold)
    rule = _check_rule("rule", rule)
    return _image(params, alpha, hold, x, rule, solver or SESolver())


def _image(params, alpha, hold, x, rule, solver) -> dict:
    t0 = time.perf_counter()
    nodes, weights = se_nodes(rule, symmetry_generators(params, hold))
    hat, mean_M, _ = conjugates_and_energy(params, alpha, x, nodes, weights, solver, hold)
    img = overlaps_from_conjugates(params, hat)
    seconds = time.perf_counter() - t0
    return dict(q=img.q, m=img.m, V=img.V, theta=img.theta, mean_M=mean_M, n_nodes=len(weights), seconds=seconds)


@functools.lru_cache(maxsize=32)
def _reference_images(params, alpha, hold, x, reference, seeds, solver) -> tuple:
    """Mean and standard error (``std / sqrt(n)`` over seeds) of the reference image, per field (cached)."""
    vals = np.array([[_image(params, alpha, hold, x, Quadrature(reference.rule, reference.order, s), solver)[k]
                      for k in IMAGE_FIELDS] for s in seeds])
    return scrambling_mean(vals)


# ------------------------------------------------------------------------------------------------ the tables
def map_image_errors(params: TaskParams, alpha: float, branch: str, overlaps: Overlaps, rules,
                     reference: Quadrature = Quadrature("sobol-sym", 20), reference_seeds=(0, 1, 2),
                     solver: SESolver | None = None) -> pd.DataFrame:
    """Error and cost of one evaluation of the state-evolution map, rule by rule.

    Parameters
    ----------
    params : TaskParams
        The task.
    alpha : float
        Sample complexity, in ``(0, inf)``.
    branch : {"semantic", "positional", "agnostic", "free"}
        Which overlaps are held at zero (and the symmetries folding the rules).
    overlaps : Overlaps
        Point ``(q, m, V, theta)`` where the map is evaluated (typically near the branch's fixed point).
    rules : sequence of Quadrature
        Candidate rules.
    reference : Quadrature
        Randomised reference rule (``"sobol-sym"`` or ``"sobol"``); its ``seed`` is ignored.
    reference_seeds : sequence of int
        At least two distinct scrambling seeds of the reference; the reference image is their mean, its
        standard error their standard deviation over ``sqrt(len(reference_seeds))``. Computed once per
        ``(params, alpha, branch, overlaps, reference, reference_seeds, solver)`` and cached.
    solver : SESolver, optional
        Proximal settings (its ``quadrature`` is ignored); default ``SESolver()``.

    Returns
    -------
    pandas.DataFrame
        One row per rule: ``sigma, lam, omega, alpha, branch``, the evaluation point ``q0, m0, V0, theta0``,
        ``rule, order, seed`` (the seed is ignored by Gauss-Hermite), ``n_points`` (points of the unfolded
        rule), ``n_nodes`` (nodes evaluated after folding by the branch's symmetries), ``seconds`` (wall time
        of one map evaluation, best of 2), the image ``q, m, V, theta, mean_M`` (``E[M]``, the mean proximal
        value), its relative errors ``err_<field>`` against the reference mean, the reference mean
        ``ref_<field>`` and its relative standard error ``ref_rse_<field>`` (standard error over
        ``|ref_<field>|``, 0 for a held overlap), and ``reference`` (e.g. ``"sobol-sym 2^20 x3"``).

    Raises
    ------
    ValueError
        If an argument is of the wrong type or out of range (the message names it and the allowed values).
    """
    params = _check_params(params)
    alpha = check_alpha(alpha)
    hold = _hold(params, _check_branch(branch, BRANCHES))
    x = _check_overlaps(overlaps, params, hold)
    rules = _check_rules("rules", rules)
    reference = Quadrature(_check_reference(reference).rule, reference.order, 0)
    seeds = check_seeds("reference_seeds", reference_seeds)
    solver = solver or SESolver()
    if not isinstance(solver, SESolver):
        raise ValueError(f"solver must be an SESolver instance or None, got {type(solver).__name__}")
    ref, ref_se = _reference_images(params, alpha, hold, x, reference, seeds, solver)
    ref_rse = _relative(ref + ref_se, ref)
    ref_name = f"{reference.rule} 2^{reference.order} x{len(seeds)}"
    rows = []
    for rule in rules:
        runs = [_image(params, alpha, hold, x, rule, solver) for _ in range(2)]
        img = runs[-1]
        vals = np.array([img[k] for k in IMAGE_FIELDS])
        err = _relative(vals, ref)
        row = dict(sigma=params.sigma, lam=params.lam, omega=params.omega, alpha=alpha, branch=branch,
                   q0=x.q, m0=x.m, V0=x.V, theta0=x.theta, rule=rule.rule, order=rule.order, seed=rule.seed,
                   n_points=rule_point_count(rule), n_nodes=img["n_nodes"],
                   seconds=min(r["seconds"] for r in runs))
        row.update({k: img[k] for k in IMAGE_FIELDS})
        row.update({f"err_{k}": e for k, e in zip(IMAGE_FIELDS, err)})
        row.update({f"ref_{k}": r for k, r in zip(IMAGE_FIELDS, ref)})
        row.update({f"ref_rse_{k}": r for k, r in zip(IMAGE_FIELDS, ref_rse)})
        row["reference"] = ref_name
        rows.append(row)
    return pd.DataFrame(rows)


def _solve(params, alpha, branch, rule, solver, start):
    """The branch's point with ``rule``, found as a sweep finds it (iteration, then Newton where the branch
    repels the iteration: :func:`attnlib.theory.solve.branch_points.follow_branch`), and the wall time of that."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        res = follow_branch(params, alpha, branch, start, replace(solver, quadrature=rule))
        seconds = time.perf_counter() - t0
    return res, seconds


def fixed_point_errors(params: TaskParams, alpha: float, branch: str, rules, reference_rules,
                       solver: SESolver | None = None, reference_start: Overlaps | None = None) -> pd.DataFrame:
    """The fixed point of the state evolution computed with each rule, against a reference.

    Parameters
    ----------
    params : TaskParams
        The task.
    alpha : float
        Sample complexity, in ``(0, inf)``.
    branch : {"semantic", "positional", "agnostic"}
        The branch (:func:`~attnlib.solve_state_evolution`).
    rules : sequence of Quadrature
        Candidate rules; each is solved from the branch's point under ``solver``'s own rule (found once,
        :func:`attnlib.theory.solve.branch_points.follow_branch`, which also finds a branch that repels the iteration), so
        ``seconds`` is the cost of a warm solve.
    reference_rules : sequence of Quadrature
        Rules whose mean fixed point is the reference (e.g. ``"sobol-sym"`` 2^18 with seeds 0, 1, 2); at
        least two, so that their spread gives a standard error.
    solver : SESolver, optional
        Solver settings (its ``quadrature`` is replaced by each rule); default ``SESolver()``.
    reference_start : Overlaps, optional
        Warm start of the reference solves; default the element-wise median of the converged fixed points of
        ``rules`` (the default start if none converged).

    Returns
    -------
    pandas.DataFrame
        One row per rule of ``rules`` and then of ``reference_rules`` (``role`` is ``"candidate"`` or
        ``"reference"``): ``sigma, lam, omega, alpha, branch, role, rule, order, seed, n_points``, the fixed
        point ``q, m, V, theta, test_error, train_loss``, ``seconds`` (wall time of the solve), ``converged``,
        ``n_iter``, ``residual``, the relative deviations ``dev_<field>`` of ``q, m, theta, test_error,
        train_loss`` from the reference mean (0 for an overlap held at zero), the reference mean
        ``ref_<field>``, its relative standard error ``ref_rse_<field>`` and ``reference`` (a label).
        ConvergenceWarnings are not re-emitted; read ``converged``.

    Raises
    ------
    ValueError
        If an argument is of the wrong type or out of range (the message names it and the allowed values).
    """
    params = _check_params(params)
    alpha = check_alpha(alpha)
    branch = _check_branch(branch, FIXED_POINT_BRANCHES)
    rules = _check_rules("rules", rules)
    reference_rules = _check_rules("reference_rules", reference_rules)
    if len(reference_rules) < 2:
        raise ValueError(f"reference_rules must hold at least 2 rules (their spread gives the standard error), "
                         f"got {len(reference_rules)}")
    solver = solver or SESolver()
    if not isinstance(solver, SESolver):
        raise ValueError(f"solver must be an SESolver instance or None, got {type(solver).__name__}")
    if reference_start is not None:
        reference_start = _check_overlaps(reference_start, params, _hold(params, branch))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = follow_branch(params, alpha, branch, None, solver).overlaps
    rows = []
    for role, group in (("candidate", rules), ("reference", reference_rules)):
        if role == "reference" and reference_start is None:
            done = np.array([[r["q"], r["m"], r["V"], r["theta"]] for r in rows if r["converged"]])
            reference_start = Overlaps.from_array(np.median(done, axis=0)) if len(done) else None
        for rule in group:
            res, seconds = _solve(params, alpha, branch, rule, solver,
                                  reference_start if role == "reference" else start)
            rows.append(dict(sigma=params.sigma, lam=params.lam, omega=params.omega, alpha=float(alpha),
                             branch=branch, role=role, rule=rule.rule, order=rule.order, seed=rule.seed,
                             n_points=rule_point_count(rule), q=res.q, m=res.m, V=res.V, theta=res.theta,
                             test_error=res.test_error, train_loss=res.train_loss, seconds=seconds,
                             converged=bool(res.converged), n_iter=res.n_iter, residual=res.residual))
    df = pd.DataFrame(rows)
    ref_vals = df.loc[df.role == "reference", list(FIXED_POINT_FIELDS)].to_numpy(float)
    ref, ref_se = scrambling_mean(ref_vals)
    dev = _relative(df[list(FIXED_POINT_FIELDS)].to_numpy(float), ref[None, :])
    ref_rse = _relative(ref + ref_se, ref)
    for j, k in enumerate(FIXED_POINT_FIELDS):
        df[f"dev_{k}"] = dev[:, j]
    for j, k in enumerate(FIXED_POINT_FIELDS):
        df[f"ref_{k}"] = ref[j]
    for j, k in enumerate(FIXED_POINT_FIELDS):
        df[f"ref_rse_{k}"] = ref_rse[j]
    labels = sorted({f"{r.rule} 2^{r.order}" if r.rule != "gauss-hermite" else f"gauss-hermite {r.order}"
                     for r in reference_rules})
    df["reference"] = f"{' + '.join(labels)} x{len(reference_rules)}"
    return df


def rule_study_summary(table: pd.DataFrame, averaged: tuple = (), map_table: pd.DataFrame | None = None
                       ) -> pd.DataFrame:
    """Worst deviation of each candidate rule over the points of a :func:`fixed_point_errors` table.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows of :func:`fixed_point_errors` (several points concatenated).
    averaged : tuple of (rule, order)
        Randomised rules whose scramblings are also averaged, as :func:`attnlib.solve_accurately` does: for
        each, a row of the mean fixed point over the candidate seeds of that rule, its deviation measured from
        the reference like the others.
    map_table : pandas.DataFrame, optional
        Rows of :func:`map_image_errors` for the same rules: adds ``map_seconds``, the median over points (and
        scramblings) of the wall time of one evaluation of the map, times the number of scramblings averaged.

    Returns
    -------
    pandas.DataFrame
        One row per candidate rule (one scrambling; Gauss-Hermite is deterministic), then one per averaged rule:
        ``rule, order, n_points, scramblings`` (1 or the number averaged), ``worst_<field>`` (the largest
        ``|dev_<field>|`` over points and scramblings, relative, for ``q, m, theta, test_error, train_loss``),
        ``seconds`` (median over points of the wall time of one solve, summed over the averaged scramblings;
        the solves of :func:`fixed_point_errors` start from the default rule's point, so this is the cost of a
        warm solve) and, with ``map_table``, ``map_seconds``.
    """
    need = {"role", "rule", "order", "seed", "omega", "alpha", "branch", "seconds"} | {
        f"dev_{k}" for k in FIXED_POINT_FIELDS} | {f"ref_{k}" for k in FIXED_POINT_FIELDS} | set(FIXED_POINT_FIELDS)
    if not isinstance(table, pd.DataFrame) or need - set(table.columns):
        raise ValueError(f"table must be a fixed_point_errors table, missing {sorted(need - set(table.columns))}")
    cand = table[table.role == "candidate"]
    rows = []
    for (rule, order), g in cand.groupby(["rule", "order"], sort=False):
        row = dict(rule=rule, order=int(order), n_points=rule_point_count(Quadrature(rule, int(order))),
                   scramblings=1)
        row.update({f"worst_{k}": float(g[f"dev_{k}"].abs().max()) for k in FIXED_POINT_FIELDS})
        row["seconds"] = float(g.groupby(["omega", "alpha", "branch"]).seconds.median().median())
        rows.append(row)
    for rule, order in averaged:
        g = cand[(cand.rule == rule) & (cand.order == order)]
        if g.empty:
            raise ValueError(f"averaged names ({rule!r}, {order}), which the table does not hold")
        per_point = g.groupby(["omega", "alpha", "branch"])
        means = per_point[list(FIXED_POINT_FIELDS)].mean()
        refs = per_point[[f"ref_{k}" for k in FIXED_POINT_FIELDS]].first().to_numpy(float)
        dev = np.abs(_relative(means.to_numpy(float), refs))
        row = dict(rule=rule, order=int(order), n_points=rule_point_count(Quadrature(rule, int(order))),
                   scramblings=int(per_point.size().min()))
        row.update({f"worst_{k}": float(dev[:, j].max()) for j, k in enumerate(FIXED_POINT_FIELDS)})
        row["seconds"] = float(per_point.seconds.sum().median())
        rows.append(row)
    out = pd.DataFrame(rows)
    if map_table is not None:
        if not isinstance(map_table, pd.DataFrame) or {"rule", "order", "seconds"} - set(map_table.columns):
            raise ValueError("map_table must be a map_image_errors table (columns rule, order, seconds)")
        cost = map_table.groupby(["rule", "order"]).seconds.median()
        missing = [(r, o) for r, o in zip(out.rule, out.order) if (r, o) not in cost.index]
        if missing:
            raise ValueError(f"map_table lacks the rules {missing}")
        out["map_seconds"] = [float(cost[(r, o)]) * n for r, o, n in zip(out.rule, out.order, out.scramblings)]
    return out

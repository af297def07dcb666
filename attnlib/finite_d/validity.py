"""Where the replica-symmetric theory stops describing finite d: theory against finite-d minimisers.

For every ``(omega, alpha)`` of an :func:`attnlib.finite_d.arbiter.arbiter_table` and each start, the finite-d
minimisers (seed means, per ``d``) are extrapolated in ``1/d`` (:func:`attnlib.finite_d.arbiter.extrapolate_inverse_d`)
and compared with the fixed point of the state evolution that the start aims at: the positional branch for the
positional start, the semantic branch for the semantic start (or, where a branch does not exist at that
``alpha``, the agnostic point ``m = theta = 0``).

Compared quantities:

* the training loss relative to ``Q = 0`` on the same data, ``eps_t - eps_t(Q = 0)`` (the shared data
  fluctuation cancels; the theory's is ``eps_t - alpha sigma^2 E sum_l (1/2 - T_ll)^2``,
  :func:`attnlib.finite_d.arbiter.loss_zero_theory`);
* the defining overlap (``m`` for the positional start, ``theta`` for the semantic one) and ``q``.

A difference whose extrapolation stays more than ``z_max`` standard errors from zero is a disagreement that
does not go away with ``d``. With each row come the diagnostics of :mod:`attnlib.theory.studies.stability` (replicon and tie
density of the fixed point).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from .arbiter import TASK_COLUMNS, loss_zero_theory, task_params
from .extrapolation import seed_mean_extrapolation
from ..theory.solve.newton import Continuation, newton_fixed_point
from ..exceptions import ConvergenceWarning
from ..params import TaskParams
from ..theory.model.proximal import minimise_locally, prox_objective
from ..theory.model.quadrature import Quadrature
from ..theory.studies.stability import proximal_nodes, rs_diagnostics
from ..theory.solve.dispatch import solve_state_evolution
from ..theory.model.state_evolution import Overlaps, SESolver
from ..theory.branches.traces import (branch_point, branch_trace, continuation_settings, DEFAULT_RANGE, _range,
                                      _trace_range)

__all__ = ["theory_point", "rs_validity", "rs_breakdown", "fixed_point_near", "SOLVER_CHECK_RULES", "solver_checks",
           "pinned_profile", "prox_coverage"]

_DEFINING = {"positional": "m", "semantic": "theta"}


def theory_point(params: TaskParams, alpha: float, branch: str, solver=None, alpha_range=DEFAULT_RANGE,
                 use_cache: bool = True):
    """The fixed point of ``branch`` at ``alpha`` (from its continuation trace), or the agnostic point where the
    branch does not exist there. Returns ``(SEResult, name of the fixed point used)``.

    Inside the branch's range the point is Newton-solved from the trace (:func:`~attnlib.theory.branches.traces.branch_point`);
    where Newton fails (near-ties of the proximal problem make the map rough at the edges) it is the
    interpolation of the trace's own fixed points, returned with ``converged=False``, never the agnostic point
    of another sector."""
    settings = continuation_settings(solver)
    trace = branch_trace(params, branch, _trace_range(*_range(alpha_range, None)), settings, use_cache)
    if trace is not None and trace.lower.alpha <= alpha <= trace.upper.alpha:
        return branch_point(trace, alpha, settings), branch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return solve_state_evolution(params, alpha, "agnostic", solver=settings.solver), "agnostic"


def rs_validity(table: pd.DataFrame, solver=None, alpha_range=DEFAULT_RANGE, diagnostics: bool = True,
                use_cache: bool = True) -> pd.DataFrame:
    """Theory against finite-d minimisers, one row per ``(task, alpha, start)`` of ``table`` (an
    :func:`~attnlib.finite_d.arbiter.arbiter_table`); see the module docstring.

    Columns: the task (``omega``, ``A11`` ...), ``alpha``, ``start``, ``fixed_point`` (the theory point used),
    ``theory_converged`` (False where the point is the interpolation of the branch's trace),
    for ``loss`` (the relative training loss), ``overlap`` (the start's defining overlap) and ``q``: the
    theory value ``theory_*``, the finite-d ``d -> infinity`` extrapolation ``fd_*`` with error ``fd_*_err``,
    the difference ``diff_* = fd_* - theory_*`` and ``z_* = diff_*/fd_*_err``; the seed means at the largest
    ``d`` (``fd_*_dmax``); ``replicon`` and ``tie_density`` of the fixed point (with ``diagnostics``).
    """
    keys = list(TASK_COLUMNS)
    rows = []
    for task_key, task in table.groupby(keys):
        params = task_params(task)
        for (alpha, start), sub in task.groupby(["alpha", "start"]):
            res, used = theory_point(params, float(alpha), start, solver, alpha_range, use_cache)
            name = _DEFINING[start]
            fd = {"loss": seed_mean_extrapolation(sub, sub.train_loss - sub.train_loss_zero),
                  "overlap": seed_mean_extrapolation(sub, sub[name].abs()),
                  "q": seed_mean_extrapolation(sub, sub.q)}
            theory = {"loss": res.train_loss - loss_zero_theory(params, float(alpha)),
                      "overlap": abs(getattr(res, name)), "q": res.q}
            row = dict(zip(keys, task_key), alpha=float(alpha), start=start, fixed_point=used,
                       theory_converged=bool(res.converged), d_max=int(sub.d.max()),
                       n_seeds=int(sub.seed.nunique()))
            for k in ("loss", "overlap", "q"):
                row[f"theory_{k}"] = theory[k]
                row[f"fd_{k}"] = fd[k]["inf"]
                row[f"fd_{k}_err"] = fd[k]["inf_err"]
                row[f"fd_{k}_dmax"] = fd[k]["by_d"][row["d_max"]]
                row[f"diff_{k}"] = fd[k]["inf"] - theory[k]
                row[f"z_{k}"] = row[f"diff_{k}"] / fd[k]["inf_err"] if fd[k]["inf_err"] > 0 else math.nan
            if diagnostics:
                row.update(rs_diagnostics(res))
            rows.append(row)
    return pd.DataFrame(rows)


def rs_breakdown(validity: pd.DataFrame, quantity: str = "loss", z_max: float = 3.0,
                 rel_tol: float = 0.01) -> pd.DataFrame:
    """Per task and start: the largest ``alpha`` at which theory and extrapolated finite d disagree (``|z| >
    z_max`` and the difference above ``rel_tol`` of the theory value), and the smallest ``alpha`` above it
    from which they agree at every grid point (NaN if they agree everywhere / nowhere)."""
    keys = [*TASK_COLUMNS, "start"]
    rows = []
    for key, sub in validity.groupby(keys):
        sub = sub.sort_values("alpha")
        bad = (sub[f"z_{quantity}"].abs() > z_max) & (
            sub[f"diff_{quantity}"].abs() > rel_tol * sub[f"theory_{quantity}"].abs())
        last_bad = float(sub.alpha[bad].max()) if bad.any() else math.nan
        above = sub.alpha[sub.alpha > last_bad] if bad.any() else sub.alpha
        rows.append(dict(zip(keys, key), last_disagreement=last_bad,
                         agrees_from=float(above.min()) if len(above) else math.nan))
    return pd.DataFrame(rows)


def fixed_point_near(params: TaskParams, alpha: float, q: float, m: float, theta: float, branch: str = "free",
                     solver=None):
    """Is there a fixed point of the state evolution near given overlaps (e.g. those of a finite-d minimiser)?

    Newton's method (:func:`attnlib.newton_fixed_point`, which also finds fixed points that repel
    the iteration) on ``branch`` (default ``"free"``: ``m`` and ``theta`` both free; ``"positional"`` holds
    ``theta = 0``, ``"semantic"`` holds ``m = 0``), started at ``(q, m, theta)`` with the width ``V`` of the
    agnostic point at ``alpha``. Returns the :class:`~attnlib.theory.model.state_evolution.SEResult` (``converged`` says
    whether a fixed point was found; compare its overlaps with the start to see how near it is).
    """
    settings = continuation_settings(solver)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        agn = solve_state_evolution(params, alpha, "agnostic", solver=settings.solver)
        theta = min(abs(theta), 0.99 * math.sqrt(params.rho * q)) * (1 if theta >= 0 else -1)
        return newton_fixed_point(params, alpha, branch, Overlaps(q=q, m=m, V=agn.V, theta=theta), settings)


#: The rules of :func:`solver_checks`: (label, quadrature, proximal mode).
SOLVER_CHECK_RULES = (
    ("Gauss-Hermite 12, global prox", Quadrature("gauss-hermite", 12), "global"),
    ("Gauss-Hermite 16, global prox", Quadrature("gauss-hermite", 16), "global"),
    ("Gauss-Hermite 12, prox from zero", Quadrature("gauss-hermite", 12), "from-zero"),
    ("Sobol-sym 2^14 (scrambling 0)", Quadrature("sobol-sym", 14, seed=0), "global"),
    ("Sobol-sym 2^14 (scrambling 1)", Quadrature("sobol-sym", 14, seed=1), "global"),
    ("Sobol-sym 2^16", Quadrature("sobol-sym", 16), "global"),
)


def solver_checks(params: TaskParams, alpha: float, branch: str, start: Overlaps, rules=SOLVER_CHECK_RULES
                  ) -> pd.DataFrame:
    """The fixed point of ``branch`` at ``alpha`` under several quadrature rules and both treatments of the
    proximal problem (Newton from ``start``, hard proximal choice): one row per rule with ``q``, ``m``,
    ``theta``, ``V``, ``train_loss``, the training loss relative to ``Q = 0`` (``rel_loss``), ``converged`` and
    ``residual`` (a rule whose map does not converge, e.g. the from-zero proximal choice on a limit cycle, is
    reported with its last iterate and ``converged=False``).

    Used where theory and finite d part, to separate what the theory determines (what agrees between rules)
    from what the numerics decide."""
    zero = loss_zero_theory(params, alpha)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for label, quad, mode in rules:
            settings = Continuation(solver=SESolver(quadrature=quad, prox_mode=mode))
            res = newton_fixed_point(params, alpha, branch, start, settings)
            if not res.converged:  # Newton on a rough map: fall back on the damped iteration from the start
                res = solve_state_evolution(params, alpha, branch, start=start, solver=settings.solver)
            rows.append({"rule": label, "prox_mode": mode, "omega": params.omega, "alpha": float(alpha),
                         "branch": branch, "q": res.q, "m": res.m, "theta": res.theta, "V": res.V,
                         "train_loss": res.train_loss, "rel_loss": res.train_loss - zero,
                         "converged": bool(res.converged), "residual": float(res.residual)})
    return pd.DataFrame(rows)


def pinned_profile(params: TaskParams, alpha: float, branch: str, values, start: Overlaps, solver=None
                   ) -> pd.DataFrame:
    """The training loss of the theory with the branch's defining overlap pinned (``m`` for the positional
    branch, ``theta`` for the semantic one; :func:`~attnlib.solve_state_evolution` with
    ``fix_m`` / ``fix_theta``): the constrained fixed point for each value, one row per value with ``q``, ``V``,
    ``train_loss``, ``rel_loss`` (relative to ``Q = 0``) and ``converged``. A profile that is flat over a range
    of values says that the theory's training loss hardly distinguishes them."""
    solver = solver or SESolver()
    if branch not in _DEFINING:
        raise ValueError(f"branch must be one of {tuple(_DEFINING)}, got {branch!r}")
    zero = loss_zero_theory(params, alpha)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for v in np.atleast_1d(np.asarray(values, float)):
            pin = {"fix_m": float(v)} if branch == "positional" else {"fix_theta": float(v)}
            st = Overlaps(start.q, float(v), start.V, 0.0) if branch == "positional" else Overlaps(
                start.q, 0.0, start.V, float(v))
            res = solve_state_evolution(params, alpha, branch, start=st, solver=solver, **pin)
            rows.append({"omega": params.omega, "alpha": float(alpha), "branch": branch, _DEFINING[branch]: float(v),
                         "q": res.q, "V": res.V, "train_loss": res.train_loss, "rel_loss": res.train_loss - zero,
                         "converged": bool(res.converged)})
    return pd.DataFrame(rows)


def prox_coverage(result, quadrature: Quadrature | None = None, points: int = 161) -> dict:
    """Does the global proximal search find the best minimum at every node? At the fixed point ``result``,
    every node's proximal problem is also solved by brute force (the objective on a ``points x points`` grid
    over the disc that contains every minimiser, ``||h - c||^2 <= 2 V * 2 sigma^2``, polished by Newton from the
    best grid point) and compared. Returns ``{"nodes", "max_deficit", "share_worse"}``: the largest amount by
    which the search's minimum lies above the brute-force one, and the share of nodes where it does by more
    than ``1e-9``."""
    quadrature = quadrature or Quadrature("sobol-sym", 10)
    w, c, t, prox = proximal_nodes(result, quadrature)
    V, s = result.V, result.params.sigma
    r = math.sqrt(2 * V * 2 * s**2)
    g = np.linspace(-r, r, int(points))
    off = np.stack([a.ravel() for a in np.meshgrid(g, g, indexing="ij")], axis=1)
    best = np.empty_like(c)
    for i in range(len(c)):  # one vectorised grid evaluation per node (a check, not a hot path)
        hs = c[i] + off
        f = prox_objective(hs, np.broadcast_to(c[i], hs.shape), np.broadcast_to(t[i], hs.shape), V, s)
        best[i] = hs[np.argmin(f)]
    polished = minimise_locally(best, c, t, V, s, 1e-12, 200, "numpy")
    deficit = prox.value - polished.value
    return {"nodes": int(len(c)), "max_deficit": float(deficit.max()), "share_worse": float(np.mean(deficit > 1e-9))}

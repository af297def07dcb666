"""Finite-d students constructed inside a sector, with its defining overlap pinned: the finite-d side of the
verdict at the edges of the phase diagram (book :ref:`sec-edge-verdict`).

Where the replica-symmetric theory and descent from the named starts disagree (at ``omega = 0`` and small
``alpha`` the positional start ends at ``m/sigma^2 ~ 0.77`` where the theory's positional fixed point has
``~ 0.60``), two explanations compete: the theory's minimum exists at finite ``d`` but descent does not reach
it (it is trapped), or it does not exist (the theory fails there). This module looks for it directly.

The sector's defining overlap is ``m = (1_d . Q)/d`` (positional) or ``theta = sigma^2 (Q* . Q)/d``
(semantic), in both cases ``(u . Q)/d`` for a fixed vector ``u``. :func:`pinned_lbfgs` minimises the empirical
risk ``R(Q)`` (book :eq:`eq-risk`) on the hyperplane ``(u . Q)/d = c``: with ``Q = c d u/||u||^2 + P x`` and
``P = I - u u^T/||u||^2`` the problem is unconstrained in ``x`` and its gradient is ``P dR/dQ``. The constrained
minimum at finite ``d`` is the finite-``d`` counterpart of the theory's fixed point with the same overlap pinned
(:func:`attnlib.finite_d.validity.pinned_profile`), so the two profiles of the training loss along the defining
overlap can be compared point by point.

:func:`sector_minima` does, on one training set: descent from the named start (the arbiter's run); the pinned
minimum at each value of a grid, started from the descent minimum (the finite-``d`` profile); at the
``target`` value (the theory's fixed point) also from ``n_restarts`` random starts in the sector (``Q``
with the target overlap, the theory's ``q`` and no component along the other sector's direction); and a free
descent released from the lowest pinned minimum at the target (does the theory's point hold when the pin is
let go?). :func:`construction_table` runs it over ``alphas x ds x seeds`` (each training set cached);
:func:`construction_summary` pairs every constructed minimum with the descent minimum on the same data and
extrapolates the differences in ``1/d``.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from ..cache import cached
from ..exceptions import warn_caller
from ..parallel import run_jobs
from ..params import TaskParams, check_alpha, check_finite_scalar, check_int, check_positive
from .arbiter import extrapolate_inverse_d
from .data import make_task, seed_streams
from .simulation import DEFAULT_GRAD_TOL, ERMObjective, GDResult, _as_Q, initial_Q, minimize_lbfgs, n_samples, overlaps

__all__ = ["SECTORS", "sector_direction", "pinned_lbfgs", "sector_minima", "construction_table",
           "construction_pairs", "construction_summary", "paired_profile", "accurate_pinned_profile"]

#: Sectors and their defining overlap.
SECTORS = {"positional": "m", "semantic": "theta"}
_NAMESPACE = "sector-minima"


def _check_sector(sector: str) -> str:
    if sector not in SECTORS:
        raise ValueError(f"sector must be one of {tuple(SECTORS)}, got {sector!r}")
    return sector


def sector_direction(teacher, sector: str) -> np.ndarray:
    """The vector ``u`` with ``(u . Q)/d`` the sector's defining overlap: ``1_d`` (positional, ``m``) or
    ``sigma^2 Q*`` (semantic, ``theta``); book :eq:`eq-overlaps`."""
    if _check_sector(sector) == "positional":
        return np.ones(teacher.d)
    return teacher.params.sigma**2 * np.asarray(teacher.Q_star, float)


def pinned_lbfgs(objective: ERMObjective, u: np.ndarray, value, Q0, grad_tol: float = DEFAULT_GRAD_TOL["lbfgs"],
                 maxiter: int = 20000, warn: bool = True) -> GDResult:
    """Minimise ``R(Q)`` (rank 1) on the affine subspace ``(U Q)/d = value`` with L-BFGS-B.

    ``u`` is one vector of shape ``(d,)`` (one constraint, ``value`` a number) or ``k`` linearly independent
    rows of shape ``(k, d)`` (``value`` of length ``k``). With ``G = U U^T`` the subspace is
    ``Q = U^T G^{-1} value d + P x``, ``P x = x - U^T G^{-1} U x``, and the problem is unconstrained in ``x``
    with gradient ``P dR/dQ``. ``Q0`` is projected onto the subspace first. The stopping rule is that of
    :func:`~attnlib.finite_d.simulation.minimize_lbfgs`, applied to the projected gradient (``grad_norm`` in the
    result is ``||P dR/dQ||/sqrt d``); ``converged=False`` and a :class:`~attnlib.exceptions.ConvergenceWarning`
    (if ``warn``) when it is not met.
    """
    if objective.rank != 1:
        raise ValueError(f"pinned_lbfgs is for a rank-1 student (objective.rank = 1), got rank {objective.rank}")
    d = objective.d
    U = np.atleast_2d(np.asarray(u, float))
    if U.ndim != 2 or U.shape[1] != d or not np.all(np.isfinite(U)):
        raise ValueError(f"u must be a finite vector of shape ({d},) or rows of shape (k, {d}), got shape "
                         f"{np.shape(u)}")
    k = U.shape[0]
    values = np.atleast_1d(np.asarray(value, float))
    if values.shape != (k,) or not np.all(np.isfinite(values)):
        raise ValueError(f"value must be {k} finite number(s), one per row of u, got {value!r}")
    G = U @ U.T
    if k > d or np.linalg.matrix_rank(G) < k:
        raise ValueError("u must be nonzero, with linearly independent rows")
    grad_tol = check_positive("grad_tol", grad_tol)
    maxiter = check_int("maxiter", maxiter, 1)
    base = U.T @ np.linalg.solve(G, values * d)

    def project(x):
        return x - U.T @ np.linalg.solve(G, U @ x)

    def fun(x):
        v, g = objective.value_and_grad((base + project(x))[:, None])
        return v, project(g[:, 0])

    x0 = project(_as_Q(Q0, d, 1, name="Q0")[:, 0])
    n0 = objective.n_evaluations
    res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "maxfun": 2 * maxiter, "maxcor": 20, "gtol": 1e-10, "ftol": 1e-16,
                            "maxls": 50})
    Q = np.ascontiguousarray((base + project(res.x))[:, None])
    v, g = objective.value_and_grad(Q)
    gnorm = float(np.linalg.norm(project(g[:, 0]))) * objective.inv_sqrt_d
    converged = bool(np.isfinite(v)) and gnorm <= grad_tol
    message = f"{res.message} ; projected gradient norm {gnorm:.3g} vs tolerance {grad_tol:.3g} after {res.nit} iterations"
    if not converged and warn:
        warn_caller(f"pinned L-BFGS did not converge: {message}")
    return GDResult(Q=Q, value=float(v), grad_norm=gnorm, n_iter=int(res.nit),
                    n_evaluations=objective.n_evaluations - n0, converged=converged, message=str(message))


def _values(name, values) -> list[float]:
    values = np.atleast_1d(np.asarray(values, float))
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be a finite number or a 1-d list of them")
    return [float(v) for v in values]


def sector_minima(params: TaskParams, d: int, alpha: float, sector: str, target: float, seed: int = 0,
                  profile=(), n_restarts: int = 3, q_start: float = 0.045, hold_other: float | None = None,
                  normalize_teacher: bool = True, use_cache: bool = True) -> list[dict]:
    """Descent, pinned and released minima of the empirical risk in one sector, on one training set (cached).

    Parameters
    ----------
    params, d, alpha, seed
        The task; the training set is that of :func:`attnlib.finite_d.arbiter.finite_d_minimum` with the same
        arguments (``Q*`` normalised to ``||Q*||^2 = d`` by default), so its descent row repeats the arbiter's.
    sector : {"positional", "semantic"}
        Which overlap is pinned (``m`` or ``theta``) and which named start descends.
    target : float
        The pinned value of the overlap for the restarts and the release (the theory's fixed point).
    profile : sequence of float
        Further pinned values, each started from the descent minimum only.
    n_restarts : int
        Random starts at ``target``: ``x ~ N(0, (q_start/sigma^2) I)``, projected onto the hyperplane and, for
        the positional sector, cleared of its component along ``Q*`` (and for the semantic one along ``1_d``).
    q_start : float
        The ``q`` of the random starts (the theory's ``q`` is about 0.045 at the edge points).
    hold_other : float, optional
        Also hold the other sector's overlap at this value in the pinned and restarted runs (``m = 0`` for
        the semantic sector puts the student in the theory's semantic subspace, where ``m`` vanishes); by
        default it is free.

    Returns
    -------
    list of dict
        One row per minimum: task parameters, ``d``, ``n``, ``alpha``, ``seed``, ``sector``, ``method``
        (``"descent"``, ``"pinned"`` from the descent minimum, ``"restart"``, ``"released"``), ``restart``
        (index, -1 otherwise), ``target``, ``pin`` (NaN for free runs), ``hold_other`` (NaN if free), ``q``,
        ``m``, ``theta``, ``train_loss``,
        ``train_loss_zero``, ``rel_loss = train_loss - train_loss_zero``, ``grad_norm``, ``converged``,
        ``n_iter``, ``seconds``.
    """
    d = check_int("d", d, 2)
    alpha = check_alpha(alpha)
    sector = _check_sector(sector)
    target = check_finite_scalar("target", target)
    seed = check_int("seed", seed, 0)
    profile = _values("profile", profile) if len(np.atleast_1d(profile)) else []
    n_restarts = check_int("n_restarts", n_restarts, 0)
    q_start = check_positive("q_start", q_start)
    if hold_other is not None:
        hold_other = check_finite_scalar("hold_other", hold_other)

    def compute():
        n = n_samples(alpha, d)
        teacher, train = make_task(params, d, n, seed=seed, normalize_teacher=normalize_teacher)
        objective = ERMObjective(train, params.lam)
        del train
        zero = objective.value(np.zeros(d)) / d
        u = sector_direction(teacher, sector)
        other = sector_direction(teacher, "semantic" if sector == "positional" else "positional")
        if hold_other is not None:
            u = np.stack([u, other])
        rows = []

        def pinned(v, start):
            return pinned_lbfgs(objective, u, v if hold_other is None else [v, hold_other], start, warn=False)

        def row(method, fit, seconds, pin=math.nan, restart=-1):
            ov = overlaps(fit.Q, teacher)
            rows.append({**params.as_dict(), "d": d, "n": n, "alpha": alpha, "seed": seed, "sector": sector,
                         "method": method, "restart": restart, "target": target, "pin": pin,
                         "hold_other": math.nan if hold_other is None else hold_other, "q": float(ov["q"][0]),
                         "m": float(ov["m"][0]), "theta": float(ov["theta"][0]), "train_loss": fit.value / d,
                         "train_loss_zero": zero, "rel_loss": fit.value / d - zero, "grad_norm": fit.grad_norm,
                         "converged": fit.converged, "n_iter": fit.n_iter, "seconds": seconds})
            return fit

        t0 = time.perf_counter()
        descent = row("descent", minimize_lbfgs(objective, initial_Q(sector, teacher, rng=seed_streams(seed)["init"]),
                                                warn=False), time.perf_counter() - t0)
        for v in profile:
            t0 = time.perf_counter()
            row("pinned", pinned(v, descent.Q), time.perf_counter() - t0, pin=v)
        t0 = time.perf_counter()
        at_target = [row("pinned", pinned(target, descent.Q),
                         time.perf_counter() - t0, pin=target)]
        rng = np.random.default_rng(np.random.SeedSequence([seed, 7719]))
        for k in range(n_restarts):
            t0 = time.perf_counter()
            x = math.sqrt(q_start) / params.sigma * rng.standard_normal(d)
            x -= (float(other @ x) / float(other @ other)) * other
            at_target.append(row("restart", pinned(target, x),
                                 time.perf_counter() - t0, pin=target, restart=k))
        best = min(at_target, key=lambda f: f.value)
        t0 = time.perf_counter()
        row("released", minimize_lbfgs(objective, best.Q, warn=False), time.perf_counter() - t0)
        return rows

    key = dict(params=params, d=d, alpha=alpha, sector=sector, target=target, seed=seed, profile=profile,
               n_restarts=n_restarts, q_start=q_start, normalize_teacher=normalize_teacher)
    if hold_other is not None:  # (the key of runs without it is unchanged, so their cached results stay valid)
        key["hold_other"] = hold_other
    return cached(_NAMESPACE, compute, use_cache=use_cache, **key)


def construction_table(params: TaskParams, alphas, targets, ds, seeds, sector: str = "positional", profile=(),
                       n_restarts: int = 3, n_jobs: int = 1, progress: bool = False, use_cache: bool = True,
                       **kwargs) -> pd.DataFrame:
    """:func:`sector_minima` over ``alphas x ds x seeds`` (``targets[i]`` the pinned value at ``alphas[i]``;
    ``ds`` a list, or a dict ``{d: seeds}`` for fewer seeds at large ``d``), as one tidy table sorted by
    ``(alpha, d, seed, method, restart, pin)``. Runs through joblib (``n_jobs``), largest ``d`` first."""
    alphas = [check_alpha(a) for a in np.atleast_1d(alphas)]
    targets = _values("targets", targets)
    if len(targets) != len(alphas):
        raise ValueError(f"targets must have one value per alpha ({len(alphas)}), got {len(targets)}")
    per_d = dict(ds) if isinstance(ds, dict) else {int(d): seeds for d in np.atleast_1d(ds)}
    if not per_d:
        raise ValueError("ds must not be empty")
    jobs = [(sector_minima, dict(params=params, d=int(d), alpha=a, sector=sector, target=t, seed=int(sd),
                                 profile=profile, n_restarts=n_restarts, use_cache=use_cache, **kwargs))
            for d in sorted(per_d, reverse=True) for a, t in zip(alphas, targets) for sd in np.atleast_1d(per_d[d])]
    rows = [r for part in run_jobs(jobs, n_jobs=n_jobs, progress=progress, desc="sector minima") for r in part]
    table = pd.DataFrame(rows)
    for col in ("pin", "hold_other"):  # (the cache stores a missing value as the string 'nan'; older rows lack
        table[col] = table[col].astype(float) if col in table else math.nan  # hold_other)
    return table.sort_values(["alpha", "d", "seed", "method", "restart", "pin"]).reset_index(drop=True)


def construction_pairs(table: pd.DataFrame) -> pd.DataFrame:
    """One row per training set ``(alpha, d, seed)`` of a :func:`construction_table`: ``descent`` (relative
    training loss of the named start), ``best_pinned`` (the lowest over the pinned and restarted minima at the
    target), ``released`` (the free descent from it), the paired differences ``gap_pinned = best_pinned -
    descent`` and ``gap_released = released - descent`` (negative: the construction found a lower minimum than
    descent), and the defining overlap of the descent and released minima (``<overlap>_descent``,
    ``<overlap>_released``)."""
    overlap = SECTORS[_check_sector(str(table.sector.iloc[0]))]
    rows = []
    for (a, d, sd), g in table.groupby(["alpha", "d", "seed"]):
        best = g[g.method.isin(["pinned", "restart"]) & np.isclose(g.pin, g.target)].rel_loss.min()
        desc = g[g.method == "descent"].iloc[0]
        rel = g[g.method == "released"].iloc[0]
        rows.append({"alpha": a, "d": d, "seed": sd, "descent": desc.rel_loss, "best_pinned": best,
                     "released": rel.rel_loss, "gap_pinned": best - desc.rel_loss,
                     "gap_released": rel.rel_loss - desc.rel_loss, f"{overlap}_descent": desc[overlap],
                     f"{overlap}_released": rel[overlap]})
    return pd.DataFrame(rows)


def construction_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Constructed minima against descent on the same data, per ``alpha`` and ``d`` and extrapolated in ``1/d``.

    Per ``(alpha, d)``: the seed means of every column of :func:`construction_pairs` (the relative losses, the
    paired gaps, the defining overlaps) with standard errors ``*_err`` and the number of seeds; rows with
    ``d = inf`` hold the weighted linear fit in ``1/d`` (:func:`attnlib.finite_d.arbiter.extrapolate_inverse_d`)
    of each mean.
    """
    per_seed = construction_pairs(table)
    cols = [c for c in per_seed.columns if c not in ("alpha", "d", "seed")]
    out = []
    for a, g in per_seed.groupby("alpha"):
        by_d = g.groupby("d")
        mean, sem, count = by_d[cols].mean(), by_d[cols].sem(), by_d.size()
        for d in mean.index:
            out.append({"alpha": a, "d": float(d), "n_seeds": int(count[d]),
                        **{c: mean.loc[d, c] for c in cols}, **{f"{c}_err": sem.loc[d, c] for c in cols}})
        if len(mean) >= 2:
            ext = {"alpha": a, "d": math.inf, "n_seeds": int(count.sum())}
            for c in cols:
                value, value_err, *_ = extrapolate_inverse_d(mean.index.to_numpy(float), mean[c].to_numpy(),
                                                             sem[c].to_numpy())
                ext[c], ext[f"{c}_err"] = value, value_err
            out.append(ext)
    return pd.DataFrame(out)


def paired_profile(table: pd.DataFrame, reference="descent") -> pd.DataFrame:
    """The finite-``d`` profile of a :func:`construction_table`: per ``(alpha, d, pin)`` the seed mean
    ``mean``, standard error ``sem`` and count ``n`` of ``rel_loss(pinned at pin) - rel_loss(reference)`` on
    the same training set, the reference being the descent minimum (``"descent"``) or the pinned minimum at
    the pin value ``reference`` (a number, e.g. ``0.0`` for the uninformed student)."""
    pins = table[table.method == "pinned"]
    if isinstance(reference, str):
        if reference != "descent":
            raise ValueError(f"reference must be 'descent' or a pinned value, got {reference!r}")
        ref = table[table.method == "descent"]
    else:
        ref = pins[np.isclose(pins.pin, float(reference), rtol=0, atol=1e-12)]
        if ref.empty:
            raise ValueError(f"reference {reference!r} is not a pinned value of the table")
    ref = ref.set_index(["alpha", "d", "seed"]).rel_loss
    diff = pins.assign(diff=pins.rel_loss.to_numpy() - ref.loc[list(zip(pins.alpha, pins.d, pins.seed))].to_numpy())
    return diff.groupby(["alpha", "d", "pin"])["diff"].agg(mean="mean", sem="sem", n="size").reset_index()


def accurate_pinned_profile(params: TaskParams, alpha: float, branch: str, values, start, seeds=(3, 4, 5),
                            order: int = 17, use_cache: bool = True) -> pd.DataFrame:
    """The theory's pinned profile (:func:`attnlib.finite_d.validity.pinned_profile`) under scrambled
    Sobol-sym rules of ``2**order`` points, as the mean over the scramblings ``seeds`` with standard errors
    (columns ``q``, ``V``, ``rel_loss`` and ``*_err``; ``converged`` if every scrambling converged). Cached."""
    from ..theory.solve.accurate import accurate_solver
    from ..theory.model.quadrature import scrambling_mean
    from ..theory.model.state_evolution import Overlaps
    from .validity import pinned_profile

    alpha = check_alpha(alpha)
    branch = _check_sector(branch)
    values = _values("values", values)
    seeds = [check_int("seed", s, 0) for s in seeds]
    order = check_int("order", order, 4)
    start = Overlaps(float(start.q), float(start.m), float(start.V), float(start.theta))

    def compute():
        runs = [pinned_profile(params, alpha, branch, values, start, solver=accurate_solver(s, order)) for s in seeds]
        fields = ["q", "V", "train_loss", "rel_loss"]
        mean, err = scrambling_mean([r[fields].to_numpy() for r in runs])
        out = pd.DataFrame({"omega": params.omega, "alpha": alpha, "branch": branch, SECTORS[branch]: values})
        out[fields] = mean
        out[[f"{f}_err" for f in fields]] = err
        out["converged"] = np.all([r.converged.to_numpy() for r in runs], axis=0)
        out["rule"] = f"sobol-sym 2^{order} x{len(seeds)}"
        return out.to_dict("records")

    key = dict(params=params, alpha=alpha, branch=branch, values=values, start=(start.q, start.m, start.V, start.theta), seeds=seeds, order=order)
    return pd.DataFrame(cached("accurate-pinned-profile", compute, use_cache=use_cache, **key))

"""The finite-d arbiter: minimisers of the empirical risk at finite ``d`` from both named starts, and the
thresholds they imply, with errors and their extrapolation to ``d -> infinity``.

Where the state evolution (the replica-symmetric theory of the global minimum) and finite-``d`` training
disagree, the finite-``d`` minimiser, followed over ``d`` and extrapolated, decides. For given task
parameters :func:`arbiter_table` runs L-BFGS (:func:`attnlib.finite_d.simulation.minimize_lbfgs`, the analytic
gradient, tight tolerances) from the semantic start ``Q = Q*`` and from the positional start
``Q = 1_d/sqrt d`` over a grid of ``alpha``, several seeds and several ``d`` (default 1000, 2000, 4000), on a
normalised teacher (``||Q*||^2 = d``), and returns a tidy table, one row per run, each run cached on disk.

Every row also carries ``train_loss_zero``, the training loss of ``Q = 0`` on the same data,
``alpha sigma^2 E sum_l (1/2 - T_ll)^2`` in the limit. Its seed-to-seed fluctuation (a few per cent at
``d = 1000``) is shared by every minimiser on the same data, so ``train_loss - train_loss_zero`` compares with
the theory far more precisely than ``train_loss`` alone (:func:`loss_zero_theory` gives the limit).

Estimates (:class:`FiniteDThreshold`):

* :func:`finite_d_critical_alpha`: at each ``d``, where the mean over seeds of the *paired* difference
  ``eps_t(semantic start) - eps_t(positional start)`` (same data) changes sign from + to - (linear
  interpolation on the grid), with a bootstrap error over seeds; then a weighted fit ``a + b/d`` gives the
  ``d -> infinity`` value ``a`` and its error.
* :func:`finite_d_theta_loss_alpha`: where the semantic start stops keeping its ``theta`` (the mean
  ``theta/rho`` falls below a floor), the same way.
* :func:`finite_d_linear_alpha`: where the finite-``d`` global minimiser (per seed, the start of lower
  training loss) reaches the linear baseline's test error, the same way (its test error is the
  Gaussian-equivalent ``eps_g`` of its overlaps).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..cache import cached
from ..theory.model.attention import teacher_diagonal
from .data import make_task, seed_streams
from ..parallel import run_jobs
from ..params import TaskParams, check_alpha, check_int, check_positive
from ..theory.model.generalisation import linear_baseline_error
from ..theory.model.quadrature import Quadrature
from .simulation import ERMObjective, initial_Q, minimize_lbfgs, n_samples, overlaps, test_error_from_overlaps_rho

__all__ = ["ARBITER_STARTS", "DEFAULT_DS", "DEFAULT_SEEDS", "finite_d_minimum", "arbiter_table",
           "loss_zero_theory", "FiniteDThreshold", "crossing_alpha", "extrapolate_inverse_d",
           "finite_d_critical_alpha", "finite_d_theta_loss_alpha", "finite_d_linear_alpha", "TASK_COLUMNS",
           "task_params"]

#: The two named starts compared by the arbiter.
ARBITER_STARTS = ("semantic", "positional")
#: Default dimensions.
DEFAULT_DS = (1000, 2000, 4000)
#: Default seeds.
DEFAULT_SEEDS = (0, 1, 2, 3)
_NAMESPACE = "arbiter-run"


def finite_d_minimum(params: TaskParams, d: int, alpha: float, start: str = "semantic", seed: int = 0,
                     normalize_teacher: bool = True, use_cache: bool = True, via_gamp: bool = False) -> dict:
    """One L-BFGS minimisation of the empirical risk at finite ``d`` (cached), as a tidy row.

    The data are those of :func:`attnlib.simulate_erm` with the same ``seed`` (teacher and
    training set from the same streams), so rows with equal ``(d, alpha, seed)`` share their data; no test set
    is drawn (the arbiter compares training losses and overlaps).

    With ``via_gamp`` the minimisation starts instead from the estimate of 100 iterations of GAMP
    (:func:`attnlib.run_gamp`, started at the overlaps of the named start; converged or not), the
    algorithm whose iterates the state evolution tracks: a way into minima that a descent from the named
    starts does not reach.

    Returns
    -------
    dict
        Task parameters, ``d``, ``n``, ``alpha``, ``seed``, ``start``, the overlaps ``q``, ``m``, ``theta``, the
        training loss ``train_loss = R(Q_hat)/d``, ``train_loss_zero = R(0)/d`` on the same data,
        ``rho_hat``, ``grad_norm`` (``||dR/dQ||/sqrt d``), ``converged``, ``n_iter``, ``seconds``.
    """
    d = check_int("d", d, 1)
    alpha = check_alpha(alpha)
    seed = check_int("seed", seed, 0)
    if start not in ARBITER_STARTS:
        raise ValueError(f"start must be one of {ARBITER_STARTS}, got {start!r}")

    def compute():
        t0 = time.perf_counter()
        n = n_samples(alpha, d)
        teacher, train = make_task(params, d, n, seed=seed, normalize_teacher=normalize_teacher)
        objective = ERMObjective(train, params.lam)
        del train
        zero = objective.value(np.zeros(d)) / d
        if via_gamp:
            from .gamp import run_gamp

            Q0 = run_gamp(params, d, alpha, start=start, seed=seed, max_iter=100,
                          normalize_teacher=normalize_teacher, warn=False).Q[:, None]
        else:
            Q0 = initial_Q(start, teacher, rng=seed_streams(seed)["init"])
        fit = minimize_lbfgs(objective, Q0, warn=False)
        ov = overlaps(fit.Q, teacher)
        return {**params.as_dict(), "d": d, "n": n, "alpha": alpha, "seed": seed, "start": start,
                "via_gamp": bool(via_gamp),
                "normalize_teacher": bool(normalize_teacher), "q": float(ov["q"][0]), "m": float(ov["m"][0]),
                "theta": float(ov["theta"][0]), "train_loss": fit.value / d, "train_loss_zero": zero,
                "rho_hat": teacher.rho_hat, "grad_norm": fit.grad_norm, "converged": fit.converged,
                "n_iter": fit.n_iter, "seconds": time.perf_counter() - t0}

    key = dict(params=params, d=d, alpha=alpha, start=start, seed=seed, normalize_teacher=normalize_teacher)
    if via_gamp:  # (the key of plain runs is unchanged, so their cached results stay valid)
        key["via_gamp"] = True
    return cached(_NAMESPACE, compute, use_cache=use_cache, **key)


def _as_list(name, values, convert):
    values = [values] if np.isscalar(values) or isinstance(values, str) else list(values)
    if not values:
        raise ValueError(f"{name} must not be empty")
    return [convert(v) for v in values]


def arbiter_table(params: TaskParams, alphas, ds=DEFAULT_DS, seeds=DEFAULT_SEEDS, starts=ARBITER_STARTS,
                  normalize_teacher: bool = True, n_jobs: int = 1, progress: bool = False,
                  use_cache: bool = True, via_gamp: bool = False) -> pd.DataFrame:
    """L-BFGS minimisers over ``alphas x ds x seeds x starts`` (:func:`finite_d_minimum`), as a tidy table.

    Runs in parallel through joblib (``n_jobs``; ``progress`` shows a bar), each run cached on its own, so an
    interrupted table resumes. Rows are sorted by ``(d, alpha, seed, start)``. ``via_gamp`` starts every
    minimisation from GAMP's estimate (:func:`finite_d_minimum`).
    """
    alphas = _as_list("alphas", alphas, check_alpha)
    ds = _as_list("ds", ds, lambda v: check_int("d", v, 1))
    seeds = _as_list("seeds", seeds, lambda v: check_int("seed", v, 0))
    starts = _as_list("starts", starts, str)
    for s in starts:
        if s not in ARBITER_STARTS:
            raise ValueError(f"starts must be among {ARBITER_STARTS}, got {s!r}")
    # largest d first, so that parallel workers finish together
    jobs = [(finite_d_minimum, dict(params=params, d=d, alpha=a, start=s, seed=sd,
                                    normalize_teacher=normalize_teacher, use_cache=use_cache, via_gamp=via_gamp))
            for d in sorted(ds, reverse=True) for a in alphas for sd in seeds for s in starts]
    rows = run_jobs(jobs, n_jobs=n_jobs, progress=progress, desc="finite-d arbiter")
    return pd.DataFrame(rows).sort_values(["d", "alpha", "seed", "start"]).reset_index(drop=True)


def loss_zero_theory(params: TaskParams, alpha: float, order: int = 60) -> float:
    """``lim R(0)/d = alpha sigma^2 E sum_l (1/2 - T_ll)^2``: the training loss of ``Q = 0`` (both attention
    rows uniform) in the high-dimensional limit (book :eq:`eq-risk`, :eq:`eq-diagonal-loss`)."""
    alpha = check_alpha(alpha)
    x, w = Quadrature("gauss-hermite", order).points(2)
    t = teacher_diagonal(params.sigma * x, params)
    return float(alpha * params.sigma**2 * (w @ np.sum((0.5 - t) ** 2, axis=1)))


@dataclass(frozen=True)
class FiniteDThreshold:
    """A threshold estimated from finite-``d`` minimisers.

    Attributes
    ----------
    name : str
    per_d : pandas.DataFrame
        ``d``, ``value`` (the estimate at that ``d``), ``stderr`` (bootstrap over seeds), ``n_seeds`` and
        ``found_fraction`` (share of bootstrap resamples in which the threshold was found).
    value, stderr : float
        The ``d -> infinity`` extrapolation ``a`` of the weighted fit ``value(d) = a + b/d`` and its error
        (NaN when fewer than one ``d`` gave an estimate; with a single ``d`` its own value and error).
    slope : float
        ``b``, the ``1/d`` coefficient.
    chi2 : float
        Weighted residual sum of squares of the fit (``dof = len(per_d) - 2``).
    found : bool
        An estimate exists at every ``d``.
    """

    name: str
    per_d: pd.DataFrame
    value: float
    stderr: float
    slope: float
    chi2: float
    found: bool


def crossing_alpha(alphas, values, direction: int = -1) -> float:
    """Where ``values(alphas)`` changes sign, by linear interpolation on the grid (NaN if it never does).

    ``direction=-1`` looks for a change from positive to negative along increasing ``alpha``, ``+1`` for
    negative to positive. With noise there can be several; the one kept best separates the grid, i.e.
    misclassifies the fewest points (values of the wrong sign on either side), ties going to the first.
    """
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 or -1, got {direction!r}")
    a = np.asarray(alphas, float)
    order = np.argsort(a)
    a = a[order]
    v = np.asarray(values, float)[order] * (-direction)  # > 0 before the crossing, <= 0 after
    best, best_err = math.nan, None
    for i in range(len(a) - 1):
        if v[i] > 0 >= v[i + 1]:
            root = a[i] + (a[i + 1] - a[i]) * v[i] / (v[i] - v[i + 1])
            err = int(np.sum(v[: i + 1] <= 0) + np.sum(v[i + 1:] > 0))
            if best_err is None or err < best_err:
                best, best_err = float(root), err
    return best


def _mean_curve(table: pd.DataFrame, column) -> pd.DataFrame:
    """Per-seed values (rows: seed, columns: alpha) of ``column`` (a name or a function of the table)."""
    vals = column(table) if callable(column) else table[column]
    return table.assign(_v=vals).pivot_table(index="seed", columns="alpha", values="_v")


def _bootstrap_root(per_seed: pd.DataFrame, direction: int, n_boot: int, rng: np.random.Generator):
    """Root of the seed-mean curve and its bootstrap error (resampling seeds with replacement)."""
    per_seed = per_seed.dropna(axis=1)
    alphas = per_seed.columns.to_numpy(float)
    vals = per_seed.to_numpy(float)
    root = crossing_alpha(alphas, vals.mean(axis=0), direction)
    k = vals.shape[0]
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, k, k)
        boots.append(crossing_alpha(alphas, vals[idx].mean(axis=0), direction))
    boots = np.array(boots)
    ok = np.isfinite(boots)
    stderr = float(np.std(boots[ok], ddof=1)) if ok.sum() > 1 else math.nan
    return root, stderr, float(ok.mean()), k


def extrapolate_inverse_d(ds, values, stderrs) -> tuple[float, float, float, float]:
    """Weighted least-squares fit ``value(d) = a + b/d``: returns ``(a, stderr of a, b, chi2)``.

    Weights are ``1/stderr^2`` (a zero or missing error is replaced by the smallest positive one, or 1). With
    more points than parameters the covariance is scaled by ``max(1, chi2/dof)``. With one point, ``a`` is
    that point (``b = 0``); with none, NaN.
    """
    d = np.asarray(ds, float)
    y = np.asarray(values, float)
    s = np.asarray(stderrs, float)
    ok = np.isfinite(y)
    d, y, s = d[ok], y[ok], s[ok]
    if len(y) == 0:
        return math.nan, math.nan, math.nan, math.nan
    good = np.isfinite(s) & (s > 0)
    s = np.where(good, s, s[good].min() if good.any() else 1.0)
    if len(y) == 1:
        return float(y[0]), float(s[0]), 0.0, 0.0
    X = np.stack([np.ones_like(d), 1.0 / d], axis=1)
    W = 1.0 / s**2
    cov = np.linalg.inv(X.T @ (W[:, None] * X))
    coef = cov @ (X.T @ (W * y))
    chi2 = float(np.sum(W * (y - X @ coef) ** 2))
    dof = len(y) - 2
    if dof > 0:
        cov = cov * max(1.0, chi2 / dof)
    return float(coef[0]), float(math.sqrt(cov[0, 0])), float(coef[1]), chi2


def _threshold(name: str, table: pd.DataFrame, column, direction: int, n_boot: int, seed: int) -> FiniteDThreshold:
    rng = np.random.default_rng(seed)
    rows = []
    for d, sub in table.groupby("d"):
        root, err, frac, k = _bootstrap_root(_mean_curve(sub, column), direction, n_boot, rng)
        rows.append({"d": int(d), "value": root, "stderr": err, "n_seeds": k, "found_fraction": frac})
    per_d = pd.DataFrame(rows)
    a, a_err, b, chi2 = extrapolate_inverse_d(per_d.d, per_d.value, per_d.stderr)
    return FiniteDThreshold(name=name, per_d=per_d, value=a, stderr=a_err, slope=b, chi2=chi2,
                            found=bool(np.isfinite(per_d.value).all()))


#: The columns of an :func:`arbiter_table` that name its task.
TASK_COLUMNS = ("sigma", "lam", "omega", "A11", "A12", "A21", "A22")


def task_params(table: pd.DataFrame) -> TaskParams:
    """The :class:`TaskParams` of an :func:`arbiter_table` (or of any table with :data:`TASK_COLUMNS`) that
    holds one task; ``ValueError`` if it holds several."""
    tasks = table[list(TASK_COLUMNS)].drop_duplicates()
    if len(tasks) != 1:
        raise ValueError(f"table must hold one task (one sigma, lam, omega, A); it holds {len(tasks)}")
    r = tasks.iloc[0]
    return TaskParams(sigma=float(r.sigma), lam=float(r.lam), omega=float(r.omega),
                      A=((float(r.A11), float(r.A12)), (float(r.A21), float(r.A22))))


def _check_both_starts(starts) -> None:
    missing = [s for s in ARBITER_STARTS if s not in set(starts)]
    if missing:
        raise ValueError(f"the table needs runs from both starts; missing {missing}")


def _paired_gap(table: pd.DataFrame) -> pd.DataFrame:
    """``eps_t(semantic start) - eps_t(positional start)`` per ``(d, alpha, seed)`` (same data)."""
    piv = table.pivot_table(index=["d", "alpha", "seed"], columns="start", values="train_loss")
    _check_both_starts(piv.columns)
    return (piv["semantic"] - piv["positional"]).rename("gap").reset_index()


def finite_d_critical_alpha(table: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> FiniteDThreshold:
    """Finite-``d`` ``alpha_c``: where the seed-mean of the paired training-loss difference
    ``eps_t(semantic start) - eps_t(positional start)`` changes sign from + to -, per ``d`` (bootstrap error
    over seeds), extrapolated in ``1/d`` (module docstring). ``table`` is an :func:`arbiter_table`."""
    check_int("n_boot", n_boot, 2)
    return _threshold("alpha_c", _paired_gap(table), "gap", -1, n_boot, seed)


def finite_d_theta_loss_alpha(table: pd.DataFrame, floor: float = 0.1, n_boot: int = 2000,
                              seed: int = 0) -> FiniteDThreshold:
    """Where the semantic start loses its ``theta``: the ``alpha`` below which the seed-mean of
    ``theta/rho`` reached from ``Q = Q*`` falls under ``floor`` (a change of ``theta/rho - floor`` from -
    to + along increasing ``alpha``), per ``d`` and extrapolated in ``1/d``."""
    floor = check_positive("floor", floor)
    check_int("n_boot", n_boot, 2)
    sem = table[table.start == "semantic"]
    if sem.empty:
        raise ValueError("the table has no runs from the semantic start")
    return _threshold("theta_loss", sem, lambda t: t.theta.abs() / (t.sigma**2) - floor, +1, n_boot, seed)


def finite_d_linear_alpha(table: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> FiniteDThreshold:
    """Finite-``d`` ``alpha_l``: where the test error of the finite-``d`` global minimiser falls below the
    linear baseline's ``eps_lin``.

    Per ``(d, alpha, seed)`` the global minimiser is the start of lower training loss on that data (the same
    comparison as :func:`finite_d_critical_alpha`); its test error is the Gaussian-equivalent
    ``eps_g(q, m, theta)`` for the run's teacher variance ``rho_hat``
    (:func:`attnlib.finite_d.simulation.test_error_from_overlaps_rho`, exact up to ``O(1/d)``). The seed-mean of
    ``eps_g - eps_lin`` changes sign from + to - at the threshold, located per ``d`` with a bootstrap error
    and extrapolated in ``1/d`` (module docstring). ``table`` is an :func:`arbiter_table` of one task.

    Raises
    ------
    ValueError
        If the table holds more than one task or lacks runs from both starts.
    """
    check_int("n_boot", n_boot, 2)
    params = task_params(table)
    _check_both_starts(table.start)
    best = (table.sort_values("train_loss").groupby(["d", "alpha", "seed"], as_index=False).first())
    sign = np.where(best.theta.to_numpy(float) < 0, -1.0, 1.0)   # the risk is even in Q: theta >= 0
    eps_g = [test_error_from_overlaps_rho(params, float(q), float(m), float(th), float(rho))
             for q, m, th, rho in zip(best.q, sign * best.m, sign * best.theta, best.rho_hat)]
    best = best.assign(excess=np.array(eps_g) - linear_baseline_error(params))
    return _threshold("alpha_l", best, "excess", -1, n_boot, seed)

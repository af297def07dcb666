"""Tidy tables for the book: GAMP against its state evolution iteration by iteration, and GAMP's fixed point
against the L-BFGS minimum of the finite-d risk on the same data (both cached on disk, :mod:`attnlib.cache`).

:func:`gamp_tracking_table` puts the overlaps of :func:`attnlib.finite_d.gamp.run_gamp` next to those of
:func:`attnlib.theory.studies.se_iterates.state_evolution_iterates`; :func:`gamp_fixed_point_table` compares GAMP's
fixed point with :func:`attnlib.finite_d.simulation.simulate_erm` (``method="lbfgs"``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..cache import cached
from ..parallel import run_jobs
from ..params import TaskParams, check_alpha, check_int
from ..theory.model.proximal import PROX_MODES
from ..theory.model.quadrature import Quadrature
from ..theory.studies.se_iterates import check_damping, start_overlaps, state_evolution_iterates
from ..theory.model.state_evolution import SESolver
from .data import make_task
from .gamp import GAMP_STARTS, run_gamp, teacher_and_start
from .simulation import ERMObjective, n_samples, simulate_erm, test_error_from_overlaps_rho

__all__ = ["TRACK_NAMESPACE", "SE_NAMESPACE", "FIXED_POINT_NAMESPACE", "FIXED_POINT_OPTIONS",
           "gamp_tracking_table", "gamp_fixed_point_table"]

#: Cache namespaces of the tables' pieces (one GAMP run, one state-evolution run, one fixed-point row).
TRACK_NAMESPACE = "gamp-track"
SE_NAMESPACE = "gamp-se"
FIXED_POINT_NAMESPACE = "gamp-fixed-point"
#: Tolerance of the tracking runs: small enough that GAMP never stops before ``n_iter``.
_TRACK_TOL = 1e-14
#: :func:`run_gamp` options per named start used by :func:`gamp_fixed_point_table` to reach the fixed point.
#: The positional start needs message damping: without it the samples whose centre sits near a jump of the
#: proximal point keep the iterate fluctuating (``m`` by ~1e-2 at d = 2000); with it, GAMP settles on the
#: small period-2 cycle described in :mod:`attnlib.finite_d.gamp`.
FIXED_POINT_OPTIONS = {"semantic": {"max_iter": 200, "message_damping": 1.0},
                       "positional": {"max_iter": 60, "message_damping": 0.5}}


def _floats(values) -> np.ndarray:
    """A cached list of numbers as a float array (the cache stores non-finite floats as 'nan'/'inf')."""
    return np.array([float(v) for v in values], dtype=float)


def _as_ints(name: str, value, minimum: int) -> list[int]:
    values = [value] if np.isscalar(value) else list(value)
    if not values:
        raise ValueError(f"{name} must not be empty")
    return [check_int(name, v, minimum) for v in values]


def _as_starts(starts) -> list[str]:
    starts = [starts] if isinstance(starts, str) else list(starts)
    if not starts:
        raise ValueError("starts must not be empty")
    for s in starts:
        if s not in GAMP_STARTS:
            raise ValueError(f"starts must be among {GAMP_STARTS}, got {s!r}")
    return starts


def _check_table_grid(params, alpha, d, seeds, starts) -> tuple:
    """The checked ``(alpha, ds, seeds, starts)`` of a table call (``ValueError`` naming the parameter)."""
    if not isinstance(params, TaskParams):
        raise ValueError(f"params must be a TaskParams, got {type(params).__name__}")
    return check_alpha(alpha), _as_ints("d", d, 1), _as_ints("seeds", seeds, 0), _as_starts(starts)


def _tracking_run(params: TaskParams, d: int, alpha: float, start: str, seed: int, n_iter: int, damping: float,
                  normalize_teacher: bool, prox_mode: str, n_probes: int, probe_eps: float,
                  use_cache: bool) -> dict:
    """One GAMP run of exactly ``n_iter`` iterations (no convergence stop), cached: per-iteration arrays."""
    def compute():
        run = run_gamp(params, d, alpha, start=start, seed=seed, max_iter=n_iter, damping=damping,
                       tol=_TRACK_TOL, prox_mode=prox_mode, normalize_teacher=normalize_teacher,
                       n_probes=n_probes, probe_eps=probe_eps, warn=False)
        return {"m": run.m, "theta": run.theta, "q": run.q, "V": run.V, "m_hat": run.m_hat, "V_hat": run.V_hat,
                "start": run.start.as_array(), "rho_hat": run.rho_hat, "seconds": run.seconds}

    return cached(TRACK_NAMESPACE, compute, use_cache=use_cache, params=params, d=d, alpha=alpha, start=start,
                  seed=seed, n_iter=n_iter, damping=damping, tol=_TRACK_TOL, normalize_teacher=normalize_teacher,
                  prox_mode=prox_mode, n_probes=n_probes, probe_eps=probe_eps)


def _se_run(params: TaskParams, alpha: float, start: str, n_iter: int, damping: float, prox_mode: str,
            quadrature: Quadrature, use_cache: bool) -> dict:
    """:func:`state_evolution_iterates` from a named start, cached."""
    def compute():
        se = state_evolution_iterates(params, alpha, start, n_iter, damping=damping, prox_mode=prox_mode,
                                      quadrature=quadrature)
        return {k: getattr(se, k) for k in ("m", "theta", "q", "V", "m_hat", "V_hat")}

    return cached(SE_NAMESPACE, compute, use_cache=use_cache, params=params, alpha=alpha, start=start,
                  n_iter=n_iter, damping=damping, prox_mode=prox_mode, quadrature=quadrature)


def gamp_tracking_table(params: TaskParams, d=2000, alpha: float = 2.0, starts=GAMP_STARTS, seeds=(0,),
                        n_iter: int = 20, damping: float = 0.3, normalize_teacher: bool = True,
                        prox_mode: str = "global", n_probes: int = 2, probe_eps: float = 0.05,
                        quadrature: Quadrature | None = None, n_jobs: int = 1, use_cache: bool = True):
    """GAMP's overlaps iteration by iteration next to its state evolution, as a tidy table.

    For every start, dimension and seed, :func:`run_gamp` is run for exactly ``n_iter`` iterations on the
    training set of ``(params, d, alpha, seed)``, and :func:`state_evolution_iterates` is iterated from the
    same initial overlaps with the same scalar damping. GAMP's output step is the proximal map of
    book :eq:`eq-prox`; its empirical conjugates are the finite-d versions of
    ``m_hat`` and ``V_hat`` of :eq:`eq-conjugates`, and its input step obeys the update
    :eq:`eq-overlap-update` (``attnlib.finite_d.gamp``), so for ``d -> infinity`` the two columns of every overlap
    agree at every ``t``; at finite ``d`` they differ by ``O(d^-1/2)`` fluctuations.

    The state evolution does not depend on ``d`` or on the seed: it is run once per start, from the named
    start's overlaps (``GAMP_STARTS``; GAMP's initial ``Q`` has exactly these overlaps,
    ``gamp_initial_Q``). Each GAMP run and each state-evolution run is cached on disk
    (``attnlib.cache.cached``: key = every argument + the library fingerprint), so an interrupted table
    resumes, and a corrupt cache file is recomputed with a :class:`~attnlib.exceptions.CacheWarning`.

    Parameters
    ----------
    params : TaskParams
        The task.
    d : int or sequence of int
        Dimension(s) of the GAMP runs.
    alpha : float
        Sample complexity.
    starts : str or sequence of str
        Named starts among ``GAMP_STARTS``.
    seeds : int or sequence of int
        Data seeds (as in :func:`~attnlib.simulate_erm`).
    n_iter : int
        Iterations compared (``>= 1``).
    damping, normalize_teacher, prox_mode, n_probes, probe_eps
        Passed to :func:`run_gamp`; ``damping`` and ``prox_mode`` also to :func:`state_evolution_iterates`.
    quadrature : Quadrature, optional
        Rule of the state evolution (default: that of :class:`~attnlib.theory.model.state_evolution.SESolver`).
    n_jobs : int
        joblib worker processes over the runs (1: in this process).
    use_cache : bool
        Read and write the disk cache (``$ATTNLIB_CACHE_DIR``).

    Returns
    -------
    pandas.DataFrame
        One row per ``(start, d, seed, t)``, ``t = 0 .. n_iter`` (``t = 0``: the start), sorted in that
        order, with columns ``start, d, alpha, seed, t``; ``m_gamp, theta_gamp, q_gamp, V_gamp`` (overlaps of
        GAMP's estimate ``Q_t`` and its width, book :eq:`eq-overlaps`) and ``m_se, theta_se, q_se, V_se`` (the state
        evolution's ``x_t``); ``m_hat_gamp, V_hat_gamp, m_hat_se, V_hat_se``, the conjugates that produced
        iterate ``t`` (computed at ``t - 1``; NaN at ``t = 0``); ``rho_hat`` (finite-d teacher norm
        ``sigma^2 ||Q*||^2/d``). Iterations a run did not reach (GAMP or SE leaving the domain) are NaN.

    Raises
    ------
    ValueError
        Naming the parameter, for an unknown start, empty or invalid ``d``/``seeds``, ``n_iter < 1``, and
        whatever :func:`run_gamp` rejects.
    """
    alpha, ds, seeds, starts = _check_table_grid(params, alpha, d, seeds, starts)
    n_iter = check_int("n_iter", n_iter, 1)
    damping = check_damping("damping", damping)
    if prox_mode not in PROX_MODES:
        raise ValueError(f"prox_mode must be one of {PROX_MODES}, got {prox_mode!r}")
    quadrature = SESolver().quadrature if quadrature is None else quadrature
    if not isinstance(quadrature, Quadrature):
        raise ValueError(f"quadrature must be a Quadrature, got {type(quadrature).__name__}")
    common = dict(params=params, alpha=alpha, n_iter=n_iter, damping=damping, prox_mode=prox_mode,
                  use_cache=use_cache)
    grid = [(s, dd, sd) for s in starts for dd in ds for sd in seeds]
    jobs = [(_se_run, dict(common, start=s, quadrature=quadrature)) for s in starts]
    jobs += [(_tracking_run, dict(common, d=dd, start=s, seed=sd, normalize_teacher=bool(normalize_teacher),
                                  n_probes=n_probes, probe_eps=probe_eps)) for s, dd, sd in grid]
    out = run_jobs(jobs, n_jobs)
    se_runs = dict(zip(starts, out[:len(starts)]))
    t = np.arange(n_iter + 1)

    def padded(values, shift=0):
        col = np.full(n_iter + 1, np.nan)
        vals = _floats(values)[:n_iter + 1 - shift]
        col[shift:shift + len(vals)] = vals
        return col

    blocks = []
    for (s, dd, sd), run in zip(grid, out[len(starts):]):
        se = se_runs[s]
        cols = {"start": s, "d": dd, "alpha": alpha, "seed": sd, "t": t}
        for k in ("m", "theta", "q", "V"):
            cols[f"{k}_gamp"] = padded(run[k])
            cols[f"{k}_se"] = padded(se[k])
        for k in ("m_hat", "V_hat"):
            cols[f"{k}_gamp"] = padded(run[k], shift=1)
            cols[f"{k}_se"] = padded(se[k], shift=1)
        cols["rho_hat"] = float(run["rho_hat"])
        blocks.append(pd.DataFrame(cols))
    order = ["start", "d", "alpha", "seed", "t"] + [f"{k}_{w}" for w in ("gamp", "se")
                                                   for k in ("m", "theta", "q", "V")] + \
        [f"{k}_{w}" for w in ("gamp", "se") for k in ("m_hat", "V_hat")] + ["rho_hat"]
    return pd.concat(blocks, ignore_index=True)[order]


def _fixed_point_row(params: TaskParams, d: int, alpha: float, start: str, seed: int, damping: float, tol: float,
                     normalize_teacher: bool, prox_mode: str, n_probes: int, probe_eps: float, gamp_options: dict,
                     use_cache: bool) -> dict:
    """GAMP to its fixed point and L-BFGS on the same data (:mod:`attnlib.finite_d.gamp`), one cached row."""
    def compute():
        run = run_gamp(params, d, alpha, start=start, seed=seed, damping=damping, tol=tol, prox_mode=prox_mode,
                       normalize_teacher=normalize_teacher, n_probes=n_probes, probe_eps=probe_eps, warn=False,
                       **gamp_options)
        _, Q0, _ = teacher_and_start(params, d, start_overlaps(params, start), seed, normalize_teacher)
        erm = {name: simulate_erm(params, d, alpha, start=st, seed=seed, method="lbfgs", n_test=2,
                                  normalize_teacher=normalize_teacher, keep_Q=True, warn=False)
               for name, st in (("lbfgs", Q0), ("lbfgs_named", start))}
        # the finite-d risk R(Q)/d at GAMP's final estimate, on the same training set
        teacher, train = make_task(params, d, n_samples(alpha, d), seed=seed, normalize_teacher=normalize_teacher)
        risk = ERMObjective(train, params.lam).value_and_grad(run.Q[:, None])[0] / d
        del train
        # overlaps: mean of the last two iterates (GAMP may end on a small period-2 cycle)
        m, theta, q = (float(np.mean(getattr(run, k)[-2:])) for k in ("m", "theta", "q"))
        row = {"n_iter_gamp": run.n_iter, "converged_gamp": run.converged, "residual_gamp": run.residual,
               "grad_norm_gamp": run.grad_norm, "cycle_m_gamp": float(abs(run.m[-1] - run.m[-2])),
               "m_gamp": m, "theta_gamp": theta, "q_gamp": q, "train_loss_gamp": float(risk),
               "test_error_gamp": test_error_from_overlaps_rho(params, q, m, theta, run.rho_hat),
               "seconds_gamp": run.seconds, "rho_hat": run.rho_hat}
        for name, e in erm.items():
            Qe = e.Q[:, 0]
            row.update({f"m_{name}": e.m, f"theta_{name}": e.theta, f"q_{name}": e.q,
                        f"train_loss_{name}": e.train_loss, f"test_error_{name}": e.test_error_theory_rho_hat,
                        f"converged_{name}": e.converged, f"grad_norm_{name}": e.grad_norm,
                        f"dist_{name}": float(np.linalg.norm(run.Q - Qe) / np.linalg.norm(Qe)),
                        f"seconds_{name}": e.wall_time})
        return row

    return cached(FIXED_POINT_NAMESPACE, compute, use_cache=use_cache, params=params, d=d, alpha=alpha,
                  start=start, seed=seed, damping=damping, tol=tol, normalize_teacher=normalize_teacher,
                  prox_mode=prox_mode, n_probes=n_probes, probe_eps=probe_eps, gamp_options=gamp_options)


def gamp_fixed_point_table(params: TaskParams, d=2000, alpha: float = 2.0, starts=GAMP_STARTS, seeds=(0,),
                           damping: float = 0.3, tol: float = 1e-6, normalize_teacher: bool = True,
                           prox_mode: str = "global", n_probes: int = 2, probe_eps: float = 0.05,
                           gamp_options: dict | None = None, n_jobs: int = 1, use_cache: bool = True):
    """GAMP's fixed point against the L-BFGS minimum of the finite-d risk on the same data, as a tidy table.

    A fixed point of GAMP is a stationary point of the GLM surrogate ``R_GLM`` of ``attnlib.finite_d.gamp``
    (the output loss of book :eq:`eq-prox`, i.e. ``(sigma^2/2)||S(h) - T||_F^2`` per sample, plus the ridge
    term), whereas :func:`attnlib.simulate_erm` (``method="lbfgs"``) minimises the finite-d risk
    ``R`` of book :eq:`eq-risk`. The two differ by the fluctuations of the token Gram
    matrices, so the overlaps (:eq:`eq-overlaps`) agree up to finite-size effects. For every start, ``d`` and
    seed, GAMP is run with ``FIXED_POINT_OPTIONS`` of the start (overridable), and L-BFGS twice: from
    GAMP's own initial ``Q`` (same start, suffix ``_lbfgs``) and from the named start of ``simulate_erm``
    (``Q = Q*`` or ``1_d/sqrt(d)``; suffix ``_lbfgs_named``). Each row is cached on disk under every argument
    and the library fingerprint.

    Parameters
    ----------
    params, d, alpha, starts, seeds, normalize_teacher, prox_mode, n_probes, probe_eps, n_jobs, use_cache
        As in :func:`gamp_tracking_table`.
    damping, tol : float
        Passed to :func:`run_gamp`.
    gamp_options : dict, optional
        Per start, extra :func:`run_gamp` keyword arguments (``max_iter``, ``message_damping``) replacing
        those of ``FIXED_POINT_OPTIONS``.

    Returns
    -------
    pandas.DataFrame
        One row per ``(start, d, seed)``. GAMP: ``m_gamp, theta_gamp, q_gamp`` (mean of the last two
        iterates: on a period-2 cycle, its centre), ``cycle_m_gamp`` (``|m_T - m_{T-1}|``),
        ``converged_gamp``, ``n_iter_gamp``, ``residual_gamp``, ``grad_norm_gamp`` (of ``R_GLM``),
        ``train_loss_gamp`` (``R(Q)/d`` of the finite-d risk at GAMP's final estimate),
        ``test_error_gamp``. For each L-BFGS run (``_lbfgs``, ``_lbfgs_named``): ``m, theta, q,
        train_loss, test_error, converged, grad_norm`` and ``dist`` (``||Q_GAMP - Q_LBFGS|| / ||Q_LBFGS||``).
        Test errors are the Gaussian-equivalent ``eps_g`` of the overlaps with the finite-d teacher norm
        (:func:`attnlib.test_error_from_overlaps_rho`). Also ``rho_hat`` and wall times
        ``seconds_*``.
    """
    alpha, ds, seeds, starts = _check_table_grid(params, alpha, d, seeds, starts)
    options = {s: dict(FIXED_POINT_OPTIONS[s]) for s in GAMP_STARTS}
    for s, extra in (gamp_options or {}).items():
        if s not in GAMP_STARTS:
            raise ValueError(f"gamp_options keys must be among {GAMP_STARTS}, got {s!r}")
        unknown = set(extra) - {"max_iter", "message_damping"}
        if unknown:
            raise ValueError(f"gamp_options may set max_iter and message_damping only, got {sorted(unknown)}")
        options[s].update(extra)
    grid = [(s, dd, sd) for s in starts for dd in ds for sd in seeds]
    jobs = [(_fixed_point_row, dict(params=params, d=dd, alpha=alpha, start=s, seed=sd, damping=damping, tol=tol,
                                    normalize_teacher=bool(normalize_teacher), prox_mode=prox_mode,
                                    n_probes=n_probes, probe_eps=probe_eps, gamp_options=options[s],
                                    use_cache=use_cache)) for s, dd, sd in grid]
    rows = run_jobs(jobs, n_jobs)
    table = pd.DataFrame([{"start": s, "d": dd, "alpha": alpha, "seed": sd, **row}
                          for (s, dd, sd), row in zip(grid, rows)])
    quantities = ("m", "theta", "q", "train_loss", "test_error", "converged", "grad_norm")
    order = ["start", "d", "alpha", "seed"] + [f"{k}_gamp" for k in quantities] + \
        ["cycle_m_gamp", "n_iter_gamp", "residual_gamp"] + \
        [f"{k}_{name}" for name in ("lbfgs", "lbfgs_named") for k in quantities + ("dist",)] + \
        ["rho_hat", "seconds_gamp", "seconds_lbfgs", "seconds_lbfgs_named"]
    table = table[order].copy()
    for col in table.columns:
        if col.startswith("converged"):
            table[col] = table[col].astype(bool)
        elif table[col].dtype == object and col != "start":
            table[col] = _floats(table[col])
    return table

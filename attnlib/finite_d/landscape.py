"""The finite-d training loss between the two minima: the barrier that makes the transition first order.

At finite ``d`` the positional and the semantic minimum are both local minima of the empirical risk over a
range of ``alpha`` (:mod:`attnlib.finite_d.arbiter`). :func:`loss_along_path` minimises the risk from both named starts
on the same data (L-BFGS) and evaluates it along the straight segment between the two minimisers,

    Q(t) = (1 - t) Q_pos + t Q_sem,     t in [-extend, 1 + extend],

(the sign of ``Q_sem`` chosen so that its ``m`` has the sign of ``Q_pos``'s; ``R`` is even in ``Q``). Any path
from one minimum to the other must climb at least as high as the lowest path, so the straight segment gives
an upper bound on the barrier; its profile shows the two basins and which one is lower.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..cache import cached
from .data import make_task, seed_streams
from ..params import TaskParams, check_alpha, check_int, check_finite_scalar
from .simulation import ERMObjective, initial_Q, minimize_lbfgs, n_samples, overlaps

__all__ = ["loss_along_path", "barrier_height"]


def loss_along_path(params: TaskParams, d: int, alpha: float, seed: int = 0, n_points: int = 41,
                    extend: float = 0.15, normalize_teacher: bool = True, use_cache: bool = True) -> pd.DataFrame:
    """Training loss ``R(Q(t))/d`` along the segment from the positional (``t = 0``) to the semantic
    (``t = 1``) L-BFGS minimiser on the same data (module docstring), cached.

    Returns
    -------
    pandas.DataFrame
        ``t``, ``train_loss``, and the overlaps ``q``, ``m``, ``theta`` of ``Q(t)``; one row per point of
        ``numpy.linspace(-extend, 1 + extend, n_points)``, plus the task, ``d``, ``alpha`` and ``seed``.
    """
    d = check_int("d", d, 2)
    alpha = check_alpha(alpha)
    seed = check_int("seed", seed, 0)
    n_points = check_int("n_points", n_points, 3)
    extend = check_finite_scalar("extend", extend)
    if not 0 <= extend <= 1:
        raise ValueError(f"extend must lie in [0, 1], got {extend!r}")

    def compute():
        teacher, train = make_task(params, d, n_samples(alpha, d), seed=seed, normalize_teacher=normalize_teacher)
        objective = ERMObjective(train, params.lam)
        del train
        rng = seed_streams(seed)["init"]
        ends = {}
        for start in ("positional", "semantic"):
            fit = minimize_lbfgs(objective, initial_Q(start, teacher, rng=rng), warn=False)
            ends[start] = fit.Q[:, 0]
        q_pos, q_sem = ends["positional"], ends["semantic"]
        if np.sign(q_sem.sum()) != np.sign(q_pos.sum()):
            q_sem = -q_sem  # R is even in Q: take the copy of the semantic minimum on the positional side
        rows = []
        for t in np.linspace(-extend, 1 + extend, n_points):
            Q = ((1 - t) * q_pos + t * q_sem)[:, None]
            ov = overlaps(Q, teacher)
            rows.append({"t": float(t), "train_loss": objective.value(Q) / d, "q": float(ov["q"][0]),
                         "m": float(ov["m"][0]), "theta": float(ov["theta"][0])})
        return rows

    rows = cached("loss-path", compute, use_cache=use_cache, params=params, d=d, alpha=alpha, seed=seed,
                  n_points=n_points, extend=extend, normalize_teacher=normalize_teacher)
    df = pd.DataFrame(rows)
    for k, v in {**params.as_dict(), "d": d, "alpha": alpha, "seed": seed}.items():
        df[k] = v
    return df


def barrier_height(path: pd.DataFrame) -> float:
    """Height of the highest point of the segment between the two minima (``0 <= t <= 1``) above the higher
    of its two ends (0 if the profile has no interior maximum above them)."""
    inner = path[(path.t >= 0) & (path.t <= 1)].sort_values("t")
    ends = max(float(inner.train_loss.iloc[0]), float(inner.train_loss.iloc[-1]))
    return max(0.0, float(inner.train_loss.max()) - ends) if math.isfinite(ends) else math.nan

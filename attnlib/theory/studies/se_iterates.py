"""The state evolution iterated step by step, as GAMP sees it: the map of the fixed-point equations applied
from given initial overlaps, with GAMP's scalar damping and without acceleration.

Where :func:`attnlib.solve_state_evolution` wants the fixed point, this module keeps every
iterate, so that a finite-d algorithm whose high-dimensional description is this map
(:func:`attnlib.finite_d.gamp.run_gamp`) can be compared with it iteration by iteration.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...params import TaskParams, check_alpha, check_finite_scalar, check_int
from ..model.quadrature import Quadrature
from ..model.state_evolution import Overlaps, SESolver, conjugates_and_energy, default_start, se_nodes

__all__ = ["NAMED_STARTS", "START_WIDTH", "SEIterates", "start_overlaps", "check_damping",
           "state_evolution_iterates"]

#: Named starts: the overlaps ``(q, m, theta)`` of :func:`~attnlib.theory.model.state_evolution.default_start`,
#: with the initial width ``V = START_WIDTH``.
NAMED_STARTS = ("semantic", "positional")
#: Initial output width of the named starts. The state evolution's default ``V = 1`` is far below the fixed
#: points' ``V ~ 11-13`` (reference task): its first steps then shrink ``q`` to ~1e-4 before it grows back, a
#: transit in which a finite-d iterate is fragile; ``V = 10`` avoids it.
START_WIDTH = 10.0


@dataclass(frozen=True)
class SEIterates:
    """Iterates of the state evolution, ``x_0 = start``, ``x_{t+1} = (1-beta) x_t + beta F(x_t)``.

    ``m``, ``theta``, ``q``, ``V`` have shape ``(n_iter + 1,)``; ``m_hat``, ``V_hat``, ``q_hat``,
    ``theta_hat`` (the conjugates at ``x_t``) shape ``(n_iter,)``.
    """

    m: np.ndarray
    theta: np.ndarray
    q: np.ndarray
    V: np.ndarray
    m_hat: np.ndarray
    V_hat: np.ndarray
    q_hat: np.ndarray
    theta_hat: np.ndarray


def start_overlaps(params: TaskParams, start) -> Overlaps:
    if isinstance(start, str):
        if start not in NAMED_STARTS:
            raise ValueError(f"start must be one of {NAMED_STARTS} or Overlaps-like (q, m, V, theta), "
                             f"got {start!r}")
        x = default_start(params, start)
        return Overlaps(q=x.q, m=x.m, V=START_WIDTH, theta=x.theta)
    if isinstance(start, Overlaps):
        vals = (start.q, start.m, start.V, start.theta)
    elif isinstance(start, dict):
        try:
            vals = tuple(start[k] for k in ("q", "m", "V", "theta"))
        except KeyError as exc:
            raise ValueError(f"start as a dict needs keys q, m, V, theta; missing {exc}") from None
    else:
        try:
            vals = tuple(start)
        except TypeError:
            raise ValueError(f"start must be one of {NAMED_STARTS} or Overlaps-like (q, m, V, theta), "
                             f"got {start!r}") from None
        if len(vals) != 4:
            raise ValueError(f"start must be one of {NAMED_STARTS} or Overlaps-like (q, m, V, theta), "
                             f"got {start!r}")
    q, m, V, theta = (check_finite_scalar(f"start.{k}", v) for k, v in zip(("q", "m", "V", "theta"), vals))
    if q <= 0 or V <= 0:
        raise ValueError(f"start must have q > 0 and V > 0, got q={q}, V={V}")
    if params.sigma**2 * m * m + theta**2 / params.rho > q * (1 + 1e-12):
        raise ValueError(f"start overlaps not realisable: need sigma^2 m^2 + theta^2/rho <= q, got q={q}, m={m}, "
                         f"theta={theta}")
    return Overlaps(q=q, m=m, V=V, theta=theta)




def check_damping(name: str, value) -> float:
    value = check_finite_scalar(name, value)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must lie in (0, 1], got {value!r}")
    return value


def state_evolution_iterates(params: TaskParams, alpha: float, start, n_iter: int, damping: float = 0.3,
                             prox_mode: str = "global", quadrature: Quadrature | None = None,
                             hold_theta_zero: bool = False) -> SEIterates:
    """The state evolution of :func:`~attnlib.run_gamp`, iterated step by step (book chapter 4, no acceleration).

    ``x_0 = start``; at step ``t`` the conjugates of ``x_t`` come from
    ``conjugates_and_energy`` (free iteration: no overlap held unless
    ``hold_theta_zero``), and with ``D_t = (1 - beta) D_{t-1} + beta (lambda + sigma^2 V_hat_t)``
    (``D_0 = sigma^2 / V_0``)::

        V_{t+1} = sigma^2 / D_t,   theta_{t+1} = sigma^2 rho theta_hat_t / D_t,
        m_{t+1} = (1 - beta) m_t + beta m_hat_t / D_t,
        q_{t+1} = sigma^2 (sigma^2 q_hat_t + sigma^2 rho theta_hat_t^2) / D_t^2 + sigma^2 m_{t+1}^2.

    With ``beta = 1`` this is the undamped update of book :eq:`eq-overlap-update`
    (``overlaps_from_conjugates``). ``q`` splits into the content part and
    ``sigma^2 m^2`` because ``Q``'s component along ``1_d`` is ``m 1_d``.

    Parameters
    ----------
    params : TaskParams
    alpha : float
        Sample complexity, ``(0, inf)``.
    start : {"semantic", "positional"} or Overlaps-like
        Initial overlaps, as in :func:`~attnlib.run_gamp` (pass ``GAMPResult.start`` to start from GAMP's finite-d
        initial overlaps).
    n_iter : int
        Number of updates (``>= 1``).
    damping : float
        ``beta`` in ``(0, 1]``, as in :func:`~attnlib.run_gamp`.
    prox_mode : {"global", "from-zero"}
        As in :func:`~attnlib.run_gamp`.
    quadrature : Quadrature, optional
        Rule for the expectations over ``(xi, eta)`` (default: that of
        :class:`~attnlib.theory.model.state_evolution.SESolver`).
    hold_theta_zero : bool
        Hold ``theta = 0`` (the positional branch, book :ref:`sec-branches`) instead of iterating it freely.

    Returns
    -------
    SEIterates
        The recursion stops early (shorter arrays) if it leaves the domain (``D <= 0``).
    """
    alpha = check_alpha(alpha)
    n_iter = check_int("n_iter", n_iter, 1)
    damping = check_damping("damping", damping)
    solver = (SESolver(prox_mode=prox_mode) if quadrature is None
              else SESolver(quadrature=quadrature, prox_mode=prox_mode))
    x = start_overlaps(params, start)
    hold = (None, 0.0) if hold_theta_zero else (None, None)
    if hold_theta_zero:
        x = Overlaps(q=x.q, m=x.m, V=x.V, theta=0.0)
    s2, rho, lam = params.sigma**2, params.rho, params.lam
    nodes, weights = se_nodes(solver.quadrature)   # the node layout of the fixed-point solver
    xs = [x.as_array()]
    hats = []
    D = s2 / x.V
    for _ in range(n_iter):
        hat = conjugates_and_energy(params, alpha, x, nodes, weights, solver, hold)[0]
        D = (lam + s2 * hat.V_hat) if damping == 1.0 else (1 - damping) * D + damping * (lam + s2 * hat.V_hat)
        if not (D > 0 and np.isfinite(D)):
            break
        m = (1 - damping) * x.m + damping * hat.m_hat / D
        q = s2 * (s2 * hat.q_hat + s2 * rho * hat.theta_hat**2) / D**2 + s2 * m * m
        x = Overlaps(q=q, m=m, V=s2 / D, theta=s2 * rho * hat.theta_hat / D)
        xs.append(x.as_array())
        hats.append((hat.m_hat, hat.V_hat, hat.q_hat, hat.theta_hat))
    xs = np.array(xs)
    hats = np.array(hats).reshape(-1, 4)
    return SEIterates(q=xs[:, 0], m=xs[:, 1], V=xs[:, 2], theta=xs[:, 3], m_hat=hats[:, 0], V_hat=hats[:, 1],
                      q_hat=hats[:, 2], theta_hat=hats[:, 3])

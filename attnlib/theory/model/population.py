"""The limit of infinitely many samples: the student of lowest population risk on each branch.

With Gaussian tokens the population risk of a student (the expected output loss on a fresh sequence) is its test
error, a function of its overlaps alone, ``eps_g(q, m, theta)`` (book :eq:`eq-test-error`). As ``alpha -> inf`` the
ridge's weight per sample vanishes and the empirical risk tends to the population risk, so the fixed point of a
branch tends to the minimiser of ``eps_g`` within the branch's subspace: ``m = 0`` on the semantic branch,
``theta = 0`` on the positional one, neither for the free state. :func:`population_minimum` finds it.

The overlaps are not independent. Writing the student as ``Q = m 1_d + (theta / sigma^2) Q* + Q_perp`` (``1_d`` and
``Q*`` orthogonal as ``d -> inf``, ``|Q*|^2 = d``, ``q = sigma^2 |Q|^2 / d``),

    q >= sigma^2 m^2 + theta^2 / sigma^2,

with equality when the student has no part outside the positional and teacher directions (this bound implies
``theta^2 <= rho q``). The minimiser respects it through the coordinates ``(m, theta, s)`` with
``q = sigma^2 m^2 + theta^2 / sigma^2 + rho s^2``; on the positional branch it sits on the edge ``s = 0`` (the
student parallel to ``1_d``), and so does the fixed point at large ``alpha``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from ...params import TaskParams, check_params
from .generalisation import test_error_from_overlaps
from .quadrature import Quadrature
from .status import branch_status, defining_overlap

__all__ = ["PopulationMinimum", "population_minimum"]

#: Starts of the minimisation, as ``(m / rho, theta / rho, s)``.
_STARTS = ((1.0, 0.9, 0.3), (0.5, 0.5, 0.8), (2.0, 1.0, 0.05), (0.2, 0.2, 1.5))


@dataclass(frozen=True)
class PopulationMinimum:
    """The student of lowest population risk on a branch (``alpha -> inf``).

    ``test_error`` is the minimal population risk ``eps_g``; ``converged`` is False when the minimiser did not meet
    its gradient tolerance from any start (the numbers are then the best point found), ``status`` ``"on-branch"``
    or ``"not-converged"`` (the minimiser of a branch's subspace always exists; its defining overlap may vanish, in
    which case ``status`` says ``"branch-absent"``: the uninformed student is then the best of the subspace).
    """

    params: TaskParams
    branch: str
    q: float
    m: float
    theta: float
    test_error: float
    converged: bool

    @property
    def status(self) -> str:
        return branch_status(self.branch, self.converged, defining_overlap(self.branch, self), 0.0, self.params.rho)

    def as_row(self) -> dict:
        return {"branch": self.branch, "alpha": math.inf, "q": self.q, "m": self.m, "theta": self.theta,
                "test_error": self.test_error, "converged": self.converged, "status": self.status,
                **self.params.as_dict()}


def _overlaps(params: TaskParams, branch: str, z: np.ndarray) -> tuple[float, float, float]:
    """``(q, m, theta)`` from the minimiser's coordinates ``z = (m / rho, theta / rho, s)`` restricted to the
    branch's free ones (module docstring)."""
    rho, s2 = params.rho, params.sigma**2
    vals = dict(zip(_FREE[branch], z))
    m, theta = rho * vals.get("m", 0.0), rho * vals.get("theta", 0.0)
    return float(s2 * m * m + theta * theta / s2 + rho * vals["s"] ** 2), float(m), float(theta)


#: The coordinates each branch leaves free.
_FREE = {"semantic": ("theta", "s"), "positional": ("m", "s"), "free": ("m", "theta", "s")}


def population_minimum(params: TaskParams, branch: str = "semantic",
                       quadrature: Quadrature | None = None) -> PopulationMinimum:
    """The minimiser of the population risk ``eps_g(q, m, theta)`` on ``branch`` (the fixed point's limit as
    ``alpha -> inf``; module docstring).

    Parameters
    ----------
    params : TaskParams
        The task (``L = 2``); ``lam`` does not enter.
    branch : {"semantic", "positional", "free"}
        The subspace: ``m = 0``, ``theta = 0``, or neither held.
    quadrature : Quadrature, optional
        The rule of ``eps_g`` (default that of :func:`attnlib.test_error_from_overlaps`, converged to ~1e-8); a
        coarser one gives a cheaper approximation (a start for the solvers at large ``alpha``).

    Returns
    -------
    PopulationMinimum
        The lowest of bounded L-BFGS minimisations from a few starts.
    """
    check_params(params, "population_minimum").require_two_tokens("population_minimum")
    if branch not in ("semantic", "positional", "free"):
        raise ValueError(f"branch must be 'semantic', 'positional' or 'free', got {branch!r}")

    rule = {} if quadrature is None else {"quadrature": quadrature}

    def risk(z):
        return test_error_from_overlaps(params, *_overlaps(params, branch, z), **rule)

    bounds = [(-50.0, 50.0) if name != "s" else (0.0, 100.0) for name in _FREE[branch]]
    best = None
    for m0, theta0, s0 in _STARTS:
        z0 = [{"m": m0, "theta": theta0, "s": s0}[name] for name in _FREE[branch]]
        out = minimize(risk, np.array(z0), method="L-BFGS-B", bounds=bounds, options={"ftol": 1e-14, "gtol": 1e-10})
        if best is None or out.fun < best.fun:
            best = out
    q, m, theta = _overlaps(params, branch, best.x)
    if (m < 0 if branch == "positional" else theta < 0):
        m, theta = -m, -theta
    return PopulationMinimum(params=params, branch=branch, q=q, m=m, theta=theta, test_error=float(best.fun),
                             converged=bool(best.success))

"""Where the replica-symmetric fixed point can be trusted: local stability and the proximal jumps.

The state evolution is the replica-symmetric (RS) description of the global minimum of the empirical risk
(book chapter 4 and :ref:`sec-branches`). Two diagnostics of a fixed point are computed here;
:mod:`attnlib.finite_d.validity` compares the fixed points with finite-d minimisers directly.

**Replicon (smooth part).** Perturb the minimiser ``Q_hat`` by a small random direction. Each sample's
pre-activations move by ``delta h``, its output gradient by ``(I - J) delta h / V`` with
``J = dh_hat/dc = (I + V Hess l(h_hat))^{-1}`` the Jacobian of the proximal map at the node, and the ridge
input step maps the sum back with slope ``sigma^2/D = V`` per unit of ``sigma^2``. The perturbation is
amplified by

    lambda_R = alpha E || I - J ||_F^2

per round (the de Almeida-Thouless ratio of this model at zero temperature; equivalently, the Hessian of the
risk at the RS minimiser, ``lambda I + sum_mu X_mu^T Hess l_mu X_mu / d``, has its spectral edge at zero when
``lambda_R = 1``, by the self-consistent resolvent of such sums). ``lambda_R < 1``: the RS minimiser is
locally stable against smooth perturbations.

**Ties of the proximal problem.** The per-sample loss has two valleys (``h`` and ``-h`` give the same
attention), so the proximal problem often has two local minima; the RS prescription lets every sample sit in
its better one *independently*. Where many samples have two nearly equal minima, which valley each takes is a
collective, glassy choice (like the signs of a spin glass), and at zero temperature the jumps of the proximal
point make the replicon diverge (the jump part of ``E ||I - J||^2`` grows like the inverse temperature). The
Gaussian mass of nodes whose runner-up minimum lies within ``width`` of the best, per unit ``width``
(:func:`tie_density`), measures how many samples face that choice.
"""
from __future__ import annotations

import numpy as np

from ..model.attention import output_loss_derivatives, teacher_diagonal
from ..model.generalisation import POSITION_SIGNS
from ...params import check_positive
from ..model.proximal import solve_prox
from ..model.quadrature import Quadrature
from ..model.state_evolution import SEResult, se_nodes

__all__ = ["DIAGNOSTIC_QUADRATURE", "proximal_nodes", "replicon", "tie_density", "rs_diagnostics"]

#: Rule of the diagnostics (equal weights, so that the tie mass is not dominated by a few heavy nodes).
DIAGNOSTIC_QUADRATURE = Quadrature("sobol-sym", 15)


def proximal_nodes(result: SEResult, quadrature: Quadrature = DIAGNOSTIC_QUADRATURE):
    """Nodes, weights, centres, teacher diagonals and the global proximal search at the fixed point."""
    p = result.params
    nodes, weights = se_nodes(quadrature)
    xi, eta = nodes[:, :2], nodes[:, 2:]
    sq = np.sqrt(result.q)
    b = np.sqrt(max(p.rho - result.theta**2 / result.q, 0.0))
    c = sq * xi + result.m * POSITION_SIGNS
    t = teacher_diagonal((result.theta / sq) * xi + b * eta, p)
    return weights, c, t, solve_prox(c, t, result.V, p.sigma)


def _replicon(result, weights, t, prox) -> float:
    V = result.V
    _, _, (H11, H12, H22) = output_loss_derivatives(prox.h, t, result.params.sigma)
    a, b, e = 1.0 + V * H11, V * H12, 1.0 + V * H22
    det = a * e - b * b
    J11, J12, J22 = e / det, -b / det, a / det
    fro = (1.0 - J11) ** 2 + 2.0 * J12**2 + (1.0 - J22) ** 2
    return float(result.alpha * (weights @ fro))


def _tie_density(result, weights, prox, width) -> float:
    return float(result.alpha * (weights @ (prox.gap < width)) / width)


def replicon(result: SEResult, quadrature: Quadrature = DIAGNOSTIC_QUADRATURE) -> float:
    """``lambda_R = alpha E ||I - J||_F^2`` at a fixed point (module docstring): below 1, the RS minimiser is
    locally stable against smooth perturbations."""
    weights, _, t, prox = proximal_nodes(result, quadrature)
    return _replicon(result, weights, t, prox)


def tie_density(result: SEResult, width: float = 1e-4, quadrature: Quadrature = DIAGNOSTIC_QUADRATURE) -> float:
    """Gaussian mass of nodes whose second-best proximal minimum lies within ``width`` of the best, divided by
    ``width``, times ``alpha`` (samples per dimension facing a near-tie, per unit energy)."""
    width = check_positive("width", width)
    weights, _, _, prox = proximal_nodes(result, quadrature)
    return _tie_density(result, weights, prox, width)


def rs_diagnostics(result: SEResult, width: float = 1e-4,
                   quadrature: Quadrature = DIAGNOSTIC_QUADRATURE) -> dict:
    """``{"replicon": lambda_R, "tie_density": ..., "two_minima": share of nodes with two local minima}``
    from one proximal search."""
    width = check_positive("width", width)
    weights, _, t, prox = proximal_nodes(result, quadrature)
    return {"replicon": _replicon(result, weights, t, prox), "tie_density": _tie_density(result, weights, prox, width),
            "two_minima": float(weights @ np.isfinite(prox.gap))}

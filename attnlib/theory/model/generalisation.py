"""Test errors in the high-dimensional limit: the student's eps_g from its overlaps, and the linear baseline.

Book :eq:`eq-gaussian-fields`, :eq:`eq-test-error` and :eq:`eq-linear-error`: with ``xi, eta ~ N(0, I_2)``
and ``s = (+1, -1)``,

    h_l = sqrt(q) xi_l + m s_l,   h*_l = (theta/sqrt(q)) xi_l + sqrt(rho - theta^2/q) eta_l,
    eps_g = (sigma^2/2) E ||S(h) - T(h*)||_F^2,
    eps_lin = 2 sigma^2 (1-omega)^2 Var[sigmoid(u_1 (u_1 - u_2))],  u ~ N(0, sigma^2 I_2).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import expit

from .attention import attention_diagonal, output_loss, softmax_rows, teacher_diagonal
from ...params import TaskParams, check_finite_scalar, check_int
from .quadrature import Quadrature, gaussian_rule

__all__ = ["teacher_student_fields", "test_error_from_overlaps", "linear_baseline_error", "mean_teacher_diagonal",
           "positional_gain_possible", "POSITION_SIGNS"]

#: Signs ``s_l`` of the positional offsets of the two tokens (``p_2 = -p_1``).
POSITION_SIGNS = np.array([1.0, -1.0])

_SMOOTH_RULE = Quadrature("gauss-hermite", 16)


def _check_overlaps(params: TaskParams, q, m, theta) -> tuple[float, float, float]:
    q = check_finite_scalar("q", q)
    m = check_finite_scalar("m", m)
    theta = check_finite_scalar("theta", theta)
    if q < 0:
        raise ValueError(f"q must lie in [0, inf), got {q!r}")
    if theta * theta > params.rho * q * (1 + 1e-9) + 1e-300:
        raise ValueError(f"overlaps must satisfy theta^2 <= rho q (Cauchy-Schwarz); got theta={theta}, q={q}, "
                         f"rho={params.rho}")
    return q, m, theta


def teacher_student_fields(params: TaskParams, q: float, m: float, theta: float,
                           xi: np.ndarray, eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Student and teacher pre-activations ``(h, h*)`` of the Gaussian representation (book :eq:`eq-gaussian-fields`).

    ``xi`` and ``eta`` have shape ``(..., 2)``; returns two arrays of the same shape.
    """
    a, b = _teacher_coefficients(params, q, theta)
    h = math.sqrt(q) * xi + m * POSITION_SIGNS
    h_star = a * xi + b * eta
    return h, h_star


def _teacher_coefficients(params: TaskParams, q: float, theta: float) -> tuple[float, float]:
    """``(theta / sqrt(q), sqrt(rho - theta^2 / q))``, the teacher field's weights on ``xi`` and ``eta`` (book
    :eq:`eq-gaussian-fields`); ``(0, sqrt(rho))`` at ``q = 0``."""
    sq = math.sqrt(q)
    if sq > 0:
        return theta / sq, math.sqrt(max(params.rho - theta * theta / q, 0.0))
    return 0.0, math.sqrt(params.rho)


def test_error_from_overlaps(params: TaskParams, q: float, m: float, theta: float,
                             quadrature: Quadrature = _SMOOTH_RULE) -> float:
    """High-dimensional test error ``eps_g(q, m, theta)`` of a student with the given overlaps.

    Implements ``eps_g = (sigma^2/2) E ||S(h) - T(h*)||_F^2`` (book :eq:`eq-test-error`) by a 4-dimensional
    quadrature over ``(xi, eta)``; the integrand is smooth, so a tensor Gauss-Hermite rule converges fast
    (the default, 16 points per dimension, agrees with 32 points to ~1e-8 relative).

    A tensor (Gauss-Hermite) rule is taken as the product of its ``xi`` and ``eta`` halves: the student's ``S(h)``
    depends on ``xi`` only, so per ``xi`` node the ``eta`` sum is ``sum_l (S_l - E_eta T_l)^2 + Var_eta T_l``
    (book :eq:`eq-test-error-moments`);
    the teacher's two moments depend on ``theta / sqrt(q)`` and ``sqrt(rho - theta^2 / q)`` only (the same at every
    point of the positional branch, ``theta = 0``) and are kept for the last few (task, weights, order). Equal to
    the direct sum over the ``order**4`` points to round-off (``tests/test_theory_reference.py``); a Sobol rule is
    summed directly.

    Raises
    ------
    ValueError
        If an overlap is not finite, ``q < 0`` or ``theta^2 > rho q``.
    """
    params.require_two_tokens("test_error_from_overlaps")
    q, m, theta = _check_overlaps(params, q, m, theta)
    if quadrature.rule != "gauss-hermite":
        x, w = quadrature.points(4)
        h, h_star = teacher_student_fields(params, q, m, theta, x[:, :2], x[:, 2:])
        return float(w @ output_loss(h, teacher_diagonal(h_star, params), params.sigma))
    x, w = quadrature.points(2)
    h, _ = teacher_student_fields(params, q, m, theta, x, x)   # the student's field on the xi half
    mean_t, var_t = _teacher_moments(params, *_teacher_coefficients(params, q, theta), quadrature.order)
    r = attention_diagonal(h) - mean_t
    return float(params.sigma**2 * (w @ np.sum(r * r + var_t, axis=-1)))


@functools.lru_cache(maxsize=8)
def _teacher_moments(params: TaskParams, a: float, b: float, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Per ``xi`` node of the ``order``-point Gauss-Hermite rule in two dimensions, the mean and the variance over
    ``eta`` (the same rule) of the teacher's diagonal at ``h* = a xi + b eta``; each of shape ``(order**2, 2)``,
    read-only, kept for the last 8 arguments."""
    x, w = gaussian_rule("gauss-hermite", order, 0, 2)
    # the teacher is even in h* and the rule symmetric (node n is -(node N-1-n)): the moments at -xi are those at
    # xi, so only the first half of the xi nodes (and the middle one of an odd rule) is computed
    half = (len(x) + 1) // 2
    t = teacher_diagonal(a * x[:half, None, :] + b * x[None, :, :], params)   # (xi node, eta node, l)
    mean = np.einsum("j,ijl->il", w, t)
    dev = t - mean[:, None, :]
    var = np.einsum("j,ijl->il", w, dev * dev)
    mirror = slice(len(x) - half - 1, None, -1)
    kept = (np.concatenate([mean, mean[mirror]]), np.concatenate([var, var[mirror]]))
    for arr in kept:
        arr.setflags(write=False)
    return kept


def linear_baseline_error(params: TaskParams, order: int | None = None) -> float:
    """Test error ``eps_lin`` of the linear positional baseline (book :eq:`eq-linear-error`), for any ``L``.

    For any ``alpha = Theta(1)`` the ridge estimate ``B_hat`` tends to ``E[T]``, hence
    ``eps_lin = (sigma^2/2) E ||T - E T||_F^2 = (sigma^2/2)(1-omega)^2 sum_{l,k} Var[softmax_row(u u^T)_{lk}]``
    with ``u ~ N(0, sigma^2 I_L)`` (book :eq:`eq-general-linear`), independent of ``A``. At ``L = 2`` the four
    variances are equal: ``2 sigma^2 (1-omega)^2 Var[sigmoid(u_1 (u_1 - u_2))]``, a smooth two-dimensional
    integral (tensor Gauss-Hermite, ``order`` points per dimension, default 80). For ``L > 2`` the
    ``L``-dimensional integral is taken by a tensor Gauss-Hermite rule of ``order`` points per dimension
    (default: about ``4e5`` points in all, at least 8 per dimension; 48 at ``L = 3``, 25 at ``L = 4``).
    """
    if params.L == 2:
        _, var = _semantic_diagonal_moments(params.sigma, 80 if order is None else order)
        return float(2.0 * params.sigma**2 * (1.0 - params.omega) ** 2 * var)
    L = params.L
    order = max(8, int(round(4e5 ** (1.0 / L)))) if order is None else check_int("order", order, 2)
    x, w = Quadrature("gauss-hermite", order).points(L)
    u = params.sigma * x
    S = softmax_rows(u[:, :, None] * u[:, None, :])
    mean = np.einsum("n,nlk->lk", w, S)
    var = np.einsum("n,nlk->lk", w, (S - mean) ** 2)
    return float(0.5 * params.sigma**2 * (1.0 - params.omega) ** 2 * var.sum())


def _semantic_diagonal_moments(sigma: float, order: int) -> tuple[float, float]:
    """Mean and variance of ``sigmoid(u_1 (u_1 - u_2))``, ``u ~ N(0, sigma^2 I_2)`` (Gauss-Hermite)."""
    x, w = Quadrature("gauss-hermite", order).points(2)
    u = sigma * x
    s = expit(u[:, 0] * (u[:, 0] - u[:, 1]))
    mean = float(w @ s)
    return mean, float(w @ (s - mean) ** 2)


def mean_teacher_diagonal(params: TaskParams, order: int = 80) -> np.ndarray:
    """``(E[T_11], E[T_22])``: the teacher's average attention to the token itself.

    ``E[T_ll] = (1 - omega) s_bar + omega A_ll`` with ``s_bar = E[sigmoid(u_1 (u_1 - u_2))] > 1/2``,
    ``u ~ N(0, sigma^2 I_2)``, the diagonal of the linear baseline's limit ``B_hat -> E[T]``.

    A purely positional tied student (``q -> 0`` in book :eq:`eq-gaussian-fields`: ``h = m s``) has
    ``S_11 = S_22 = sigmoid(2 m^2) >= 1/2``: it can only raise both diagonal entries together. Its loss
    ``sigma^2 sum_l E[(S - T_ll)^2]`` is then lowest at ``S = mean(E[T_11], E[T_22])`` when that mean
    exceeds ``1/2`` (a positional solution ``m > 0``), and at ``m = 0`` otherwise: see
    :func:`positional_gain_possible`.
    """
    params.require_two_tokens("mean_teacher_diagonal")
    s_bar, _ = _semantic_diagonal_moments(params.sigma, order)
    A = params.A_array
    return (1.0 - params.omega) * s_bar + params.omega * np.array([A[0, 0], A[1, 1]])


def positional_gain_possible(params: TaskParams, order: int = 80) -> bool:
    """Whether a purely positional tied student beats ``m = 0``: ``mean(E[T_11], E[T_22]) > 1/2``
    (:func:`mean_teacher_diagonal`). Always true for the standard ``A`` (diagonal 0.6); for the alternative
    ``A`` (diagonal mean 0.25) only below a small ``omega``."""
    return bool(np.mean(mean_teacher_diagonal(params, order)) > 0.5)


# not a pytest test, despite the name
test_error_from_overlaps.__test__ = False

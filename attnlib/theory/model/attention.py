"""Two-token attention maps and the per-sample loss in the low-dimensional (GLM) variables.

For ``L = 2`` a row-stochastic matrix is fixed by its diagonal, so the student attention
``S = softmax_row(h h^T)`` and the teacher attention ``T = (1-omega) softmax_row(h* h*^T) + omega A`` are
described by ``(S_11, S_22)`` and ``(T_11, T_22)``, with (book :eq:`eq-diagonal-loss`)

    S_11 = sigmoid(h_1 (h_1 - h_2)),   S_22 = sigmoid(h_2 (h_2 - h_1)),
    ||S - T||_F^2 = 2 (S_11 - T_11)^2 + 2 (S_22 - T_22)^2.

All functions broadcast over leading axes; the last axis (length 2) indexes the token. The row softmax and the
teacher's attention for any ``L`` (:func:`softmax_rows`, :func:`teacher_attention`) serve the general state
evolution and the finite-d data alike.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from ...params import TaskParams

__all__ = ["attention_diagonal", "teacher_diagonal", "attention_matrix", "teacher_matrix",
           "output_loss", "output_loss_derivatives", "softmax_rows", "teacher_attention"]


def softmax_rows(scores: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Row-wise softmax over the last axis (max-shifted, so it never overflows)."""
    z = np.subtract(scores, scores.max(axis=-1, keepdims=True), out=out)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def teacher_attention(h_star: np.ndarray, omega: float, A: np.ndarray) -> np.ndarray:
    """Teacher attention ``T = (1-omega) softmax_row(h* h*^T) + omega A`` for ``h_star`` of shape (n, L), any
    ``L``."""
    T = softmax_rows(h_star[:, :, None] * h_star[:, None, :])
    T *= 1.0 - omega
    T += omega * A
    return T


def attention_diagonal(h: np.ndarray) -> np.ndarray:
    """Diagonal ``(S_11, S_22)`` of ``softmax_row(h h^T)`` for pre-activations ``h`` of shape ``(..., 2)``."""
    h = np.asarray(h, dtype=float)
    h1, h2 = h[..., 0], h[..., 1]
    diff = h1 - h2
    return np.stack([expit(h1 * diff), expit(-h2 * diff)], axis=-1)


def teacher_diagonal(h_star: np.ndarray, params: TaskParams) -> np.ndarray:
    """Diagonal ``(T_11, T_22)`` of the teacher ``T = (1-omega) softmax_row(h* h*^T) + omega A``."""
    params.require_two_tokens("teacher_diagonal")
    A = params.A_array
    return (1.0 - params.omega) * attention_diagonal(h_star) + params.omega * np.array([A[0, 0], A[1, 1]])


def _matrix_from_diagonal(diag: np.ndarray) -> np.ndarray:
    d1, d2 = diag[..., 0], diag[..., 1]
    return np.stack([np.stack([d1, 1.0 - d1], -1), np.stack([1.0 - d2, d2], -1)], -2)


def attention_matrix(h: np.ndarray) -> np.ndarray:
    """Full 2x2 student attention matrices ``softmax_row(h h^T)``, shape ``(..., 2, 2)``."""
    return _matrix_from_diagonal(attention_diagonal(h))


def teacher_matrix(h_star: np.ndarray, params: TaskParams) -> np.ndarray:
    """Full 2x2 teacher attention matrices, shape ``(..., 2, 2)``."""
    return _matrix_from_diagonal(teacher_diagonal(h_star, params))


def output_loss(h: np.ndarray, t_diag: np.ndarray, sigma: float) -> np.ndarray:
    """Per-sample output loss ``(sigma^2/2) ||S(h) - T||_F^2 = sigma^2 sum_l (S_ll - T_ll)^2``."""
    r = attention_diagonal(h) - t_diag
    return sigma**2 * np.sum(r * r, axis=-1)


def output_loss_derivatives(h: np.ndarray, t_diag: np.ndarray, sigma: float):
    """Value, gradient and Hessian in ``h`` of :func:`output_loss` (analytic).

    With ``a_1 = h_1^2 - h_1 h_2``, ``a_2 = h_2^2 - h_1 h_2`` and ``s_l = sigmoid(a_l)``, the loss is
    ``sigma^2 sum_l (s_l - t_l)^2``; its gradient is ``2 sigma^2 sum_l r_l s_l' grad a_l`` and its Hessian
    ``2 sigma^2 sum_l [(s_l'^2 + r_l s_l'') grad a_l grad a_l^T + r_l s_l' Hess a_l]`` with ``r_l = s_l - t_l``.

    Returns
    -------
    value : ndarray, shape (...)
    grad : ndarray, shape (..., 2)
    hess : tuple of three ndarrays (H_11, H_12, H_22), each of shape (...)
    """
    h1, h2 = h[..., 0], h[..., 1]
    a1 = h1 * (h1 - h2)
    a2 = h2 * (h2 - h1)
    s1, s2 = expit(a1), expit(a2)
    r1, r2 = s1 - t_diag[..., 0], s2 - t_diag[..., 1]
    d1, d2 = s1 * (1.0 - s1), s2 * (1.0 - s2)          # s'
    e1, e2 = d1 * (1.0 - 2.0 * s1), d2 * (1.0 - 2.0 * s2)  # s''
    c = sigma**2
    value = c * (r1 * r1 + r2 * r2)
    # gradients of a_1, a_2
    g1x, g1y = 2.0 * h1 - h2, -h1
    g2x, g2y = -h2, 2.0 * h2 - h1
    w1, w2 = r1 * d1, r2 * d2
    grad = 2.0 * c * np.stack([w1 * g1x + w2 * g2x, w1 * g1y + w2 * g2y], axis=-1)
    k1, k2 = d1 * d1 + r1 * e1, d2 * d2 + r2 * e2
    # Hess a_1 = [[2, -1], [-1, 0]], Hess a_2 = [[0, -1], [-1, 2]]
    H11 = 2.0 * c * (k1 * g1x * g1x + k2 * g2x * g2x + 2.0 * w1)
    H12 = 2.0 * c * (k1 * g1x * g1y + k2 * g2x * g2y - w1 - w2)
    H22 = 2.0 * c * (k1 * g1y * g1y + k2 * g2y * g2y + 2.0 * w2)
    return value, grad, (H11, H12, H22)

"""Finite-d empirical risk minimisation of the attention student, to validate the theory.

Model (book chapter 2, :eq:`eq-student`, :eq:`eq-risk`): for a sample ``X`` in R^{L x d}, the student is
``f_Q(X) = softmax_row(h h^T) X`` with ``h = X Q / sqrt(d)``, ``Q`` in R^{d x r}; it is trained on

    R(Q) = sum_mu ||y^mu - f_Q(X^mu)||_F^2 / (2d) + (lambda/2) ||Q||_F^2.

Fast objective (book :eq:`eq-gram-risk`). With ``S = softmax_row(h h^T)``, per sample

    ||S X - Y||_F^2 / d = tr(S G S^T) - 2 tr(S E^T) + ||Y||_F^2 / d,   G = X X^T / d,  E = Y X^T / d,

so the ``L x L`` matrices ``G`` and ``E`` are formed once. An evaluation of ``R`` and of its analytic
gradient then needs ``h = X Q / sqrt(d)`` (one pass over the data) and ``X^T (dR/dh) / sqrt(d)`` (a second
pass); everything in between is ``O(n L^2 r)`` work, vectorised over samples. The backward pass is

    dl/dS = S G - E,   dl/dA_lk = S_lk (dl/dS_lk - sum_j S_lj dl/dS_lj),   dl/dh = (dl/dA + dl/dA^T) h,

with ``A = h h^T`` the scores and ``l`` the per-sample loss.

Training: full-batch gradient descent with the paper's protocol (learning rate 0.15, 5000 steps), or
L-BFGS-B (scipy) on the same objective with the same analytic gradient, which reaches the same minimum in
far fewer passes over the data.

Measurements (book :eq:`eq-overlaps`, :eq:`eq-test-error`, :eq:`eq-train-loss`): ``m = (1_d . Q)/d``,
``theta = sigma^2 (Q . Q*)/d``, ``q = sigma^2 ||Q||^2/d``, ``eps_t = R(Q_hat)/d``, ``eps_g`` on fresh samples
and the linear positional baseline (ridge ``lambda_lin = 1e-4``).

Reproducibility: the teacher, training set, test set and random start come from independent streams of
one seed (:func:`attnlib.finite_d.data.seed_streams`); two runs with equal arguments on the same machine and BLAS
thread count give bit-identical results (a different thread count changes the rounding of the matrix
products, hence the last digits, and L-BFGS may take a slightly different path to the same minimum).

Finite-d notes (measured, sigma = 0.5, lambda = 0.01, omega = 0.3, alpha = 2):

* The teacher norm ``rho_hat = sigma^2 ||Q*||^2 / d`` fluctuates by about 4.5 % at d = 1000 (seed 0:
  ``rho_hat = 0.223``), and the minimiser's overlaps and errors move with it (seed 0: theta 0.139 instead
  of 0.157, eps_lin 0.00167 instead of 0.00197). ``normalize_teacher=True`` rescales ``Q*`` to
  ``||Q*||^2 = d``; then seeds 0-2 give (Q . Q*)/d = 0.627-0.636 and eps_g = 0.00141-0.00144 from the
  semantic start, m = 0.249-0.269 and eps_g = 0.00346-0.00347 from the positional start (the paper's
  reference values, book :ref:`sec-book-and-paper`: 0.634, 0.00140; 0.259, 0.00349).
  ``ERMResult.test_error_theory_rho_hat`` accounts for ``rho_hat`` instead.
* Gradient descent with the paper's protocol (lr 0.15, 5000 steps) reaches ``||grad R||/sqrt(d)`` of about
  8e-6 at d = 1000 and agrees with L-BFGS to ~1e-4 in the overlaps. At d = 200 the positional basin is
  flat: 5000 steps leave |delta m| up to 4e-3 (seed 0; 20 000 steps reach 4e-5), and for some seeds (seed 1)
  gradient descent drifts slowly from the positional start towards another stationary point while L-BFGS
  stops at the nearest minimum.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from .data import (Samples, Teacher, _resolve_L, iter_sample_chunks, make_teacher, draw_samples, seed_streams,
                   softmax_rows)
from ..exceptions import warn_caller
from ..theory.model.attention import output_loss, teacher_diagonal
from ..theory.model.general_model import principal_position_direction
from ..theory.model.generalisation import teacher_student_fields, test_error_from_overlaps
from ..theory.model.quadrature import Quadrature
from ..params import TaskParams, check_alpha, check_int, check_finite_scalar, check_positive

__all__ = [
    "STARTS",
    "METHODS",
    "DEFAULT_N_TEST",
    "ERMObjective",
    "ERMResult",
    "GDResult",
    "student_output",
    "initial_Q",
    "gradient_descent",
    "minimize_lbfgs",
    "fit_linear_baseline",
    "estimate_test_errors",
    "overlaps",
    "n_samples",
    "test_error_from_overlaps_rho",
    "simulate_erm",
]

#: Named starting points of the optimisation.
STARTS = ("semantic", "positional", "random")
#: Optimisers: full-batch gradient descent (paper protocol) or scipy's L-BFGS-B.
METHODS = ("gd", "lbfgs")
#: Default number of fresh test samples. At d = 1000, alpha = 2 (the paper's reference points) the per-sample
#: errors have a coefficient of variation of about 1.3 (semantic minimum) to 1.7 (positional minimum), so
#: 60 000 samples give a relative standard error of 0.5 % to 0.7 % on eps_g.
DEFAULT_N_TEST = 60_000
#: Default tolerance on ``||grad R||_F / sqrt(d)`` below which a run counts as converged.
DEFAULT_GRAD_TOL = {"gd": 1e-5, "lbfgs": 1e-7}


# --------------------------------------------------------------------------------------------------------
# forward pass and objective
# --------------------------------------------------------------------------------------------------------
def _as_Q(Q, d: int, r: int | None = None, name: str = "Q") -> np.ndarray:
    """Validate a student matrix: shape (d,) (rank 1) or (d, r), finite; returns a float (d, r) copy."""
    try:
        arr = np.array(Q, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real array of shape (d, r) = ({d}, r)") from exc
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != d or arr.shape[1] < 1 or (r is not None and arr.shape[1] != r):
        want = f"({d}, {r})" if r is not None else f"({d}, r)"
        raise ValueError(f"{name} must have shape {want} (or ({d},) for rank 1), got shape {np.shape(Q)}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must have finite entries (no NaN or inf)")
    return np.ascontiguousarray(arr)


def student_output(Q: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Student output ``f_Q(X) = softmax_row(h h^T) X``, ``h = X Q / sqrt(d)`` (book :eq:`eq-student`).

    Parameters
    ----------
    Q : ndarray, shape (d,) or (d, r)
    X : ndarray, shape (n, L, d)

    Returns
    -------
    ndarray, shape (n, L, d)
    """
    X = np.asarray(X, dtype=float)
    d = X.shape[-1]
    Q = _as_Q(Q, d)
    H = (X @ Q) / math.sqrt(d)
    S = softmax_rows(H @ np.swapaxes(H, -1, -2))
    return S @ X


def _gram_matrices(samples: Samples) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample ``G = X X^T/d``, ``E = Y X^T/d`` and ``K = W W^T/d`` (``W = sigma Z``), each (n, L, L)."""
    X, W, T = samples.X, samples.W, samples.T
    d = X.shape[-1]
    Xt = np.swapaxes(X, 1, 2)
    G = np.matmul(X, Xt) / d
    E = np.matmul(T, np.matmul(W, Xt)) / d
    K = np.matmul(W, np.swapaxes(W, 1, 2)) / d
    return G, E, K


class ERMObjective:
    """Empirical risk ``R(Q)`` and its analytic gradient on a fixed training set (book :eq:`eq-risk`,
    :eq:`eq-gram-risk`).

    Precomputes the flattened inputs ``X`` (``n L x d``, C-contiguous) and the ``L x L`` matrices
    ``G = X X^T/d``, ``E = Y X^T/d`` and ``||Y||^2/d`` of every sample; each call of :meth:`value_and_grad`
    then costs two matrix products with ``X`` (``n L d r`` flops each, memory bound for small ``r``) plus
    ``O(n L^2 r)`` vectorised work. Output buffers are preallocated and reused, so the returned gradient is
    overwritten by the next call: copy it if you keep it.

    Parameters
    ----------
    samples : Samples
        Training set.
    lam : float
        Ridge penalty ``lambda >= 0``.
    rank : int
        Number of columns ``r >= 1`` of ``Q``.
    specialise : bool
        Use the closed-form two-token backward pass when ``L = 2`` and ``r = 1`` (same numbers to rounding,
        fewer operations); False forces the general ``L x L`` path.
    """

    def __init__(self, samples: Samples, lam: float, rank: int = 1, specialise: bool = True):
        lam = check_finite_scalar("lam", lam)
        if lam < 0:
            raise ValueError(f"lam must lie in [0, inf), got {lam!r}")
        self.rank = check_int("rank", rank, 1)
        n, L, d = samples.X.shape
        self.n, self.L, self.d, self.lam = n, L, d, lam
        self.inv_sqrt_d = 1.0 / math.sqrt(d)
        self.X = np.ascontiguousarray(samples.X.reshape(n * L, d))
        self.G, self.E, K = _gram_matrices(samples)
        yy = np.einsum("nlk,nkj,nlj->n", samples.T, K, samples.T)  # ||T W||^2 / d
        self.const = 0.5 * float(yy.sum())
        r = self.rank
        self._H = np.empty((n * L, r))
        self._dH = np.empty((n, L, r))
        self._grad = np.empty((d, r))
        self.n_evaluations = 0
        self.two_token = bool(specialise) and L == 2 and r == 1
        if self.two_token:
            G, E = self.G, self.E
            self._c = G[:, 0, 0] - 2 * G[:, 0, 1] + G[:, 1, 1]
            self._k1 = G[:, 0, 1] - G[:, 1, 1] - E[:, 0, 0] + E[:, 0, 1]
            self._k2 = G[:, 0, 1] - G[:, 0, 0] - E[:, 1, 1] + E[:, 1, 0]
            self._const2 = self.const + float(np.sum(0.5 * (G[:, 0, 0] + G[:, 1, 1]) - E[:, 0, 1] - E[:, 1, 0]))

    def value_and_grad(self, Q: np.ndarray, need_value: bool = True) -> tuple[float, np.ndarray]:
        """``(R(Q), dR/dQ)`` for ``Q`` of shape (d, r); the value is NaN if ``need_value`` is False.

        The gradient array is an internal buffer (shape (d, r)), overwritten by the next call.
        """
        n, L, r = self.n, self.L, self.rank
        self.n_evaluations += 1
        H = self._H
        if r == 1:  # matrix-vector products (BLAS gemv) for the theory's rank-one student
            np.dot(self.X, Q[:, 0], out=H[:, 0])
        else:
            np.dot(self.X, Q, out=H)
        H *= self.inv_sqrt_d
        if self.two_token:
            value = self._two_token_backward(H[:, 0], need_value)
        else:
            value = self._general_backward(H.reshape(n, L, r), need_value)
        if need_value:
            value += 0.5 * self.lam * float(np.vdot(Q, Q))
        g = self._grad
        if r == 1:
            np.dot(self.X.T, self._dH.reshape(n * L), out=g[:, 0])
        else:
            np.dot(self.X.T, self._dH.reshape(n * L, r), out=g)
        g *= self.inv_sqrt_d
        if self.lam:
            g += self.lam * Q
        return value, g

    def _general_backward(self, H3: np.ndarray, need_value: bool) -> float:
        """Data term of R and ``dR/dh`` (into ``self._dH``) for any L, r; ``H3`` has shape (n, L, r)."""
        r = self.rank
        if r == 1:
            h = H3[:, :, 0]
            S = h[:, :, None] * h[:, None, :]
        else:
            S = np.matmul(H3, np.swapaxes(H3, 1, 2))
        softmax_rows(S, out=S)
        SG = np.matmul(S, self.G)
        value = math.nan
        if need_value:
            value = 0.5 * float(np.vdot(SG, S)) - float(np.vdot(S, self.E)) + self.const
        dA = np.subtract(SG, self.E, out=SG)                       # dl/dS = S G - E
        dA -= np.einsum("nlk,nlk->nl", S, dA)[:, :, None]          # softmax backward
        dA *= S
        dA += np.swapaxes(dA, 1, 2).copy()                         # scores A = h h^T
        if r == 1:
            np.multiply(dA, h[:, None, :], out=dA)
            np.sum(dA, axis=2, out=self._dH[:, :, 0])
        else:
            np.matmul(dA, H3, out=self._dH)
        return value

    def _two_token_backward(self, hflat: np.ndarray, need_value: bool) -> float:
        """Specialisation for L = 2, r = 1 (the theory's case), on length-n vectors.

        With ``S = [[a, 1-a], [1-b, b]]``, ``a = sigmoid(h_1 (h_1 - h_2))``, ``b = sigmoid(h_2 (h_2 - h_1))``,
        the per-sample loss is ``c (a^2 + b^2)/2 + k_1 a + k_2 b + const`` with ``c = G_11 - 2 G_12 + G_22``,
        ``k_1 = G_12 - G_22 - E_11 + E_12``, ``k_2 = G_12 - G_11 - E_22 + E_21`` (precomputed), so
        ``dl/da = c a + k_1``, ``dl/db = c b + k_2`` and the chain rule through ``a``, ``b`` gives ``dl/dh``.
        """
        c, k1, k2 = self._c, self._k1, self._k2
        h1, h2 = hflat[0::2], hflat[1::2]
        diff = h1 - h2
        a = expit(h1 * diff)
        b = expit(-h2 * diff)
        value = math.nan
        if need_value:
            value = float(0.5 * (c @ (a * a + b * b)) + k1 @ a + k2 @ b) + self._const2
        w1 = c * a
        w1 += k1
        w1 *= a
        w1 *= 1.0 - a                                   # dl/du_1, u_1 = h_1 (h_1 - h_2)
        w2 = c * b
        w2 += k2
        w2 *= b
        w2 *= 1.0 - b                                   # dl/du_2, u_2 = h_2 (h_2 - h_1)
        dh = self._dH.reshape(self.n, 2)
        # dl/dh_1 = w_1 (2 h_1 - h_2) - w_2 h_2 = w_1 (h_1 + diff) - w_2 h_2
        np.multiply(w1, h1 + diff, out=dh[:, 0])
        dh[:, 0] -= w2 * h2
        # dl/dh_2 = -w_1 h_1 + w_2 (2 h_2 - h_1) = w_2 (h_2 - diff) - w_1 h_1
        np.multiply(w2, h2 - diff, out=dh[:, 1])
        dh[:, 1] -= w1 * h1
        return value

    def value(self, Q: np.ndarray) -> float:
        """``R(Q)``."""
        return self.value_and_grad(_as_Q(Q, self.d, self.rank))[0]

    def gradient(self, Q: np.ndarray) -> np.ndarray:
        """``dR/dQ`` (a fresh array of shape (d, r))."""
        return self.value_and_grad(_as_Q(Q, self.d, self.rank), need_value=False)[1].copy()

    def grad_norm(self, g: np.ndarray) -> float:
        """Convergence measure ``||g||_F / sqrt(d)`` of a gradient ``g``."""
        return float(np.linalg.norm(g)) * self.inv_sqrt_d


# --------------------------------------------------------------------------------------------------------
# optimisers
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GDResult:
    """Outcome of an optimiser: final ``Q`` (d, r), ``R(Q)``, ``||grad R||_F/sqrt(d)``, iterations,
    number of objective evaluations, whether the gradient tolerance was met, and a message."""

    Q: np.ndarray
    value: float
    grad_norm: float
    n_iter: int
    n_evaluations: int
    converged: bool
    message: str


def gradient_descent(objective: ERMObjective, Q0, lr: float = 0.15, steps: int = 5000,
                     grad_tol: float = DEFAULT_GRAD_TOL["gd"], warn: bool = True) -> GDResult:
    """Full-batch gradient descent ``Q <- Q - lr dR/dQ`` for ``steps`` steps (the paper's protocol).

    The run counts as converged when ``||dR/dQ||_F / sqrt(d) <= grad_tol`` at the end; otherwise a
    :class:`~attnlib.exceptions.ConvergenceWarning` is issued (if ``warn``) and ``converged`` is False.
    A non-finite iterate (divergence, e.g. too large ``lr``) stops the run early with ``converged=False``.
    """
    lr = check_positive("lr (learning rate)", lr)
    steps = check_int("steps", steps, 0)
    grad_tol = check_positive("grad_tol", grad_tol)
    Q = _as_Q(Q0, objective.d, objective.rank, name="Q0")
    step = np.empty_like(Q)
    n_iter = 0
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is detected and reported below
        for n_iter in range(1, steps + 1):
            _, g = objective.value_and_grad(Q, need_value=False)
            np.multiply(g, lr, out=step)
            Q -= step
            if n_iter % 100 == 0 and not np.all(np.isfinite(Q)):
                break
        else:
            n_iter = steps
    finite = bool(np.all(np.isfinite(Q)))
    if finite:
        value, g = objective.value_and_grad(Q)
        gnorm = objective.grad_norm(g)
    else:
        value, gnorm = math.nan, math.nan
    converged = finite and gnorm <= grad_tol
    message = (f"gradient norm {gnorm:.3g} {'<=' if converged else '>'} tolerance {grad_tol:.3g} after "
               f"{n_iter} steps" if finite else f"diverged (non-finite Q) after {n_iter} steps")
    if not converged and warn:
        warn_caller(f"gradient descent did not converge: {message}")
    return GDResult(Q=Q, value=float(value), grad_norm=float(gnorm), n_iter=n_iter,
                    n_evaluations=n_iter + int(finite), converged=converged, message=message)


def minimize_lbfgs(objective: ERMObjective, Q0, grad_tol: float = DEFAULT_GRAD_TOL["lbfgs"],
                   maxiter: int = 20000, maxcor: int = 20, warn: bool = True) -> GDResult:
    """Minimise ``R(Q)`` with scipy's L-BFGS-B and the analytic gradient, to tight tolerances.

    scipy is run with ``gtol = 1e-10`` (max-abs gradient entry), ``ftol = 1e-16`` and at most ``maxiter``
    iterations; it may stop with a line-search message when the objective is flat to machine precision, so
    convergence is judged, as for gradient descent, by ``||dR/dQ||_F / sqrt(d) <= grad_tol``. Failure gives
    ``converged=False`` and a :class:`~attnlib.exceptions.ConvergenceWarning` (if ``warn``).
    """
    grad_tol = check_positive("grad_tol", grad_tol)
    maxiter = check_int("maxiter", maxiter, 1)
    d, r = objective.d, objective.rank
    Q0 = _as_Q(Q0, d, r, name="Q0")

    def fun(x):
        value, g = objective.value_and_grad(x.reshape(d, r))
        return value, g.ravel().copy()

    n0 = objective.n_evaluations
    res = minimize(fun, Q0.ravel(), jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "maxfun": 2 * maxiter, "maxcor": maxcor, "gtol": 1e-10,
                            "ftol": 1e-16, "maxls": 50})
    Q = np.ascontiguousarray(res.x.reshape(d, r))
    value, g = objective.value_and_grad(Q)
    gnorm = objective.grad_norm(g)
    converged = bool(np.isfinite(value)) and gnorm <= grad_tol
    message = f"{res.message} ; gradient norm {gnorm:.3g} vs tolerance {grad_tol:.3g} after {res.nit} iterations"
    if not converged and warn:
        warn_caller(f"L-BFGS did not converge: {message}")
    return GDResult(Q=Q, value=float(value), grad_norm=float(gnorm), n_iter=int(res.nit),
                    n_evaluations=objective.n_evaluations - n0, converged=converged, message=str(message))


# --------------------------------------------------------------------------------------------------------
# starts, baseline, measurements
# --------------------------------------------------------------------------------------------------------
def initial_Q(start, teacher: Teacher, rank: int = 1, rng: np.random.Generator | None = None,
              init_scale: float = 0.1) -> np.ndarray:
    """Starting point ``Q0`` of shape (d, rank).

    ``"semantic"``: ``Q = Q*``; ``"positional"``: ``Q = 1_d/sqrt(d)`` (``L = 2``; for ``L > 2``,
    ``Q = P^T u`` with ``u`` the principal positional direction of ``A``,
    :func:`attnlib.theory.model.general_model.principal_position_direction`); ``"random"``: i.i.d.
    ``N(0, init_scale^2)`` entries; an array: used as given (shape (d,) or (d, rank), finite). For
    ``rank > 1`` and a named start the first column is the named vector and the other columns are small
    random ``N(0, init_scale^2)`` entries (a column started at exactly zero would stay zero, its gradient
    vanishing). Random entries come from ``rng`` (the ``"init"`` stream of the run's seed).
    """
    d = teacher.d
    rank = check_int("rank", rank, 1)
    init_scale = check_positive("init_scale", init_scale)
    if isinstance(start, str):
        if start not in STARTS:
            raise ValueError(f"start must be one of {STARTS} or an array of shape ({d}, {rank}), got {start!r}")
        if rng is None:
            rng = np.random.default_rng(0)
        Q = init_scale * rng.standard_normal((d, rank))
        if start == "semantic":
            Q[:, 0] = teacher.Q_star
        elif start == "positional" and teacher.L == 2:
            Q[:, 0] = 1.0 / math.sqrt(d)
        elif start == "positional":  # L > 2: along the encodings' principal direction of A (M proportional to G u)
            Q[:, 0] = teacher.P.T @ principal_position_direction(teacher.A)
        return Q
    return _as_Q(start, d, rank, name="start (Q)")


def overlaps(Q: np.ndarray, teacher: Teacher) -> dict[str, np.ndarray]:
    """Per-column overlaps of ``Q`` (d, r) with the task (book :eq:`eq-overlaps`).

    Returns arrays of length r: ``m = (1_d . Q)/d``, ``theta = sigma^2 (Q . Q*)/d`` and
    ``q = sigma^2 ||Q||^2/d``; and the positional overlaps ``M = P Q/sqrt d`` (L, r) and the full
    ``q_matrix = sigma^2 Q^T Q/d`` (r, r) of the general theory (book :ref:`sec-general-L`; at ``L = 2``,
    ``M = (m, -m)``).
    """
    Q = _as_Q(Q, teacher.d)
    d, s2 = teacher.d, teacher.params.sigma**2
    return {"q": s2 * np.einsum("ij,ij->j", Q, Q) / d, "m": Q.sum(axis=0) / d,
            "theta": s2 * (teacher.Q_star @ Q) / d, "M": teacher.P @ Q / math.sqrt(d),
            "q_matrix": s2 * Q.T @ Q / d}


def fit_linear_baseline(samples: Samples, lam_lin: float = 1e-4) -> np.ndarray:
    """Ridge fit of the linear positional baseline ``y_hat = B (sigma Z)`` (book :eq:`eq-linear`).

    Minimises ``sum_mu ||y^mu - B W^mu||_F^2/(2d) + (lam_lin/2) ||B||_F^2`` with ``W = sigma Z``; since
    ``y = T W`` the normal equations involve only ``L x L`` sums:
    ``B (sum_mu K_mu + lam_lin I) = sum_mu T_mu K_mu`` with ``K = W W^T / d``.
    """
    lam_lin = check_finite_scalar("lam_lin", lam_lin)
    if lam_lin < 0:
        raise ValueError(f"lam_lin must lie in [0, inf), got {lam_lin!r}")
    W, T = samples.W, samples.T
    d, L = W.shape[-1], W.shape[1]
    K = np.matmul(W, np.swapaxes(W, 1, 2)) / d
    M = K.sum(axis=0) + lam_lin * np.eye(L)
    rhs = np.matmul(T, K).sum(axis=0)
    return np.linalg.solve(M, rhs.T).T  # M symmetric: B = rhs M^{-1}


def estimate_test_errors(teacher: Teacher, Q: np.ndarray, n_test: int, rng: np.random.Generator,
                         B: np.ndarray | None = None, chunk_size: int = 2048,
                         control_mean: float | None = None) -> dict[str, float]:
    """Monte-Carlo test errors on ``n_test`` fresh samples, drawn in chunks of ``chunk_size``.

    ``eps_g = mean_mu ||y - f_Q(X)||_F^2 / (2d)`` (book :eq:`eq-test-error`) and, if ``B`` is given, the same for the
    linear baseline ``B (sigma Z)``, on the same samples; each with its standard error
    ``std / sqrt(n_test)``. Memory is ``O(chunk_size L d)``.

    If ``control_mean`` is given, also a control-variate estimate ``test_error_cv`` (with
    ``test_error_cv_stderr``): the per-sample ``c = (sigma^2/2) ||S(h) - T(h*)||_F^2``, whose exact mean is
    ``control_mean`` (for L = 2, r = 1: :func:`test_error_from_overlaps_rho` at the student's overlaps and
    the teacher's ``rho_hat``, exact at finite d because ``(h, h*)`` are exactly Gaussian for a fixed
    ``Q``), is subtracted sample by sample and its mean added back. Unbiased; the residual is the finite-d
    part only, so its standard error is several times smaller than the plain one.
    """
    n_test = check_int("n_test", n_test, 2)
    d = teacher.d
    Q = _as_Q(Q, d)
    errs = np.empty(n_test)
    lin = np.empty(n_test) if B is not None else None
    ctrl = np.empty(n_test) if control_mean is not None else None
    half_s2 = 0.5 * teacher.params.sigma**2
    i = 0
    for chunk in iter_sample_chunks(teacher, n_test, rng, chunk_size):
        k = chunk.n
        Y = chunk.Y
        H = (chunk.X @ Q) / math.sqrt(d)
        S = softmax_rows(H @ np.swapaxes(H, 1, 2))
        res = np.matmul(S, chunk.X)
        res -= Y
        errs[i:i + k] = np.einsum("nld,nld->n", res, res) / (2 * d)
        if ctrl is not None:
            diff = S - chunk.T
            ctrl[i:i + k] = half_s2 * np.einsum("nlk,nlk->n", diff, diff)
        if B is not None:
            np.matmul(B, chunk.W, out=res)
            res -= Y
            lin[i:i + k] = np.einsum("nld,nld->n", res, res) / (2 * d)
        i += k
    out = {"test_error": float(errs.mean()), "test_error_stderr": float(errs.std(ddof=1) / math.sqrt(n_test))}
    if B is not None:
        out["linear_test_error"] = float(lin.mean())
        out["linear_test_error_stderr"] = float(lin.std(ddof=1) / math.sqrt(n_test))
    if ctrl is not None:
        resid = errs - ctrl
        out["test_error_cv"] = float(resid.mean() + control_mean)
        out["test_error_cv_stderr"] = float(resid.std(ddof=1) / math.sqrt(n_test))
    return out


def test_error_from_overlaps_rho(params: TaskParams, q: float, m: float, theta: float, rho: float,
                                 order: int = 16) -> float:
    """``eps_g(q, m, theta)`` as :func:`attnlib.test_error_from_overlaps`, for a teacher of
    pre-activation variance ``rho`` instead of ``sigma^2``.

    At finite d, for a fixed student ``Q`` and a fresh sample, ``h_l = m s_l + sigma z_l . Q/sqrt(d)`` and
    ``h*_l`` are exactly jointly Gaussian with covariances ``q``, ``theta`` and
    ``rho_hat = sigma^2 ||Q*||^2/d`` (book :eq:`eq-gaussian-fields`), so this is the Gaussian-equivalent test error of
    the trained student up to ``O(1/d)`` terms (the positional part of ``S X`` and the fluctuation of
    ``Z Z^T/d`` around ``I``). ``theta`` is clipped to the Cauchy-Schwarz bound ``sqrt(rho q)``.
    """
    rho = check_positive("rho", rho)
    q = check_finite_scalar("q", q)
    if q < 0:
        raise ValueError(f"q must lie in [0, inf), got {q!r}")
    bound = math.sqrt(rho * q)
    theta = float(np.clip(check_finite_scalar("theta", theta), -bound, bound))
    x, w = Quadrature("gauss-hermite", order).points(4)
    # teacher_student_fields takes the teacher variance from params.rho = sigma^2: pass sigma = sqrt(rho)
    h, h_star = teacher_student_fields(params.with_(sigma=math.sqrt(rho)), q, m, theta, x[:, :2], x[:, 2:])
    return float(w @ output_loss(h, teacher_diagonal(h_star, params), params.sigma))


def n_samples(alpha, d: int) -> int:
    """Number of training samples ``n = round(alpha d)`` (half up); ``ValueError`` naming ``n`` if < 1."""
    alpha = check_alpha(alpha)
    d = check_int("d", d, 1)
    n = int(math.floor(alpha * d + 0.5))
    if n < 1:
        raise ValueError(f"n = round(alpha d) must be >= 1, got n = {n} (alpha = {alpha}, d = {d})")
    return n


# --------------------------------------------------------------------------------------------------------
# result and driver
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ERMResult:
    """One finite-d ERM run and its measurements (book chapters 2-3, :eq:`eq-risk`, :eq:`eq-overlaps`).

    Scalar overlaps ``q``, ``m``, ``theta`` are those of the first column of ``Q`` (the only one for the
    theory's rank ``r = 1``); ``q_cols``, ``m_cols``, ``theta_cols`` hold all ``r`` columns.
    ``test_error_theory`` is ``test_error_from_overlaps(params, q, m, theta)`` for ``r = 1, L = 2`` (else
    None), with ``theta`` clipped to the Cauchy-Schwarz bound ``sqrt(rho q)`` if the finite-d teacher norm
    ``rho_hat`` exceeds ``rho``; ``test_error_theory_rho_hat`` is the same with the teacher variance
    ``rho_hat = sigma^2 ||Q*||^2/d`` of this finite-d teacher (:func:`test_error_from_overlaps_rho`), the
    better prediction of the measured ``test_error`` unless the teacher is normalised. ``test_error_cv``
    (r = 1, L = 2, else None) estimates the same ``eps_g`` as ``test_error`` on the same samples, with the
    control variate of :func:`estimate_test_errors` (smaller standard error ``test_error_cv_stderr``).
    ``grad_norm`` is ``||dR/dQ||_F / sqrt(d)`` at the end. ``Q`` (the minimiser) and ``wall_time`` are excluded from equality and from :meth:`as_dict` (hence from caches).
    """

    sigma: float
    lam: float
    omega: float
    A: tuple
    d: int
    n: int
    alpha: float
    L: int
    rank: int
    seed: int
    start: str
    method: str
    lr: float
    steps: int
    n_test: int
    normalize_teacher: bool
    q: float
    m: float
    theta: float
    q_cols: tuple
    m_cols: tuple
    theta_cols: tuple
    rho_hat: float
    train_loss: float
    test_error: float
    test_error_stderr: float
    test_error_theory: float | None
    test_error_theory_rho_hat: float | None
    test_error_cv: float | None
    test_error_cv_stderr: float | None
    linear_test_error: float
    linear_test_error_stderr: float
    converged: bool
    n_iter: int
    n_evaluations: int
    grad_norm: float
    message: str
    wall_time: float = field(default=math.nan, compare=False)
    Q: np.ndarray | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """Tidy row: every field except ``Q`` and ``wall_time``; tuples become lists (JSON-able)."""
        row = {k: v for k, v in asdict(self).items() if k not in ("Q", "wall_time")}
        for k in ("A", "q_cols", "m_cols", "theta_cols"):
            row[k] = [list(a) if isinstance(a, tuple) else a for a in row[k]]
        return row


def simulate_erm(params: TaskParams, d: int, alpha: float, start="semantic", seed: int = 0,
                 method: str = "gd", lr: float = 0.15, steps: int = 5000, rank: int = 1, L: int | None = None,
                 A=None, n_test: int = DEFAULT_N_TEST, lam_lin: float = 1e-4, init_scale: float = 0.1,
                 grad_tol: float | None = None, lbfgs_maxiter: int = 20000, test_chunk: int = 2048,
                 normalize_teacher: bool = False, keep_Q: bool = True, warn: bool = True) -> ERMResult:
    """Train the attention student by ERM at finite ``d`` and measure it (book chapter 7; :eq:`eq-risk`,
    :eq:`eq-overlaps`, :eq:`eq-test-error`).

    Parameters
    ----------
    params : TaskParams
        ``sigma``, ``lambda``, ``omega`` and the 2x2 ``A``.
    d : int
        Dimension, ``>= 1``.
    alpha : float
        Sample complexity; ``n = round(alpha d)`` training samples (must be ``>= 1``).
    start : {"semantic", "positional", "random"} or ndarray
        Starting point (see ``initial_Q``).
    seed : int
        Seed of the teacher, training set, test set and random start (independent streams, see
        :func:`attnlib.seed_streams`); equal arguments give bit-identical results.
    method : {"gd", "lbfgs"}
        Full-batch gradient descent with ``lr`` and ``steps`` (paper: 0.15, 5000), or L-BFGS-B to tight
        tolerances (``lr``, ``steps`` unused).
    rank : int
        Columns ``r`` of ``Q`` (theory: 1).
    L : int, optional
        Sequence length; default the size of ``A`` if given, else of ``params.A``.
    A : array_like, optional
        Row-stochastic ``L x L`` matrix overriding ``params.A``.
    n_test : int
        Fresh test samples for ``eps_g`` and the linear baseline (default :data:`DEFAULT_N_TEST`).
    lam_lin : float
        Ridge of the linear baseline (default 1e-4, as in the book's experiments).
    init_scale : float
        Standard deviation of random starting entries.
    grad_tol : float, optional
        Convergence tolerance on ``||dR/dQ||_F / sqrt(d)`` (default 1e-5 for GD, 1e-7 for L-BFGS).
    normalize_teacher : bool
        Rescale ``Q*`` to ``||Q*||^2 = d`` (``rho_hat = rho``), see ``attnlib.finite_d.data.make_teacher``.
    keep_Q : bool
        Store the final ``Q`` in the result.
    warn : bool
        Issue :class:`~attnlib.exceptions.ConvergenceWarning` on non-convergence.

    Returns
    -------
    ERMResult

    Raises
    ------
    ValueError
        Naming the offending parameter: ``d < 1``, ``n < 1``, ``L < 2``, ``rank < 1``, ``lr <= 0``,
        ``steps < 0``, wrong-shape or non-finite ``Q``, bad ``A``, unknown ``start`` or ``method``.
    """
    t0 = time.perf_counter()
    if not isinstance(params, TaskParams):
        raise ValueError(f"params must be a TaskParams, got {type(params).__name__}")
    d = check_int("d", d, 1)
    alpha = check_alpha(alpha)
    n = n_samples(alpha, d)
    L = _resolve_L(params, L, A)
    rank = check_int("rank", rank, 1)
    seed = check_int("seed", seed, 0)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    lr = check_positive("lr (learning rate)", lr)
    steps = check_int("steps", steps, 0)
    n_test = check_int("n_test", n_test, 2)
    if grad_tol is None:
        grad_tol = DEFAULT_GRAD_TOL[method]
    if isinstance(start, str) and start not in STARTS:
        raise ValueError(f"start must be one of {STARTS} or an array of shape ({d}, {rank}), got {start!r}")

    streams = seed_streams(seed)
    teacher = make_teacher(params, d, streams["teacher"], L=L, A=A, normalize_teacher=normalize_teacher)
    Q0 = initial_Q(start, teacher, rank=rank, rng=streams["init"], init_scale=init_scale)
    train = draw_samples(teacher, n, streams["train"])
    objective = ERMObjective(train, params.lam, rank)
    B = fit_linear_baseline(train, lam_lin)
    del train
    if method == "gd":
        fit = gradient_descent(objective, Q0, lr=lr, steps=steps, grad_tol=grad_tol, warn=warn)
    else:
        fit = minimize_lbfgs(objective, Q0, grad_tol=grad_tol, maxiter=lbfgs_maxiter, warn=warn)
    del objective
    Q = fit.Q
    ov = overlaps(Q, teacher)
    q, m, theta = float(ov["q"][0]), float(ov["m"][0]), float(ov["theta"][0])
    theory = theory_rho_hat = None
    if rank == 1 and L == 2 and np.isfinite(q):
        p2 = params if A is None else params.with_(A=tuple(map(tuple, teacher.A.tolist())))
        bound = math.sqrt(p2.rho * q)
        theory = test_error_from_overlaps(p2, q, m, float(np.clip(theta, -bound, bound)))
        theory_rho_hat = test_error_from_overlaps_rho(p2, q, m, theta, teacher.rho_hat)
    errors = {"test_error_cv": None, "test_error_cv_stderr": None}
    errors.update(estimate_test_errors(teacher, Q, n_test, streams["test"], B=B, chunk_size=test_chunk,
                                       control_mean=theory_rho_hat))
    return ERMResult(
        sigma=params.sigma, lam=params.lam, omega=params.omega, A=tuple(map(tuple, teacher.A.tolist())),
        d=d, n=n, alpha=alpha, L=L, rank=rank, seed=seed,
        start=start if isinstance(start, str) else "array", method=method, lr=lr, steps=steps, n_test=n_test,
        q=q, m=m, theta=theta, q_cols=tuple(map(float, ov["q"])), m_cols=tuple(map(float, ov["m"])),
        theta_cols=tuple(map(float, ov["theta"])), rho_hat=teacher.rho_hat,
        train_loss=fit.value / d, **errors, test_error_theory=theory,
        test_error_theory_rho_hat=theory_rho_hat, normalize_teacher=bool(normalize_teacher), converged=fit.converged,
        n_iter=fit.n_iter, n_evaluations=fit.n_evaluations, grad_norm=fit.grad_norm, message=fit.message,
        wall_time=time.perf_counter() - t0, Q=Q if keep_Q else None)

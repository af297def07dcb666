"""The proximal (output-channel) step of the state evolution, solved for all quadrature nodes at once.

For each node, with centre ``c`` in R^2, width ``V > 0`` and teacher diagonal ``t = (T_11, T_22)``, the
proximal point is (book :eq:`eq-prox`)

    h_hat = argmin_h  F(h),   F(h) = ||h - c||^2 / (2V) + (sigma^2/2) ||S(h) - T||_F^2,

and ``M = F(h_hat)`` is the Moreau envelope used by the training loss. ``F`` is **not convex**: the loss term
is bounded (``0 <= loss <= 2 sigma^2``) but has several valleys, so ``F`` can have two or more local minima.

How local minima are handled
----------------------------
Every minimiser satisfies ``||h_hat - c||^2 <= 2 V loss(c)`` (compare ``F(h_hat) <= F(c)``), so all
candidates live in a disc around ``c``. Two modes are offered:

``mode="global"`` (default, the literal replica-symmetric prescription)
    Damped Newton descent is started, for every node at once, from ``c``, from ``0`` and from ``n_ring``
    points on two circles inside that disc; the candidate with the lowest ``F`` is kept. No state is carried
    between calls, so the proximal point is a function of the node (symmetric nodes stay symmetric).
``mode="from-zero"`` (the authors' numerics)
    One local descent from ``h = 0``.

Two descents whose results lie within :data:`SAME_MINIMUM` of each other (in each coordinate) have found the same
minimum. The compiled backend also stops a start as soon as its iterate comes that close to a minimum an earlier
start found (its last, quadratically convergent Newton steps would only refine that minimum again): 86 % of the
nodes of a typical rule have a single minimum, which the six starts of the default search then reach only once.

The descent is Newton's method with an eigenvalue-shifted Hessian (so each step is a descent direction) and
a backtracking line search (Armijo). All derivatives are analytic
(:func:`attnlib.theory.model.attention.output_loss_derivatives`). Two interchangeable backends run it over all nodes at
once, with no Python loop over nodes:

``backend="numba"`` (default when numba is installed)
    compiled kernels (:mod:`attnlib.theory.model._prox_kernels`), one node per iteration of a compiled loop;
``backend="numpy"``
    vectorised array code, converged nodes dropped from the working set (the reference implementation).

They give the same proximal points to round-off.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import output_loss, output_loss_derivatives

try:  # the compiled backend is optional
    from . import _prox_kernels
except ImportError:  # pragma: no cover - exercised only without numba
    _prox_kernels = None

__all__ = ["ProxResult", "prox_objective", "minimise_locally", "solve_prox", "PROX_MODES", "PROX_BACKENDS",
           "resolve_backend", "SAME_MINIMUM"]

PROX_MODES = ("global", "from-zero")
PROX_BACKENDS = ("auto", "numba", "numpy")
_STEPS = 0.5 ** np.arange(12)  # backtracking step sizes tried at once
#: Two local minima of one node closer than this in each coordinate are the same minimum (module docstring). Measured
#: on six rules of 2^16 points at both branches (omega 0 to 0.35, alpha 0.6 to 2): stopping starts there picks the
#: same minimum as descending each to the end at every node, and so it does up to 1e-2; at 3e-2 one node in 2^15
#: takes a different minimum (2.8e-2 away, 2.5e-7 higher).
SAME_MINIMUM = 1e-3


@dataclass(frozen=True)
class ProxResult:
    """Proximal points of a batch of nodes.

    Attributes
    ----------
    h : ndarray (N, 2)
        Proximal points ``h_hat``.
    value : ndarray (N,)
        ``M = F(h_hat)``, the minimal value (Moreau envelope).
    grad_norm : ndarray (N,)
        ``||grad F(h_hat)||`` (small at a stationary point).
    n_iter : int
        Largest number of Newton iterations used by any descent.
    gap : ndarray (N,), optional
        Global search only: how much higher the best *other* local minimum found lies (``inf`` if all
        starts reached the same point). A small gap marks a node near a jump of the proximal point.
    h_alt : ndarray (N, 2), optional
        Global search only: that runner-up local minimum (equal to ``h`` where there is none).
    """

    h: np.ndarray
    value: np.ndarray
    grad_norm: np.ndarray
    n_iter: int
    gap: np.ndarray | None = None
    h_alt: np.ndarray | None = None


def prox_objective(h: np.ndarray, c: np.ndarray, t_diag: np.ndarray, V: float, sigma: float) -> np.ndarray:
    """``F(h) = ||h - c||^2/(2V) + (sigma^2/2)||S(h) - T||_F^2`` (broadcasts over leading axes)."""
    d = h - c
    return np.sum(d * d, axis=-1) / (2.0 * V) + output_loss(h, t_diag, sigma)


def resolve_backend(backend: str) -> str:
    """The backend that ``backend`` selects: ``"auto"`` is ``"numba"`` when numba is importable, else
    ``"numpy"``; asking for ``"numba"`` without numba raises ``ImportError``."""
    if backend not in PROX_BACKENDS:
        raise ValueError(f"backend must be one of {PROX_BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "numba" if _prox_kernels is not None else "numpy"
    if backend == "numba" and _prox_kernels is None:
        raise ImportError("backend='numba' needs the numba package (pip install numba)")
    return backend


def minimise_locally(h0: np.ndarray, c: np.ndarray, t_diag: np.ndarray, V: float, sigma: float,
                     tol: float = 1e-10, max_iter: int = 60, backend: str = "auto") -> ProxResult:
    """Local minimisation of ``F`` from ``h0`` for every node (shifted-Newton descent, all nodes at once).

    Parameters
    ----------
    h0, c, t_diag : ndarray (N, 2)
        Starting points, centres and teacher diagonals.
    V : float
        Width of the quadratic term, ``> 0``.
    sigma : float
        Token-content scale (the loss is ``sigma^2 sum_l (S_ll - T_ll)^2``).
    tol : float
        Stop a node when ``||grad F|| <= tol``.
    max_iter : int
        Newton iterations at most.
    backend : {"auto", "numba", "numpy"}
        Compiled kernel or vectorised numpy (module docstring).
    """
    if resolve_backend(backend) == "numba":
        h, value, grad_norm, n_iter = _prox_kernels.local_prox(
            np.ascontiguousarray(h0, dtype=float), np.ascontiguousarray(c, dtype=float),
            np.ascontiguousarray(t_diag, dtype=float), float(V), float(sigma), float(tol), int(max_iter))
        return ProxResult(h=h, value=value, grad_norm=grad_norm, n_iter=int(n_iter))
    h = np.array(h0, dtype=float, copy=True)
    n = h.shape[0]
    grad_norm = np.full(n, np.inf)
    active = np.arange(n)
    inv_v = 1.0 / V
    it = 0
    for it in range(1, max_iter + 1):
        ha, ca, ta = h[active], c[active], t_diag[active]
        val, g, (H11, H12, H22) = output_loss_derivatives(ha, ta, sigma)
        diff = ha - ca
        val = val + 0.5 * inv_v * np.sum(diff * diff, axis=-1)
        g = g + inv_v * diff
        H11 = H11 + inv_v
        H22 = H22 + inv_v
        gn = np.hypot(g[:, 0], g[:, 1])
        grad_norm[active] = gn
        keep = gn > tol
        if not np.any(keep):
            active = active[:0]
            break
        if not np.all(keep):
            active, ha, ca, ta, val, g = active[keep], ha[keep], ca[keep], ta[keep], val[keep], g[keep]
            H11, H12, H22 = H11[keep], H12[keep], H22[keep]
        # shift the Hessian so that its smallest eigenvalue is at least inv_v / 4 (descent direction)
        half_tr = 0.5 * (H11 + H22)
        rad = np.hypot(0.5 * (H11 - H22), H12)
        shift = np.maximum(0.0, 0.25 * inv_v - (half_tr - rad))
        a, b, d = H11 + shift, H12, H22 + shift
        det = a * d - b * b
        p = np.stack([-(d * g[:, 0] - b * g[:, 1]) / det, -(a * g[:, 1] - b * g[:, 0]) / det], axis=-1)
        slope = np.sum(g * p, axis=-1)  # < 0
        # Armijo, with a round-off allowance so that the last quadratically convergent steps are accepted;
        # the full step is tried first and only the nodes where it fails backtrack (all sizes at once)
        slack = 8.0 * np.finfo(float).eps * np.maximum(np.abs(val), 1.0)
        bound = val + slack
        step = np.ones_like(val)
        fail = prox_objective(ha + p, ca, ta, V, sigma) > bound + 1e-4 * slope
        if np.any(fail):
            trial = ha[fail][None] + _STEPS[1:, None, None] * p[fail][None]
            f_trial = prox_objective(trial, ca[fail][None], ta[fail][None], V, sigma)
            ok = f_trial <= bound[fail][None] + 1e-4 * _STEPS[1:, None] * slope[fail][None]
            any_ok = ok.any(axis=0)
            step[fail] = np.where(any_ok, _STEPS[1:][ok.argmax(axis=0)], 0.0)
        h[active] = ha + step[:, None] * p
    else:
        # recompute the gradient norm of the nodes still active after the last step
        if active.size:
            _, g, _ = output_loss_derivatives(h[active], t_diag[active], sigma)
            g = g + inv_v * (h[active] - c[active])
            grad_norm[active] = np.hypot(g[:, 0], g[:, 1])
    value = prox_objective(h, c, t_diag, V, sigma)
    return ProxResult(h=h, value=value, grad_norm=grad_norm, n_iter=it)


def _ring_starts(c: np.ndarray, t_diag: np.ndarray, V: float, sigma: float, n_ring: int) -> list[np.ndarray]:
    """Starts on two circles (radii 0.35 R and 0.75 R, ``R = sqrt(2 V loss(c))`` the radius of the disc that
    holds every minimiser) around ``c``. The set of offsets is closed under ``h -> -h`` and under swapping
    the two coordinates when ``n_ring`` is a multiple of 4, so the search is equivariant under the model's
    symmetries."""
    radius = np.sqrt(2.0 * V * output_loss(c, t_diag, sigma))
    k = np.arange(n_ring)
    frac = np.where(k % 2 == 0, 0.35, 0.75)
    angles = 2.0 * np.pi * (k + 0.5) / n_ring
    offsets = frac[:, None] * np.stack([np.cos(angles), np.sin(angles)], axis=-1)  # (n_ring, 2)
    return [c + radius[:, None] * offsets[j] for j in range(n_ring)]


def solve_prox(c: np.ndarray, t_diag: np.ndarray, V: float, sigma: float, mode: str = "global",
               n_ring: int = 12, tol: float = 1e-10, max_iter: int = 60, backend: str = "auto") -> ProxResult:
    """Proximal points of all nodes (see the module docstring for the treatment of local minima).

    The result is a deterministic function of ``(c, t_diag, V)``: no state is carried
    between calls, so nodes related by a symmetry get related proximal points.

    Parameters
    ----------
    c, t_diag : ndarray (N, 2)
        Centres ``c`` and teacher diagonals ``(T_11, T_22)``.
    V : float
        Width ``V > 0``.
    sigma : float
        Token-content scale.
    mode : {"global", "from-zero"}
        Multi-start global minimisation, or one local descent from ``h = 0``.
    n_ring : int
        Starts on two circles around ``c`` in ``"global"`` mode (besides ``c`` and ``0``).
    backend : {"auto", "numba", "numpy"}
        Compiled kernel or vectorised numpy (module docstring); same results to round-off.

    Returns
    -------
    ProxResult
        In ``"global"`` mode ``gap`` tells how far above the kept minimum the best other one lies.
    """
    if mode not in PROX_MODES:
        raise ValueError(f"mode must be one of {PROX_MODES}, got {mode!r}")
    if not (np.isfinite(V) and V > 0):
        raise ValueError(f"V must lie in (0, inf), got {V!r}")
    c = np.asarray(c, dtype=float)
    t_diag = np.asarray(t_diag, dtype=float)
    n = c.shape[0]
    backend = resolve_backend(backend)
    if mode == "from-zero":
        return minimise_locally(np.zeros_like(c), c, t_diag, V, sigma, tol, max_iter, backend)
    if backend == "numba":
        h, value, grad_norm, gap, h_alt, n_iter = _prox_kernels.global_prox(
            np.ascontiguousarray(c), np.ascontiguousarray(t_diag), float(V), float(sigma), int(n_ring),
            float(tol), int(max_iter), SAME_MINIMUM)
        return ProxResult(h=h, value=value, grad_norm=grad_norm, n_iter=int(n_iter), gap=gap, h_alt=h_alt)
    starts = [c, np.zeros_like(c)]
    if n_ring:
        starts.extend(_ring_starts(c, t_diag, V, sigma, n_ring))
    k = len(starts)
    res = minimise_locally(np.concatenate(starts), np.tile(c, (k, 1)), np.tile(t_diag, (k, 1)), V, sigma,
                           tol, max_iter, backend)
    values = res.value.reshape(k, n)
    best = np.argmin(values, axis=0)
    idx = best * n + np.arange(n)
    h_all = res.h.reshape(k, n, 2)
    other = np.max(np.abs(h_all - res.h[idx][None]), axis=-1) > SAME_MINIMUM  # a different local minimum
    excess = np.where(other, values - res.value[idx][None], np.inf)
    alt = np.argmin(excess, axis=0)  # first start reaching the runner-up (the kernel keeps the first too)
    gap = excess[alt, np.arange(n)]
    h_alt = np.where(np.isfinite(gap)[:, None], h_all[alt, np.arange(n)], res.h[idx])
    return ProxResult(h=res.h[idx], value=res.value[idx], grad_norm=res.grad_norm[idx], n_iter=res.n_iter,
                      gap=gap, h_alt=h_alt)

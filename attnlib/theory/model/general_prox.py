"""The proximal problem of the state evolution for any sequence length ``L`` and student rank ``r``.

At every quadrature node the general state evolution (book :eq:`eq-general-prox`) needs the global minimum over
``h`` in ``R^{L x r}`` of

    F(h) = (1/2) sum_l (h_l - c_l) V^{-1} (h_l - c_l)^T + (sigma^2/2) ||softmax_row(h h^T) - T||_F^2,

a non-convex problem in ``L r`` variables. It is solved for all nodes at once (arrays of shape ``(B, L, r)``):
saddle-free Newton steps (the Hessian's eigenvalues taken in absolute value and floored at a quarter of the
smallest eigenvalue of ``V^{-1}``) with Armijo backtracking, from a set of starts that is closed under
``h -> -h`` and under permutations of the tokens and of the columns, so that nodes related by a symmetry of the
model keep symmetric answers (:func:`start_directions`). Every minimiser lies in the ellipsoid
``||h - c||^2_{V^{-1}} <= 2 l(c)`` (``F(h_hat) <= F(c) = l(c)``), which sets the starts' radius.

Between full searches a nearby state needs only a local descent from the last minimiser (and from the runner-up
where the two were within ``margin`` of each other): :func:`prox_warm`.

The descents run compiled, one node at a time (``attnlib.theory.model._general_prox_kernels``, numba; blocks of nodes
on numba's threads when called from a process's main thread with more than one thread to use), or as the
vectorised numpy code of :func:`newton_descent` (the reference, and the fallback without numba); the two agree to
round-off, and the compiled code is three to five times faster.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import softmax_rows
from .proximal import resolve_backend  # numba is importable for both kernel modules or for neither

try:  # the compiled backend is optional
    from . import _general_prox_kernels
except ImportError:  # pragma: no cover - exercised only without numba
    _general_prox_kernels = None

__all__ = ["GeneralProx", "sqrtm_spd", "loss_and_derivatives", "prox_value", "newton_descent", "resolve_backend",
           "start_directions", "prox_global", "prox_from_centre", "prox_warm"]

#: Radii of the starts around ``c``, as fractions of the bound ``sqrt(2 l(c))`` on the distance to a minimiser.
#: One radius and the signed axes found the same global minimum as two radii with the diagonals (0.35, 0.75 and
#: the ``2^{L r}`` diagonals) at every one of 8192 nodes of six states (``L = 2, 3``; ``r = 1, 2``; up to 16 % of
#: the nodes with two local minima), at a third to a fifth of the cost.
START_RADII = (0.75,)
#: Two local minima closer than this (largest entry) are the same minimum.
SAME_MINIMUM = 1e-6
#: The compiled search stops a start as soon as its iterate lies within this (every entry) of a minimum an earlier
#: start at that node found, and counts it as that minimum (the numpy reference descends every start to the end).
MERGE = 1e-3


def _sw(x):
    return np.swapaxes(x, -1, -2)


def loss_and_derivatives(h: np.ndarray, T: np.ndarray, sigma: float, hess: bool = True):
    """``l(h) = (sigma^2/2) ||softmax_row(h h^T) - T||_F^2`` for ``h`` of shape ``(B, L, r)``, ``T`` of shape
    ``(B, L, L)``: its value ``(B,)``, gradient ``(B, L, r)`` and (with ``hess``) Hessian ``(B, L r, L r)`` in the
    flattening ``(l, i) -> l r + i``.

    With ``R = sigma^2 (S - T)`` and ``Gam = S o (R - rowsum(S o R))`` (the derivative in the scores
    ``h h^T``), the gradient is ``(Gam + Gam^T) h``; the Hessian adds the curvature of ``h h^T`` to the
    row-softmax's second derivatives.
    """
    s2 = sigma * sigma
    S = softmax_rows(h @ _sw(h))
    diff = S - T
    Rt = s2 * diff
    val = 0.5 * np.sum(Rt * diff, axis=(-1, -2))
    Gam = S * (Rt - np.sum(S * Rt, axis=-1, keepdims=True))
    Gs = Gam + _sw(Gam)
    grad = Gs @ h
    if not hess:
        return val, grad, None
    B, L, r = h.shape
    eye_r, eye = np.eye(r), np.eye(L)
    H1 = Gs[:, :, None, :, None] * eye_r[None, None, :, None, :]
    J = S[..., :, None] * eye - S[..., :, None] * S[..., None, :]  # d softmax_row / d scores, per row
    w = Rt * S
    sw = w.sum(axis=-1)[..., None, None]
    Hrow = (s2 * (J @ J) + w[..., :, None] * eye - w[..., :, None] * S[..., None, :]
            - S[..., :, None] * w[..., None, :] + 2.0 * sw * S[..., :, None] * S[..., None, :]
            - sw * S[..., :, None] * eye)
    # d(h h^T)_{lk} / d h_{m i} = delta_{lm} h_{k i} + delta_{km} h_{l i}
    E = eye[None, :, None, :, None] * h[:, None, :, None, :] + eye[None, None, :, :, None] * h[:, :, None, None, :]
    W = np.einsum("blkq,blkmi->blqmi", Hrow, E)
    H2 = np.einsum("blqmi,blqnj->bminj", W, E)
    return val, grad, (H1 + H2).reshape(B, L * r, L * r)


def prox_value(h, c, T, Vinv, sigma) -> np.ndarray:
    """``F(h)`` for arrays of nodes."""
    d = h - c
    return 0.5 * np.einsum("bli,ij,blj->b", d, Vinv, d) + loss_and_derivatives(h, T, sigma, hess=False)[0]


#: Below this many nodes the compiled descent runs in one thread (starting numba's threads costs more).
THREADS_FROM = 2048


def _use_threads(n_nodes: int) -> bool:
    """Whether the compiled descent of ``n_nodes`` nodes runs on numba's threads: with more than one thread
    available (``NUMBA_NUM_THREADS``, which joblib's process workers set to their share of the cores), at least
    :data:`THREADS_FROM` nodes, and only from the main thread (a thread pool's workers, the threading and Dask
    backends of :func:`attnlib.parallel.run_jobs`, run the one-thread kernel: numba's default thread pool does not
    take launches from several threads at once)."""
    import threading

    import numba

    return (n_nodes >= THREADS_FROM and numba.get_num_threads() > 1
            and threading.current_thread() is threading.main_thread())


def newton_descent(h0, c, T, Vinv, sigma, tol: float = 1e-10, max_iter: int = 100, backend: str = "auto"):
    """Local minimisation of ``F`` from ``h0`` at every node: saddle-free Newton with Armijo backtracking.

    Nodes whose gradient norm is below ``tol`` are dropped from the iteration. ``backend``: ``"numba"`` (the
    compiled per-node kernel of ``attnlib.theory.model._general_prox_kernels``, the default when numba is installed;
    on numba's threads where :func:`_use_threads` allows, with the same per-node results) or ``"numpy"`` (this
    vectorised code, the reference); they agree to round-off. Returns ``(h, F(h),
    |grad F|, iterations)``.
    """
    mu0 = 0.25 * float(np.linalg.eigvalsh(Vinv).min())
    if resolve_backend(backend) == "numba":
        f = np.ascontiguousarray
        kernel = (_general_prox_kernels.newton_descent_parallel if _use_threads(len(h0))
                  else _general_prox_kernels.newton_descent)
        h, val, gn, it = kernel(
            f(h0, dtype=float), f(c, dtype=float), f(T, dtype=float), f(Vinv, dtype=float), float(sigma) ** 2, mu0,
            float(tol), int(max_iter))
        return h, val, gn, int(it)
    h = np.array(h0, dtype=float, copy=True)
    B, L, r = h.shape
    n = L * r
    Kq = np.kron(np.eye(L), Vinv)
    gnorm = np.full(B, np.inf)
    active = np.arange(B)
    it = 0
    for it in range(1, max_iter + 1):
        ha, ca, Ta = h[active], c[active], T[active]
        lv, lg, lH = loss_and_derivatives(ha, Ta, sigma)
        d = ha - ca
        val = lv + 0.5 * np.einsum("bli,ij,blj->b", d, Vinv, d)
        g = (lg + d @ Vinv).reshape(-1, n)
        gn = np.linalg.norm(g, axis=1)
        gnorm[active] = gn
        keep = gn > tol
        if not keep.any():
            break
        active, ha, ca, Ta, val, g, lH = active[keep], ha[keep], ca[keep], Ta[keep], val[keep], g[keep], lH[keep]
        ev, U = np.linalg.eigh(lH + Kq)
        ev = np.maximum(np.abs(ev), mu0)
        p = -np.einsum("bij,bj->bi", U, np.einsum("bji,bj->bi", U, g) / ev)
        slope = np.sum(g * p, axis=1)
        bound = val + 8.0 * np.finfo(float).eps * np.maximum(np.abs(val), 1.0)
        step = np.zeros(len(active))
        pending = np.arange(len(active))
        t = 1.0
        for _ in range(40):
            trial = ha[pending] + t * p[pending].reshape(-1, L, r)
            ok = prox_value(trial, ca[pending], Ta[pending], Vinv, sigma) <= bound[pending] + 1e-4 * t * slope[pending]
            step[pending[ok]] = t
            pending = pending[~ok]
            if pending.size == 0:
                break
            t *= 0.5
        h[active] = ha + step[:, None, None] * p.reshape(-1, L, r)
    return h, prox_value(h, c, T, Vinv, sigma), gnorm, it


def start_directions(n: int, diagonals: bool = False) -> np.ndarray:
    """Unit directions in ``R^n`` for the starts: the ``2 n`` signed axes, and with ``diagonals`` the ``2^n``
    diagonals too (when ``n <= 4``); the set is closed under ``u -> -u`` and under permutations of the
    coordinates."""
    dirs = [s * e for e in np.eye(n) for s in (1.0, -1.0)]
    if diagonals and n <= 4:
        grid = np.array(np.meshgrid(*([[-1.0, 1.0]] * n), indexing="ij")).reshape(n, -1).T
        dirs += list(grid / np.sqrt(n))
    return np.array(dirs)


def sqrtm_spd(a: np.ndarray) -> np.ndarray:
    """The symmetric square root of a symmetric positive-definite matrix; ``FloatingPointError`` if it is not
    positive definite."""
    ev, U = np.linalg.eigh(a)
    if ev.min() <= 0:
        raise FloatingPointError(f"matrix not positive definite (eigenvalues {ev})")
    return (U * np.sqrt(ev)) @ U.T


@dataclass(frozen=True)
class GeneralProx:
    """Proximal points of a batch of nodes.

    Attributes
    ----------
    h : ndarray, shape (B, L, r)
        The global minimiser found.
    value : ndarray, shape (B,)
        ``F(h)``.
    h_alt : ndarray, shape (B, L, r)
        The runner-up local minimum (``h`` itself where only one was found).
    gap : ndarray, shape (B,)
        ``F(h_alt) - F(h)`` (``inf`` where only one minimum was found).
    """

    h: np.ndarray
    value: np.ndarray
    h_alt: np.ndarray
    gap: np.ndarray

    @property
    def multi_fraction(self) -> float:
        """Fraction of nodes with more than one local minimum found."""
        return float(np.mean(np.isfinite(self.gap)))


def prox_global(c, T, V, sigma, radii=START_RADII, diagonals: bool = False, tol: float = 1e-10,
                max_iter: int = 100, backend: str = "auto") -> GeneralProx:
    """The global proximal step at every node (module docstring): local descents from ``c``, from 0 and from
    ``c + rad sqrt(2 l(c)) u V^{1/2}`` for every direction ``u`` of :func:`start_directions` (``diagonals``)
    and ``rad`` in ``radii``; the lowest minimum is kept and the runner-up recorded. The compiled backend stops a
    start that comes within :data:`MERGE` of a minimum found by an earlier start at the node (same lowest minimum;
    a runner-up closer than that to it is not reported)."""
    B, L, r = c.shape
    Vinv = np.linalg.inv(V)
    Vh = sqrtm_spd(V)
    R = np.sqrt(2.0 * loss_and_derivatives(c, T, sigma, hess=False)[0])
    starts = [c, np.zeros_like(c)]
    for u in start_directions(L * r, diagonals):
        off = u.reshape(L, r) @ Vh
        for rad in radii:
            starts.append(c + (rad * R)[:, None, None] * off[None])
    K = len(starts)
    if resolve_backend(backend) == "numba":
        f = np.ascontiguousarray
        kernel = (_general_prox_kernels.global_search_parallel if _use_threads(K * B)
                  else _general_prox_kernels.global_search)
        h, val, _ = kernel(f(np.stack(starts), dtype=float), f(c, dtype=float), f(T, dtype=float),
                           f(Vinv, dtype=float), float(sigma) ** 2, 0.25 * float(np.linalg.eigvalsh(Vinv).min()),
                           float(tol), int(max_iter), MERGE)
        return _best_two(h, val)
    h, val, _, _ = newton_descent(np.concatenate(starts), np.tile(c, (K, 1, 1)), np.tile(T, (K, 1, 1)), Vinv,
                                  sigma, tol, max_iter, backend)
    h, val = h.reshape(K, B, L, r), val.reshape(K, B)
    return _best_two(h, val)


def _best_two(h, val) -> GeneralProx:
    """The lowest of the candidates ``h`` (K, B, L, r) with values ``val`` (K, B), and the lowest candidate that
    is a different minimum."""
    K, B = val.shape
    idx = np.arange(B)
    best = np.argmin(val, axis=0)
    hb = h[best, idx]
    other = np.max(np.abs(h - hb[None]), axis=(-1, -2)) > SAME_MINIMUM
    alt_val = np.where(other, val, np.inf)
    alt = np.argmin(alt_val, axis=0)
    gap = alt_val[alt, idx] - val[best, idx]
    h_alt = np.where(np.isfinite(gap)[:, None, None], h[alt, idx], hb)
    return GeneralProx(h=hb, value=val[best, idx], h_alt=h_alt, gap=gap)


def prox_from_centre(c, T, V, sigma, tol: float = 1e-10, max_iter: int = 100, backend: str = "auto") -> GeneralProx:
    """One local descent from ``c`` at every node (no runner-up): the cheap first step of an iteration, which
    full searches then correct."""
    h, val, _, _ = newton_descent(c, c, T, np.linalg.inv(V), sigma, tol, max_iter, backend)
    return GeneralProx(h=h, value=val, h_alt=h.copy(), gap=np.full(len(val), np.inf))


def prox_warm(c, T, V, sigma, last: GeneralProx, margin: float, tol: float = 1e-10,
              max_iter: int = 100, backend: str = "auto") -> GeneralProx:
    """The proximal step at a state near the one of ``last``: a local descent from ``last.h`` at every node,
    and from ``last.h_alt`` where the two minima were within ``margin`` (the nodes where the global minimum may
    switch). The runner-up is kept only at those nodes (elsewhere ``gap`` is ``inf``)."""
    Vinv = np.linalg.inv(V)
    h, val, _, _ = newton_descent(last.h, c, T, Vinv, sigma, tol, max_iter, backend)
    near = np.flatnonzero(last.gap < margin)
    gap = np.full(len(val), np.inf)
    h_alt = h.copy()
    if near.size:
        ha, va, _, _ = newton_descent(last.h_alt[near], c[near], T[near], Vinv, sigma, tol, max_iter, backend)
        pair = _best_two(np.stack([h[near], ha]), np.stack([val[near], va]))
        h[near], val[near], h_alt[near], gap[near] = pair.h, pair.value, pair.h_alt, pair.gap
    return GeneralProx(h=h, value=val, h_alt=h_alt, gap=gap)

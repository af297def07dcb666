"""Compiled (numba) kernel of the general proximal descent: the algorithm of
:func:`attnlib.theory.model.general_prox.newton_descent` written per node and compiled; the loop over nodes runs in
one thread (:func:`newton_descent`) or, split into blocks of nodes, on numba's threads
(:func:`newton_descent_parallel`; the caller picks, :func:`attnlib.theory.model.general_prox.newton_descent`).

Per node and step the numpy code builds the Hessian by two einsums over arrays of ``L^3 r`` entries per node and
runs an Armijo search over all active nodes; here one node's ``L r``-dimensional problem is finished in a few
small loops. The results agree with the numpy code to round-off (``tests/test_general_state_evolution.py``); the
numpy code stays as the reference and as the fallback when numba is not installed.

Algorithm: saddle-free Newton on ``F(h) = (1/2) sum_l (h_l - c_l) V^{-1} (h_l - c_l)^T + l(h)`` with
``l(h) = (sigma^2/2) ||softmax_row(h h^T) - T||_F^2``: the Hessian's eigenvalues taken in absolute value and
floored at ``mu0`` (where they all exceed ``mu0``, the common case near a minimum, that is the plain Newton
step, solved by Cholesky instead of an eigendecomposition), Armijo backtracking over the step sizes
``1, 1/2, ..., 1/2^39`` with a round-off allowance of ``8 eps max(|F|, 1)``; a node stops when ``||grad F|| <= tol``, when no step size is accepted, or after
``max_iter`` steps.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

_ROUND = 8.0 * np.finfo(float).eps
_N_STEPS = 40  # backtracking step sizes 1, 1/2, ..., 1/2^39 (as in general_prox.newton_descent)


@njit(cache=True)
def _softmax_scores(h, S):
    """``S = softmax_row(h h^T)`` (max-shifted)."""
    L, r = h.shape
    for l in range(L):
        zmax = -np.inf
        for k in range(L):
            z = 0.0
            for i in range(r):
                z += h[l, i] * h[k, i]
            S[l, k] = z
            if z > zmax:
                zmax = z
        tot = 0.0
        for k in range(L):
            e = math.exp(S[l, k] - zmax)
            S[l, k] = e
            tot += e
        for k in range(L):
            S[l, k] /= tot


@njit(cache=True)
def _quadratic(h, c, Vinv):
    """``(1/2) sum_l (h_l - c_l) V^{-1} (h_l - c_l)^T`` of one node."""
    L, r = h.shape
    val = 0.0
    for l in range(L):
        for i in range(r):
            di = h[l, i] - c[l, i]
            for j in range(r):
                val += 0.5 * di * Vinv[i, j] * (h[l, j] - c[l, j])
    return val


@njit(cache=True)
def _objective(h, c, T, Vinv, s2, S):
    """``F(h)`` of one node (``S`` is scratch)."""
    L, r = h.shape
    _softmax_scores(h, S)
    val = 0.0
    for l in range(L):
        for k in range(L):
            dd = S[l, k] - T[l, k]
            val += dd * dd
    val *= 0.5 * s2
    val += _quadratic(h, c, Vinv)
    return val


@njit(cache=True)
def _derivatives(h, c, T, Vinv, s2, S, g, H, E, R, Gam, Hrow, HE):
    """``F(h)``, its gradient ``g`` (flattened ``l r + i``) and Hessian ``H`` of one node (``S``, ``E``
    and the rest scratch); the formulas of :func:`attnlib.theory.model.general_prox.loss_and_derivatives` plus the quadratic
    term."""
    L, r = h.shape
    n = L * r
    _softmax_scores(h, S)
    for l in range(L):
        for k in range(L):
            R[l, k] = s2 * (S[l, k] - T[l, k])
    val = 0.0
    for l in range(L):
        for k in range(L):
            val += 0.5 * R[l, k] * (S[l, k] - T[l, k])
    for l in range(L):
        sr = 0.0
        for q in range(L):
            sr += S[l, q] * R[l, q]
        for k in range(L):
            Gam[l, k] = S[l, k] * (R[l, k] - sr)
    for m in range(L):
        for i in range(r):
            acc = 0.0
            for k in range(L):
                acc += (Gam[m, k] + Gam[k, m]) * h[k, i]
            dm = 0.0
            for j in range(r):
                dm += (h[m, j] - c[m, j]) * Vinv[j, i]
            g[m * r + i] = acc + dm
    for a in range(n):
        for b in range(n):
            H[a, b] = 0.0
    for m in range(L):
        for p in range(L):
            for i in range(r):
                H[m * r + i, p * r + i] += Gam[m, p] + Gam[p, m]
            for i in range(r):
                for j in range(r):
                    if m == p:
                        H[m * r + i, p * r + j] += Vinv[i, j]
    for l in range(L):
        sw = 0.0
        for k in range(L):
            sw += R[l, k] * S[l, k]
        for k in range(L):
            wk = R[l, k] * S[l, k]
            for q in range(L):
                # (J J)_{kq} with J = diag(S_l) - S_l S_l^T
                jj = 0.0
                for u in range(L):
                    jku = (S[l, k] if k == u else 0.0) - S[l, k] * S[l, u]
                    juq = (S[l, u] if u == q else 0.0) - S[l, u] * S[l, q]
                    jj += jku * juq
                wq = R[l, q] * S[l, q]
                v = s2 * jj - wk * S[l, q] - S[l, k] * wq + 2.0 * sw * S[l, k] * S[l, q]
                if k == q:
                    v += wk - sw * S[l, k]
                Hrow[k, q] = v
        # E[k, m r + i] = d (h h^T)_{lk} / d h_{m i} = delta_{lm} h_{k i} + delta_{km} h_{l i}
        for k in range(L):
            for a in range(n):
                E[k, a] = 0.0
            for i in range(r):
                E[k, l * r + i] += h[k, i]
                E[k, k * r + i] += h[l, i]
        for k in range(L):
            for b in range(n):
                acc = 0.0
                for q in range(L):
                    acc += Hrow[k, q] * E[q, b]
                HE[k, b] = acc
        for a in range(n):
            for b in range(n):
                acc = 0.0
                for k in range(L):
                    acc += E[k, a] * HE[k, b]
                H[a, b] += acc
    val += _quadratic(h, c, Vinv)
    return val


@njit(cache=True)
def _cholesky(H, shift, C):
    """Lower Cholesky factor ``C`` of ``H - shift I``; False where that matrix is not positive definite."""
    n = H.shape[0]
    for i in range(n):
        for j in range(i + 1):
            acc = H[i, j]
            if i == j:
                acc -= shift
            for k in range(j):
                acc -= C[i, k] * C[j, k]
            if i == j:
                if not acc > 0.0:
                    return False
                C[i, i] = math.sqrt(acc)
            else:
                C[i, j] = acc / C[j, j]
    return True


@njit(cache=True)
def _newton_direction(H, g, mu0, p, C, z):
    """``p = -|H|_mu0^{-1} g`` (eigenvalues in absolute value, floored at ``mu0``). Where every eigenvalue is
    above ``mu0`` (``H - mu0 I`` has a Cholesky factor) that is ``-H^{-1} g``, solved by Cholesky; else by the
    eigendecomposition."""
    n = H.shape[0]
    if _cholesky(H, mu0, C) and _cholesky(H, 0.0, C):
        for i in range(n):
            acc = g[i]
            for k in range(i):
                acc -= C[i, k] * z[k]
            z[i] = acc / C[i, i]
        for i in range(n - 1, -1, -1):
            acc = z[i]
            for k in range(i + 1, n):
                acc -= C[k, i] * p[k]
            p[i] = acc / C[i, i]
        for i in range(n):
            p[i] = -p[i]
        return
    ev, U = np.linalg.eigh(H)
    for a in range(n):
        za = 0.0
        for k in range(n):
            za += U[k, a] * g[k]
        z[a] = za / max(abs(ev[a]), mu0)
    for k in range(n):
        pk = 0.0
        for a in range(n):
            pk -= U[k, a] * z[a]
        p[k] = pk


@njit(cache=True)
def _scratch(L, r):
    n = L * r
    return (np.empty((L, L)), np.empty(n), np.empty((n, n)), np.empty((L, n)), np.empty((L, r)), np.empty(n),
            np.empty(n), np.zeros((n, n)), np.empty((L, L)), np.empty((L, L)), np.empty((L, L)), np.empty((L, n)))


@njit(cache=True)
def _descend_node(h, cb, Tb, Vinv, s2, mu0, tol, max_iter, scratch, found, n_found, merge):
    """The descent (module docstring) of one node from ``h``, in place. With ``merge > 0`` it also stops as soon as
    every entry of ``h`` lies within ``merge`` of one of the minima ``found[:n_found]`` (earlier starts' minima at
    this node) and takes that minimum. Returns ``(F, last gradient norm, steps, index of the minimum merged
    into or -1)``."""
    S, g, H, E, trial, z, p, C, R, Gam, Hrow, HE = scratch
    L, r = h.shape
    n = L * r
    gn = np.inf
    it = 0
    while it < max_iter:
        if merge > 0.0:
            for j in range(n_found):
                far = False
                for l in range(L):
                    for i in range(r):
                        if abs(h[l, i] - found[j, l, i]) > merge:
                            far = True
                if not far:
                    for l in range(L):
                        for i in range(r):
                            h[l, i] = found[j, l, i]
                    return _objective(h, cb, Tb, Vinv, s2, S), 0.0, it, j
        it += 1
        val = _derivatives(h, cb, Tb, Vinv, s2, S, g, H, E, R, Gam, Hrow, HE)
        gn = math.sqrt(np.sum(g * g))
        if gn <= tol:
            break
        _newton_direction(H, g, mu0, p, C, z)
        slope = 0.0
        for k in range(n):
            slope += g[k] * p[k]
        bound = val + _ROUND * max(abs(val), 1.0)
        t = 1.0
        accepted = False
        for _ in range(_N_STEPS):
            for l in range(L):
                for i in range(r):
                    trial[l, i] = h[l, i] + t * p[l * r + i]
            if _objective(trial, cb, Tb, Vinv, s2, S) <= bound + 1e-4 * t * slope:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            break  # the numpy code keeps such a node at the same point until max_iter: the same answer
        for l in range(L):
            for i in range(r):
                h[l, i] = trial[l, i]
    return _objective(h, cb, Tb, Vinv, s2, S), gn, it, -1


@njit(cache=True)
def _descend_range(h_out, val_out, gn_out, its, c, T, Vinv, s2, mu0, tol, max_iter, lo, hi):
    """The descent (module docstring) at nodes ``lo .. hi-1``, in place: ``h_out`` (holding the starts on entry),
    ``F`` in ``val_out``, the last gradient norm in ``gn_out``, the steps taken in ``its``. Scratch is allocated
    here, once per call, so that concurrent calls on disjoint ranges share nothing."""
    L, r = h_out.shape[1], h_out.shape[2]
    scratch = _scratch(L, r)
    none = np.empty((0, L, r))
    for b in range(lo, hi):
        val_out[b], gn_out[b], its[b], _ = _descend_node(h_out[b], c[b], T[b], Vinv, s2, mu0, tol, max_iter,
                                                         scratch, none, 0, 0.0)


@njit(cache=True)
def _search_range(h_out, val_out, its, c, T, Vinv, s2, mu0, tol, max_iter, merge, lo, hi):
    """The multi-start search at nodes ``lo .. hi-1``, in place: ``h_out`` (K, B, L, r) holds the K starts on entry,
    the minima on exit (``F`` in ``val_out`` (K, B)). Start ``k`` of a node stops once it is within ``merge`` of a
    minimum an earlier start of that node found (:func:`_descend_node`)."""
    K, L, r = h_out.shape[0], h_out.shape[2], h_out.shape[3]
    scratch = _scratch(L, r)
    found = np.empty((K, L, r))
    for b in range(lo, hi):
        n_found = 0
        for k in range(K):
            val, _, it, j = _descend_node(h_out[k, b], c[b], T[b], Vinv, s2, mu0, tol, max_iter, scratch, found,
                                          n_found, merge)
            val_out[k, b] = val
            its[b] = max(its[b], it)
            if j < 0:
                found[n_found] = h_out[k, b]
                n_found += 1


@njit(cache=True)
def newton_descent(h0, c, T, Vinv, s2, mu0, tol, max_iter):
    """The descent at every node (module docstring), in one thread. Returns ``(h, F(h), ||grad F|| at the last
    evaluation, the most steps any node took)``."""
    B = h0.shape[0]
    h_out = h0.copy()
    val_out = np.empty(B)
    gn_out = np.empty(B)
    its = np.zeros(B, dtype=np.int64)
    _descend_range(h_out, val_out, gn_out, its, c, T, Vinv, s2, mu0, tol, max_iter, 0, B)
    return h_out, val_out, gn_out, its.max() if B else 0


#: Nodes per block of :func:`newton_descent_parallel` (each block one task of numba's thread pool).
BLOCK = 256


@njit(cache=True, parallel=True)
def newton_descent_parallel(h0, c, T, Vinv, s2, mu0, tol, max_iter):
    """:func:`newton_descent` with the nodes split into blocks of :data:`BLOCK` run on numba's threads: every
    node's descent is the same computation as there, so the results are identical."""
    B = h0.shape[0]
    h_out = h0.copy()
    val_out = np.empty(B)
    gn_out = np.empty(B)
    its = np.zeros(B, dtype=np.int64)
    n_blocks = (B + BLOCK - 1) // BLOCK
    for k in prange(n_blocks):
        _descend_range(h_out, val_out, gn_out, its, c, T, Vinv, s2, mu0, tol, max_iter, k * BLOCK,
                       min((k + 1) * BLOCK, B))
    return h_out, val_out, gn_out, its.max() if B else 0


@njit(cache=True)
def global_search(h0, c, T, Vinv, s2, mu0, tol, max_iter, merge):
    """The multi-start search (:func:`_search_range`) at every node, in one thread: ``h0`` (K, B, L, r) the starts.
    Returns ``(h (K, B, L, r), F (K, B), the most steps any start took)``."""
    K, B = h0.shape[0], h0.shape[1]
    h_out = h0.copy()
    val_out = np.empty((K, B))
    its = np.zeros(B, dtype=np.int64)
    _search_range(h_out, val_out, its, c, T, Vinv, s2, mu0, tol, max_iter, merge, 0, B)
    return h_out, val_out, its.max() if B else 0


@njit(cache=True, parallel=True)
def global_search_parallel(h0, c, T, Vinv, s2, mu0, tol, max_iter, merge):
    """:func:`global_search` with the nodes split into blocks of :data:`BLOCK` run on numba's threads (the same
    per-node results)."""
    K, B = h0.shape[0], h0.shape[1]
    h_out = h0.copy()
    val_out = np.empty((K, B))
    its = np.zeros(B, dtype=np.int64)
    n_blocks = (B + BLOCK - 1) // BLOCK
    for k in prange(n_blocks):
        _search_range(h_out, val_out, its, c, T, Vinv, s2, mu0, tol, max_iter, merge, k * BLOCK,
                      min((k + 1) * BLOCK, B))
    return h_out, val_out, its.max() if B else 0

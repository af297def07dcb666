"""Compiled (numba) kernels of the proximal step: the same algorithm as the vectorised numpy code of
:mod:`attnlib.theory.model.proximal`, written per node and compiled; the loop over nodes runs in one thread (parallel sweeps
run in joblib processes, which threads inside each would oversubscribe).

Per node the work is a handful of 2-d Newton steps; in numpy every step is some fifty array operations over
all active nodes, with temporaries and per-call overhead, while here a node is finished in registers. The
results agree with the numpy backend to round-off (``tests/test_prox.py``); the numpy code stays as the
reference and as the fallback when numba is not installed.

Algorithm (see :func:`attnlib.theory.model.proximal.minimise_locally`): Newton's method on
``F(h) = ||h - c||^2/(2V) + sigma^2 sum_l (sigmoid(a_l(h)) - t_l)^2`` with ``a_1 = h_1(h_1 - h_2)``,
``a_2 = h_2(h_2 - h_1)``, the Hessian shifted so that its smallest eigenvalue is at least ``1/(4V)``, and an
Armijo backtracking line search over the step sizes ``1, 1/2, ..., 1/2^11`` (with a round-off allowance of
``8 eps max(|F|, 1)``); a node stops when ``||grad F|| <= tol``.

Speed without changing a bit of the result: the sigmoids of the accepted line-search trial are carried into the
next Newton step, the gradient's norm and the Hessian's eigenvalue shift are decided from squares (``hypot`` is
evaluated only where the shift is needed, and once for the returned norm), the sigmoid selects its numerator
instead of branching on the sign, and the ring starts' offsets are computed once per call. Measured at
omega = 0.05 (4 x 2^16 nodes): the global search 1.16 -> 0.63 s (positional, alpha = 1), 0.84 -> 0.46 s
(semantic, alpha = 1.5); the local descent 0.08 -> 0.04 s; the proximal points, values
and gaps bitwise equal (a squared comparison can decide otherwise than the norm only within a rounding of its
threshold), and so were the phase diagram's thresholds and ends at omega = 0.15 and 0.35.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

_ROUND = 8.0 * np.finfo(float).eps
_N_STEPS = 12  # backtracking step sizes 1, 1/2, ..., 1/2^11 (as _STEPS in proximal.py)


@njit(cache=True, inline="always")
def _sigmoid(a):
    # 1 / (1 + e^-a) for a >= 0, e^a / (1 + e^a) below (no overflow); written with a select instead of a branch
    # (the sign of a is random from node to node), the same floating-point operations on either side
    e = math.exp(-abs(a))
    return (1.0 if a >= 0.0 else e) / (1.0 + e)


@njit(cache=True)
def _descend(h1, h2, c1, c2, t1, t2, inv_v, s2, tol, max_iter, found1, found2, n_found, merge):
    """Shifted-Newton descent of one node from ``(h1, h2)``; returns ``h1, h2, F, ||grad F||, iterations, j``.

    ``j >= 0`` when the descent was stopped because its iterate came within ``merge`` (in each coordinate) of
    ``(found1[j], found2[j])``, one of the ``n_found`` minima found before (the returned ``F`` and gradient norm
    are then not computed, zero); ``j = -1`` when it ran to ``tol`` or ``max_iter``."""
    gn = np.inf
    tol2 = tol * tol
    it = 0
    fresh = False  # whether s1, sb hold the sigmoids at (h1, h2) (carried over from the accepted line-search trial)
    s1 = sb = 0.0
    while True:
        for j in range(n_found):
            if abs(h1 - found1[j]) <= merge and abs(h2 - found2[j]) <= merge:
                return h1, h2, 0.0, 0.0, it, j
        if not fresh:
            s1 = _sigmoid(h1 * (h1 - h2))
            sb = _sigmoid(h2 * (h2 - h1))
        r1 = s1 - t1
        r2 = sb - t2
        d1 = s1 * (1.0 - s1)
        d2 = sb * (1.0 - sb)
        g1x, g1y = 2.0 * h1 - h2, -h1
        g2x, g2y = -h2, 2.0 * h2 - h1
        w1, w2 = r1 * d1, r2 * d2
        gx = 2.0 * s2 * (w1 * g1x + w2 * g2x) + inv_v * (h1 - c1)
        gy = 2.0 * s2 * (w1 * g1y + w2 * g2y) + inv_v * (h2 - c2)
        if gx * gx + gy * gy <= tol2 or it == max_iter:  # the norm itself (hypot, slow) only once, below
            gn = math.hypot(gx, gy)
            break
        it += 1
        val = s2 * (r1 * r1 + r2 * r2) + 0.5 * inv_v * ((h1 - c1) ** 2 + (h2 - c2) ** 2)
        k1 = d1 * d1 + r1 * d1 * (1.0 - 2.0 * s1)
        k2 = d2 * d2 + r2 * d2 * (1.0 - 2.0 * sb)
        H11 = 2.0 * s2 * (k1 * g1x * g1x + k2 * g2x * g2x + 2.0 * w1) + inv_v
        H12 = 2.0 * s2 * (k1 * g1x * g1y + k2 * g2x * g2y - w1 - w2)
        H22 = 2.0 * s2 * (k1 * g1y * g1y + k2 * g2y * g2y + 2.0 * w2) + inv_v
        half_tr = 0.5 * (H11 + H22)
        half_diff = 0.5 * (H11 - H22)
        floor_gap = half_tr - 0.25 * inv_v
        if floor_gap > 0.0 and half_diff * half_diff + H12 * H12 <= floor_gap * floor_gap:
            shift = 0.0  # smallest eigenvalue >= inv_v / 4: no shift, decided without the (slow) hypot
        else:
            shift = max(0.0, 0.25 * inv_v - (half_tr - math.hypot(half_diff, H12)))
        a, b, d = H11 + shift, H12, H22 + shift
        det = a * d - b * b
        px = -(d * gx - b * gy) / det
        py = -(a * gy - b * gx) / det
        slope = gx * px + gy * py
        bound = val + _ROUND * max(abs(val), 1.0)
        step = 1.0
        fresh = False
        for _ in range(_N_STEPS):
            n1 = h1 + step * px
            n2 = h2 + step * py
            q1 = _sigmoid(n1 * (n1 - n2))
            q2 = _sigmoid(n2 * (n2 - n1))
            trial = 0.5 * inv_v * ((n1 - c1) ** 2 + (n2 - c2) ** 2) + s2 * ((q1 - t1) ** 2 + (q2 - t2) ** 2)
            if trial <= bound + 1e-4 * step * slope:
                h1, h2, s1, sb, fresh = n1, n2, q1, q2, True
                break
            step *= 0.5
        else:  # no step accepted: stay (a non-finite direction still turns h into NaN, as a zero step always did)
            h1 += 0.0 * px
            h2 += 0.0 * py
    if not fresh:
        s1 = _sigmoid(h1 * (h1 - h2))
        sb = _sigmoid(h2 * (h2 - h1))
    value = 0.5 * inv_v * ((h1 - c1) ** 2 + (h2 - c2) ** 2) + s2 * ((s1 - t1) ** 2 + (sb - t2) ** 2)
    return h1, h2, value, gn, it, -1


@njit(cache=True)
def local_prox(h0, c, t, V, sigma, tol, max_iter):
    """Local descent of every node from ``h0``: ``(h, value, grad_norm, max iterations)``."""
    n = c.shape[0]
    inv_v, s2 = 1.0 / V, sigma * sigma
    h = np.empty((n, 2))
    value = np.empty(n)
    grad_norm = np.empty(n)
    iters = np.empty(n, np.int64)
    none = np.empty(0)
    for i in range(n):
        h[i, 0], h[i, 1], value[i], grad_norm[i], iters[i], _ = _descend(
            h0[i, 0], h0[i, 1], c[i, 0], c[i, 1], t[i, 0], t[i, 1], inv_v, s2, tol, max_iter, none, none, 0, 0.0)
    return h, value, grad_norm, iters.max() if n else 0


@njit(cache=True)
def global_prox(c, t, V, sigma, n_ring, tol, max_iter, merge):
    """Multi-start descent of every node (starts: ``c``, ``0`` and ``n_ring`` ring points, as
    :func:`attnlib.theory.model.proximal._ring_starts`); keeps the lowest minimum, and the best *other* local minimum
    (the runner-up, ``h_alt``, more than ``merge`` away in some coordinate) with the gap between the two (``inf`` and
    ``h_alt = h`` if there is none). A start whose iterate comes within ``merge`` of a minimum already found is
    stopped there and counts as that minimum (``attnlib.theory.model.proximal.SAME_MINIMUM``).

    Returns ``(h, value, grad_norm, gap, h_alt, max iterations)``.
    """
    n = c.shape[0]
    inv_v, s2 = 1.0 / V, sigma * sigma
    k_all = 2 + n_ring
    h = np.empty((n, 2))
    value = np.empty(n)
    grad_norm = np.empty(n)
    gap = np.empty(n)
    h_alt = np.empty((n, 2))
    iters = np.zeros(n, np.int64)
    x1 = np.empty(k_all)
    x2 = np.empty(k_all)
    f = np.empty(k_all)
    g = np.empty(k_all)
    found1 = np.empty(k_all)  # the distinct minima found so far at this node, and the start that found each
    found2 = np.empty(k_all)
    source = np.empty(k_all, np.int64)
    ring1 = np.empty(n_ring)  # the ring starts' offsets from c in units of the radius (the same at every node)
    ring2 = np.empty(n_ring)
    for j in range(n_ring):
        frac = 0.35 if j % 2 == 0 else 0.75
        angle = 2.0 * math.pi * (j + 0.5) / n_ring
        ring1[j] = frac * math.cos(angle)
        ring2[j] = frac * math.sin(angle)
    for i in range(n):
        c1, c2, t1, t2 = c[i, 0], c[i, 1], t[i, 0], t[i, 1]
        diff = c1 - c2
        r1 = _sigmoid(c1 * diff) - t1
        r2 = _sigmoid(-c2 * diff) - t2
        radius = math.sqrt(2.0 * V * s2 * (r1 * r1 + r2 * r2))  # every minimiser lies within this of c
        n_found = 0
        for k in range(k_all):
            if k == 0:
                s1, sb = c1, c2
            elif k == 1:
                s1, sb = 0.0, 0.0
            else:
                s1 = c1 + radius * ring1[k - 2]
                sb = c2 + radius * ring2[k - 2]
            a1, a2, fk, gk, it, same = _descend(s1, sb, c1, c2, t1, t2, inv_v, s2, tol, max_iter, found1, found2,
                                                n_found, merge)
            if same >= 0:  # reached a minimum found before: take that start's result
                src = source[same]
                x1[k], x2[k], f[k], g[k] = x1[src], x2[src], f[src], g[src]
            else:
                x1[k], x2[k], f[k], g[k] = a1, a2, fk, gk
                found1[n_found], found2[n_found], source[n_found] = a1, a2, k
                n_found += 1
            iters[i] = max(iters[i], it)
        best = 0
        for k in range(1, k_all):
            if f[k] < f[best]:
                best = k
        other = np.inf
        alt = best
        for k in range(k_all):
            if max(abs(x1[k] - x1[best]), abs(x2[k] - x2[best])) > merge and f[k] - f[best] < other:
                other = f[k] - f[best]
                alt = k
        h[i, 0], h[i, 1], value[i], grad_norm[i], gap[i] = x1[best], x2[best], f[best], g[best], other
        h_alt[i, 0], h_alt[i, 1] = x1[alt], x2[alt]
    return h, value, grad_norm, gap, h_alt, iters.max() if n else 0

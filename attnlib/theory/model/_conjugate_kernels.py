"""Compiled (numba) kernels around the proximal step of the two-token state evolution: the student fields ``c``, the
teacher diagonal and the weighted sums that make the conjugates (book :eq:`eq-conjugates`), each one pass over the
nodes instead of a dozen numpy array operations with their temporaries (on the quadrature's ``(n, 4)`` node array,
whose ``xi`` and ``eta`` halves are strided views).

The numpy expressions in :func:`attnlib.theory.model.state_evolution.conjugates_and_energy` stay as the reference and as the
fallback without numba; the two agree to round-off (``tests/test_prox.py``). The sums are taken in blocks of
``_BLOCK`` nodes, each block's sum added to the total, so their rounding error grows like ``(_BLOCK + n / _BLOCK)``
units of round-off instead of ``n`` (numpy's pairwise sums are about as accurate). Unlike numpy's ``@`` (a BLAS
call), the order of every operation is fixed: the result does not depend on the machine's BLAS kernel.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ._prox_kernels import _sigmoid

_BLOCK = 256


@njit(cache=True)
def student_fields(nodes, sq, m):
    """``c = sqrt(q) xi + m (1, -1)`` for nodes ``(xi_1, xi_2, eta_1, eta_2)``: array (n, 2)."""
    n = nodes.shape[0]
    c = np.empty((n, 2))
    for i in range(n):
        c[i, 0] = sq * nodes[i, 0] + m
        c[i, 1] = sq * nodes[i, 1] - m
    return c


@njit(cache=True)
def teacher_diagonal(nodes, a, b, omega, A11, A22):
    """``(T_11, T_22)`` at ``h* = a xi + b eta``: ``(1 - omega) sigmoid(+-h*_l (h*_1 - h*_2)) + omega A_ll``."""
    n = nodes.shape[0]
    t = np.empty((n, 2))
    keep = 1.0 - omega
    for i in range(n):
        u1 = a * nodes[i, 0] + b * nodes[i, 2]
        u2 = a * nodes[i, 1] + b * nodes[i, 3]
        diff = u1 - u2
        t[i, 0] = keep * _sigmoid(u1 * diff) + omega * A11
        t[i, 1] = keep * _sigmoid(-u2 * diff) + omega * A22
    return t


@njit(cache=True)
def conjugate_sums(h, c, nodes, weights, value, V):
    """With ``g = (h - c) / V`` per node: ``sum w g.g``, ``sum w g.eta``, ``sum w g.xi``, ``sum w (g_1 - g_2)`` and
    ``sum w value`` (blockwise sums, module docstring)."""
    n = h.shape[0]
    t0 = t1 = t2 = t3 = t4 = 0.0
    for start in range(0, n, _BLOCK):
        b0 = b1 = b2 = b3 = b4 = 0.0
        for i in range(start, min(start + _BLOCK, n)):
            g1 = (h[i, 0] - c[i, 0]) / V
            g2 = (h[i, 1] - c[i, 1]) / V
            w = weights[i]
            b0 += w * (g1 * g1 + g2 * g2)
            b1 += w * (g1 * nodes[i, 2] + g2 * nodes[i, 3])
            b2 += w * (g1 * nodes[i, 0] + g2 * nodes[i, 1])
            b3 += w * (g1 - g2)
            b4 += w * value[i]
        t0 += b0
        t1 += b1
        t2 += b2
        t3 += b3
        t4 += b4
    return t0, t1, t2, t3, t4

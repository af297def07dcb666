"""Gaussian expectations: tensor Gauss-Hermite rules and scrambled-Sobol quasi-Monte-Carlo.

Every expectation in the theory is over independent standard normals (book :eq:`eq-gaussian-fields`,
:eq:`eq-conjugates`), so a rule is a set of points ``x`` of shape ``(N, dim)`` and weights ``w`` of shape
``(N,)`` with ``E f(X) ~= sum_i w_i f(x_i)``, ``X ~ N(0, I_dim)``. Only open tools are used (numpy's
Hermite_e nodes, scipy's Sobol sequences).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import ndtri
from scipy.stats import qmc

__all__ = ["Quadrature", "gauss_hermite_1d", "gaussian_rule", "reduced_rule", "scrambling_mean"]

_RULES = ("gauss-hermite", "sobol", "sobol-sym")
#: Sign flips under which the "sobol-sym" rule is closed (4-d rules: (x1, x2, x3, x4) -> signs * x). In the
#: state evolution's coordinates ``(xi, eta)`` these are ``eta -> -eta`` and ``(xi, eta) -> -(xi, eta)``: the
#: maps that keep ``theta = 0`` and ``m = 0`` invariant (book :ref:`sec-branches`), so a rule closed under them
#: keeps those subspaces exactly invariant, as the tensor Gauss-Hermite rule does.
SYMMETRIC_FLIPS = ((1, 1, -1, -1), (-1, -1, -1, -1))


@functools.lru_cache(maxsize=64)
def gauss_hermite_1d(order: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the ``order``-point Gauss-Hermite rule for ``N(0, 1)`` (weights sum to 1)."""
    x, w = hermegauss(order)
    x = 0.5 * (x - x[::-1])  # exactly antisymmetric, so that reflections map the grid onto itself
    w = 0.5 * (w + w[::-1])
    w = w / w.sum()
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


@dataclass(frozen=True)
class Quadrature:
    """A rule for ``E_{X ~ N(0, I_dim)} f(X)``.

    Parameters
    ----------
    rule : {"gauss-hermite", "sobol"}
        ``"gauss-hermite"``: tensor product of ``order``-point Gauss-Hermite rules (``order**dim`` points).
        Exact for polynomials, fast for smooth integrands, slow where the integrand jumps.
        ``"sobol"``: ``2**order`` points of a scrambled Sobol sequence (seeded by ``seed``), mapped by the
        normal inverse CDF; equal weights. Robust to discontinuities, error ~ ``N^-1`` up to logs for smooth
        integrands (slower where the integrand jumps).
        ``"sobol-sym"`` (4 dimensions): ``2**order / 4`` scrambled Sobol points and their images under
        ``SYMMETRIC_FLIPS`` (``2**order`` points in all, equal weights), so that the rule is exactly
        symmetric under those sign flips (antithetic sampling); folded by the integrand's symmetries like
        the Gauss-Hermite rule (``reduced_rule``).
    order : int
        Points per dimension (Gauss-Hermite, 2 to 200) or log2 of the point count (Sobol, 4 to 22).
    seed : int
        Scrambling seed of the Sobol rule (ignored for Gauss-Hermite).
    """

    rule: str = "gauss-hermite"
    order: int = 10
    seed: int = 0

    def __post_init__(self):
        if self.rule not in _RULES:
            raise ValueError(f"rule must be one of {_RULES}, got {self.rule!r}")
        if isinstance(self.order, bool) or not isinstance(self.order, (int, np.integer)):
            raise ValueError(f"order must be an integer, got {self.order!r}")
        lo, hi = (2, 200) if self.rule == "gauss-hermite" else (4, 22)
        if self.rule == "sobol-sym":
            lo = 6
        if not lo <= self.order <= hi:
            raise ValueError(f"order must lie in [{lo}, {hi}] for rule {self.rule!r}, got {self.order}")
        object.__setattr__(self, "order", int(self.order))

    @property
    def label(self) -> str:
        """A short name: ``"gauss-hermite 12"`` (nodes per dimension) or ``"sobol-sym 2^14 seed 0"``."""
        if self.rule == "gauss-hermite":
            return f"gauss-hermite {self.order}"
        return f"{self.rule} 2^{self.order} seed {self.seed}"

    def points(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """Points ``(N, dim)`` and weights ``(N,)`` of this rule in ``dim`` dimensions (cached, read-only)."""
        return gaussian_rule(self.rule, self.order, self.seed, int(dim))

    def reduced_points(self, dim: int, generators: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
        """Points and weights with the orbits of a symmetry group merged (see ``reduced_rule``)."""
        return reduced_rule(self.rule, self.order, self.seed, int(dim), tuple(generators))


@functools.lru_cache(maxsize=32)
def gaussian_rule(rule: str, order: int, seed: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Points and weights of a :class:`Quadrature` rule (cached)."""
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    if rule == "gauss-hermite":
        x, w = gauss_hermite_1d(order)
        grids = np.meshgrid(*([x] * dim), indexing="ij")
        wgrids = np.meshgrid(*([w] * dim), indexing="ij")
        pts = np.stack([g.ravel() for g in grids], axis=-1)
        wts = np.prod(np.stack([g.ravel() for g in wgrids], axis=-1), axis=-1)
    elif rule == "sobol":
        u = qmc.Sobol(d=dim, scramble=True, seed=seed).random_base2(order)
        pts = ndtri(np.clip(u, 1e-16, 1 - 1e-16))
        wts = np.full(len(pts), 1.0 / len(pts))
    elif rule == "sobol-sym":
        if dim != 4:
            raise ValueError(f"rule 'sobol-sym' is 4-dimensional, got dim={dim}")
        u = qmc.Sobol(d=dim, scramble=True, seed=seed).random_base2(order - 2)
        base = ndtri(np.clip(u, 1e-16, 1 - 1e-16))
        pts = np.concatenate([base * np.array(sg, float) for sg in _flip_group(SYMMETRIC_FLIPS)])
        wts = np.full(len(pts), 1.0 / len(pts))
    else:  # pragma: no cover - validated by Quadrature
        raise ValueError(f"unknown rule {rule!r}")
    pts = np.ascontiguousarray(pts)
    pts.setflags(write=False)
    wts.setflags(write=False)
    return pts, wts


def _flip_group(generators) -> list[tuple]:
    """All products of commuting sign-flip generators (sign vectors), the identity first."""
    dim = len(generators[0]) if generators else 4
    group = [(1,) * dim]
    for g in generators:
        if tuple(g) in group:
            continue
        group += [tuple(a * b for a, b in zip(h, g)) for h in group]
    return group


def _fold_symmetric_sobol(pts, wts, generators):
    """Fold a "sobol-sym" rule (images of the base points under :data:`SYMMETRIC_FLIPS`, stored block by
    block) by those of ``generators`` that are sign flips in that group: the images related by them carry
    the same integrand value, so one image per coset is kept, with the coset's total weight."""
    group = _flip_group(SYMMETRIC_FLIPS)
    flips = [tuple(signs) for perm, signs in generators if tuple(perm) == tuple(range(len(signs)))]
    sub = _flip_group([f for f in flips if f in group]) if flips else [group[0]]
    sub = [g for g in sub if g in group]
    n = len(pts) // len(group)
    keep, seen = [], set()
    for i, g in enumerate(group):
        coset = frozenset(tuple(a * b for a, b in zip(g, h)) for h in sub)
        if coset not in seen:
            seen.add(coset)
            keep.append(i)
    idx = np.concatenate([np.arange(i * n, (i + 1) * n) for i in keep])
    p_red = np.ascontiguousarray(pts[idx])
    w_red = np.ascontiguousarray(wts[idx] * len(group) / len(keep))
    p_red.setflags(write=False)
    w_red.setflags(write=False)
    return p_red, w_red


@functools.lru_cache(maxsize=32)
def reduced_rule(rule: str, order: int, seed: int, dim: int, generators: tuple) -> tuple[np.ndarray, np.ndarray]:
    """A tensor Gauss-Hermite rule folded by a group of signed coordinate permutations.

    Each generator is ``(perm, signs)`` acting as ``x -> signs * x[perm]``; the generators must be commuting
    involutions (so the group is the set of their products). If the integrand is invariant under the group,
    ``sum_i w_i f(x_i)`` equals the sum over one representative per orbit with the orbit's total weight,
    which cuts the number of integrand evaluations by up to the group order. The Gauss-Hermite grid is
    exactly symmetric (:func:`gauss_hermite_1d`), so the group maps nodes onto nodes. Sobol rules are
    returned unfolded (their points are not symmetric).
    """
    pts, wts = gaussian_rule(rule, order, seed, dim)
    if rule == "sobol-sym":
        return _fold_symmetric_sobol(pts, wts, generators)
    if rule != "gauss-hermite" or not generators:
        return pts, wts
    n = order
    idx = np.stack(np.unravel_index(np.arange(n**dim), (n,) * dim), axis=-1)
    group = [(tuple(range(dim)), (1,) * dim)]
    for perm, signs in generators:
        perm, signs = tuple(perm), tuple(signs)
        group += [(tuple(p[i] for i in perm), tuple(sg[i] * signs[j] for j, i in enumerate(perm)))
                  for p, sg in group]
    rep = np.full(len(idx), np.iinfo(np.int64).max)
    for perm, signs in group:
        mapped = idx[:, list(perm)]
        mapped = np.where(np.array(signs) < 0, n - 1 - mapped, mapped)
        flat = np.ravel_multi_index(tuple(mapped.T), (n,) * dim)
        rep = np.minimum(rep, flat)
    reps, inverse = np.unique(rep, return_inverse=True)
    w_red = np.bincount(inverse, weights=wts)
    p_red = np.ascontiguousarray(pts[reps])
    p_red.setflags(write=False)
    w_red.setflags(write=False)
    return p_red, w_red


def scrambling_mean(values) -> tuple[np.ndarray, np.ndarray]:
    """Mean over scramblings and its standard error: ``values`` of shape ``(n, ...)``, one row per scrambling
    of a randomised rule (each an unbiased estimate, so their spread measures the error), ``n >= 2``.

    Returns ``(mean, std / sqrt(n))`` over the first axis (sample standard deviation, ``ddof=1``).
    """
    values = np.asarray(values, dtype=float)
    if values.ndim < 1 or len(values) < 2:
        raise ValueError(f"values must hold at least 2 scramblings along the first axis, got shape {values.shape}")
    return values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(len(values))

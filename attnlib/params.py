"""Task parameters of the solvable attention model and input validation.

The conventions are those of the book (chapter 2, :eq:`eq-tokens` to :eq:`eq-linear`, and the page
:ref:`conventions`), which restate Cui, Behrens, Krzakala & Zdeborova (NeurIPS 2024) in the normalisation of
the authors' numerics.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from numbers import Integral, Real

import numpy as np

#: Standard positional attention matrix of the teacher, ``A = [[0.6, 0.4], [0.4, 0.6]]``.
STANDARD_A = ((0.6, 0.4), (0.4, 0.6))
#: The paper's alternative (not token-swap symmetric) positional matrix.
ALTERNATIVE_A = ((0.3, 0.7), (0.8, 0.2))

__all__ = [
    "TaskParams",
    "STANDARD_A",
    "ALTERNATIVE_A",
    "check_int",
    "check_finite_scalar",
    "check_positive",
    "check_alpha",
]


def check_int(name: str, value, minimum: int) -> int:
    """Return ``value`` as an int ``>= minimum``, else raise ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (Integral, np.integer)):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_seeds(name: str, seeds, minimum: int = 2) -> tuple:
    """Return ``seeds`` as a tuple of at least ``minimum`` distinct integers ``>= 0``, else raise ``ValueError``
    naming ``name`` (several scramblings or streams, whose spread gives a standard error)."""
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__len__") or len(seeds) < minimum:
        raise ValueError(f"{name} must be a sequence of at least {minimum} distinct integers >= 0, got {seeds!r}")
    out = tuple(check_int(f"{name}[{i}]", s, 0) for i, s in enumerate(seeds))
    if len(set(out)) != len(out):
        raise ValueError(f"{name} must be distinct integers >= 0, got {seeds!r}")
    return out


def check_finite_scalar(name: str, value) -> float:
    """Return ``value`` as a float, or raise ``ValueError`` naming ``name`` if it is not a finite real."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite (not NaN or inf), got {value!r}")
    return value


def check_positive(name: str, value) -> float:
    """Finite and strictly positive, else ``ValueError`` naming ``name`` and the range ``(0, inf)``."""
    value = check_finite_scalar(name, value)
    if value <= 0:
        raise ValueError(f"{name} must lie in (0, inf), got {value!r}")
    return value


def check_alpha(alpha) -> float:
    """Validate a sample complexity ``alpha = n/d``: finite and in ``(0, inf)``."""
    return check_positive("alpha", alpha)


def _check_matrix(A) -> tuple[tuple[float, float], tuple[float, float]]:
    try:
        arr = np.asarray(A, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"A must be a 2x2 row-stochastic matrix, got {A!r}") from exc
    if arr.shape != (2, 2):
        raise ValueError(f"A must be a 2x2 row-stochastic matrix (shape (2, 2)), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"A must have finite entries (no NaN or inf), got {arr.tolist()}")
    if np.any(arr < 0):
        raise ValueError(f"A must have entries in [0, 1], got {arr.tolist()}")
    if not np.allclose(arr.sum(axis=1), 1.0, rtol=0, atol=1e-12):
        raise ValueError(f"A must have rows summing to 1 (row-stochastic), got row sums {arr.sum(axis=1).tolist()}")
    return (tuple(float(v) for v in arr[0]), tuple(float(v) for v in arr[1]))


@dataclass(frozen=True)
class TaskParams:
    """Parameters of the teacher-student attention task (book chapter 2, :eq:`eq-tokens`, :eq:`eq-teacher`).

    Parameters
    ----------
    sigma : float
        Token-content scale, ``x_l = p_l + sigma z_l``; must lie in ``(0, inf)``.
    lam : float
        Ridge penalty ``lambda`` of the empirical risk ``R(Q)``; must lie in ``[0, inf)``.
    omega : float
        Weight of the positional part of the teacher, ``T = (1-omega) softmax(h* h*^T) + omega A``;
        must lie in ``[0, 1]``.
    A : 2x2 nested tuple
        Row-stochastic positional attention matrix of the teacher (default :data:`STANDARD_A`).

    Notes
    -----
    Frozen and hashable, so it can key caches. ``rho = sigma**2`` is the teacher norm in the
    high-dimensional limit.
    """

    sigma: float = 0.5
    lam: float = 0.01
    omega: float = 0.3
    A: tuple = field(default=STANDARD_A)

    def __post_init__(self):
        sigma = check_positive("sigma", self.sigma)
        lam = check_finite_scalar("lam (lambda)", self.lam)
        if lam < 0:
            raise ValueError(f"lam (lambda) must lie in [0, inf), got {lam!r}")
        omega = check_finite_scalar("omega", self.omega)
        if not 0.0 <= omega <= 1.0:
            raise ValueError(f"omega must lie in [0, 1], got {omega!r}")
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "lam", lam)
        object.__setattr__(self, "omega", omega)
        object.__setattr__(self, "A", _check_matrix(self.A))

    @property
    def rho(self) -> float:
        """Teacher norm ``rho = sigma^2 ||Q*||^2 / d -> sigma^2``."""
        return self.sigma**2

    @property
    def A_array(self) -> np.ndarray:
        """``A`` as a float array of shape (2, 2)."""
        return np.array(self.A, dtype=float)

    @property
    def swap_symmetric(self) -> bool:
        """True when ``A_11 == A_22`` -- the task is symmetric under swapping the two tokens, an extra symmetry
        of the state-evolution integrands (``m = 0`` and ``theta = 0`` are preserved for every ``A``, book
        :ref:`sec-branches`)."""
        return self.A[0][0] == self.A[1][1]

    def with_(self, **changes) -> "TaskParams":
        """A copy with some fields replaced (validated again)."""
        return replace(self, **changes)

    def as_dict(self) -> dict:
        """Plain dict (for tidy tables and cache keys)."""
        return {"sigma": self.sigma, "lam": self.lam, "omega": self.omega,
                "A11": self.A[0][0], "A12": self.A[0][1], "A21": self.A[1][0], "A22": self.A[1][1]}

"""Task parameters of the solvable attention model and input validation.

The conventions are those of the book (chapter 2, :eq:`eq-tokens` to :eq:`eq-linear`, and the page
:ref:`conventions`), which restate Cui, Behrens, Krzakala & Zdeborova (NeurIPS 2024) in the normalisation of
the authors' numerics.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, fields, replace
from numbers import Integral, Real

import numpy as np

#: Standard positional attention matrix of the teacher, ``A = [[0.6, 0.4], [0.4, 0.6]]``.
STANDARD_A = ((0.6, 0.4), (0.4, 0.6))
#: The paper's alternative (not token-swap symmetric) positional matrix.
ALTERNATIVE_A = ((0.3, 0.7), (0.8, 0.2))

#: The domain over which every call of the two-token state evolution is verified to return a fixed point on the
#: requested branch, a "branch absent" verdict or a flagged non-convergence (``tests/test_domain.py``,
#: ``benchmarks/bench_domain.py``): closed intervals of ``sigma``, ``lambda``, ``omega``, ``alpha`` and of every
#: entry of a row-stochastic ``A`` (``L = 2``). Values outside it are valid input, not verified.
DOMAIN = {"sigma": (0.1, 3.0), "lam": (1e-4, 10.0), "omega": (0.0, 1.0), "alpha": (0.05, 1000.0),
          "A_entry": (0.02, 0.98)}

__all__ = [
    "TaskParams",
    "STANDARD_A",
    "ALTERNATIVE_A",
    "DOMAIN",
    "check_int",
    "check_finite_scalar",
    "check_positive",
    "check_alpha",
    "check_choice",
    "check_params",
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
    """Validate a sample complexity ``alpha = n/d``: finite and in ``(0, inf)``; several values (a sequence or an
    array) are refused with a pointer to :func:`attnlib.alpha_sweep`."""
    if isinstance(alpha, (list, tuple, np.ndarray)) and np.ndim(alpha) > 0:
        raise ValueError(f"alpha must be a single number in (0, inf), got {type(alpha).__name__} of {np.size(alpha)} "
                         f"values; for several values of alpha use attnlib.alpha_sweep(params, alphas)")
    return check_positive("alpha", alpha)


def _did_you_mean(value, choices) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to a string ``value``, or ``""``."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value.lower(), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_choice(name: str, value, choices) -> str:
    """Return ``value`` if it is one of ``choices``, else raise ``ValueError`` naming ``name`` and the choices, with
    the closest one suggested for a misspelling."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}{_did_you_mean(value, choices)}")
    return value


def check_params(params, where: str):
    """Return ``params`` if it is a :class:`TaskParams`, else raise ``ValueError`` saying how to build one
    (``where``: the function that needs it)."""
    if isinstance(params, TaskParams):
        return params
    if isinstance(params, dict):
        raise ValueError(f"{where}: params must be an attnlib.TaskParams, got a dict; build one with "
                         f"attnlib.TaskParams(**params) (fields sigma, lam, omega, A)")
    raise ValueError(f"{where}: params must be an attnlib.TaskParams(sigma=..., lam=..., omega=..., A=...), got "
                     f"{type(params).__name__}")


def _check_matrix(A) -> tuple:
    try:
        arr = np.asarray(A, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"A must be an L x L row-stochastic matrix (L >= 2), got {A!r}") from exc
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
        raise ValueError(f"A must be an L x L row-stochastic matrix with L >= 2 (shape (L, L)), got shape "
                         f"{arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"A must have finite entries (no NaN or inf), got {arr.tolist()}")
    if np.any(arr < 0):
        raise ValueError(f"A must have entries in [0, 1], got {arr.tolist()}")
    if not np.allclose(arr.sum(axis=1), 1.0, rtol=0, atol=1e-12):
        raise ValueError(f"A must have rows summing to 1 (row-stochastic), got row sums {arr.sum(axis=1).tolist()}")
    return tuple(tuple(float(v) for v in row) for row in arr)


#: Names a user may reach for, and the field each means.
_ALIASES = {"lambda": "lam", "lambda_": "lam", "lmbda": "lam", "ridge": "lam", "l2": "lam", "sig": "sigma",
            "w": "omega", "A_matrix": "A", "a": "A"}


@dataclass(frozen=True, init=False)
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
    A : L x L nested tuple
        Row-stochastic positional attention matrix of the teacher (default :data:`STANDARD_A`); its size is the
        sequence length ``L >= 2``. The paper's solved case, and most of the library, is ``L = 2``; functions
        written for it raise ``ValueError`` naming ``L`` otherwise (:meth:`require_two_tokens`), and
        :func:`attnlib.solve_state_evolution` dispatches ``L > 2`` to the general engine
        (``attnlib.solve_general``).

    Notes
    -----
    Frozen and hashable, so it can key caches. ``rho = sigma**2`` is the teacher norm in the
    high-dimensional limit.
    """

    sigma: float = 0.5
    lam: float = 0.01
    omega: float = 0.3
    A: tuple = field(default=STANDARD_A)

    def __init__(self, sigma: float = 0.5, lam: float = 0.01, omega: float = 0.3, A: tuple = STANDARD_A, **unknown):
        if unknown:
            names = [f.name for f in fields(self)]
            hints = [f"{k!r}" + (f" (did you mean {_ALIASES[k]!r}?)" if k in _ALIASES else _did_you_mean(k, names))
                     for k in unknown]
            raise TypeError(f"TaskParams got unexpected keyword argument(s) {', '.join(hints)}; its fields are "
                            f"sigma, lam (the ridge penalty lambda), omega and A")
        for name, value in (("sigma", sigma), ("lam", lam), ("omega", omega), ("A", A)):
            object.__setattr__(self, name, value)
        self.__post_init__()

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
        """``A`` as a float array of shape (L, L)."""
        return np.array(self.A, dtype=float)

    @property
    def L(self) -> int:
        """Sequence length: the size of ``A``."""
        return len(self.A)

    def require_two_tokens(self, what: str) -> None:
        """Raise ``ValueError`` naming ``L`` unless ``L = 2`` (``what``: the function that needs it)."""
        if self.L != 2:
            raise ValueError(f"{what} is written for L = 2 tokens (A of shape (2, 2)); got L = {self.L}. For "
                             f"L > 2 use attnlib.solve_state_evolution (the general engine) or "
                             f"attnlib.solve_general")

    @property
    def swap_symmetric(self) -> bool:
        """True when ``A_11 == A_22`` -- the task is symmetric under swapping the two tokens, an extra symmetry
        of the state-evolution integrands (``m = 0`` and ``theta = 0`` are preserved for every ``A``, book
        :ref:`sec-branches`)."""
        return self.L == 2 and self.A[0][0] == self.A[1][1]

    def with_(self, **changes) -> "TaskParams":
        """A copy with some fields replaced (validated again)."""
        return replace(self, **changes)

    def as_dict(self) -> dict:
        """Plain dict (for tidy tables): ``sigma, lam, omega`` and the entries ``A11, A12, ...`` (1-based), with
        ``L`` when ``L > 2``."""
        row = {"sigma": self.sigma, "lam": self.lam, "omega": self.omega}
        if self.L > 2:
            row["L"] = self.L
        sep = "_" if self.L > 9 else ""
        row.update({f"A{l + 1}{sep}{k + 1}": v for l, a in enumerate(self.A) for k, v in enumerate(a)})
        return row

"""Finite-d data of the solvable attention model: positional encodings, teacher, samples (book chapter 2).

A sample is a sequence ``X`` in R^{L x d} of tokens ``x_l = p_l + sigma z_l`` with ``z_l ~ N(0, I_d)``
i.i.d.; its target is ``y = T (sigma Z)`` with the teacher attention

    T = (1 - omega) softmax_row(h* h*^T) + omega A,     h*_l = sigma z_l . Q* / sqrt(d),

and a teacher ``Q* ~ N(0, I_d)``. The theory is for ``L = 2``, where ``p_1 = +1_d/sqrt(d)`` and
``p_2 = -1_d/sqrt(d)``; the generator accepts any ``L >= 2`` (see :func:`positional_encodings` for the
generalisation) and any row-stochastic ``L x L`` matrix ``A``.

Randomness: every draw comes from a :class:`numpy.random.Generator` built from an explicit integer seed.
:func:`seed_streams` spawns independent child streams (teacher, train, test, init) from
``numpy.random.SeedSequence(seed)``, so a given seed yields bit-identical data whatever else is drawn, and
the training set of size ``n`` is a prefix of the one of size ``n' > n`` (samples are drawn in order).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..params import TaskParams, check_int
from ..theory.model.attention import softmax_rows, teacher_attention  # re-exported: the data's attention maps

__all__ = [
    "STREAM_NAMES",
    "check_int",
    "check_A",
    "seed_streams",
    "positional_encodings",
    "softmax_rows",
    "teacher_attention",
    "draw_teacher",
    "Teacher",
    "Samples",
    "make_teacher",
    "draw_samples",
    "iter_sample_chunks",
    "make_task",
]

#: Names of the independent random streams spawned from one seed (in spawn order).
STREAM_NAMES = ("teacher", "train", "test", "init")


def check_A(A, L: int) -> np.ndarray:
    """Validate a row-stochastic ``L x L`` positional matrix ``A`` and return it as a float array.

    Raises
    ------
    ValueError
        (naming ``A``) if the shape is not ``(L, L)``, an entry is not finite or negative, or a row does not
        sum to 1 (to 1e-12).
    """
    try:
        arr = np.array(A, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"A must be a row-stochastic {L}x{L} matrix, got {A!r}") from exc
    if arr.shape != (L, L):
        raise ValueError(f"A must be a row-stochastic {L}x{L} matrix (shape ({L}, {L})), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("A must have finite entries (no NaN or inf)")
    if np.any(arr < 0):
        raise ValueError(f"A must have non-negative entries, got {arr.tolist()}")
    if not np.allclose(arr.sum(axis=1), 1.0, rtol=0, atol=1e-12):
        raise ValueError(f"A must have rows summing to 1 (row-stochastic), got row sums {arr.sum(axis=1).tolist()}")
    return arr


def _resolve_L(params: TaskParams, L, A) -> int:
    """The sequence length: ``L`` if given, else the size of ``A`` if given, else ``params.L``."""
    if L is not None:
        return check_int("L", L, 2)
    if A is not None and np.ndim(A) == 2:
        return int(np.shape(A)[0])
    return params.L  # (a malformed A is refused by check_A)


def _resolve_A(params: TaskParams, L: int, A) -> np.ndarray:
    """The teacher's positional matrix: ``A`` if given (validated), else ``params.A`` (which must be ``L x L``)."""
    if A is not None:
        return check_A(A, L)
    if L != params.L:
        raise ValueError(f"A must be given (an {L}x{L} row-stochastic array) when L = {L} differs from the size "
                         f"of params.A (L = {params.L})")
    return params.A_array


def seed_streams(seed) -> dict[str, np.random.Generator]:
    """Independent generators ``{"teacher", "train", "test", "init"}`` spawned from ``SeedSequence(seed)``.

    ``seed`` must be a non-negative integer (``ValueError`` naming ``seed`` otherwise).
    """
    seed = check_int("seed", seed, 0)
    children = np.random.SeedSequence(seed).spawn(len(STREAM_NAMES))
    return {name: np.random.default_rng(child) for name, child in zip(STREAM_NAMES, children)}


def positional_encodings(d: int, L: int = 2) -> np.ndarray:
    """Positional encodings ``P`` in R^{L x d}: unit rows with the Gram matrix of the regular simplex.

    Distinct rows have ``p_l @ p_k = -1/(L-1)`` and ``sum_l p_l = 0`` (book :eq:`eq-general-fields`).

    ``L = 2``: ``p_1 = +1_d/sqrt(d)`` and ``p_2 = -1_d/sqrt(d)`` (book :eq:`eq-tokens`). ``L > 2``:
    ``p_l = sqrt(L/(L-1)) (e_l - mean_k e_k)`` with ``e_l`` the normalised indicator of the ``l``-th of ``L``
    contiguous blocks of coordinates (sizes differing by at most one; ``d >= L``). Only the Gram matrix enters the
    theory (the token contents are isotropic).
    """
    d = check_int("d", d, 1)
    L = check_int("L", L, 2)
    if L == 2:
        P = np.empty((2, d))
        P[0], P[1] = 1.0, -1.0
        return P / math.sqrt(d)
    if d < L:
        raise ValueError(f"d must be >= L = {L} for the simplex encodings, got d = {d}")
    E = np.zeros((L, d))
    for l, block in enumerate(np.array_split(np.arange(d), L)):
        E[l, block] = 1.0 / math.sqrt(len(block))
    return math.sqrt(L / (L - 1.0)) * (E - E.mean(axis=0))


def draw_teacher(d: int, rng: np.random.Generator) -> np.ndarray:
    """Teacher vector ``Q* ~ N(0, I_d)``, shape (d,)."""
    return rng.standard_normal(check_int("d", d, 1))


@dataclass(frozen=True)
class Teacher:
    """The fixed parts of a finite-d task: parameters, teacher vector and positional encodings.

    Attributes
    ----------
    params : TaskParams
    Q_star : ndarray, shape (d,)
        Teacher, ``Q* ~ N(0, I_d)``.
    P : ndarray, shape (L, d)
        Positional encodings (:func:`positional_encodings`).
    A : ndarray, shape (L, L)
        Row-stochastic positional matrix of the teacher.
    """

    params: TaskParams
    Q_star: np.ndarray
    P: np.ndarray
    A: np.ndarray

    @property
    def d(self) -> int:
        return self.Q_star.shape[0]

    @property
    def L(self) -> int:
        return self.P.shape[0]

    @property
    def rho_hat(self) -> float:
        """Finite-d teacher norm ``sigma^2 ||Q*||^2 / d`` (tends to ``rho = sigma^2``)."""
        return self.params.sigma**2 * float(self.Q_star @ self.Q_star) / self.d


@dataclass(frozen=True)
class Samples:
    """A batch of ``n`` samples.

    Attributes
    ----------
    X : ndarray, shape (n, L, d)
        Inputs, ``x_l = p_l + sigma z_l``.
    W : ndarray, shape (n, L, d)
        Token contents ``sigma Z`` (what the teacher mixes).
    T : ndarray, shape (n, L, L)
        Teacher attention matrices.
    """

    X: np.ndarray
    W: np.ndarray
    T: np.ndarray

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def Y(self) -> np.ndarray:
        """Targets ``y = T (sigma Z)``, shape (n, L, d) (computed on demand)."""
        return np.matmul(self.T, self.W)


def make_teacher(params: TaskParams, d: int, rng: np.random.Generator, L: int | None = None, A=None,
                 normalize_teacher: bool = False) -> Teacher:
    """Draw ``Q*`` from ``rng`` and bundle it with the encodings and the (validated) matrix ``A``.

    With ``normalize_teacher`` the draw is rescaled to ``||Q*||^2 = d`` exactly, so that the finite-d
    teacher norm ``rho_hat = sigma^2 ||Q*||^2/d`` equals its limit ``rho = sigma^2``. This removes the
    ``O(d^-1/2)`` fluctuation of the teacher's pre-activation variance (about 4.5 % at d = 1000), the
    leading finite-size deviation from the theory; the default (False) is the plain ``N(0, I_d)`` teacher of
    book chapter 2.
    """
    if not isinstance(params, TaskParams):
        raise ValueError(f"params must be a TaskParams, got {type(params).__name__}")
    d = check_int("d", d, 1)
    L = _resolve_L(params, L, A)
    A_arr = _resolve_A(params, L, A)
    Q_star = draw_teacher(d, rng)
    if normalize_teacher:
        Q_star *= math.sqrt(d) / np.linalg.norm(Q_star)
    return Teacher(params=params, Q_star=Q_star, P=positional_encodings(d, L), A=A_arr)


def draw_samples(teacher: Teacher, n: int, rng: np.random.Generator) -> Samples:
    """Draw ``n`` fresh samples ``(X, sigma Z, T)`` of the task from ``rng`` (book :eq:`eq-tokens`, :eq:`eq-teacher`).

    Memory: three float64 arrays of ``n L d`` entries are held at once (``X``, ``sigma Z`` and the draw);
    use :func:`iter_sample_chunks` for large test sets.
    """
    n = check_int("n", n, 1)
    sigma, d = teacher.params.sigma, teacher.d
    W = rng.standard_normal((n, teacher.L, d))
    W *= sigma
    X = W + teacher.P
    h_star = (W @ teacher.Q_star) / math.sqrt(d)
    T = teacher_attention(h_star, teacher.params.omega, teacher.A)
    return Samples(X=X, W=W, T=T)


def iter_sample_chunks(teacher: Teacher, n: int, rng: np.random.Generator,
                       chunk_size: int = 2048) -> Iterator[Samples]:
    """Yield ``n`` samples in chunks of at most ``chunk_size`` (memory ``O(chunk_size L d)``)."""
    n = check_int("n", n, 1)
    chunk_size = check_int("chunk_size", chunk_size, 1)
    done = 0
    while done < n:
        size = min(chunk_size, n - done)
        yield draw_samples(teacher, size, rng)
        done += size


def make_task(params: TaskParams, d: int, n: int, seed: int = 0, L: int | None = None, A=None,
              normalize_teacher: bool = False) -> tuple[Teacher, Samples]:
    """Teacher and training set for ``(params, d, n, seed, L)``: the data of book chapter 2.

    The teacher comes from the ``"teacher"`` stream and the samples from the ``"train"`` stream of
    :func:`seed_streams`, so equal arguments give bit-identical arrays.

    Parameters
    ----------
    params : TaskParams
    d, n : int
        Dimension and number of samples (both ``>= 1``).
    seed : int
        Non-negative seed.
    L : int, optional
        Sequence length (``>= 2``); default the size of ``A`` if given, else of ``params.A``.
    A : array_like, optional
        Row-stochastic ``L x L`` positional matrix overriding ``params.A`` (required when ``L`` differs from
        the size of ``params.A``).
    normalize_teacher : bool
        Rescale ``Q*`` to ``||Q*||^2 = d`` (see ``make_teacher``).
    """
    streams = seed_streams(seed)
    teacher = make_teacher(params, d, streams["teacher"], L=L, A=A, normalize_teacher=normalize_teacher)
    return teacher, draw_samples(teacher, n, streams["train"])


"""The state-evolution map for any sequence length ``L`` and student rank ``r`` (teacher rank 1).

Implements book :eq:`eq-general-fields` to :eq:`eq-general-free-energy` (section :ref:`sec-general-L` of the
conventions page). Tokens are ``x_l = p_l + sigma z_l`` with positional encodings of Gram matrix ``G`` (the regular
simplex, ``p_l . p_k = -1/(L-1)``, :func:`simplex_gram`; at ``L = 2`` it is ``p_1 = -p_2``). The order parameters
are ``q`` and ``V`` (``r x r``), ``theta`` (``r``) and the positional overlaps ``M`` (``L x r``, ``M = P Q/sqrt d``;
at ``L = 2``, ``r = 1``: ``M = (m, -m)``). For standard normal ``xi`` (``L x r``) and ``eta`` (``L``), the student's
and the teacher's fields are

    c_l = xi_l q^{1/2} + M_l,   h*_l = xi_l q^{-1/2} theta + b eta_l,   b = sqrt(rho - theta^T q^{-1} theta),

and with ``h_hat`` the global minimiser of the proximal problem (:mod:`attnlib.theory.model.general_prox`) and
``g_l = (h_hat_l - c_l) V^{-1}`` the conjugates are

    G_hat = alpha E[g],  q_hat = alpha E[sum_l g_l^T g_l],  theta_hat = alpha E[sum_l eta_l g_l] / b,
    V_hat = -alpha q^{-1/2} E[sum_l xi_l^T g_l] + q^{-1} theta theta_hat^T   (symmetrised),

and with ``D = lambda I + sigma^2 V_hat`` the overlaps

    V = sigma^2 D^{-1},  M = G G_hat D^{-1},  theta = sigma^2 rho D^{-1} theta_hat,
    q = sigma^2 D^{-1} (sigma^2 q_hat + G_hat^T G G_hat + sigma^2 rho theta_hat theta_hat^T) D^{-1}.

At ``L = 2``, ``r = 1`` these are the equations of :mod:`attnlib.theory.model.state_evolution` (tests check the map and
the fixed points against it). Branches hold invariant subspaces as there: ``"semantic"`` holds ``M = 0``,
``"positional"`` ``theta = 0``, ``"agnostic"`` both, ``"free"`` neither.

The nodes of the expectations are symmetrised scrambled Sobol rules in ``L (r + 1)`` dimensions (each base point
with its images under ``eta -> -eta`` and ``(xi, eta) -> -(xi, eta)``, folded where an overlap is held at zero,
:func:`general_nodes`); :mod:`attnlib.theory.solve.general_state_evolution` solves the fixed point.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri
from scipy.stats import qmc

from ...params import TaskParams, check_choice, check_finite_scalar, check_int, check_seeds
from .attention import softmax_rows, teacher_attention
from .general_prox import GeneralProx, prox_from_centre, prox_global, prox_warm, resolve_backend, sqrtm_spd
from .state_evolution import BRANCHES
from .status import branch_status

__all__ = ["GeneralOverlaps", "GeneralSolver", "GeneralResult", "MAX_L", "MAX_RANK", "simplex_gram",
           "principal_position_direction", "general_default_start", "general_nodes", "general_channel",
           "general_prior_update", "general_free_energy", "general_test_error"]

#: Largest sequence length the general engine takes (its proximal problem has ``L r`` variables).
MAX_L = 6
#: Largest student rank the general engine takes.
MAX_RANK = 3


def simplex_gram(L: int) -> np.ndarray:
    """Gram matrix of the regular simplex of unit vectors: 1 on the diagonal, ``-1/(L-1)`` off it
    (``G = L/(L-1) (I - 1 1^T/L)``; ``G 1 = 0``)."""
    L = check_int("L", L, 2)
    return (L / (L - 1.0)) * (np.eye(L) - 1.0 / L)


@dataclass(frozen=True)
class GeneralOverlaps:
    """Order parameters ``q`` (r, r), ``M`` (L, r), ``V`` (r, r), ``theta`` (r,) (module docstring)."""

    q: np.ndarray
    M: np.ndarray
    V: np.ndarray
    theta: np.ndarray

    def __post_init__(self):
        for name in ("q", "M", "V", "theta"):
            a = np.array(getattr(self, name), dtype=float)
            a.setflags(write=False)
            object.__setattr__(self, name, a)

    @property
    def L(self) -> int:
        return self.M.shape[0]

    @property
    def rank(self) -> int:
        return self.q.shape[0]

    def rotated(self, O: np.ndarray) -> "GeneralOverlaps":
        """The same student in another gauge, ``Q -> Q O`` (``O`` orthogonal, ``r x r``): ``q -> O^T q O``,
        ``V -> O^T V O``, ``theta -> O^T theta``, ``M -> M O``."""
        return GeneralOverlaps(q=O.T @ self.q @ O, M=self.M @ O, V=O.T @ self.V @ O, theta=O.T @ self.theta)

    def canonical(self, tol: float = 1e-9) -> "GeneralOverlaps":
        """The representative of the gauge orbit used to report a fixed point: ``self.rotated(O)`` with ``O`` of
        :meth:`canonical_rotation`."""
        return self if self.rank == 1 else self.rotated(self.canonical_rotation(tol))

    def canonical_rotation(self, tol: float = 1e-9) -> np.ndarray:
        """The rotation ``O`` to the representative of the gauge orbit ``Q -> Q O`` used by the solver (rank ``r > 1``; rank 1 is
        returned as is): the student's directions are the left singular vectors of ``K = [theta, M^T]``
        (``r x (L + 1)``, what the student knows of the teacher and of the positions) by decreasing singular value,
        completed by the eigenvectors of ``q`` in the null space of ``K``; each sign makes the largest entry of
        its row of ``K`` positive, or in the null space its entry of ``q`` with the first direction."""
        r = self.rank
        if r == 1:
            return np.eye(1)
        K = np.column_stack([self.theta, self.M.T])
        U, sv, _ = np.linalg.svd(K)
        k = int(np.sum(sv > tol * max(float(sv.max(initial=0.0)), 1e-300))) if sv.size else 0
        O = U.copy()
        if k < r:  # directions the signal does not fix: eigenvectors of q there
            N = U[:, k:]
            ev, W = np.linalg.eigh(N.T @ self.q @ N)
            O[:, k:] = N @ W[:, ::-1]
        Kr = O.T @ K
        qr = O.T @ self.q @ O
        for j in range(r):
            if j < k:
                flip = Kr[j, int(np.argmax(np.abs(Kr[j])))] < 0
            else:
                flip = j > 0 and qr[0, j] < 0
            if flip:
                O[:, j] = -O[:, j]
        return O

    def to_vector(self) -> np.ndarray:
        """The independent coordinates: upper triangles of ``q`` and ``V``, ``theta``, ``M`` (row-major)."""
        iu = np.triu_indices(self.rank)
        return np.concatenate([self.q[iu], self.V[iu], self.theta, self.M.ravel()])

    @classmethod
    def from_vector(cls, x, L: int, rank: int) -> "GeneralOverlaps":
        iu = np.triu_indices(rank)
        k = len(iu[0])

        def sym(v):
            a = np.zeros((rank, rank))
            a[iu] = v
            return a + np.triu(a, 1).T

        x = np.asarray(x, dtype=float)
        return cls(q=sym(x[:k]), V=sym(x[k:2 * k]), theta=x[2 * k:2 * k + rank], M=x[2 * k + rank:].reshape(L, rank))


@dataclass(frozen=True)
class GeneralSolver:
    """Numerical settings of :func:`solve_general`.

    Parameters
    ----------
    order : int
        log2 of the points of one scrambling of the symmetrised Sobol rule, in ``[6, 20]``.
    max_order : int
        The rule is refined up to this order while a relative standard error is above ``precision``: by
        ``2 log2(ratio)`` doublings (at least one) when the errors are ``ratio`` times the target.
    seeds : tuple of int
        Scrambling seeds (at least two); one fixed point per seed.
    precision : float
        Target standard error, in ``(0, 1]``, relative to the largest entry of each of ``q``, ``M`` and ``theta``
        (an entry a symmetry holds at zero is judged on the array's scale) and to ``eps_g`` and ``eps_t``; a
        scale below ``1e-3 rho`` is replaced by ``1e-3 rho``.
    tol : float
        Convergence of one scrambling's iteration: no entry of ``q``, ``V``, ``theta``, ``M`` moves by more than
        ``tol`` times the largest entry of its matrix (absolute below ``1e-4``), confirmed by a full proximal
        search.
    max_iter : int
        Iterations at most per scrambling and rule.
    damping, anderson :
        Weight of the new iterate, and history length of Anderson mixing.
    full_every : int
        A full proximal search every so many iterations (local descents from the last minimisers in between).
    chord : bool
        After the first scrambling's fixed point, solve the others and the finer rules by chord steps with the
        Jacobian of the map there (``attnlib.theory.solve.general_chord``), the iteration taking over where a chord
        fails; ``False``: the iteration throughout. Both stop at the same ``tol``.
    margin : float
        Between full searches, nodes whose runner-up minimum lay within this of the best are also descended from
        the runner-up.
    backend : {"auto", "numba", "numpy"}
        The proximal descents' code: compiled per node (``"numba"``, the default when numba is installed) or
        vectorised numpy (the reference); they agree to round-off.
    """

    order: int = 11
    max_order: int = 14
    seeds: tuple = (3, 4, 5, 6)
    precision: float = 2e-3
    tol: float = 1e-6
    max_iter: int = 300
    damping: float = 0.5
    anderson: int = 4
    full_every: int = 8
    chord: bool = True
    margin: float = 1e-3
    backend: str = "auto"

    def __post_init__(self):
        order = check_int("order", self.order, 6)
        max_order = check_int("max_order", self.max_order, order)
        if max_order > 20:
            raise ValueError(f"max_order must lie in [order, 20], got {max_order}")
        object.__setattr__(self, "seeds", check_seeds("seeds", self.seeds))
        for name, lo, hi in (("precision", 0.0, 1.0), ("tol", 0.0, 1.0), ("damping", 0.0, 1.0)):
            v = check_finite_scalar(name, getattr(self, name))
            if not lo < v <= hi:
                raise ValueError(f"{name} must lie in ({lo:g}, {hi:g}], got {v!r}")
        check_int("max_iter", self.max_iter, 1)
        check_int("anderson", self.anderson, 0)
        check_int("full_every", self.full_every, 1)
        if not check_finite_scalar("margin", self.margin) >= 0:
            raise ValueError(f"margin must lie in [0, inf), got {self.margin!r}")
        resolve_backend(self.backend)


@dataclass(frozen=True)
class GeneralResult:
    """A fixed point of the general state evolution (mean over scramblings) and what it predicts.

    ``q, M, V, theta`` and the conjugates ``q_hat, G_hat, V_hat, theta_hat`` are arrays; ``test_error`` is
    ``eps_g``, ``train_loss`` is ``eps_t = -Phi``. ``stderr`` holds the standard error of the mean over the
    scramblings of every one of them (same shapes). ``per_seed`` keeps each scrambling's fixed point.
    ``converged`` is False when some scrambling's iteration did not converge or ended on an unphysical fixed point
    (``eps_t < 0``); ``precise`` is False when the rule missed its precision target at ``max_order`` (the numbers
    are then the fixed point with larger error bars). Either issues a
    :class:`~attnlib.exceptions.ConvergenceWarning`.
    """

    params: TaskParams
    alpha: float
    branch: str
    rank: int
    q: np.ndarray
    M: np.ndarray
    V: np.ndarray
    theta: np.ndarray
    q_hat: np.ndarray
    G_hat: np.ndarray
    V_hat: np.ndarray
    theta_hat: np.ndarray
    test_error: float
    train_loss: float
    converged: bool
    precise: bool
    n_iter: int
    seconds: float
    rule: str
    stderr: dict = field(default_factory=dict)
    per_seed: tuple = ()
    multi_fraction: float = 0.0

    @property
    def L(self) -> int:
        return self.M.shape[0]

    @property
    def overlaps(self) -> GeneralOverlaps:
        return GeneralOverlaps(self.q, self.M, self.V, self.theta)

    @property
    def m(self) -> float:
        """The positional overlap's size ``||M||_F / sqrt 2`` (at ``L = 2``, ``r = 1``: ``|m|``)."""
        return float(np.linalg.norm(self.M) / math.sqrt(2.0))

    def defining_overlap(self) -> tuple[float, float]:
        """The size of the branch's defining overlap with its standard error: ``||theta||`` on the semantic branch,
        ``||M||_F / sqrt 2`` (:attr:`m`) on the positional one (0, 0 for the others; error 0 where unmeasured)."""
        if self.branch not in ("semantic", "positional"):
            return 0.0, 0.0
        a, scale = (self.theta, 1.0) if self.branch == "semantic" else (self.M, math.sqrt(2.0))
        size = float(np.linalg.norm(a))
        e = self.stderr.get("theta" if self.branch == "semantic" else "M")
        err = float(np.linalg.norm(a * e) / size) if e is not None and size > 0 else 0.0
        return size / scale, err / scale

    @property
    def status(self) -> str:
        """``"on-branch"``, ``"branch-absent"`` or ``"not-converged"``
        (:func:`attnlib.theory.model.status.branch_status` of :meth:`defining_overlap`)."""
        return branch_status(self.branch, self.converged, *self.defining_overlap(), self.params.rho)

    def as_row(self) -> dict:
        """A flat row: ``alpha, branch, rank, L``, every entry (``q_11``, ``M_1_1``, ``theta_1``, ...; 1-based)
        with its ``_err``, ``test_error``, ``train_loss``, ``converged``, ``n_iter``, ``seconds``, ``rule`` and the
        task's parameters."""
        row = {"alpha": self.alpha, "branch": self.branch, "rank": self.rank, "L": self.L}
        for name in ("q", "V", "theta", "M"):
            a, e = getattr(self, name), self.stderr.get(name)
            for idx in np.ndindex(a.shape):
                key = f"{name}_" + "_".join(str(i + 1) for i in idx)
                row[key] = float(a[idx])
                row[f"{key}_err"] = float(e[idx]) if e is not None else math.nan
        for name in ("test_error", "train_loss"):
            row[name] = getattr(self, name)
            row[f"{name}_err"] = float(self.stderr.get(name, math.nan))
        row.update(converged=self.converged, status=self.status, precise=self.precise, n_iter=self.n_iter, seconds=self.seconds,
                   rule=self.rule,
                   multi_fraction=self.multi_fraction)
        row.update(self.params.as_dict())
        return row


def principal_position_direction(A) -> np.ndarray:
    """The unit sum-zero direction of tokens along which ``A`` varies most (the eigenvector of
    ``C (A + A^T)/2 C`` of largest absolute eigenvalue, ``C`` the centring), with its first nonzero entry
    positive; at ``L = 2``, ``(1, -1)/sqrt 2``. The positional start of a branch (and of a finite-d descent)
    points the student along it."""
    A = np.asarray(A, dtype=float)
    L = A.shape[0]
    C = np.eye(L) - 1.0 / L
    ev, U = np.linalg.eigh(C @ (0.5 * (A + A.T)) @ C)
    score = np.where(np.abs(U.sum(axis=0)) > 1e-8, -1.0, np.abs(ev))  # never the constant vector
    u = U[:, int(np.argmax(score))]
    return u if u[np.flatnonzero(np.abs(u) > 1e-12)[0]] > 0 else -u


def general_default_start(params: TaskParams, branch: str, rank: int = 1) -> GeneralOverlaps:
    """Starting overlaps of a branch (at ``L = 2``, ``r = 1`` those of
    :func:`attnlib.theory.model.state_evolution.default_start`): near the teacher (semantic), along the principal
    positional direction of ``A`` (positional), a small uninformed student (agnostic), or a bit of both (free);
    the extra columns of a rank ``r > 1`` student start small and generic."""
    check_choice("branch", branch, BRANCHES)
    rank = check_int("rank", rank, 1)
    rho, L = params.rho, params.L
    u = principal_position_direction(params.A_array) * math.sqrt(2.0)  # at L = 2: (1, -1)
    eye = np.eye(rank)
    extra = np.diag([1.0] + [0.3] * (rank - 1))
    M0 = np.zeros((L, rank))
    theta0 = np.zeros(rank)
    if branch == "semantic":
        q, V, theta = rho * extra, eye, 0.9 * rho * eye[0]
    elif branch == "free":
        q, V, theta = 0.5 * rho * extra, eye, 0.5 * rho * eye[0]
        M0 = 0.1 * np.outer(u, eye[0])
    elif branch == "positional":
        q, V, theta = 0.2 * rho * extra, eye, theta0
        M0 = 0.25 * np.outer(u, eye[0])
    else:
        q, V, theta = 0.2 * rho * extra, eye, theta0
    if rank > 1 and branch in ("positional", "free"):
        # a generic second positional column (another sum-zero direction, or the same one at L = 2)
        C = np.eye(L) - 1.0 / L
        w = C @ np.arange(1.0, L + 1.0) ** 2
        w = w - (w @ u) * u / (u @ u) if L > 2 else u
        M0[:, 1:] = 0.05 * (w / max(np.linalg.norm(w), 1e-12))[:, None]
    return GeneralOverlaps(q=q, M=M0, V=V, theta=theta)


def _hold(branch: str) -> tuple[bool, bool]:
    """Whether ``M`` and ``theta`` are held at zero on ``branch``."""
    check_choice("branch", branch, BRANCHES)
    return branch in ("semantic", "agnostic"), branch in ("positional", "agnostic")


def general_nodes(L: int, rank: int, order: int, seed: int, hold=(False, False)):
    """Nodes ``xi`` (N, L, r), ``eta`` (N, L) and weights (N,) of the symmetrised Sobol rule with ``2^order``
    points in ``L (r + 1)`` dimensions (module docstring), folded by the flips that leave every integrand
    invariant where ``M`` (``hold[0]``: ``(xi, eta) -> -(xi, eta)``) or ``theta`` (``hold[1]``: ``eta -> -eta``)
    is held at zero."""
    dim = L * (rank + 1)
    base = ndtri(np.clip(qmc.Sobol(d=dim, scramble=True, seed=seed).random_base2(order - 2), 1e-16, 1 - 1e-16))
    f_eta = np.concatenate([np.ones(L * rank), -np.ones(L)])
    images = [np.ones(dim), f_eta, -np.ones(dim), -f_eta]
    keep = [0, 1, 2, 3]
    if hold[0] and hold[1]:
        keep = [0]
    elif hold[0]:
        keep = [0, 1]  # the images under full negation carry the same integrands
    elif hold[1]:
        keep = [0, 2]  # the images under eta -> -eta carry the same integrands
    pts = np.concatenate([base * images[k] for k in keep])
    w = np.full(len(pts), 1.0 / len(pts))
    return pts[:, :L * rank].reshape(-1, L, rank), np.ascontiguousarray(pts[:, L * rank:]), w


def _fields(params: TaskParams, x: GeneralOverlaps, xi, eta):
    qs = sqrtm_spd(x.q)
    qis = np.linalg.inv(qs)
    w = qis @ x.theta
    b2 = params.rho - float(w @ w)
    if b2 < -1e-12 * params.rho:
        raise FloatingPointError(f"theta^T q^-1 theta = {w @ w:.6g} exceeds rho = {params.rho:.6g}")
    b = math.sqrt(max(b2, 0.0))
    c = xi @ qs + x.M[None]
    h_star = xi @ w + b * eta
    return c, h_star, qis, b


@dataclass(frozen=True)
class _Channel:
    G_hat: np.ndarray
    q_hat: np.ndarray
    theta_hat: np.ndarray
    V_hat: np.ndarray
    mean_M: float
    prox: GeneralProx


def general_channel(params: TaskParams, alpha: float, x: GeneralOverlaps, nodes, hold=(False, False),
                    warm: GeneralProx | str | None = None, margin: float = 1e-3, backend: str = "auto") -> _Channel:
    """Conjugates ``G_hat, q_hat, theta_hat, V_hat`` of ``x`` (module docstring), the mean proximal value
    ``E[M]`` and the proximal points: the full search (:func:`attnlib.theory.model.general_prox.prox_global`),
    local descents from ``warm`` (:func:`attnlib.theory.model.general_prox.prox_warm`), or with ``warm="centre"`` one
    descent from the centre ``c`` (the cheap first step of an iteration). Held overlaps get zero
    conjugates (``G_hat`` for ``M``, ``theta_hat`` for ``theta``). ``backend``: that of the proximal descents
    (:class:`GeneralSolver`)."""
    xi, eta, w = nodes
    c, h_star, qis, b = _fields(params, x, xi, eta)
    T = teacher_attention(h_star, params.omega, params.A_array)
    if warm is None:
        prox = prox_global(c, T, x.V, params.sigma, backend=backend)
    elif warm == "centre":
        prox = prox_from_centre(c, T, x.V, params.sigma, backend=backend)
    else:
        prox = prox_warm(c, T, x.V, params.sigma, warm, margin, backend=backend)
    g = (prox.h - c) @ np.linalg.inv(x.V)
    r = x.rank
    G_hat = np.zeros_like(x.M) if hold[0] else alpha * np.einsum("n,nli->li", w, g)
    q_hat = alpha * np.einsum("n,nli,nlj->ij", w, g, g)
    if hold[1] or b == 0:
        theta_hat = np.zeros(r)
    else:
        theta_hat = alpha * np.einsum("n,nl,nli->i", w, eta, g) / b
    V_raw = -alpha * qis @ np.einsum("n,nli,nlj->ij", w, xi, g) + np.linalg.solve(x.q, np.outer(x.theta, theta_hat))
    return _Channel(G_hat=G_hat, q_hat=0.5 * (q_hat + q_hat.T), theta_hat=theta_hat, V_hat=0.5 * (V_raw + V_raw.T),
                    mean_M=float(w @ prox.value), prox=prox)


def _prior_parts(params: TaskParams, ch: _Channel, G: np.ndarray):
    s2 = params.sigma ** 2
    r = ch.q_hat.shape[0]
    D = params.lam * np.eye(r) + s2 * ch.V_hat
    if np.linalg.eigvalsh(D).min() <= 0:
        raise FloatingPointError("lambda + sigma^2 V_hat is not positive definite")
    B = s2 * ch.q_hat + ch.G_hat.T @ G @ ch.G_hat + s2 * params.rho * np.outer(ch.theta_hat, ch.theta_hat)
    return D, B


def general_prior_update(params: TaskParams, ch: _Channel, G: np.ndarray) -> GeneralOverlaps:
    """The overlaps from the conjugates (module docstring); ``FloatingPointError`` when ``D`` is not positive
    definite."""
    s2 = params.sigma ** 2
    D, B = _prior_parts(params, ch, G)
    Di = np.linalg.inv(D)
    q = s2 * Di @ B @ Di
    return GeneralOverlaps(q=0.5 * (q + q.T), M=G @ ch.G_hat @ Di, V=s2 * 0.5 * (Di + Di.T),
                           theta=s2 * params.rho * Di @ ch.theta_hat)


def general_free_energy(params: TaskParams, alpha: float, x: GeneralOverlaps, ch: _Channel,
                        G: np.ndarray) -> float:
    """``Phi`` at ``x`` with conjugates ``ch`` (book :eq:`eq-general-free-energy`); ``eps_t = -Phi``."""
    D, B = _prior_parts(params, ch, G)
    return float(0.5 * np.trace(ch.V_hat @ x.q) - 0.5 * np.trace(ch.q_hat @ x.V) - np.sum(x.M * ch.G_hat)
                 - x.theta @ ch.theta_hat + 0.5 * np.trace(np.linalg.solve(D, B)) - alpha * ch.mean_M)


def general_test_error(params: TaskParams, x: GeneralOverlaps, nodes) -> float:
    """``eps_g = (sigma^2/2) E ||softmax_row(c c^T) - T(h*)||_F^2`` at the overlaps ``x`` (book
    :eq:`eq-general-test-error`), on the given nodes."""
    xi, eta, w = nodes
    c, h_star, _, _ = _fields(params, x, xi, eta)
    S = softmax_rows(c @ np.swapaxes(c, -1, -2))
    return 0.5 * params.sigma ** 2 * float(w @ np.sum((S - teacher_attention(h_star, params.omega, params.A_array)) ** 2,
                                                         axis=(-1, -2)))


def _check_domain(params: TaskParams, x: GeneralOverlaps) -> None:
    v = x.to_vector()
    if not np.isfinite(v).all():
        raise FloatingPointError("non-finite overlaps")
    if np.linalg.eigvalsh(x.q).min() <= 0 or np.linalg.eigvalsh(x.V).min() <= 0:
        raise FloatingPointError("q or V not positive definite")
    if float(x.theta @ np.linalg.solve(x.q, x.theta)) > params.rho * (1 + 1e-12):
        raise FloatingPointError("theta^T q^-1 theta > rho")


def _project(x: GeneralOverlaps, hold) -> GeneralOverlaps:
    """``x`` with the held overlaps at exactly zero."""
    return GeneralOverlaps(q=x.q, M=np.zeros_like(x.M) if hold[0] else x.M, V=x.V,
                           theta=np.zeros_like(x.theta) if hold[1] else x.theta)


@dataclass
class _ScramblingOutcome:
    x: GeneralOverlaps
    ch: _Channel
    converged: bool
    n_iter: int
    residual: float


def _block_scales(x: GeneralOverlaps) -> np.ndarray:
    """Per coordinate of ``x.to_vector()``, the largest entry of its matrix (``q``, ``V``, ``theta`` or ``M``), at
    least ``1e-4``."""
    blocks = (x.q, x.V, x.theta, x.M)
    sizes = (len(np.triu_indices(x.rank)[0]),) * 2 + (x.rank, x.M.size)
    return np.concatenate([np.full(n, max(float(np.max(np.abs(b))), 1e-4)) for n, b in zip(sizes, blocks)])


def _block_residual(x: GeneralOverlaps, fx: GeneralOverlaps) -> float:
    """The largest change from ``x`` to its image ``fx`` of an entry of ``q``, ``V``, ``theta`` or ``M``, relative to
    the largest entry of its matrix (absolute below ``1e-4``, :func:`_block_scales`); at ``L = 2``, ``r = 1`` the
    relative change of each overlap, as in the ``L = 2`` solver."""
    return float(np.max(np.abs(fx.to_vector() - x.to_vector()) / _block_scales(x)))


def _image(params, alpha, x: GeneralOverlaps, nodes, hold, G, warm, margin, backend, canonical: bool = True):
    """The map at ``x``: its image in the gauge of ``x`` (``canonical``: the canonical gauge with the signs of
    ``x``, :func:`_match_signs`; else aligned with ``x``, :func:`_align`), projected on the branch, and the channel;
    ``FloatingPointError`` when the image leaves the domain."""
    ch = general_channel(params, alpha, x, nodes, hold, warm, margin, backend)
    fx = general_prior_update(params, ch, G)
    fx = _project(_match_signs(fx.canonical(), x) if canonical else _align(fx, x), hold)
    _check_domain(params, fx)
    return fx, ch


def _alignment(f: GeneralOverlaps, ref: GeneralOverlaps) -> np.ndarray:
    """The orthogonal ``O`` (``r x r``) that brings ``f`` closest to ``ref`` in the gauge ``Q -> Q O``: the
    Procrustes rotation of the stacked ``theta^T``, ``M``, ``q``, ``V`` (each block scaled by its size in
    ``ref``); the identity at rank 1."""
    r = f.rank
    if r == 1:
        return np.eye(1)
    Yf, Yr = [], []
    for a, b in ((f.theta[None, :], ref.theta[None, :]), (f.M, ref.M), (f.q, ref.q), (f.V, ref.V)):
        scale = float(np.linalg.norm(b))
        if scale > 0:
            Yf.append(a / scale)
            Yr.append(b / scale)
    U, _, Wt = np.linalg.svd(np.vstack(Yf).T @ np.vstack(Yr))
    return U @ Wt


def _align(f: GeneralOverlaps, ref: GeneralOverlaps) -> GeneralOverlaps:
    """``f`` in the gauge closest to ``ref`` (:func:`_alignment`). The equations are covariant under the
    gauge, so aligning each image to its iterate removes the flat direction of the fixed-point iteration."""
    return f if f.rank == 1 else f.rotated(_alignment(f, ref))


def _match_signs(f: GeneralOverlaps, ref: GeneralOverlaps) -> GeneralOverlaps:
    """``f`` with each of its student directions (columns) flipped where that brings it closer to ``ref``
    (:func:`_alignment` restricted to sign flips): the canonical gauge fixes a direction's sign by an entry that
    vanishes at a symmetric fixed point, and near it the iteration must not flip between the two signs."""
    O = _alignment(f, ref)
    signs = np.where(np.diag(O) < 0, -1.0, 1.0)
    return f if np.all(signs > 0) else f.rotated(np.diag(signs))


def _rotate_channel(ch: _Channel, O: np.ndarray) -> _Channel:
    """The conjugates in the gauge ``Q -> Q O``."""
    return _Channel(G_hat=ch.G_hat @ O, q_hat=O.T @ ch.q_hat @ O, theta_hat=O.T @ ch.theta_hat,
                    V_hat=O.T @ ch.V_hat @ O, mean_M=ch.mean_M, prox=ch.prox)



"""State evolution (replica fixed-point equations) of the global minimum of the empirical risk.

Implements book chapter 4 (:eq:`eq-prox` to :eq:`eq-free-energy`) for ``L = 2``, ``r = 1``. Given the
overlaps ``(q, m, V, theta)``, for every quadrature node ``(xi, eta) ~ N(0, I_4)``

    c = sqrt(q) xi + m s,   T = T(h*(xi, eta)),   h_hat = prox(c, T; V),   g = (h_hat - c) / V,

the conjugates are

    m_hat     = alpha E[s . g]
    q_hat     = alpha E[|g|^2]
    theta_hat = alpha E[g . eta] / sqrt(rho - theta^2/q)
    V_hat     = -alpha E[g . xi] / sqrt(q) + theta theta_hat / q,

and, with ``D = lambda + sigma^2 V_hat``, the overlaps are updated as

    V = sigma^2/D,   m = m_hat/D,   theta = sigma^2 rho theta_hat/D,
    q = sigma^2 (sigma^2 q_hat + m_hat^2 + sigma^2 rho theta_hat^2)/D^2.

At the fixed point the training loss is ``eps_t = -Phi`` with

    Phi = (V_hat q - q_hat V)/2 - m m_hat - theta theta_hat
          + (sigma^2 q_hat + m_hat^2 + sigma^2 rho theta_hat^2)/(2D) - alpha E[M],

``M`` the minimal value of the proximal problem, and the test error is ``eps_g(q, m, theta)``
(:func:`attnlib.theory.model.generalisation.test_error_from_overlaps`).

Branches are followed by holding an overlap at exactly zero, which symmetries preserve for every ``A``
(book :ref:`sec-branches`; :func:`_hold`): ``"positional"`` holds ``theta = 0``, ``"semantic"`` holds ``m = 0``,
``"agnostic"`` holds both and ``"free"`` neither (started from given overlaps, for example those of a
finite-d minimiser). A branch's fixed point is the global minimum of the training loss *within* its
invariant subspace; the state evolution says nothing about local minima of higher training loss.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np
from scipy.special import expit

from .attention import teacher_diagonal
from .generalisation import POSITION_SIGNS
from ...params import TaskParams, check_choice, check_finite_scalar
from .proximal import PROX_BACKENDS, PROX_MODES, minimise_locally, resolve_backend, solve_prox
from .quadrature import Quadrature
from .status import branch_status, defining_overlap

try:  # compiled fields, teacher diagonal and sums (optional, as the proximal kernels)
    from . import _conjugate_kernels
except ImportError:  # pragma: no cover - exercised only without numba
    _conjugate_kernels = None

__all__ = ["Overlaps", "Conjugates", "SESolver", "SEResult", "BRANCHES", "default_start", "symmetry_generators",
           "se_nodes", "conjugates_and_energy", "overlaps_from_conjugates", "state_evolution_step",
]

BRANCHES = ("semantic", "positional", "agnostic", "free")


@dataclass(frozen=True)
class Overlaps:
    """Order parameters ``(q, m, V, theta)`` of the student (book :eq:`eq-overlaps`; ``V`` is the response width)."""

    q: float
    m: float
    V: float
    theta: float

    def as_array(self) -> np.ndarray:
        return np.array([self.q, self.m, self.V, self.theta])

    @classmethod
    def from_array(cls, x) -> "Overlaps":
        return cls(*(float(v) for v in x))


@dataclass(frozen=True)
class Conjugates:
    """Conjugate parameters ``(q_hat, m_hat, V_hat, theta_hat)``."""

    q_hat: float
    m_hat: float
    V_hat: float
    theta_hat: float


@dataclass(frozen=True)
class SESolver:
    """Numerical settings of the state-evolution solver (kept apart from the model's :class:`TaskParams`).

    Parameters
    ----------
    quadrature : Quadrature
        Rule for the 4-dimensional expectation over ``(xi, eta)``, laid out in rotated coordinates
        (``se_nodes``; use an even Gauss-Hermite order). The default, Gauss-Hermite with 12 nodes per
        dimension, is fast but misses the converged fixed point of the positional branch by a few per cent
        (the proximal point jumps inside the integrand; book :ref:`sec-accurate-rule`);
        :func:`attnlib.solve_accurately` averages scrambled Sobol rules to within ``2e-3``.
    prox_mode : {"global", "from-zero"}
        Treatment of the non-convex proximal problem (``attnlib.theory.model.proximal``).
    n_ring : int
        Extra starts of the global proximal search.
    prox_backend : {"auto", "numba", "numpy"}
        Implementation of the proximal step (``attnlib.theory.model.proximal.resolve_backend``); the backends agree to
        round-off, so this changes the speed, not the answer.
    tol : float
        Convergence when every overlap moves by less than ``tol`` relative (absolute below ``1e-4``).
    max_iter : int
        Outer iterations at most.
    damping : float
        Weight of the new iterate in a plain damped step, in ``(0, 1]``.
    anderson : int
        History length of Anderson acceleration (0 switches it off).
    restart_factor : float
        An accelerated step that makes the residual grow by more than this factor is rejected: the iteration
        takes a plain damped step from the previous iterate instead and restarts the Anderson history.
    jump_margin : float
        Between full proximal searches, nodes whose second-best local minimum lay within this margin of the
        best are searched fully again (the rest follow their minimum by local descent).
    cheap_below : float
        Cheap steps are taken only once the residual is below this (while the overlaps still move a lot,
        the global proximal minimum of many nodes switches basin, and only the full search follows it).
    coarse_quadrature : Quadrature or None
        A cheap rule used for the transient, until the residual falls below ``coarse_until``; then the
        iteration continues with ``quadrature`` (None: ``quadrature`` throughout). The fixed point is that of
        ``quadrature`` alone.
    coarse_until : float
        Residual at which the coarse rule hands over to the fine one.
    tie_smoothing : float
        ``tau >= 0``. With ``tau > 0`` (full proximal searches, and in a cheap step the nodes near a jump,
        which it searches fully; the others lie more than ``jump_margin`` from a tie, where the runner-up's
        weight is below ``expit(-jump_margin / tau)``, hence ``jump_margin >= 10 tau``) each node's proximal point is the
        Boltzmann mixture of its best and runner-up local minima at temperature ``tau`` (weight
        ``expit(-gap/tau)`` on the runner-up, ``M`` the soft minimum ``F_1 - tau log(1 + e^{-gap/tau})``),
        instead of the hard choice. The quadrature sum then varies smoothly where a node's proximal point
        switches minimum, which pseudo-arclength continuation needs (``attnlib.theory.branches.continuation``); the
        state evolution of book chapter 4 is the limit ``tau -> 0`` (default 0: exact hard choice).
    hover_window : int
        ``W > 0``: the iteration also stops, unconverged, when the best residual of its last ``W`` iterations is no
        better than half the best of the ``W`` before them, once its best is below ``HOVER_BELOW`` (1e-2, module
        ``attnlib.theory.solve.iteration``): a map that is rough at the scale of the tolerance (many nodes switching
        proximal minimum, at large width ``V``) makes the residual hover there for hundreds of iterations. For a
        start that other solvers refine (the pooled rule's chord); 0 (default): off.
    """

    quadrature: Quadrature = field(default_factory=lambda: Quadrature("gauss-hermite", 12))
    prox_mode: str = "global"
    n_ring: int = 12
    prox_backend: str = "auto"
    tol: float = 1e-6
    max_iter: int = 400
    damping: float = 0.5
    anderson: int = 4
    restart_factor: float = 3.0
    jump_margin: float = 1e-3
    cheap_below: float = 0.2
    coarse_quadrature: Quadrature | None = field(default_factory=lambda: Quadrature("gauss-hermite", 6))
    coarse_until: float = 1e-3
    tie_smoothing: float = 0.0
    hover_window: int = 0

    def __post_init__(self):
        if self.prox_mode not in PROX_MODES:
            raise ValueError(f"prox_mode must be one of {PROX_MODES}, got {self.prox_mode!r}")
        if self.prox_backend not in PROX_BACKENDS:
            raise ValueError(f"prox_backend must be one of {PROX_BACKENDS}, got {self.prox_backend!r}")
        if not (0.0 < check_finite_scalar("damping", self.damping) <= 1.0):
            raise ValueError(f"damping must lie in (0, 1], got {self.damping!r}")
        if not check_finite_scalar("restart_factor", self.restart_factor) > 1.0:
            raise ValueError(f"restart_factor must lie in (1, inf), got {self.restart_factor!r}")
        if not check_finite_scalar("tie_smoothing", self.tie_smoothing) >= 0.0:
            raise ValueError(f"tie_smoothing must lie in [0, inf), got {self.tie_smoothing!r}")
        if self.tie_smoothing > 0 and not self.jump_margin >= 10 * self.tie_smoothing:
            raise ValueError(f"jump_margin must be >= 10 tie_smoothing = {10 * self.tie_smoothing:g} (cheap steps "
                             f"search the nodes within it of a tie), got {self.jump_margin!r}")
        if not (0.0 < check_finite_scalar("tol", self.tol) < 1.0):
            raise ValueError(f"tol must lie in (0, 1), got {self.tol!r}")
        for name in ("max_iter", "anderson", "n_ring", "hover_window"):
            v = getattr(self, name)
            lo = 1 if name == "max_iter" else 0
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")


@dataclass(frozen=True)
class SEResult:
    """A fixed point of the state evolution and what it predicts.

    ``test_error`` is ``eps_g``, ``train_loss`` is ``eps_t = -Phi`` (book :eq:`eq-train-loss`,
    :eq:`eq-free-energy`). When ``converged`` is False the numbers are the last iterate, not a fixed point.
    ``status`` names the outcome in one word: ``"on-branch"``, ``"branch-absent"`` (converged, with the branch's
    defining overlap vanished: the numbers are the uninformed fixed point, or the trivial one ``q = 0`` where the
    ridge wins) or ``"not-converged"``.
    ``rule`` names the quadrature; ``stderr`` holds the standard error of ``q, m, V, theta, test_error,
    train_loss`` where the rule measures it (the default rule, :func:`attnlib.solve_chord`), and is empty for a
    single deterministic rule (an explicit ``solver``), whose error the numerics appendix measures.
    ``n_iter`` counts the map evaluations.
    """

    params: TaskParams
    alpha: float
    branch: str
    q: float
    m: float
    V: float
    theta: float
    q_hat: float
    m_hat: float
    V_hat: float
    theta_hat: float
    test_error: float
    train_loss: float
    converged: bool
    n_iter: int
    residual: float
    seconds: float = 0.0
    residual_history: tuple = ()
    rule: str = ""
    stderr: dict = field(default_factory=dict)

    @property
    def overlaps(self) -> Overlaps:
        return Overlaps(self.q, self.m, self.V, self.theta)

    @property
    def status(self) -> str:
        """``"on-branch"``, ``"branch-absent"`` or ``"not-converged"``
        (:func:`attnlib.theory.model.status.branch_status`): converged with the branch's defining overlap
        (``theta`` semantic, ``m`` positional) present above its floor and its standard error, converged with it
        vanished (the numbers are then the uninformed or trivial fixed point), or not converged."""
        key = "theta" if self.branch == "semantic" else "m"
        return branch_status(self.branch, self.converged, defining_overlap(self.branch, self),
                             self.stderr.get(key, 0.0), self.params.rho)

    def as_row(self) -> dict:
        """Tidy-table row (no history): every field, ``status``, ``<name>_err`` for each standard error, the
        task's parameters."""
        row = {k: v for k, v in asdict(self).items() if k not in ("params", "residual_history", "stderr")}
        row["status"] = self.status
        row.update({f"{k}_err": v for k, v in self.stderr.items()})
        row.update(self.params.as_dict())
        return row


def _hold(params: TaskParams, branch: str, fix_m=None, fix_theta=None) -> tuple:
    """Pinned overlaps ``(m, theta)`` of a branch: a value to hold, or None for a free overlap.

    ``m = 0`` and ``theta = 0`` are invariant subspaces of the state evolution for every ``A`` (book
    :ref:`sec-branches`): flipping the sign of all Gaussian inputs ``(xi, eta)`` maps ``c -> -c`` at ``m = 0``
    and leaves both attention maps unchanged (they depend on quadratic forms only), so ``g -> -g`` and
    ``m_hat = alpha E[s . g] = 0``; flipping ``eta`` alone at ``theta = 0`` leaves ``c`` and ``T`` unchanged and
    flips the ``theta_hat`` integrand. The semantic branch holds ``m = 0``, the positional one ``theta = 0``,
    the agnostic point both, and ``"free"`` neither.
    """
    check_choice("branch", branch, BRANCHES)
    pin_m = 0.0 if branch in ("semantic", "agnostic") else None
    pin_theta = 0.0 if branch in ("positional", "agnostic") else None
    if fix_m is not None:
        pin_m = check_finite_scalar("fix_m", fix_m)
    if fix_theta is not None:
        pin_theta = check_finite_scalar("fix_theta", fix_theta)
    return pin_m, pin_theta


def default_start(params: TaskParams, branch: str) -> Overlaps:
    """Starting overlaps of a branch: close to the teacher (semantic), to the positional direction
    (positional), a small uninformed student (agnostic), or a bit of both (free)."""
    check_choice("branch", branch, BRANCHES)
    rho = params.rho
    if branch == "semantic":
        return Overlaps(q=rho, m=0.0, V=1.0, theta=0.9 * rho)
    if branch == "free":
        return Overlaps(q=0.5 * rho, m=0.1, V=1.0, theta=0.5 * rho)
    if branch == "positional":
        return Overlaps(q=0.2 * rho, m=0.25, V=1.0, theta=0.0)
    if branch == "agnostic":
        return Overlaps(q=0.2 * rho, m=0.0, V=1.0, theta=0.0)
    raise AssertionError(f"no default start for {branch!r}")  # pragma: no cover - every branch has one


def _check_state(x: Overlaps, rho: float) -> None:
    if not (np.isfinite(x.as_array()).all() and x.q > 0 and x.V > 0 and x.theta**2 <= rho * x.q * (1 + 1e-12)):
        raise FloatingPointError(f"invalid overlaps {x}")


def symmetry_generators(params: TaskParams, hold=(None, None)) -> tuple:
    """Symmetries of the state-evolution integrands, as sign flips of the rotated coordinates
    ``(u_xi, v_xi, u_eta, v_eta)`` of :func:`se_nodes` (``u = (x_1 + x_2)/sqrt 2``, ``v = (x_1 - x_2)/sqrt 2``).

    (``hold`` gives the pinned ``(m, theta)``, None where free; only pins at exactly zero add symmetries.)

    * ``A_11 = A_22``: ``(xi, eta) -> (-swap xi, -swap eta)``, i.e. ``u -> -u``, maps ``c -> -swap c``,
      ``T -> swap T``, hence ``g -> -swap g``, leaving every integrand invariant.
    * ``theta = 0`` held: ``eta -> -eta`` leaves ``T`` and ``c`` unchanged (only the held ``theta_hat``
      integrand changes sign).
    * ``m = 0`` held: ``(xi, eta) -> (-xi, -eta)`` maps ``g -> -g`` (only the held ``m_hat`` integrand
      changes sign).
    """
    ident = (0, 1, 2, 3)
    gens = []
    if params.swap_symmetric:
        gens.append((ident, (-1, 1, -1, 1)))
    if hold[1] == 0.0:
        gens.append((ident, (1, 1, -1, -1)))
    if hold[0] == 0.0:
        gens.append((ident, (-1, -1, -1, -1)))
    return tuple(gens)


_ROT = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2.0)


def se_nodes(quadrature: Quadrature, generators: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature nodes ``(xi_1, xi_2, eta_1, eta_2)`` and weights of the state evolution.

    The rule is laid out in the rotated coordinates ``u = (x_1 + x_2)/sqrt 2``, ``v = (x_1 - x_2)/sqrt 2`` of
    each pair (the Gaussian is rotation invariant). With an even Gauss-Hermite order no node then lies on the
    token-swap mirror ``x_1 = x_2`` (nor at the origin), where the proximal problem has two mirror-image
    minima of equal value and the integrand is ambiguous; and the symmetries of
    :func:`symmetry_generators` are sign flips that map the grid onto itself, so their orbits are folded
    (:meth:`Quadrature.reduced_points`).
    """
    pts, wts = quadrature.reduced_points(4, generators)
    xi = pts[:, :2] @ _ROT.T
    eta = pts[:, 2:] @ _ROT.T
    return np.ascontiguousarray(np.concatenate([xi, eta], axis=1)), wts


def _smoothed(prox, tie_smoothing: float):
    """The Boltzmann mixture of each node's best and runner-up proximal minima at temperature ``tie_smoothing``
    (a smooth stand-in for the hard choice, :class:`SESolver` ``tie_smoothing``); ``prox`` itself at zero
    temperature or without a runner-up."""
    if not tie_smoothing > 0 or prox.gap is None:
        return prox
    z = prox.gap / tie_smoothing
    p_alt = expit(-z)[:, None]
    return replace(prox, h=(1.0 - p_alt) * prox.h + p_alt * prox.h_alt,
                   value=prox.value - tie_smoothing * np.log1p(np.exp(-z)))


def conjugates_and_energy(params: TaskParams, alpha: float, x: Overlaps, nodes: np.ndarray,
                          weights: np.ndarray, solver: SESolver, hold=(None, None),
                          warm: tuple | None = None, teacher: dict | None = None):
    """Conjugates of the overlaps ``x`` (book :eq:`eq-conjugates`), the mean proximal value ``E[M]`` and the proximal
    points.

    Without ``warm`` the proximal step is the solver's deterministic one (``solver.prox_mode``). With
    ``warm = (h, near_jump)`` (what a previous call returned, for a nearby state) and ``prox_mode="global"``
    it is one local descent from ``h`` per node, plus a full search on the nodes flagged ``near_jump``
    (whose second-best local minimum lay within ``solver.jump_margin`` of the best at the last full
    search): the cheap step that :func:`iterate_state_evolution` takes between full searches (it always
    confirms a fixed point with a full search).

    ``hold = (m_pin, theta_pin)`` pins overlaps (None: free). A pinned overlap is a constraint on the
    minimisation: its conjugate becomes the Lagrange multiplier that keeps it at the pinned value
    (``m_hat = m_pin D``, ``theta_hat = theta_pin D / (sigma^2 rho)``), while ``V_hat`` keeps the integral
    value of ``theta_hat`` (it comes from Stein's lemma, ``V_hat = -alpha E[d g / d c]``).

    With the compiled backend (``solver.prox_backend`` resolving to ``"numba"``) the fields ``c``, the teacher
    diagonal and the weighted sums are one compiled pass each (:mod:`attnlib.theory.model._conjugate_kernels`; sums in a
    fixed blockwise order, independent of the BLAS kernel); with ``"numpy"`` the same quantities are numpy
    expressions. The two agree to the precision the proximal descent is stopped at.

    ``teacher`` (optional) is a dict that a caller evaluating many states on the same ``nodes`` keeps for them: it
    holds the last teacher diagonal with the two numbers it depends on (``theta / sqrt(q)`` and
    ``sqrt(rho - theta^2 / q)``), which is reused while they are unchanged (always on the positional branch, where
    ``theta = 0``).

    Returns
    -------
    Conjugates, float, tuple (h, near_jump) to pass as ``warm`` to the next call
    """
    params.require_two_tokens("conjugates_and_energy")
    rho = params.rho
    compiled = resolve_backend(solver.prox_backend) == "numba"  # the compiled passes over the nodes
    xi, eta = nodes[:, :2], nodes[:, 2:]
    sq = np.sqrt(x.q)
    b = np.sqrt(max(rho - x.theta**2 / x.q, 0.0))
    if compiled:
        nodes = np.ascontiguousarray(nodes, dtype=float)
        c = _conjugate_kernels.student_fields(nodes, float(sq), float(x.m))
    else:
        c = sq * xi + x.m * POSITION_SIGNS
    key = (x.theta / sq, b)
    if teacher is not None and teacher.get("key") == key:
        t_diag = teacher["t_diag"]
    else:
        if compiled:
            A = params.A_array
            t_diag = _conjugate_kernels.teacher_diagonal(nodes, float(key[0]), float(b), float(params.omega),
                                                         float(A[0, 0]), float(A[1, 1]))
        else:
            t_diag = teacher_diagonal(key[0] * xi + b * eta, params)
        if teacher is not None:
            teacher.update(key=key, t_diag=t_diag)
    if warm is not None and solver.prox_mode == "global":
        h_warm, near_jump = warm
        prox = minimise_locally(h_warm, c, t_diag, x.V, params.sigma, backend=solver.prox_backend)
        if np.any(near_jump):  # nodes near a jump of the proximal point: full search again
            sub = _smoothed(solve_prox(c[near_jump], t_diag[near_jump], x.V, params.sigma, n_ring=solver.n_ring,
                                       backend=solver.prox_backend), solver.tie_smoothing)
            # with tie smoothing the searched nodes take the search's (smoothed) answer, as in the exact map;
            # without, the lower of the two minima
            take = np.ones(len(sub.value), bool) if solver.tie_smoothing > 0 else sub.value < prox.value[near_jump]
            h = prox.h.copy()
            value = prox.value.copy()
            rows = np.nonzero(near_jump)[0][take]
            h[rows], value[rows] = sub.h[take], sub.value[take]
            prox = replace(prox, h=h, value=value)
        new_warm = (prox.h, near_jump)
    else:
        prox = solve_prox(c, t_diag, x.V, params.sigma, mode=solver.prox_mode, n_ring=solver.n_ring,
                          backend=solver.prox_backend)
        near_jump = prox.gap < solver.jump_margin if prox.gap is not None else np.zeros(len(c), bool)
        new_warm = (prox.h, near_jump)
        prox = _smoothed(prox, solver.tie_smoothing)
    if compiled:
        s_gg, s_geta, s_gxi, s_gs, mean_M = _conjugate_kernels.conjugate_sums(
            np.ascontiguousarray(prox.h), c, nodes, np.ascontiguousarray(weights, dtype=float), prox.value,
            float(x.V))
    else:
        g = (prox.h - c) / x.V
        wg = weights[:, None] * g
        s_gg, s_geta, s_gxi = float(np.sum(wg * g)), float(np.sum(wg * eta)), float(np.sum(wg * xi))
        s_gs, mean_M = float(np.sum(wg @ POSITION_SIGNS)), float(weights @ prox.value)
    pin_m, pin_theta = hold
    q_hat = alpha * s_gg
    theta_hat = 0.0 if (pin_theta == 0.0 or b == 0.0) else alpha * s_geta / b
    V_hat = -alpha * s_gxi / sq + x.theta * theta_hat / x.q
    D = params.lam + params.sigma**2 * V_hat
    m_hat = alpha * s_gs if pin_m is None else pin_m * D
    if pin_theta is not None:
        theta_hat = pin_theta * D / (params.sigma**2 * rho)
    return Conjugates(q_hat, m_hat, V_hat, theta_hat), mean_M, new_warm


def overlaps_from_conjugates(params: TaskParams, hat: Conjugates) -> Overlaps:
    """The input-side update of book :eq:`eq-overlap-update` (ridge penalty + positional direction)."""
    s2, rho = params.sigma**2, params.rho
    D = params.lam + s2 * hat.V_hat
    if not D > 0:
        raise FloatingPointError(f"lambda + sigma^2 V_hat = {D} <= 0: no positive width V")
    q = s2 * (s2 * hat.q_hat + hat.m_hat**2 + s2 * rho * hat.theta_hat**2) / D**2
    return Overlaps(q=q, m=hat.m_hat / D, V=s2 / D, theta=s2 * rho * hat.theta_hat / D)


def _free_energy(params: TaskParams, alpha: float, x: Overlaps, hat: Conjugates, mean_M: float) -> float:
    s2, rho = params.sigma**2, params.rho
    D = params.lam + s2 * hat.V_hat
    return (0.5 * (hat.V_hat * x.q - hat.q_hat * x.V) - x.m * hat.m_hat - x.theta * hat.theta_hat
            + (s2 * hat.q_hat + hat.m_hat**2 + s2 * rho * hat.theta_hat**2) / (2.0 * D) - alpha * mean_M)


def state_evolution_step(params: TaskParams, alpha: float, x: Overlaps, solver: SESolver | None = None,
                         branch: str | None = None) -> Overlaps:
    """One undamped update ``x -> F(x)`` of the state evolution (for checks of stationarity)."""
    solver = solver or SESolver()
    hold = _hold(params, branch) if branch else (None, None)
    nodes, weights = se_nodes(solver.quadrature)
    hat, _, _ = conjugates_and_energy(params, alpha, x, nodes, weights, solver, hold)
    return overlaps_from_conjugates(params, hat)


def _residual(x: np.ndarray, fx: np.ndarray) -> float:
    return float(np.max(np.abs(fx - x) / np.maximum(np.abs(x), 1e-4)))

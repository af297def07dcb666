"""Generalised approximate message passing (GAMP) for the attention ERM on finite-d data, and its state evolution.

The empirical risk of book :eq:`eq-risk` depends on ``Q`` only through the pre-activations of the two tokens of
every sample. Writing ``x_l = p_l + sigma z_l`` (book :eq:`eq-tokens`),

    h_{mu l} = (F Q)_{mu l} + s_l m,   F_{mu l, :} = sigma z_{mu l} / sqrt(d),   m = (1_d . Q)/d,

with ``s = (+1, -1)``: ``F`` is a ``(2n x d)`` matrix of i.i.d. ``N(0, sigma^2/d)`` entries and the positional
offset is a known shift. In the high-dimensional limit the per-sample loss is the output loss
``(sigma^2/2)||S(h) - T||_F^2`` (:func:`attnlib.theory.model.attention.output_loss`), so the risk is the generalised linear
model

    R_GLM(Q) = sum_mu (sigma^2/2) ||S(h_mu) - T_mu||_F^2 + (lambda/2) ||Q||^2,

with ``T_mu`` the teacher's actual attention diagonal of sample ``mu``. Max-sum (MAP) GAMP
(Rangan, "Generalized approximate message passing for estimation with random linear mixing", ISIT 2011) for
this problem, with scalar variances and a vector (two-token) output channel, is, at iteration ``t``:

Output side (the proximal step of book :eq:`eq-prox`)::

    omega = F Q_hat - V g_prev                      (Onsager correction)
    c     = omega + m s,    m = (1_d . Q_hat)/d        (the positional shift, treated explicitly)
    h_hat = prox(c, T_mu; V),   g = (h_hat - c)/V
    dg/dc = ((I + V Hess l(h_hat))^{-1} - I)/V       (implicit derivative of the proximal map)
    m_hat = (1/d) sum_mu s . g_mu,    V_hat = -(1/d) sum_mu tr(dg_mu/dc)

Input side (ridge penalty plus the linear term ``-m_hat (1_d . Q)`` of the positional direction)::

    D = lambda + sigma^2 V_hat
    Q_hat <- (sigma^2 V_hat Q_hat + F^T g + m_hat 1_d) / D,    V <- sigma^2 / D.

This is the GAMP input denoiser ``argmin_Q (sigma^2 V_hat/2)||Q - r||^2 + (lambda/2)||Q||^2 - m_hat 1.Q`` at
``r = Q_hat + F^T g/(sigma^2 V_hat)``. The empirical ``m_hat`` and ``V_hat`` are the finite-sample versions of
``alpha E[s . g]`` and ``-alpha E[tr dg/dc]`` (Stein's lemma gives the ``V_hat`` of book :eq:`eq-conjugates`), and
``F^T g = -sigma^2 V_hat Q_hat + sigma^2 theta_hat Q* + sigma sqrt(q_hat) zeta`` in distribution, so the
overlaps of the new estimate obey exactly the update of book :eq:`eq-overlap-update`:
``m = m_hat/D``, ``theta = sigma^2 rho theta_hat/D``, ``q = sigma^2 (sigma^2 q_hat + m_hat^2
+ sigma^2 rho theta_hat^2)/D^2`` and ``V = sigma^2/D``. :func:`attnlib.theory.studies.se_iterates.state_evolution_iterates`
iterates that map from the same initial overlaps for an iteration-by-iteration comparison.

Two implementation choices keep this state evolution exact while making GAMP usable:

* ``V_hat`` needs the divergence of ``g`` *including* the jumps of the global proximal point between local
  minima (Stein's lemma in the state evolution sees them); the implicit Jacobian alone misses them (about 6 %
  of ``V_hat`` on the positional branch), so a control-variate probe estimate adds them
  (:func:`_divergence`).
* The undamped iteration has period-2 instabilities (strongest in ``m``). Damping the two *scalars* of the
  input step, ``D`` and ``m``, is exact for the state evolution (``damping``); Rangan-style damping of the
  vector messages (``message_damping``) is also offered but is not tracked exactly.

On the positional branch GAMP can end on a small period-2 cycle (amplitude ~4e-4 in ``m`` at d = 2000)
rather than an exact fixed point: samples whose centre sits near a jump of the proximal point alternate
between the two minima. It is reported as ``converged=False``.

A fixed point of GAMP is an exact stationary point of ``R_GLM``: there ``h_hat = h(Q_hat)``,
``g = -grad l(h_hat)`` and ``lambda Q_hat = F^T g + m_hat 1_d = -grad R_GLM + lambda Q_hat``. ``R_GLM`` differs
from the finite-d risk of :mod:`attnlib.finite_d.simulation` by the fluctuations of the token Gram matrices
(``O(d^-1/2)`` per sample), so the fixed point agrees with the L-BFGS minimum up to finite-size effects.

Data are those of :func:`attnlib.make_task` / :func:`attnlib.simulate_erm`: equal ``seed``, ``d``, ``alpha`` give
bit-identical teacher and training set.

Tables for the book are in :mod:`attnlib.finite_d.gamp_tables`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..theory.model.attention import output_loss_derivatives
from .data import draw_samples, make_teacher, seed_streams
from ..exceptions import warn_caller
from ..theory.model.generalisation import POSITION_SIGNS
from ..params import TaskParams, check_alpha, check_int, check_finite_scalar
from ..theory.model.proximal import PROX_MODES, solve_prox
from .simulation import n_samples
from ..theory.studies.se_iterates import NAMED_STARTS, START_WIDTH, check_damping, start_overlaps
from ..theory.model.state_evolution import Overlaps

__all__ = ["GAMP_STARTS", "START_WIDTH", "GAMPResult", "gamp_initial_Q", "run_gamp", "teacher_and_start"]

#: Named starts of :func:`run_gamp` (:data:`attnlib.theory.studies.se_iterates.NAMED_STARTS`) and their initial
#: output width (:data:`attnlib.theory.studies.se_iterates.START_WIDTH`).
GAMP_STARTS = NAMED_STARTS


@dataclass(frozen=True)
class GAMPResult:
    """Outcome of :func:`run_gamp`.

    Attributes
    ----------
    m, theta, q, V : ndarray, shape (n_iter + 1,)
        Overlaps of the GAMP estimate at every iteration (index 0: the start), in the book's conventions
        (:eq:`eq-overlaps`): ``m = (1_d . Q)/d``, ``theta = sigma^2 (Q . Q*)/d``, ``q = sigma^2 ||Q||^2/d``;
        ``V`` is GAMP's output-side width ``sigma^2 / D``.
    m_hat, V_hat : ndarray, shape (n_iter,)
        Empirical conjugates of every iteration.
    Q : ndarray, shape (d,)
        Final estimate.
    converged : bool
        Whether ``||Q_t - Q_{t-1}|| <= tol ||Q_t||`` was reached within ``max_iter`` iterations.
    n_iter : int
        GAMP iterations done.
    residual : float
        Last relative change ``||Q_t - Q_{t-1}|| / ||Q_t||``.
    grad_norm : float
        ``||grad R_GLM(Q)|| / sqrt(d)`` at the final estimate (the surrogate risk of the module docstring).
    rho_hat : float
        Finite-d teacher norm ``sigma^2 ||Q*||^2/d``.
    start : Overlaps
        Overlaps (q, m, V, theta) the iteration was started from (those of the initial ``Q``, ``V``).
    seconds : float
        Wall time.
    """

    params: TaskParams
    d: int
    n: int
    alpha: float
    seed: int
    m: np.ndarray
    theta: np.ndarray
    q: np.ndarray
    V: np.ndarray
    m_hat: np.ndarray
    V_hat: np.ndarray
    Q: np.ndarray = field(repr=False)
    converged: bool
    n_iter: int
    residual: float
    grad_norm: float
    rho_hat: float
    start: Overlaps
    seconds: float = field(default=math.nan, compare=False)

    @property
    def overlaps(self) -> Overlaps:
        """Final overlaps ``(q, m, V, theta)``."""
        return Overlaps(q=float(self.q[-1]), m=float(self.m[-1]), V=float(self.V[-1]),
                        theta=float(self.theta[-1]))


def gamp_initial_Q(start: Overlaps, Q_star: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """A vector ``Q`` in R^d whose finite-d overlaps equal ``(q, m, theta)`` of ``start`` exactly.

    ``Q = m 1_d + a u_* + b u``, with ``u_*`` the unit part of ``Q*`` orthogonal to ``1_d`` and ``u`` a random
    unit vector (from ``rng``) orthogonal to both: ``m = (1.Q)/d``, ``theta = sigma^2 (Q.Q*)/d`` and
    ``q = sigma^2 ||Q||^2/d``. Raises ``ValueError`` when ``b^2 < 0`` (overlaps not realisable with this
    finite-d teacher).
    """
    d = Q_star.shape[0]
    one = np.ones(d)
    qs_perp = Q_star - Q_star.mean() * one
    n_perp = float(np.linalg.norm(qs_perp))
    u_star = qs_perp / n_perp
    u = rng.standard_normal(d)
    u -= u.mean() * one
    u -= (u @ u_star) * u_star
    u /= np.linalg.norm(u)
    s2 = sigma**2
    a = (start.theta * d / s2 - start.m * float(Q_star.sum())) / n_perp
    b2 = start.q * d / s2 - start.m**2 * d - a * a
    if b2 < 0:
        raise ValueError(f"start overlaps (q={start.q}, m={start.m}, theta={start.theta}) are not realisable "
                         f"with this teacher (sigma^2 m^2 + theta^2/rho_hat > q)")
    return start.m * one + a * u_star + math.sqrt(b2) * u


def teacher_and_start(params: TaskParams, d: int, x0: Overlaps, seed: int, normalize_teacher: bool):
    """Teacher (``"teacher"`` stream of ``seed``, as :func:`~attnlib.finite_d.simulation.simulate_erm` draws it), GAMP's
    initial ``Q`` with the overlaps of ``x0`` (:func:`gamp_initial_Q`, ``"init"`` stream) and the streams."""
    streams = seed_streams(seed)
    teacher = make_teacher(params, d, streams["teacher"], normalize_teacher=normalize_teacher)
    return teacher, gamp_initial_Q(x0, teacher.Q_star, params.sigma, streams["init"]), streams


def _prox_jacobian(h_hat: np.ndarray, t_diag: np.ndarray, V: float, sigma: float):
    """``dg/dc`` per sample as ``(J11, J12, J22)``: ``dh_hat/dc = (I + V Hess l(h_hat))^{-1}``,
    ``g = (h_hat - c)/V`` (implicit differentiation of the stationarity condition of the proximal problem)."""
    _, _, (H11, H12, H22) = output_loss_derivatives(h_hat, t_diag, sigma)
    a, b, e = 1.0 + V * H11, V * H12, 1.0 + V * H22
    det = a * e - b * b
    # at a (non-degenerate) local minimum of the proximal objective, I + V Hess is positive definite
    det = np.where(det > 1e-12, det, 1e-12)
    return (e / det - 1.0) / V, -b / (det * V), (a / det - 1.0) / V


def _divergence(c, h_hat, t_diag, V, sigma, prox_mode, probes, eps):
    """Per-sample divergence ``tr(dg/dc)`` of the output denoiser, jumps included.

    The implicit Jacobian (:func:`_prox_jacobian`) is exact where the proximal point moves smoothly, but the
    global proximal point jumps between local minima along curves in ``c`` (book :ref:`sec-prox-nonconvex`), and the
    distributional derivative there is a line of Dirac masses. The state evolution's ``V_hat`` (from Stein's
    lemma, ``-alpha E[g . xi]/sqrt(q) + ...``) contains them; on the positional branch they are about 6 % of
    ``V_hat``. With ``n_probes > 0`` the jump part is estimated by antithetic Gaussian probes ``u`` of size
    ``eps`` (``probes``, shape ``(n_probes, N, 2)``, drawn once per run so that the GAMP map is
    deterministic and can converge), with the Jacobian as control variate::

        div = tr J + mean_u [ (g(c + eps u) - g(c - eps u)) . u / (2 eps) - u^T J u ],

    whose correction term vanishes to ``O(eps^2)`` wherever ``g`` is smooth (so it only adds the noise of the
    samples that straddle a jump).
    """
    J11, J12, J22 = _prox_jacobian(h_hat, t_diag, V, sigma)
    div = J11 + J22
    if len(probes):
        corr = np.zeros(len(c))
        for u in probes:
            cp, cm = c + eps * u, c - eps * u
            gp = (solve_prox(cp, t_diag, V, sigma, mode=prox_mode).h - cp) / V
            gm = (solve_prox(cm, t_diag, V, sigma, mode=prox_mode).h - cm) / V
            corr += (np.sum((gp - gm) * u, axis=1) / (2.0 * eps)
                     - (J11 * u[:, 0] ** 2 + 2.0 * J12 * u[:, 0] * u[:, 1] + J22 * u[:, 1] ** 2))
        div = div + corr / len(probes)
    return div


def _check_run_arguments(params, d, alpha, seed, max_iter, damping, message_damping, tol, prox_mode, n_probes,
                         probe_eps) -> tuple:
    """Check the arguments of :func:`run_gamp` in the order of its signature (``ValueError`` naming the first bad
    one; the start is checked by :func:`~attnlib.theory.studies.se_iterates.start_overlaps`).

    Returns
    -------
    tuple
        ``(d, alpha, seed, max_iter, damping, message_damping, tol, n_probes, probe_eps)``, normalised.
    """
    if not isinstance(params, TaskParams):
        raise ValueError(f"params must be a TaskParams, got {type(params).__name__}")
    d = check_int("d", d, 1)
    alpha = check_alpha(alpha)
    seed = check_int("seed", seed, 0)
    max_iter = check_int("max_iter", max_iter, 1)
    damping = check_damping("damping", damping)
    message_damping = check_damping("message_damping", message_damping)
    tol = check_finite_scalar("tol", tol)
    if not 0.0 < tol < 1.0:
        raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
    if prox_mode not in PROX_MODES:
        raise ValueError(f"prox_mode must be one of {PROX_MODES}, got {prox_mode!r}")
    n_probes = check_int("n_probes", n_probes, 0)
    probe_eps = check_finite_scalar("probe_eps", probe_eps)
    if not 0.0 < probe_eps <= 1.0:
        raise ValueError(f"probe_eps must lie in (0, 1], got {probe_eps!r}")
    return d, alpha, seed, max_iter, damping, message_damping, tol, n_probes, probe_eps


@dataclass(frozen=True, eq=False)
class _GLMData:
    """The finite-d generalised linear model of the module docstring on one training set.

    Attributes
    ----------
    F : ndarray, shape (2n, d)
        ``sigma z`` of the two tokens of every sample (scaled by ``1/sqrt(d)`` in the products).
    t_diag : ndarray, shape (n, 2)
        The teacher's attention diagonals ``T_mu``.
    Q_star : ndarray, shape (d,)
        The teacher.
    probes : ndarray, shape (n_probes, n, 2)
        The fixed probes of :func:`_divergence`.
    n, d : int
        Samples and dimension.
    inv_sqrt_d, sigma, s2, lam : float
        ``1/sqrt(d)``, ``sigma``, ``sigma^2``, ``lambda``.
    prox_mode : str
        Proximal search of the output step.
    """

    F: np.ndarray
    t_diag: np.ndarray
    Q_star: np.ndarray
    probes: np.ndarray
    n: int
    d: int
    inv_sqrt_d: float
    sigma: float
    s2: float
    lam: float
    prox_mode: str


def _training_data(params: TaskParams, d: int, n: int, x0: Overlaps, seed: int, normalize_teacher: bool,
                   n_probes: int, prox_mode: str):
    """Teacher, training set and divergence probes of :func:`run_gamp`, the data exactly as
    :func:`~attnlib.finite_d.simulation.simulate_erm` draws them.

    Returns
    -------
    data : _GLMData
    teacher : ~attnlib.finite_d.data.Teacher
    Q : ndarray, shape (d,)
        The initial estimate, with the overlaps of ``x0`` (:func:`teacher_and_start`).
    """
    probes = np.random.default_rng([seed, 0x6A4D50]).standard_normal((n_probes, n, 2))
    teacher, Q, streams = teacher_and_start(params, d, x0, seed, normalize_teacher)
    train = draw_samples(teacher, n, streams["train"])
    t_diag = np.ascontiguousarray(np.stack([train.T[:, 0, 0], train.T[:, 1, 1]], axis=-1))
    F = train.W.reshape(2 * n, d)          # sigma z; scaled by 1/sqrt(d) in the products
    data = _GLMData(F=F, t_diag=t_diag, Q_star=teacher.Q_star, probes=probes, n=n, d=d,
                    inv_sqrt_d=1.0 / math.sqrt(d), sigma=params.sigma, s2=params.sigma**2, lam=params.lam,
                    prox_mode=prox_mode)
    return data, teacher, Q


def _estimate_overlaps(data: _GLMData, Q: np.ndarray) -> tuple[float, float, float]:
    """Finite-d overlaps ``(m, theta, q)`` of an estimate ``Q``.

    ``m = (1_d . Q)/d``, ``theta = sigma^2 (Q . Q*)/d`` and ``q = sigma^2 ||Q||^2/d``.
    """
    d = data.d
    return (float(Q.sum()) / d, data.s2 * float(Q @ data.Q_star) / d, data.s2 * float(Q @ Q) / d)


def _output_step(data: _GLMData, Q: np.ndarray, V: float, g: np.ndarray, probe_eps: float,
                 message_damping: float, first: bool):
    """Output side of one GAMP iteration (module docstring).

    Onsager-corrected centres ``c = F Q - V g + m s``, the proximal step, the divergence of the output denoiser
    (:func:`_divergence`, probes of size ``probe_eps sqrt(q)``), the empirical conjugates and the (damped,
    except at the ``first`` iteration) new message ``g``.

    Returns
    -------
    m, m_hat, V_hat : float
        ``(1_d . Q)/d`` and the empirical conjugates.
    g : ndarray, shape (n, 2)
        The new output message.
    """
    d = data.d
    m = float(Q.sum()) / d
    c = (data.F @ Q).reshape(data.n, 2) * data.inv_sqrt_d - V * g + m * POSITION_SIGNS
    prox = solve_prox(c, data.t_diag, V, data.sigma, mode=data.prox_mode)
    g_new = (prox.h - c) / V
    eps = probe_eps * math.sqrt(data.s2 * float(Q @ Q) / d)
    div = _divergence(c, prox.h, data.t_diag, V, data.sigma, data.prox_mode, data.probes, eps)
    V_hat = -float(div.sum()) / d
    m_hat = float((g_new @ POSITION_SIGNS).sum()) / d
    g = g_new if (message_damping == 1.0 or first) else (1 - message_damping) * g + message_damping * g_new
    return m, m_hat, V_hat, g


def _input_step(data: _GLMData, Q: np.ndarray, g: np.ndarray, m: float, m_hat: float, V_hat: float, D: float,
                damping: float, message_damping: float):
    """Input side of one GAMP iteration (module docstring): the ridge denoiser with the positional direction.

    The scalars ``D = lambda + sigma^2 V_hat`` (from the previous ``D``) and ``m`` (from the estimate's ``m``)
    are damped by ``damping``, the new estimate by ``message_damping``.

    Returns
    -------
    Q_new : ndarray or None
        The new estimate; None where the damped ``D`` is not positive and finite (the iteration stops).
    D : float
        The damped ``D`` (the new width is ``V = sigma^2 / D``).
    """
    D_new = data.lam + data.s2 * V_hat
    D = D_new if damping == 1.0 else (1 - damping) * D + damping * D_new
    if not (D > 0 and np.isfinite(D)):
        return None, D
    FTg = (data.F.T @ g.reshape(2 * data.n)) * data.inv_sqrt_d
    Q_new = (data.s2 * V_hat * Q + FTg + m_hat) / D
    if damping < 1.0:
        m_new = float(Q_new.sum()) / data.d
        Q_new += (1 - damping) * (m - m_new)
    if message_damping < 1.0:
        Q_new = (1 - message_damping) * Q + message_damping * Q_new
    return Q_new, D


def _surrogate_grad_norm(data: _GLMData, Q: np.ndarray) -> float:
    """``||grad R_GLM(Q)|| / sqrt(d)``: the gradient norm of the surrogate risk of the module docstring."""
    inv_sqrt_d = data.inv_sqrt_d
    h = (data.F @ Q).reshape(data.n, 2) * inv_sqrt_d + (float(Q.sum()) / data.d) * POSITION_SIGNS
    _, grad_h, _ = output_loss_derivatives(h, data.t_diag, data.sigma)
    grad = ((data.F.T @ grad_h.reshape(2 * data.n)) * inv_sqrt_d + float((grad_h @ POSITION_SIGNS).sum()) / data.d
            + data.lam * Q)
    return float(np.linalg.norm(grad)) * inv_sqrt_d


def run_gamp(params: TaskParams, d: int, alpha: float, start="semantic", seed: int = 0, max_iter: int = 200,
             damping: float = 0.3, tol: float = 1e-6, prox_mode: str = "global", message_damping: float = 1.0,
             normalize_teacher: bool = False, n_probes: int = 2, probe_eps: float = 0.05,
             warn: bool = True) -> GAMPResult:
    """Run max-sum GAMP on the finite-d training set of ``(params, d, alpha, seed)`` (module docstring).

    Parameters
    ----------
    params : TaskParams
        The task (``sigma``, ``lambda``, ``omega``, ``A``); ``L = 2``, rank ``r = 1``.
    d : int
        Dimension, ``>= 1``; ``n = round(alpha d)`` samples (``attnlib.finite_d.simulation.n_samples``).
    alpha : float
        Sample complexity, in ``(0, inf)``.
    start : {"semantic", "positional"} or Overlaps-like
        Initial overlaps ``(q, m, V, theta)``: those of the state evolution's
        ``default_start`` of the named branch with ``V =``
        ``START_WIDTH``, an :class:`Overlaps`, a dict with
        keys ``q, m, V, theta`` or a 4-sequence in that order. The initial ``Q`` has exactly these finite-d
        overlaps (``gamp_initial_Q``, random part from the ``"init"`` stream of ``seed``); ``V`` is the
        initial output width.
    seed : int
        Seed of the data (same as :func:`~attnlib.simulate_erm`: same data).
    max_iter : int
        Iterations at most (``>= 1``).
    damping : float
        Weight ``beta`` in ``(0, 1]`` of the new value of the two *scalar* parameters of the input step:
        ``D_t = (1 - beta) D_{t-1} + beta (lambda + sigma^2 V_hat_t)`` (hence the width ``V = sigma^2/D``)
        and the positional component ``m_t = (1 - beta) m_{t-1} + beta (1_d . Q_new)/d``. Any scalar ``D``
        leaves the Onsager correction exact (it is the divergence ``sigma^2/D`` of the input denoiser) and
        ``m`` is an explicit scalar, so the state evolution stays exact
        (:func:`~attnlib.state_evolution_iterates` with the same ``damping``), and a fixed point is still a stationary
        point of ``R_GLM``. It tames the period-2 instabilities of the undamped iteration (in ``m`` the
        multiplier is about -2 at the semantic and about -5 at the positional fixed point of the reference
        task). Default 0.3; 1 is plain GAMP.
    tol : float
        Convergence when ``||Q_t - Q_{t-1}|| <= tol ||Q_t||``; in ``(0, 1)``.
    prox_mode : {"global", "from-zero"}
        Treatment of the non-convex proximal problem (``attnlib.theory.model.proximal.solve_prox``); use the same as in
        the state evolution you compare with.
    message_damping : float
        In ``(0, 1]``: Rangan-style damping of the vector messages (``g`` and ``Q_hat`` mixed as
        ``(1 - b) old + b new``). Helps convergence to the fixed point, but the state evolution is then no
        longer exact (``q`` of a mixture involves cross-overlaps of successive iterates). Default 1 (off).
    normalize_teacher : bool
        Rescale ``Q*`` to ``||Q*||^2 = d`` (as in :func:`~attnlib.simulate_erm`).
    n_probes : int
        Antithetic probe pairs per iteration for the jump part of the divergence of the output denoiser
        (``0``: implicit Jacobian only, which misses the jumps of the global proximal point; see
        ``_divergence``). The probes are drawn once, from a generator seeded by ``seed``.
    probe_eps : float
        Probe size relative to ``sqrt(q)`` of the current estimate, in ``(0, 1]``.
    warn : bool
        Issue a :class:`~attnlib.exceptions.ConvergenceWarning` when not converged.

    Returns
    -------
    GAMPResult

    Raises
    ------
    ValueError
        Naming the parameter: ``params`` not a TaskParams, ``d < 1``, ``alpha <= 0`` or non-finite, ``seed``,
        ``max_iter < 1``, ``damping`` or ``message_damping`` outside ``(0, 1]``, ``tol`` outside ``(0, 1)``,
        unknown ``prox_mode`` or ``start``, non-finite or unrealisable start overlaps, ``n_probes < 0``,
        ``probe_eps`` outside ``(0, 1]``.
    """
    t0 = time.perf_counter()
    d, alpha, seed, max_iter, damping, message_damping, tol, n_probes, probe_eps = _check_run_arguments(
        params, d, alpha, seed, max_iter, damping, message_damping, tol, prox_mode, n_probes, probe_eps)
    x0 = start_overlaps(params, start)
    n = n_samples(alpha, d)
    data, teacher, Q = _training_data(params, d, n, x0, seed, normalize_teacher, n_probes, prox_mode)

    m0, th0, q0 = _estimate_overlaps(data, Q)
    ms, ths, qs, Vs = [m0], [th0], [q0], [x0.V]
    m_hats, V_hats = [], []
    V = x0.V
    D = data.s2 / V
    g = np.zeros((n, 2))
    residual = math.inf
    converged = False
    failure = None
    it = 0
    for it in range(1, max_iter + 1):
        m, m_hat, V_hat, g = _output_step(data, Q, V, g, probe_eps, message_damping, first=it == 1)
        Q_new, D = _input_step(data, Q, g, m, m_hat, V_hat, D, damping, message_damping)
        if Q_new is None:
            failure = f"lambda + sigma^2 V_hat = {D:.3g} <= 0 at iteration {it}"
            it -= 1
            break
        V = data.s2 / D
        residual = float(np.linalg.norm(Q_new - Q) / max(np.linalg.norm(Q_new), 1e-300))
        Q = Q_new
        mt, tht, qt = _estimate_overlaps(data, Q)
        ms.append(mt), ths.append(tht), qs.append(qt), Vs.append(V)
        m_hats.append(m_hat), V_hats.append(V_hat)
        if not np.isfinite(residual):
            failure = f"non-finite estimate at iteration {it}"
            break
        if residual <= tol:
            converged = True
            break

    grad_norm = _surrogate_grad_norm(data, Q)
    if not converged and warn:
        why = failure or f"relative change {residual:.3g} > tol {tol:g} after {it} iterations"
        warn_caller(f"GAMP did not converge (d={d}, alpha={alpha:g}): {why}")
    return GAMPResult(params=params, d=d, n=n, alpha=alpha, seed=seed, m=np.array(ms), theta=np.array(ths),
                      q=np.array(qs), V=np.array(Vs), m_hat=np.array(m_hats), V_hat=np.array(V_hats), Q=Q,
                      converged=converged, n_iter=it, residual=residual, grad_norm=grad_norm,
                      rho_hat=teacher.rho_hat, start=Overlaps(q=q0, m=m0, V=x0.V, theta=th0),
                      seconds=time.perf_counter() - t0)

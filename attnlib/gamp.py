"""Generalised approximate message passing (GAMP) for the attention ERM on finite-d data, and its state evolution.

The empirical risk of spec section 1 depends on ``Q`` only through the pre-activations of the two tokens of
every sample. Writing ``x_l = p_l + sigma z_l`` (spec section 2),

    h_{mu l} = (F Q)_{mu l} + s_l m,   F_{mu l, :} = sigma z_{mu l} / sqrt(d),   m = (1_d . Q)/d,

with ``s = (+1, -1)``: ``F`` is a ``(2n x d)`` matrix of i.i.d. ``N(0, sigma^2/d)`` entries and the positional
offset is a known shift. In the high-dimensional limit the per-sample loss is the output loss
``(sigma^2/2)||S(h) - T||_F^2`` (:func:`attnlib.attention.output_loss`), so the risk is the generalised linear
model

    R_GLM(Q) = sum_mu (sigma^2/2) ||S(h_mu) - T_mu||_F^2 + (lambda/2) ||Q||^2,

with ``T_mu`` the teacher's actual attention diagonal of sample ``mu``. Max-sum (MAP) GAMP
(Rangan, "Generalized approximate message passing for estimation with random linear mixing", ISIT 2011) for
this problem, with scalar variances and a vector (two-token) output channel, is, at iteration ``t``:

Output side (the proximal step of spec section 3)::

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
``alpha E[s . g]`` and ``-alpha E[tr dg/dc]`` (Stein's lemma gives the spec's ``V_hat`` formula), and
``F^T g = -sigma^2 V_hat Q_hat + sigma^2 theta_hat Q* + sigma sqrt(q_hat) zeta`` in distribution, so the
overlaps of the new estimate obey exactly the update of spec section 3:
``m = m_hat/D``, ``theta = sigma^2 rho theta_hat/D``, ``q = sigma^2 (sigma^2 q_hat + m_hat^2
+ sigma^2 rho theta_hat^2)/D^2`` and ``V = sigma^2/D``. :func:`state_evolution_iterates` iterates that map
from the same initial overlaps for an iteration-by-iteration comparison.

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
from the finite-d risk of :mod:`attnlib.simulation` by the fluctuations of the token Gram matrices
(``O(d^-1/2)`` per sample), so the fixed point agrees with the L-BFGS minimum up to finite-size effects.

Data are those of :func:`attnlib.data.make_task` / :func:`attnlib.simulation.simulate_erm`: equal ``seed``,
``d``, ``alpha`` give bit-identical teacher and training set.

Tables (cached on disk, :mod:`attnlib.cache`): :func:`gamp_tracking_table` puts GAMP's overlaps next to those
of :func:`state_evolution_iterates` iteration by iteration; :func:`gamp_fixed_point_table` compares GAMP's
fixed point with the L-BFGS minimum of the finite-d risk on the same data.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .attention import output_loss_derivatives
from .cache import cached
from .data import check_int, draw_samples, make_task, make_teacher, seed_streams
from .exceptions import ConvergenceWarning
from .generalisation import POSITION_SIGNS
from .parallel import run_jobs
from .params import TaskParams, check_alpha, check_finite_scalar
from .proximal import PROX_MODES, solve_prox
from .quadrature import Quadrature
from .simulation import n_samples
from . import state_evolution as _se
from .state_evolution import Overlaps, SESolver, conjugates_and_energy, default_start

__all__ = ["GAMP_STARTS", "START_WIDTH", "FIXED_POINT_OPTIONS", "GAMPResult", "SEIterates", "gamp_initial_Q",
           "run_gamp", "state_evolution_iterates", "gamp_tracking_table", "gamp_fixed_point_table"]

#: Named starts of :func:`run_gamp`: the overlaps ``(q, m, theta)`` of the state evolution's
#: :func:`~attnlib.state_evolution.default_start`, with the initial width ``V = START_WIDTH``.
GAMP_STARTS = ("semantic", "positional")
#: Initial output width of the named starts. The state evolution's default ``V = 1`` is far below the fixed
#: points' ``V ~ 11-13`` (reference task): its first steps then shrink ``q`` to ~1e-4 before it grows back, a
#: transit in which the finite-d iterate is fragile; ``V = 10`` avoids it.
START_WIDTH = 10.0


@dataclass(frozen=True)
class GAMPResult:
    """Outcome of :func:`run_gamp`.

    Attributes
    ----------
    m, theta, q, V : ndarray, shape (n_iter + 1,)
        Overlaps of the GAMP estimate at every iteration (index 0: the start), in the spec's conventions:
        ``m = (1_d . Q)/d``, ``theta = sigma^2 (Q . Q*)/d``, ``q = sigma^2 ||Q||^2/d``; ``V`` is GAMP's
        output-side width ``sigma^2 / D``.
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


@dataclass(frozen=True)
class SEIterates:
    """Iterates of the state evolution, ``x_0 = start``, ``x_{t+1} = (1-beta) x_t + beta F(x_t)``.

    ``m``, ``theta``, ``q``, ``V`` have shape ``(n_iter + 1,)``; ``m_hat``, ``V_hat``, ``q_hat``,
    ``theta_hat`` (the conjugates at ``x_t``) shape ``(n_iter,)``.
    """

    m: np.ndarray
    theta: np.ndarray
    q: np.ndarray
    V: np.ndarray
    m_hat: np.ndarray
    V_hat: np.ndarray
    q_hat: np.ndarray
    theta_hat: np.ndarray


def _start_overlaps(params: TaskParams, start) -> Overlaps:
    if isinstance(start, str):
        if start not in GAMP_STARTS:
            raise ValueError(f"start must be one of {GAMP_STARTS} or Overlaps-like (q, m, V, theta), "
                             f"got {start!r}")
        x = default_start(params, start)
        return Overlaps(q=x.q, m=x.m, V=START_WIDTH, theta=x.theta)
    if isinstance(start, Overlaps):
        vals = (start.q, start.m, start.V, start.theta)
    elif isinstance(start, dict):
        try:
            vals = tuple(start[k] for k in ("q", "m", "V", "theta"))
        except KeyError as exc:
            raise ValueError(f"start as a dict needs keys q, m, V, theta; missing {exc}") from None
    else:
        try:
            vals = tuple(start)
        except TypeError:
            raise ValueError(f"start must be one of {GAMP_STARTS} or Overlaps-like (q, m, V, theta), "
                             f"got {start!r}") from None
        if len(vals) != 4:
            raise ValueError(f"start must be one of {GAMP_STARTS} or Overlaps-like (q, m, V, theta), "
                             f"got {start!r}")
    q, m, V, theta = (check_finite_scalar(f"start.{k}", v) for k, v in zip(("q", "m", "V", "theta"), vals))
    if q <= 0 or V <= 0:
        raise ValueError(f"start must have q > 0 and V > 0, got q={q}, V={V}")
    if params.sigma**2 * m * m + theta**2 / params.rho > q * (1 + 1e-12):
        raise ValueError(f"start overlaps not realisable: need sigma^2 m^2 + theta^2/rho <= q, got q={q}, m={m}, "
                         f"theta={theta}")
    return Overlaps(q=q, m=m, V=V, theta=theta)


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


def _teacher_and_start(params: TaskParams, d: int, x0: Overlaps, seed: int, normalize_teacher: bool):
    """Teacher (``"teacher"`` stream of ``seed``, as :func:`~attnlib.simulation.simulate_erm` draws it), GAMP's
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
    global proximal point jumps between local minima along curves in ``c`` (spec section 5), and the
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
        Dimension, ``>= 1``; ``n = round(alpha d)`` samples (:func:`attnlib.simulation.n_samples`).
    alpha : float
        Sample complexity, in ``(0, inf)``.
    start : {"semantic", "positional"} or Overlaps-like
        Initial overlaps ``(q, m, V, theta)``: those of the state evolution's
        :func:`~attnlib.state_evolution.default_start` of the named branch with ``V =``
        :data:`START_WIDTH`, an :class:`Overlaps`, a dict with
        keys ``q, m, V, theta`` or a 4-sequence in that order. The initial ``Q`` has exactly these finite-d
        overlaps (:func:`gamp_initial_Q`, random part from the ``"init"`` stream of ``seed``); ``V`` is the
        initial output width.
    seed : int
        Seed of the data (same as :func:`~attnlib.simulation.simulate_erm`: same data).
    max_iter : int
        Iterations at most (``>= 1``).
    damping : float
        Weight ``beta`` in ``(0, 1]`` of the new value of the two *scalar* parameters of the input step:
        ``D_t = (1 - beta) D_{t-1} + beta (lambda + sigma^2 V_hat_t)`` (hence the width ``V = sigma^2/D``)
        and the positional component ``m_t = (1 - beta) m_{t-1} + beta (1_d . Q_new)/d``. Any scalar ``D``
        leaves the Onsager correction exact (it is the divergence ``sigma^2/D`` of the input denoiser) and
        ``m`` is an explicit scalar, so the state evolution stays exact
        (:func:`state_evolution_iterates` with the same ``damping``), and a fixed point is still a stationary
        point of ``R_GLM``. It tames the period-2 instabilities of the undamped iteration (in ``m`` the
        multiplier is about -2 at the semantic and about -5 at the positional fixed point of the reference
        task). Default 0.3; 1 is plain GAMP.
    tol : float
        Convergence when ``||Q_t - Q_{t-1}|| <= tol ||Q_t||``; in ``(0, 1)``.
    prox_mode : {"global", "from-zero"}
        Treatment of the non-convex proximal problem (:func:`attnlib.proximal.solve_prox`); use the same as in
        the state evolution you compare with.
    message_damping : float
        In ``(0, 1]``: Rangan-style damping of the vector messages (``g`` and ``Q_hat`` mixed as
        ``(1 - b) old + b new``). Helps convergence to the fixed point, but the state evolution is then no
        longer exact (``q`` of a mixture involves cross-overlaps of successive iterates). Default 1 (off).
    normalize_teacher : bool
        Rescale ``Q*`` to ``||Q*||^2 = d`` (as in :func:`~attnlib.simulation.simulate_erm`).
    n_probes : int
        Antithetic probe pairs per iteration for the jump part of the divergence of the output denoiser
        (``0``: implicit Jacobian only, which misses the jumps of the global proximal point; see
        :func:`_divergence`). The probes are drawn once, from a generator seeded by ``seed``.
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
    if not isinstance(params, TaskParams):
        raise ValueError(f"params must be a TaskParams, got {type(params).__name__}")
    d = check_int("d", d, 1)
    alpha = check_alpha(alpha)
    seed = check_int("seed", seed, 0)
    max_iter = check_int("max_iter", max_iter, 1)
    damping = _check_damping("damping", damping)
    message_damping = _check_damping("message_damping", message_damping)
    tol = check_finite_scalar("tol", tol)
    if not 0.0 < tol < 1.0:
        raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
    if prox_mode not in PROX_MODES:
        raise ValueError(f"prox_mode must be one of {PROX_MODES}, got {prox_mode!r}")
    n_probes = check_int("n_probes", n_probes, 0)
    probe_eps = check_finite_scalar("probe_eps", probe_eps)
    if not 0.0 < probe_eps <= 1.0:
        raise ValueError(f"probe_eps must lie in (0, 1], got {probe_eps!r}")
    x0 = _start_overlaps(params, start)
    n = n_samples(alpha, d)
    probes = np.random.default_rng([seed, 0x6A4D50]).standard_normal((n_probes, n, 2))

    # data exactly as simulate_erm draws them
    teacher, Q, streams = _teacher_and_start(params, d, x0, seed, normalize_teacher)
    train = draw_samples(teacher, n, streams["train"])
    t_diag = np.ascontiguousarray(np.stack([train.T[:, 0, 0], train.T[:, 1, 1]], axis=-1))
    F = train.W.reshape(2 * n, d)          # sigma z; scaled by 1/sqrt(d) in the products
    del train
    inv_sqrt_d = 1.0 / math.sqrt(d)
    sigma, s2, lam = params.sigma, params.sigma**2, params.lam
    Q_star = teacher.Q_star

    def measure(Qv):
        return (float(Qv.sum()) / d, s2 * float(Qv @ Q_star) / d, s2 * float(Qv @ Qv) / d)

    m0, th0, q0 = measure(Q)
    ms, ths, qs, Vs = [m0], [th0], [q0], [x0.V]
    m_hats, V_hats = [], []
    V = x0.V
    D = s2 / V
    g = np.zeros((n, 2))
    residual = math.inf
    converged = False
    failure = None
    it = 0
    for it in range(1, max_iter + 1):
        # ---- output side: Onsager-corrected centres, proximal step, divergence of the denoiser
        m = float(Q.sum()) / d
        c = (F @ Q).reshape(n, 2) * inv_sqrt_d - V * g + m * POSITION_SIGNS
        prox = solve_prox(c, t_diag, V, sigma, mode=prox_mode)
        g_new = (prox.h - c) / V
        eps = probe_eps * math.sqrt(s2 * float(Q @ Q) / d)
        div = _divergence(c, prox.h, t_diag, V, sigma, prox_mode, probes, eps)
        V_hat = -float(div.sum()) / d
        m_hat = float((g_new @ POSITION_SIGNS).sum()) / d
        g = g_new if (message_damping == 1.0 or it == 1) else (1 - message_damping) * g + message_damping * g_new
        # ---- input side: ridge denoiser with the positional direction (scalars D and m damped)
        D_new = lam + s2 * V_hat
        D = D_new if damping == 1.0 else (1 - damping) * D + damping * D_new
        if not (D > 0 and np.isfinite(D)):
            failure = f"lambda + sigma^2 V_hat = {D:.3g} <= 0 at iteration {it}"
            it -= 1
            break
        FTg = (F.T @ g.reshape(2 * n)) * inv_sqrt_d
        Q_new = (s2 * V_hat * Q + FTg + m_hat) / D
        if damping < 1.0:
            m_new = float(Q_new.sum()) / d
            Q_new += (1 - damping) * (m - m_new)
        if message_damping < 1.0:
            Q_new = (1 - message_damping) * Q + message_damping * Q_new
        V = s2 / D
        residual = float(np.linalg.norm(Q_new - Q) / max(np.linalg.norm(Q_new), 1e-300))
        Q = Q_new
        mt, tht, qt = measure(Q)
        ms.append(mt), ths.append(tht), qs.append(qt), Vs.append(V)
        m_hats.append(m_hat), V_hats.append(V_hat)
        if not np.isfinite(residual):
            failure = f"non-finite estimate at iteration {it}"
            break
        if residual <= tol:
            converged = True
            break

    # gradient of the surrogate risk R_GLM at the final estimate
    h = (F @ Q).reshape(n, 2) * inv_sqrt_d + (float(Q.sum()) / d) * POSITION_SIGNS
    _, grad_h, _ = output_loss_derivatives(h, t_diag, sigma)
    grad = (F.T @ grad_h.reshape(2 * n)) * inv_sqrt_d + float((grad_h @ POSITION_SIGNS).sum()) / d + lam * Q
    grad_norm = float(np.linalg.norm(grad)) * inv_sqrt_d
    if not converged and warn:
        why = failure or f"relative change {residual:.3g} > tol {tol:g} after {it} iterations"
        warnings.warn(f"GAMP did not converge (d={d}, alpha={alpha:g}): {why}", ConvergenceWarning,
                      stacklevel=2)
    return GAMPResult(params=params, d=d, n=n, alpha=alpha, seed=seed, m=np.array(ms), theta=np.array(ths),
                      q=np.array(qs), V=np.array(Vs), m_hat=np.array(m_hats), V_hat=np.array(V_hats), Q=Q,
                      converged=converged, n_iter=it, residual=residual, grad_norm=grad_norm,
                      rho_hat=teacher.rho_hat, start=Overlaps(q=q0, m=m0, V=x0.V, theta=th0),
                      seconds=time.perf_counter() - t0)


def _check_damping(name: str, value) -> float:
    value = check_finite_scalar(name, value)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must lie in (0, 1], got {value!r}")
    return value


def state_evolution_iterates(params: TaskParams, alpha: float, start, n_iter: int, damping: float = 0.3,
                             prox_mode: str = "global", quadrature: Quadrature | None = None,
                             hold_theta_zero: bool = False) -> SEIterates:
    """The state evolution of :func:`run_gamp`, iterated step by step (spec section 3, no acceleration).

    ``x_0 = start``; at step ``t`` the conjugates of ``x_t`` come from
    :func:`~attnlib.state_evolution.conjugates_and_energy` (free iteration: no overlap held unless
    ``hold_theta_zero``), and with ``D_t = (1 - beta) D_{t-1} + beta (lambda + sigma^2 V_hat_t)``
    (``D_0 = sigma^2 / V_0``)::

        V_{t+1} = sigma^2 / D_t,   theta_{t+1} = sigma^2 rho theta_hat_t / D_t,
        m_{t+1} = (1 - beta) m_t + beta m_hat_t / D_t,
        q_{t+1} = sigma^2 (sigma^2 q_hat_t + sigma^2 rho theta_hat_t^2) / D_t^2 + sigma^2 m_{t+1}^2.

    With ``beta = 1`` this is the undamped update of spec section 3
    (:func:`~attnlib.state_evolution.overlaps_from_conjugates`). ``q`` splits into the content part and
    ``sigma^2 m^2`` because ``Q``'s component along ``1_d`` is ``m 1_d``.

    Parameters
    ----------
    params : TaskParams
    alpha : float
        Sample complexity, ``(0, inf)``.
    start : {"semantic", "positional"} or Overlaps-like
        Initial overlaps, as in :func:`run_gamp` (pass ``GAMPResult.start`` to start from GAMP's finite-d
        initial overlaps).
    n_iter : int
        Number of updates (``>= 1``).
    damping : float
        ``beta`` in ``(0, 1]``, as in :func:`run_gamp`.
    prox_mode : {"global", "from-zero"}
        As in :func:`run_gamp`.
    quadrature : Quadrature, optional
        Rule for the expectations over ``(xi, eta)`` (default: that of
        :class:`~attnlib.state_evolution.SESolver`).
    hold_theta_zero : bool
        Hold ``theta = 0`` (the positional branch, spec section 3) instead of iterating it freely.

    Returns
    -------
    SEIterates
        The recursion stops early (shorter arrays) if it leaves the domain (``D <= 0``).
    """
    alpha = check_alpha(alpha)
    n_iter = check_int("n_iter", n_iter, 1)
    damping = _check_damping("damping", damping)
    solver = (SESolver(prox_mode=prox_mode) if quadrature is None
              else SESolver(quadrature=quadrature, prox_mode=prox_mode))
    x = _start_overlaps(params, start)
    hold = (None, 0.0) if hold_theta_zero else (None, None)
    if hold_theta_zero:
        x = Overlaps(q=x.q, m=x.m, V=x.V, theta=0.0)
    s2, rho, lam = params.sigma**2, params.rho, params.lam
    # the same nodes as attnlib.state_evolution (its node layout, where it defines one)
    se_nodes = getattr(_se, "se_nodes", None)
    nodes, weights = se_nodes(solver.quadrature) if se_nodes is not None else solver.quadrature.points(4)
    xs = [x.as_array()]
    hats = []
    D = s2 / x.V
    for _ in range(n_iter):
        hat = conjugates_and_energy(params, alpha, x, nodes, weights, solver, hold)[0]
        D = (lam + s2 * hat.V_hat) if damping == 1.0 else (1 - damping) * D + damping * (lam + s2 * hat.V_hat)
        if not (D > 0 and np.isfinite(D)):
            break
        m = (1 - damping) * x.m + damping * hat.m_hat / D
        q = s2 * (s2 * hat.q_hat + s2 * rho * hat.theta_hat**2) / D**2 + s2 * m * m
        x = Overlaps(q=q, m=m, V=s2 / D, theta=s2 * rho * hat.theta_hat / D)
        xs.append(x.as_array())
        hats.append((hat.m_hat, hat.V_hat, hat.q_hat, hat.theta_hat))
    xs = np.array(xs)
    hats = np.array(hats).reshape(-1, 4)
    return SEIterates(q=xs[:, 0], m=xs[:, 1], V=xs[:, 2], theta=xs[:, 3], m_hat=hats[:, 0], V_hat=hats[:, 1],
                      q_hat=hats[:, 2], theta_hat=hats[:, 3])


# --------------------------------------------------------------------------------------------------------
# tidy tables for the book: GAMP against its state evolution, and its fixed point against L-BFGS (cached)
# --------------------------------------------------------------------------------------------------------
#: Cache namespaces of the tables' pieces (one GAMP run, one state-evolution run, one fixed-point row).
TRACK_NAMESPACE = "gamp-track"
SE_NAMESPACE = "gamp-se"
FIXED_POINT_NAMESPACE = "gamp-fixed-point"
#: Tolerance of the tracking runs: small enough that GAMP never stops before ``n_iter``.
_TRACK_TOL = 1e-14
#: :func:`run_gamp` options per named start used by :func:`gamp_fixed_point_table` to reach the fixed point.
#: The positional start needs message damping: without it the samples whose centre sits near a jump of the
#: proximal point keep the iterate fluctuating (``m`` by ~1e-2 at d = 2000); with it, GAMP settles on the
#: small period-2 cycle described in the module docstring.
FIXED_POINT_OPTIONS = {"semantic": {"max_iter": 200, "message_damping": 1.0},
                       "positional": {"max_iter": 60, "message_damping": 0.5}}


def _floats(values) -> np.ndarray:
    """A cached list of numbers as a float array (the cache stores non-finite floats as 'nan'/'inf')."""
    return np.array([float(v) for v in values], dtype=float)


def _as_ints(name: str, value, minimum: int) -> list[int]:
    values = [value] if np.isscalar(value) else list(value)
    if not values:
        raise ValueError(f"{name} must not be empty")
    return [check_int(name, v, minimum) for v in values]


def _as_starts(starts) -> list[str]:
    starts = [starts] if isinstance(starts, str) else list(starts)
    if not starts:
        raise ValueError("starts must not be empty")
    for s in starts:
        if s not in GAMP_STARTS:
            raise ValueError(f"starts must be among {GAMP_STARTS}, got {s!r}")
    return starts


def _tracking_run(params: TaskParams, d: int, alpha: float, start: str, seed: int, n_iter: int, damping: float,
                  normalize_teacher: bool, prox_mode: str, n_probes: int, probe_eps: float,
                  use_cache: bool) -> dict:
    """One GAMP run of exactly ``n_iter`` iterations (no convergence stop), cached: per-iteration arrays."""
    def compute():
        run = run_gamp(params, d, alpha, start=start, seed=seed, max_iter=n_iter, damping=damping,
                       tol=_TRACK_TOL, prox_mode=prox_mode, normalize_teacher=normalize_teacher,
                       n_probes=n_probes, probe_eps=probe_eps, warn=False)
        return {"m": run.m, "theta": run.theta, "q": run.q, "V": run.V, "m_hat": run.m_hat, "V_hat": run.V_hat,
                "start": run.start.as_array(), "rho_hat": run.rho_hat, "seconds": run.seconds}

    return cached(TRACK_NAMESPACE, compute, use_cache=use_cache, params=params, d=d, alpha=alpha, start=start,
                  seed=seed, n_iter=n_iter, damping=damping, tol=_TRACK_TOL, normalize_teacher=normalize_teacher,
                  prox_mode=prox_mode, n_probes=n_probes, probe_eps=probe_eps)


def _se_run(params: TaskParams, alpha: float, start: str, n_iter: int, damping: float, prox_mode: str,
            quadrature: Quadrature, use_cache: bool) -> dict:
    """:func:`state_evolution_iterates` from a named start, cached."""
    def compute():
        se = state_evolution_iterates(params, alpha, start, n_iter, damping=damping, prox_mode=prox_mode,
                                      quadrature=quadrature)
        return {k: getattr(se, k) for k in ("m", "theta", "q", "V", "m_hat", "V_hat")}

    return cached(SE_NAMESPACE, compute, use_cache=use_cache, params=params, alpha=alpha, start=start,
                  n_iter=n_iter, damping=damping, prox_mode=prox_mode, quadrature=quadrature)


def gamp_tracking_table(params: TaskParams, d=2000, alpha: float = 2.0, starts=GAMP_STARTS, seeds=(0,),
                        n_iter: int = 20, damping: float = 0.3, normalize_teacher: bool = True,
                        prox_mode: str = "global", n_probes: int = 2, probe_eps: float = 0.05,
                        quadrature: Quadrature | None = None, n_jobs: int = 1, use_cache: bool = True):
    """GAMP's overlaps iteration by iteration next to its state evolution, as a tidy table.

    For every start, dimension and seed, :func:`run_gamp` is run for exactly ``n_iter`` iterations on the
    training set of ``(params, d, alpha, seed)``, and :func:`state_evolution_iterates` is iterated from the
    same initial overlaps with the same scalar damping. GAMP's output step is the proximal map of
    spec section 3 (book eq. ``eq-prox``); its empirical conjugates are the finite-d versions of
    ``m_hat`` and ``V_hat`` of eq. ``eq-conjugates``, and its input step obeys the update
    ``eq-overlap-update`` (module docstring), so for ``d -> infinity`` the two columns of every overlap
    agree at every ``t``; at finite ``d`` they differ by ``O(d^-1/2)`` fluctuations.

    The state evolution does not depend on ``d`` or on the seed: it is run once per start, from the named
    start's overlaps (:data:`GAMP_STARTS`; GAMP's initial ``Q`` has exactly these overlaps,
    :func:`gamp_initial_Q`). Each GAMP run and each state-evolution run is cached on disk
    (:func:`attnlib.cache.cached`: key = every argument + the library fingerprint), so an interrupted table
    resumes, and a corrupt cache file is recomputed with a :class:`~attnlib.exceptions.CacheWarning`.

    Parameters
    ----------
    params : TaskParams
        The task.
    d : int or sequence of int
        Dimension(s) of the GAMP runs.
    alpha : float
        Sample complexity.
    starts : str or sequence of str
        Named starts among :data:`GAMP_STARTS`.
    seeds : int or sequence of int
        Data seeds (as in :func:`~attnlib.simulation.simulate_erm`).
    n_iter : int
        Iterations compared (``>= 1``).
    damping, normalize_teacher, prox_mode, n_probes, probe_eps
        Passed to :func:`run_gamp`; ``damping`` and ``prox_mode`` also to :func:`state_evolution_iterates`.
    quadrature : Quadrature, optional
        Rule of the state evolution (default: that of :class:`~attnlib.state_evolution.SESolver`).
    n_jobs : int
        joblib worker processes over the runs (1: in this process).
    use_cache : bool
        Read and write the disk cache (``$ATTNLIB_CACHE_DIR``).

    Returns
    -------
    pandas.DataFrame
        One row per ``(start, d, seed, t)``, ``t = 0 .. n_iter`` (``t = 0``: the start), sorted in that
        order, with columns ``start, d, alpha, seed, t``; ``m_gamp, theta_gamp, q_gamp, V_gamp`` (overlaps of
        GAMP's estimate ``Q_t`` and its width, spec conventions) and ``m_se, theta_se, q_se, V_se`` (the state
        evolution's ``x_t``); ``m_hat_gamp, V_hat_gamp, m_hat_se, V_hat_se``, the conjugates that produced
        iterate ``t`` (computed at ``t - 1``; NaN at ``t = 0``); ``rho_hat`` (finite-d teacher norm
        ``sigma^2 ||Q*||^2/d``). Iterations a run did not reach (GAMP or SE leaving the domain) are NaN.

    Raises
    ------
    ValueError
        Naming the parameter, for an unknown start, empty or invalid ``d``/``seeds``, ``n_iter < 1``, and
        whatever :func:`run_gamp` rejects.
    """
    if not isinstance(params, TaskParams):
        raise ValueError(f"params must be a TaskParams, got {type(params).__name__}")
    alpha = check_alpha(alpha)
    ds = _as_ints("d", d, 1)
    seeds = _as_ints("seeds", seeds, 0)
    starts = _as_starts(starts)
    n_iter = check_int("n_iter", n_iter, 1)
    damping = _check_damping("damping", damping)
    if prox_mode not in PROX_MODES:
        raise ValueError(f"prox_mode must be one of {PROX_MODES}, got {prox_mode!r}")
    quadrature = SESolver().quadrature if quadrature is None else quadrature
    if not isinstance(quadrature, Quadrature):
        raise ValueError(f"quadrature must be a Quadrature, got {type(quadrature).__name__}")
    common = dict(params=params, alpha=alpha, n_iter=n_iter, damping=damping, prox_mode=prox_mode,
                  use_cache=use_cache)
    grid = [(s, dd, sd) for s in starts for dd in ds for sd in seeds]
    jobs = [(_se_run, dict(common, start=s, quadrature=quadrature)) for s in starts]
    jobs += [(_tracking_run, dict(common, d=dd, start=s, seed=sd, normalize_teacher=bool(normalize_teacher),
                                  n_probes=n_probes, probe_eps=probe_eps)) for s, dd, sd in grid]
    out = run_jobs(jobs, n_jobs)
    se_runs = dict(zip(starts, out[:len(starts)]))
    t = np.arange(n_iter + 1)

    def padded(values, shift=0):
        col = np.full(n_iter + 1, np.nan)
        vals = _floats(values)[:n_iter + 1 - shift]
        col[shift:shift + len(vals)] = vals
        return col

    blocks = []
    for (s, dd, sd), run in zip(grid, out[len(starts):]):
        se = se_runs[s]
        cols = {"start": s, "d": dd, "alpha": alpha, "seed": sd, "t": t}
        for k in ("m", "theta", "q", "V"):
            cols[f"{k}_gamp"] = padded(run[k])
            cols[f"{k}_se"] = padded(se[k])
        for k in ("m_hat", "V_hat"):
            cols[f"{k}_gamp"] = padded(run[k], shift=1)
            cols[f"{k}_se"] = padded(se[k], shift=1)
        cols["rho_hat"] = float(run["rho_hat"])
        blocks.append(pd.DataFrame(cols))
    order = ["start", "d", "alpha", "seed", "t"] + [f"{k}_{w}" for w in ("gamp", "se")
                                                   for k in ("m", "theta", "q", "V")] + \
        [f"{k}_{w}" for w in ("gamp", "se") for k in ("m_hat", "V_hat")] + ["rho_hat"]
    return pd.concat(blocks, ignore_index=True)[order]


def _fixed_point_row(params: TaskParams, d: int, alpha: float, start: str, seed: int, damping: float, tol: float,
                     normalize_teacher: bool, prox_mode: str, n_probes: int, probe_eps: float, gamp_options: dict,
                     use_cache: bool) -> dict:
    """GAMP to its fixed point and L-BFGS on the same data (module docstring), one cached row."""
    def compute():
        from .simulation import ERMObjective, simulate_erm, test_error_from_overlaps_rho

        run = run_gamp(params, d, alpha, start=start, seed=seed, damping=damping, tol=tol, prox_mode=prox_mode,
                       normalize_teacher=normalize_teacher, n_probes=n_probes, probe_eps=probe_eps, warn=False,
                       **gamp_options)
        _, Q0, _ = _teacher_and_start(params, d, _start_overlaps(params, start), seed, normalize_teacher)
        erm = {name: simulate_erm(params, d, alpha, start=st, seed=seed, method="lbfgs", n_test=2,
                                  normalize_teacher=normalize_teacher, keep_Q=True, warn=False)
               for name, st in (("lbfgs", Q0), ("lbfgs_named", start))}
        # the finite-d risk R(Q)/d at GAMP's final estimate, on the same training set
        teacher, train = make_task(params, d, n_samples(alpha, d), seed=seed, normalize_teacher=normalize_teacher)
        risk = ERMObjective(train, params.lam).value_and_grad(run.Q[:, None])[0] / d
        del train
        # overlaps: mean of the last two iterates (GAMP may end on a small period-2 cycle)
        m, theta, q = (float(np.mean(getattr(run, k)[-2:])) for k in ("m", "theta", "q"))
        row = {"n_iter_gamp": run.n_iter, "converged_gamp": run.converged, "residual_gamp": run.residual,
               "grad_norm_gamp": run.grad_norm, "cycle_m_gamp": float(abs(run.m[-1] - run.m[-2])),
               "m_gamp": m, "theta_gamp": theta, "q_gamp": q, "train_loss_gamp": float(risk),
               "test_error_gamp": test_error_from_overlaps_rho(params, q, m, theta, run.rho_hat),
               "seconds_gamp": run.seconds, "rho_hat": run.rho_hat}
        for name, e in erm.items():
            Qe = e.Q[:, 0]
            row.update({f"m_{name}": e.m, f"theta_{name}": e.theta, f"q_{name}": e.q,
                        f"train_loss_{name}": e.train_loss, f"test_error_{name}": e.test_error_theory_rho_hat,
                        f"converged_{name}": e.converged, f"grad_norm_{name}": e.grad_norm,
                        f"dist_{name}": float(np.linalg.norm(run.Q - Qe) / np.linalg.norm(Qe)),
                        f"seconds_{name}": e.wall_time})
        return row

    return cached(FIXED_POINT_NAMESPACE, compute, use_cache=use_cache, params=params, d=d, alpha=alpha,
                  start=start, seed=seed, damping=damping, tol=tol, normalize_teacher=normalize_teacher,
                  prox_mode=prox_mode, n_probes=n_probes, probe_eps=probe_eps, gamp_options=gamp_options)


def gamp_fixed_point_table(params: TaskParams, d=2000, alpha: float = 2.0, starts=GAMP_STARTS, seeds=(0,),
                           damping: float = 0.3, tol: float = 1e-6, normalize_teacher: bool = True,
                           prox_mode: str = "global", n_probes: int = 2, probe_eps: float = 0.05,
                           gamp_options: dict | None = None, n_jobs: int = 1, use_cache: bool = True):
    """GAMP's fixed point against the L-BFGS minimum of the finite-d risk on the same data, as a tidy table.

    A fixed point of GAMP is a stationary point of the GLM surrogate ``R_GLM`` of the module docstring
    (the output loss of book eq. ``eq-prox``, i.e. ``(sigma^2/2)||S(h) - T||_F^2`` per sample, plus the ridge
    term), whereas :func:`attnlib.simulation.simulate_erm` (``method="lbfgs"``) minimises the finite-d risk
    ``R`` of spec section 1 (book eq. ``eq-risk``). The two differ by the fluctuations of the token Gram
    matrices, so the overlaps (``eq-overlaps``) agree up to finite-size effects. For every start, ``d`` and
    seed, GAMP is run with :data:`FIXED_POINT_OPTIONS` of the start (overridable), and L-BFGS twice: from
    GAMP's own initial ``Q`` (same start, suffix ``_lbfgs``) and from the named start of ``simulate_erm``
    (``Q = Q*`` or ``1_d/sqrt(d)``; suffix ``_lbfgs_named``). Each row is cached on disk under every argument
    and the library fingerprint.

    Parameters
    ----------
    params, d, alpha, starts, seeds, normalize_teacher, prox_mode, n_probes, probe_eps, n_jobs, use_cache
        As in :func:`gamp_tracking_table`.
    damping, tol : float
        Passed to :func:`run_gamp`.
    gamp_options : dict, optional
        Per start, extra :func:`run_gamp` keyword arguments (``max_iter``, ``message_damping``) replacing
        those of :data:`FIXED_POINT_OPTIONS`.

    Returns
    -------
    pandas.DataFrame
        One row per ``(start, d, seed)``. GAMP: ``m_gamp, theta_gamp, q_gamp`` (mean of the last two
        iterates: on a period-2 cycle, its centre), ``cycle_m_gamp`` (``|m_T - m_{T-1}|``),
        ``converged_gamp``, ``n_iter_gamp``, ``residual_gamp``, ``grad_norm_gamp`` (of ``R_GLM``),
        ``train_loss_gamp`` (``R(Q)/d`` of the finite-d risk at GAMP's final estimate),
        ``test_error_gamp``. For each L-BFGS run (``_lbfgs``, ``_lbfgs_named``): ``m, theta, q,
        train_loss, test_error, converged, grad_norm`` and ``dist`` (``||Q_GAMP - Q_LBFGS|| / ||Q_LBFGS||``).
        Test errors are the Gaussian-equivalent ``eps_g`` of the overlaps with the finite-d teacher norm
        (:func:`attnlib.simulation.test_error_from_overlaps_rho`). Also ``rho_hat`` and wall times
        ``seconds_*``.
    """
    if not isinstance(params, TaskParams):
        raise ValueError(f"params must be a TaskParams, got {type(params).__name__}")
    alpha = check_alpha(alpha)
    ds = _as_ints("d", d, 1)
    seeds = _as_ints("seeds", seeds, 0)
    starts = _as_starts(starts)
    options = {s: dict(FIXED_POINT_OPTIONS[s]) for s in GAMP_STARTS}
    for s, extra in (gamp_options or {}).items():
        if s not in GAMP_STARTS:
            raise ValueError(f"gamp_options keys must be among {GAMP_STARTS}, got {s!r}")
        unknown = set(extra) - {"max_iter", "message_damping"}
        if unknown:
            raise ValueError(f"gamp_options may set max_iter and message_damping only, got {sorted(unknown)}")
        options[s].update(extra)
    grid = [(s, dd, sd) for s in starts for dd in ds for sd in seeds]
    jobs = [(_fixed_point_row, dict(params=params, d=dd, alpha=alpha, start=s, seed=sd, damping=damping, tol=tol,
                                    normalize_teacher=bool(normalize_teacher), prox_mode=prox_mode,
                                    n_probes=n_probes, probe_eps=probe_eps, gamp_options=options[s],
                                    use_cache=use_cache)) for s, dd, sd in grid]
    rows = run_jobs(jobs, n_jobs)
    table = pd.DataFrame([{"start": s, "d": dd, "alpha": alpha, "seed": sd, **row}
                          for (s, dd, sd), row in zip(grid, rows)])
    quantities = ("m", "theta", "q", "train_loss", "test_error", "converged", "grad_norm")
    order = ["start", "d", "alpha", "seed"] + [f"{k}_gamp" for k in quantities] + \
        ["cycle_m_gamp", "n_iter_gamp", "residual_gamp"] + \
        [f"{k}_{name}" for name in ("lbfgs", "lbfgs_named") for k in quantities + ("dist",)] + \
        ["rho_hat", "seconds_gamp", "seconds_lbfgs", "seconds_lbfgs_named"]
    table = table[order].copy()
    for col in table.columns:
        if col.startswith("converged"):
            table[col] = table[col].astype(bool)
        elif table[col].dtype == object and col != "start":
            table[col] = _floats(table[col])
    return table

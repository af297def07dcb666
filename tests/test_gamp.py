"""Tests of GAMP on finite-d data and of its state evolution (attnlib.finite_d.gamp; book chapters 2-4
and appendix, book eqs. (eq-gamp), (eq-gamp-input)).

Reference task of the paper (its reference values: book/data/paper_reference.csv): sigma = 0.5, lambda = 0.01,
omega = 0.3, standard A, alpha = 2, d = 2000.
"""
import warnings

import numpy as np
import pytest

from attnlib.exceptions import ConvergenceWarning
from attnlib.finite_d.gamp import GAMPResult, gamp_initial_Q, run_gamp
from attnlib.theory.studies.se_iterates import state_evolution_iterates
from attnlib.params import TaskParams
from attnlib.theory.model.quadrature import Quadrature
from attnlib.finite_d.simulation import simulate_erm
from attnlib.theory.model.state_evolution import Overlaps

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
D, ALPHA = 2000, 2.0
N_TRACK = 20  # iterations compared with the state evolution


@pytest.fixture(scope="module")
def tracked():
    """GAMP (damping 0.3, normalised teacher) and its state evolution from the same initial overlaps."""
    out = {}
    for start in ("semantic", "positional"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            run = run_gamp(P, D, ALPHA, start=start, seed=0, max_iter=N_TRACK, tol=1e-9, damping=0.3,
                           normalize_teacher=True)
        se = state_evolution_iterates(P, ALPHA, run.start, n_iter=N_TRACK, damping=0.3,
                                      quadrature=Quadrature("gauss-hermite", 10))
        out[start] = (run, se)
    return out


def _max_dev(run, se, name, k):
    return float(np.max(np.abs(getattr(run, name)[:k + 1] - getattr(se, name)[:k + 1])))


def test_semantic_start_tracked_by_state_evolution(tracked):
    run, se = tracked["semantic"]
    assert len(run.m) == len(se.m) == N_TRACK + 1
    # start with identical overlaps
    assert run.theta[0] == pytest.approx(se.theta[0]) and run.q[0] == pytest.approx(se.q[0])
    # iteration by iteration, within finite-size fluctuations at d = 2000 (measured, seed 0: theta 0.0034,
    # q 0.0026, m 0.012 (the SE keeps m = 0 exactly), V 1 %)
    assert _max_dev(run, se, "theta", N_TRACK) < 0.01
    assert _max_dev(run, se, "q", N_TRACK) < 0.01
    assert _max_dev(run, se, "m", N_TRACK) < 0.03
    assert np.max(np.abs(run.V - se.V) / se.V) < 0.04
    # the last five iterations (near the fixed point) agree more closely
    tail = slice(N_TRACK - 4, N_TRACK + 1)
    assert np.max(np.abs(run.theta[tail] - se.theta[tail])) < 0.002
    assert np.max(np.abs(run.q[tail] - se.q[tail])) < 0.003
    # both settle near the semantic fixed point of the SE (paper reference values: theta 0.1586, q 0.1142)
    assert se.theta[-1] == pytest.approx(0.1586, rel=0.03)
    assert run.theta[-1] == pytest.approx(0.1586, rel=0.05)


def test_positional_start_tracked_by_state_evolution(tracked):
    run, se = tracked["positional"]
    assert len(run.m) == len(se.m) == N_TRACK + 1
    # the SE keeps theta = 0 exactly; GAMP's theta is an O(d^-1/2) fluctuation over these iterations
    # (the free iteration leaves the positional branch later, book section (sec-quadrature))
    assert np.max(np.abs(se.theta)) < 1e-6  # round-off only
    # measured, seed 0: m 0.011, q 0.0025, theta 0.0025, V 4 %
    assert np.max(np.abs(run.theta)) < 0.01
    assert _max_dev(run, se, "m", N_TRACK) < 0.025
    assert _max_dev(run, se, "q", N_TRACK) < 0.006
    assert np.max(np.abs(run.V - se.V) / se.V) < 0.08
    # near the positional fixed point (paper reference values: m 0.2586, q 0.0500)
    assert se.m[-1] == pytest.approx(0.2586, rel=0.03)
    assert run.m[-1] == pytest.approx(0.2586, rel=0.04)


def test_semantic_fixed_point_matches_lbfgs():
    """A GAMP fixed point is a stationary point of the GLM risk; L-BFGS minimises the finite-d risk."""
    run = run_gamp(P, D, ALPHA, start="semantic", seed=0, max_iter=150, tol=1e-6)
    assert run.converged and run.grad_norm < 1e-6
    erm = simulate_erm(P, D, ALPHA, start="semantic", seed=0, method="lbfgs", n_test=100)
    assert erm.converged
    assert abs(run.theta[-1] - erm.theta) < 0.02
    assert abs(run.m[-1] - erm.m) < 0.02
    assert abs(run.q[-1] - erm.q) < 0.02


@pytest.mark.slow
def test_positional_fixed_point_matches_lbfgs():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        run = run_gamp(P, D, ALPHA, start="positional", seed=0, max_iter=60, tol=1e-6, message_damping=0.5)
    erm = simulate_erm(P, D, ALPHA, start="positional", seed=0, method="lbfgs", n_test=100)
    assert erm.converged
    # the global proximal point jumps for samples near the Maxwell line: GAMP may end on a small period-2
    # cycle instead of an exact fixed point, so average the last two iterates
    theta = run.theta[-2:].mean()
    m = run.m[-2:].mean()
    assert abs(theta - erm.theta) < 0.02
    assert abs(m - erm.m) < 0.02
    assert abs(run.m[-1] - run.m[-2]) < 0.01


def test_same_seed_same_data_as_simulate_erm_and_reproducible():
    a = run_gamp(P, 60, 2.0, start="semantic", seed=3, max_iter=3, warn=False)
    b = run_gamp(P, 60, 2.0, start="semantic", seed=3, max_iter=3, warn=False)
    assert np.array_equal(a.Q, b.Q) and np.array_equal(a.theta, b.theta)
    erm = simulate_erm(P, 60, 2.0, start="semantic", seed=3, method="lbfgs", n_test=10, warn=False)
    assert a.rho_hat == erm.rho_hat and a.n == erm.n == 120


def test_initial_Q_has_the_requested_overlaps():
    rng = np.random.default_rng(0)
    Q_star = rng.standard_normal(500)
    st = Overlaps(q=0.1, m=0.2, V=1.0, theta=0.05)
    Q = gamp_initial_Q(st, Q_star, 0.5, np.random.default_rng(1))
    assert Q.sum() / 500 == pytest.approx(0.2)
    assert 0.25 * Q @ Q_star / 500 == pytest.approx(0.05)
    assert 0.25 * Q @ Q / 500 == pytest.approx(0.1)


def test_result_is_frozen_with_per_iteration_arrays():
    r = run_gamp(P, 50, 1.0, start=(0.1, 0.1, 5.0, 0.05), max_iter=4, warn=False)
    assert isinstance(r, GAMPResult)
    assert r.m.shape == r.theta.shape == r.q.shape == r.V.shape == (r.n_iter + 1,)
    assert r.Q.shape == (50,)
    with pytest.raises(Exception):
        r.n_iter = 0


def test_non_convergence_warns():
    with pytest.warns(ConvergenceWarning):
        r = run_gamp(P, 100, 2.0, max_iter=1)
    assert not r.converged and r.n_iter == 1


@pytest.mark.parametrize("kwargs, name", [
    ({"d": 0}, "d"),
    ({"d": 2.5}, "d"),
    ({"alpha": 0.0}, "alpha"),
    ({"alpha": -1.0}, "alpha"),
    ({"alpha": float("nan")}, "alpha"),
    ({"damping": 0.0}, "damping"),
    ({"damping": 1.5}, "damping"),
    ({"damping": float("inf")}, "damping"),
    ({"message_damping": 0.0}, "message_damping"),
    ({"start": "random"}, "start"),
    ({"start": (0.1, float("nan"), 1.0, 0.0)}, "start"),
    ({"start": (0.1, 0.0, -1.0, 0.0)}, "start"),
    ({"start": (0.01, 0.5, 1.0, 0.0)}, "start"),
    ({"tol": 0.0}, "tol"),
    ({"max_iter": 0}, "max_iter"),
    ({"seed": -1}, "seed"),
    ({"prox_mode": "local"}, "prox_mode"),
    ({"n_probes": -1}, "n_probes"),
    ({"probe_eps": 0.0}, "probe_eps"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    args = {"params": P, "d": 20, "alpha": 1.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        run_gamp(**args)


def test_bad_params_and_se_helper_input():
    with pytest.raises(ValueError, match="params"):
        run_gamp({"sigma": 0.5}, 20, 1.0)
    with pytest.raises(ValueError, match="damping"):
        state_evolution_iterates(P, 2.0, "semantic", n_iter=2, damping=0.0)
    with pytest.raises(ValueError, match="alpha"):
        state_evolution_iterates(P, 0.0, "semantic", n_iter=2)
    with pytest.raises(ValueError, match="n_iter"):
        state_evolution_iterates(P, 2.0, "semantic", n_iter=0)


def test_se_helper_undamped_step_is_the_spec_update():
    from attnlib.theory.model.state_evolution import SESolver, state_evolution_step
    start = Overlaps(q=0.1, m=0.1, V=8.0, theta=0.1)
    se = state_evolution_iterates(P, ALPHA, start, n_iter=1, damping=1.0)
    ref = state_evolution_step(P, ALPHA, start, SESolver())
    assert se.q[1] == pytest.approx(ref.q, rel=2e-3)
    assert se.m[1] == pytest.approx(ref.m, rel=2e-3)
    assert se.theta[1] == pytest.approx(ref.theta, rel=2e-3)
    assert se.V[1] == pytest.approx(ref.V, rel=2e-3)

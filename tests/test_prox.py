"""The proximal step (both backends) against scipy.optimize.minimize node by node, and against each other."""
import numpy as np
import pytest
from scipy.optimize import minimize

from attnlib.theory.model.attention import output_loss, output_loss_derivatives
from attnlib.theory.model.proximal import minimise_locally, prox_objective, resolve_backend, solve_prox

BACKENDS = ["numpy"] + (["numba"] if resolve_backend("auto") == "numba" else [])


@pytest.fixture(scope="module")
def nodes():
    rng = np.random.default_rng(3)
    n = 300
    c = rng.normal(scale=0.6, size=(n, 2))
    t = rng.uniform(0.25, 0.85, size=(n, 2))
    return c, t


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("V", [0.5, 5.0, 30.0])
def test_global_prox_matches_multistart_scipy(nodes, V, backend):
    c, t = nodes
    sigma = 0.5
    res = solve_prox(c, t, V, sigma, mode="global", backend=backend)
    assert np.all(res.grad_norm < 1e-8)
    rng = np.random.default_rng(4)
    radius = np.sqrt(2 * V * output_loss(c, t, sigma))
    for i in range(0, len(c), 3):
        f = lambda h: prox_objective(h, c[i], t[i], V, sigma)
        starts = [c[i], np.zeros(2)] + [c[i] + radius[i] * rng.uniform(-1, 1, 2) for _ in range(6)]
        best = min((minimize(f, x0, method="BFGS", options={"gtol": 1e-11}) for x0 in starts), key=lambda r: r.fun)
        assert res.value[i] <= best.fun + 1e-10


@pytest.mark.parametrize("backend", BACKENDS)
def test_from_zero_is_a_local_minimum(nodes, backend):
    c, t = nodes
    res = solve_prox(c, t, 5.0, 0.5, mode="from-zero", backend=backend)
    assert np.all(res.grad_norm < 1e-8)
    glob = solve_prox(c, t, 5.0, 0.5, mode="global", backend=backend)
    assert np.all(glob.value <= res.value + 1e-12)


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba is not installed")
@pytest.mark.parametrize("V", [0.5, 5.0, 30.0])
def test_compiled_and_vectorised_backends_agree(nodes, V):
    """The numba kernels run the numpy algorithm node by node: same minima, values, gaps (to round-off)."""
    c, t = nodes
    a = solve_prox(c, t, V, 0.5, backend="numba")
    b = solve_prox(c, t, V, 0.5, backend="numpy")
    np.testing.assert_allclose(a.h, b.h, atol=1e-7)
    np.testing.assert_allclose(a.value, b.value, rtol=1e-12, atol=1e-14)
    finite = np.isfinite(b.gap)
    np.testing.assert_array_equal(np.isfinite(a.gap), finite)
    np.testing.assert_allclose(a.gap[finite], b.gap[finite], atol=1e-12)
    h0 = c + 0.1
    la = minimise_locally(h0, c, t, V, 0.5, backend="numba")
    lb = minimise_locally(h0, c, t, V, 0.5, backend="numpy")
    np.testing.assert_allclose(la.h, lb.h, atol=1e-7)
    np.testing.assert_allclose(la.value, lb.value, rtol=1e-12, atol=1e-14)


def test_backend_is_validated():
    with pytest.raises(ValueError, match="backend"):
        solve_prox(np.zeros((2, 2)), np.full((2, 2), 0.5), 1.0, 0.5, backend="fortran")


def test_analytic_derivatives_match_finite_differences():
    rng = np.random.default_rng(5)
    h = rng.normal(size=(50, 2))
    t = rng.uniform(0.2, 0.9, size=(50, 2))
    val, g, (H11, H12, H22) = output_loss_derivatives(h, t, 0.7)
    np.testing.assert_allclose(val, output_loss(h, t, 0.7))
    eps = 1e-6
    for k in range(2):
        e = np.zeros(2)
        e[k] = eps
        fd = (output_loss(h + e, t, 0.7) - output_loss(h - e, t, 0.7)) / (2 * eps)
        np.testing.assert_allclose(g[:, k], fd, atol=1e-8)
        _, gp, _ = output_loss_derivatives(h + e, t, 0.7)
        _, gm, _ = output_loss_derivatives(h - e, t, 0.7)
        fdH = (gp - gm) / (2 * eps)
        np.testing.assert_allclose(fdH[:, 0], H11 if k == 0 else H12, atol=1e-6)
        np.testing.assert_allclose(fdH[:, 1], H12 if k == 0 else H22, atol=1e-6)


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba is not installed")
def test_compiled_conjugate_passes_match_numpy():
    """The compiled passes around the proximal step (student fields, teacher diagonal, the conjugates' weighted sums)
    against the numpy expressions they replace, on the same proximal points: equal to summation round-off."""
    from attnlib import TaskParams
    from attnlib.theory.model import _conjugate_kernels as ck
    from attnlib.theory.model.attention import teacher_diagonal
    from attnlib.theory.model.generalisation import POSITION_SIGNS

    rng = np.random.default_rng(11)
    n = 5003  # not a multiple of the summation block
    nodes = rng.normal(size=(n, 4))
    weights = rng.uniform(0.5, 1.5, n) / n
    xi, eta = nodes[:, :2], nodes[:, 2:]
    sq, m, V = 0.37, 0.21, 1.7
    c = ck.student_fields(nodes, sq, m)
    np.testing.assert_array_equal(c, sq * xi + m * POSITION_SIGNS)
    params = TaskParams(omega=0.3, A=((0.2, 0.8), (0.35, 0.65)))
    a, b = 0.6, 0.45
    A = params.A_array
    np.testing.assert_allclose(ck.teacher_diagonal(nodes, a, b, params.omega, A[0, 0], A[1, 1]),
                               teacher_diagonal(a * xi + b * eta, params), rtol=1e-14, atol=1e-16)
    h = c + rng.normal(scale=0.3, size=(n, 2))
    value = rng.uniform(0, 1, n)
    g = (h - c) / V
    wg = weights[:, None] * g
    want = [np.sum(wg * g), np.sum(wg * eta), np.sum(wg * xi), np.sum(wg @ POSITION_SIGNS), weights @ value]
    scale = [np.sum(np.abs(wg * g)), np.sum(np.abs(wg * eta)), np.sum(np.abs(wg * xi)), np.sum(np.abs(wg)),
             weights @ value]
    got = ck.conjugate_sums(h, c, nodes, weights, value, V)
    np.testing.assert_array_less(np.abs(np.subtract(got, want)), 1e-14 * np.array(scale))


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba is not installed")
@pytest.mark.parametrize("theta", [0.0, 0.15])
def test_conjugates_agree_between_backends(theta):
    """conjugates_and_energy with the compiled passes and with numpy: the same conjugates and mean proximal value to
    the precision the proximal descent is stopped at (its gradient tolerance moves each node by ~1e-10)."""
    from dataclasses import replace

    from attnlib import SESolver, TaskParams
    from attnlib.theory.model.state_evolution import Overlaps, conjugates_and_energy, se_nodes
    from attnlib.theory.model.quadrature import Quadrature

    solver = SESolver(quadrature=Quadrature(rule="sobol-sym", order=12, seed=1), n_ring=4, tie_smoothing=5e-5)
    nodes, weights = se_nodes(solver.quadrature)
    params = TaskParams(omega=0.25)
    x = Overlaps(q=0.3, m=0.12, V=1.3, theta=theta)
    out = {}
    for backend in ("numba", "numpy"):
        s = replace(solver, prox_backend=backend)
        hat, mean_M, warm = conjugates_and_energy(params, 1.4, x, nodes, weights, s)
        warm_hat, warm_M, _ = conjugates_and_energy(params, 1.4, replace(x, q=0.301), nodes, weights, s, warm=warm)
        out[backend] = np.array([hat.q_hat, hat.m_hat, hat.V_hat, hat.theta_hat, mean_M,
                                 warm_hat.q_hat, warm_hat.m_hat, warm_hat.V_hat, warm_hat.theta_hat, warm_M])
    np.testing.assert_allclose(out["numba"], out["numpy"], rtol=1e-7, atol=1e-12)

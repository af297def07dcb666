"""The state evolution for any L and student rank (attnlib.theory.solve.general_state_evolution; book section
sec-general-L): it reduces to the L = 2 solver, its symmetries are exact, eps_lin matches a Monte-Carlo average of
its definition, fixed points at L = 3 and at rank 2 converge and agree with finite-d minimisers, and what it
cannot do is refused with a ValueError naming L or the rank."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from attnlib import (GeneralOverlaps, GeneralResult, GeneralSolver, TaskParams, alpha_sweep, linear_baseline_error,
                     positional_encodings, simulate_erm, solve_state_evolution)
from attnlib.exceptions import ConvergenceWarning
from attnlib.theory.model import general_model as gm
from attnlib.theory.solve import general_state_evolution as gse
from attnlib.theory.model.attention import softmax_rows, teacher_attention
from attnlib.theory.model.general_prox import prox_global, start_directions
from attnlib.theory.model.quadrature import Quadrature
from attnlib.theory.model.state_evolution import (Overlaps, SESolver, _free_energy, conjugates_and_energy,
                                                  overlaps_from_conjugates, se_nodes)

P2 = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
#: A 3-token positional matrix a tied rank-1 student can represent: softmax_row(a a^T), a = (1, 0, -1).
A3 = tuple(map(tuple, softmax_rows(np.outer([1.0, 0.0, -1.0], [1.0, 0.0, -1.0])).tolist()))
P3 = TaskParams(sigma=0.5, lam=0.01, omega=0.3, A=A3)


def _general_nodes_from(nodes, w):
    n = len(w)
    return nodes[:, :2].reshape(n, 2, 1), np.ascontiguousarray(nodes[:, 2:]), w


@pytest.mark.parametrize("x", [Overlaps(0.08, 0.2, 2.0, 0.1), Overlaps(0.04, 0.15, 24.0, 0.03)])
def test_map_reduces_to_the_two_token_map(x):
    """At L = 2, r = 1, on the same nodes, the general conjugates, E[min F], the updated overlaps and Phi equal
    those of the L = 2 solver (M = (m, -m), m_hat = G_hat_1 - G_hat_2); the second state has V = 24, where
    many nodes have two local minima."""
    q = Quadrature("sobol-sym", 11, 3)
    nodes, w = se_nodes(q)
    hat, mean_M, _ = conjugates_and_energy(P2, 1.25, x, nodes, w, SESolver(quadrature=q))
    new = overlaps_from_conjugates(P2, hat)
    gx = GeneralOverlaps(q=[[x.q]], M=[[x.m], [-x.m]], V=[[x.V]], theta=[x.theta])
    G = gm.simplex_gram(2)
    ch = gm.general_channel(P2, 1.25, gx, _general_nodes_from(nodes, w))
    gnew = gm.general_prior_update(P2, ch, G)
    pairs = [(hat.q_hat, ch.q_hat[0, 0]), (hat.m_hat, ch.G_hat[0, 0] - ch.G_hat[1, 0]), (hat.V_hat, ch.V_hat[0, 0]),
             (hat.theta_hat, ch.theta_hat[0]), (mean_M, ch.mean_M), (new.q, gnew.q[0, 0]), (new.m, gnew.M[0, 0]),
             (-new.m, gnew.M[1, 0]), (new.V, gnew.V[0, 0]), (new.theta, gnew.theta[0]),
             (_free_energy(P2, 1.25, x, hat, mean_M), gm.general_free_energy(P2, 1.25, gx, ch, G))]
    for a, b in pairs:
        assert b == pytest.approx(a, rel=1e-7, abs=1e-13)


@pytest.mark.parametrize("alpha, branch", [(1.25, "semantic"), (1.25, "positional"), (2.0, "positional")])
def test_fixed_point_reduces_to_the_two_token_solver(alpha, branch):
    """At L = 2, r = 1 the general engine's fixed point (a GeneralSolver forces it) agrees with the default L = 2
    solver within four combined standard errors in q, m, theta, eps_g and eps_t."""
    ref = solve_state_evolution(P2, alpha, branch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the smaller rule's precision target
        gen = solve_state_evolution(P2, alpha, branch, solver=GeneralSolver(order=12, max_order=12))
    assert isinstance(gen, GeneralResult) and gen.L == 2 and gen.rank == 1
    e = gen.stderr
    checks = [(gen.q[0, 0], e["q"][0, 0], ref.q, ref.stderr["q"]),
              (gen.M[0, 0], e["M"][0, 0], ref.m, ref.stderr["m"]),
              (gen.theta[0], e["theta"][0], ref.theta, ref.stderr["theta"]),
              (gen.test_error, e["test_error"], ref.test_error, ref.stderr["test_error"]),
              (gen.train_loss, e["train_loss"], ref.train_loss, ref.stderr["train_loss"])]
    for a, ea, b, eb in checks:
        assert abs(a - b) <= 4 * math.hypot(ea, eb) + 1e-12, (a, ea, b, eb)
    assert gen.M[1, 0] == pytest.approx(-gen.M[0, 0], abs=1e-12)  # the columns of M sum to zero


def test_symmetric_rule_keeps_the_invariant_subspaces_exactly():
    """On the unfolded symmetrised rule, M = 0 gives G_hat = 0 and theta = 0 gives theta_hat = 0 to round-off,
    at L = 3 (book sec-general-L: (xi, eta) -> -(xi, eta) and eta -> -eta)."""
    nodes = gm.general_nodes(3, 1, 9, 5)
    sem = GeneralOverlaps(q=[[0.15]], M=np.zeros((3, 1)), V=[[3.0]], theta=[0.12])
    pos = GeneralOverlaps(q=[[0.08]], M=[[0.3], [0.0], [-0.3]], V=[[10.0]], theta=[0.0])
    ch_sem, ch_pos = gm.general_channel(P3, 1.5, sem, nodes), gm.general_channel(P3, 1.5, pos, nodes)
    # zero to the proximal solver's tolerance, against conjugates of order 1e-3 off the subspaces
    assert np.max(np.abs(ch_sem.G_hat)) < 1e-10 < 1e-6 < np.max(np.abs(ch_pos.G_hat))
    assert np.max(np.abs(ch_pos.theta_hat)) < 1e-10 < 1e-6 < np.max(np.abs(ch_sem.theta_hat))


def test_map_is_covariant_under_the_gauge():
    """Q -> Q O: with the nodes rotated as well (xi -> xi O), the rank-2 conjugates rotate exactly (to the
    proximal solver's tolerance, about 1e-8 in h): G_hat -> G_hat O, q_hat -> O^T q_hat O, theta_hat -> O^T theta_hat."""
    x = GeneralOverlaps(q=[[0.05, 0.004], [0.004, 0.03]], M=[[0.2, 0.03], [-0.2, -0.03]], V=[[6.0, 0.5], [0.5, 9.0]],
                        theta=[0.05, 0.01])
    t = 0.7
    O = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    xi, eta, w = gm.general_nodes(2, 2, 9, 1)
    ch = gm.general_channel(P2, 1.0, x, (xi, eta, w))
    cr = gm.general_channel(P2, 1.0, x.rotated(O), (xi @ O, eta, w))
    assert np.allclose(cr.G_hat, ch.G_hat @ O, rtol=0, atol=1e-6 * np.abs(ch.G_hat).max())
    assert np.allclose(cr.q_hat, O.T @ ch.q_hat @ O, rtol=0, atol=1e-6 * np.abs(ch.q_hat).max())
    assert np.allclose(cr.theta_hat, O.T @ ch.theta_hat, rtol=0, atol=1e-6 * np.abs(ch.theta_hat).max())
    assert np.allclose(cr.V_hat, O.T @ ch.V_hat @ O, rtol=0, atol=1e-6 * np.abs(ch.V_hat).max())
    assert cr.mean_M == pytest.approx(ch.mean_M, rel=1e-12)


def test_reduced_start_set_finds_the_global_minimum():
    """The default starts (centre, origin, the signed axes at one radius) find the same global minimum as the
    larger set (two radii and the diagonals) at every node of an L = 3 positional state with many two-minimum
    nodes."""
    x = GeneralOverlaps(q=[[0.05]], M=[[0.3], [0.0], [-0.3]], V=[[40.0]], theta=[0.0])
    p = P3.with_(omega=0.0)
    xi, eta, _ = gm.general_nodes(3, 1, 10, 3, (False, True))
    c, hs, _, _ = gm._fields(p, x, xi, eta)
    T = teacher_attention(hs, p.omega, p.A_array)
    small = prox_global(c, T, x.V, p.sigma)
    big = prox_global(c, T, x.V, p.sigma, radii=(0.35, 0.75), diagonals=True)
    assert big.multi_fraction > 0.05  # a hard state: many nodes have two local minima
    assert np.max(small.value - big.value) < 1e-10
    assert len(start_directions(3)) == 6 and len(start_directions(3, diagonals=True)) == 14


@pytest.mark.parametrize("L, r", [(2, 1), (3, 1), (4, 1), (2, 2), (3, 2)])
def test_compiled_descent_equals_the_numpy_reference(L, r):
    """The numba kernel of the proximal descent (per node, Cholesky where the Hessian is safely positive) and the
    vectorised numpy code reach the same point at every node from the same starts, to round-off, and the full
    search keeps the same global minimum."""
    from attnlib.theory.model.general_prox import newton_descent
    rng = np.random.default_rng(L + 10 * r)
    B = 600
    c = 1.5 * rng.standard_normal((B, L, r))
    T = teacher_attention(rng.standard_normal((B, L)), 0.3, np.full((L, L), 1.0 / L))
    V = 3.0 * np.eye(r) + 0.5 * (np.ones((r, r)) - np.eye(r))
    h0 = c + 0.5 * rng.standard_normal(c.shape)
    a = newton_descent(h0, c, T, np.linalg.inv(V), 0.5, backend="numba")
    b = newton_descent(h0, c, T, np.linalg.inv(V), 0.5, backend="numpy")
    assert np.max(np.abs(a[0] - b[0])) < 1e-9 and np.max(np.abs(a[1] - b[1])) < 1e-12
    assert np.all(a[2] <= 1e-10) and a[3] == b[3]
    ga, gb = (prox_global(c, T, V, 0.5, backend=be) for be in ("numba", "numpy"))
    assert np.max(np.abs(ga.value - gb.value)) < 1e-12


def test_threaded_descent_equals_the_one_thread_kernel():
    """The compiled descent split into blocks on numba's threads is the same per-node computation as the
    one-thread kernel: identical results, for a node count that is not a multiple of the block size; and the
    caller only threads large batches from the main thread."""
    import threading

    import numba

    from attnlib.theory.model import _general_prox_kernels as k
    from attnlib.theory.model.general_prox import THREADS_FROM, _use_threads
    rng = np.random.default_rng(7)
    B, L, r = 3 * k.BLOCK + 17, 3, 1
    c = 1.5 * rng.standard_normal((B, L, r))
    T = teacher_attention(rng.standard_normal((B, L)), 0.3, np.full((L, L), 1.0 / L))
    Vinv = np.linalg.inv(np.array([[3.0]]))
    h0 = c + 0.5 * rng.standard_normal(c.shape)
    mu0 = 0.25 * float(np.linalg.eigvalsh(Vinv).min())
    a = k.newton_descent(h0, c, T, Vinv, 0.25, mu0, 1e-10, 100)
    b = k.newton_descent_parallel(h0, c, T, Vinv, 0.25, mu0, 1e-10, 100)
    for x, y in zip(a[:3], b[:3]):
        np.testing.assert_array_equal(x, y)
    assert a[3] == b[3]
    assert not _use_threads(THREADS_FROM - 1)
    assert _use_threads(THREADS_FROM) == (numba.get_num_threads() > 1)
    seen = []
    t = threading.Thread(target=lambda: seen.append(_use_threads(10 * THREADS_FROM)))
    t.start()
    t.join()
    assert seen == [False]


def test_rule_refinement_jumps_by_the_missed_precision():
    """Missing the target by a factor ratio refines the rule by 2 log2(ratio) doublings (the N^-1/2 law), at
    least one and never past max_order; an undefined error refines by one."""
    assert gse._next_order(10, 1.01, 16) == 11
    assert gse._next_order(10, 2.0, 16) == 12
    assert gse._next_order(10, 3.0, 16) == 14
    assert gse._next_order(10, 100.0, 16) == 16
    assert gse._next_order(10, math.inf, 16) == 11
    mean = {"q": 1.0, "M": np.array([0.5, -0.5]), "theta": np.zeros(1), "test_error": 0.01, "train_loss": 0.02}
    err = {"q": 1e-4, "M": np.array([1e-4, 2e-4]), "theta": np.zeros(1), "test_error": 1e-6, "train_loss": 1e-6}
    ratio = gse._precision_ratio(mean, err, P2, 1e-3)
    assert ratio == pytest.approx(0.4) and gse._precise(mean, err, P2, 1e-3)
    err["train_loss"] = float("nan")
    assert gse._precision_ratio(mean, err, P2, 1e-3) == math.inf and not gse._precise(mean, err, P2, 1e-3)


def test_fixed_point_is_the_same_with_either_descent_code():
    """A fixed point (L = 3, positional branch, one rule) is the same with the compiled and the numpy descents,
    far below its quadrature error."""
    solvers = [GeneralSolver(order=9, max_order=9, seeds=(3, 4), backend=be) for be in ("numba", "numpy")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ra, rb = (gse.solve_general(P3, 1.0, "positional", solver=s) for s in solvers)
    assert ra.converged and rb.converged
    assert abs(ra.train_loss - rb.train_loss) < 1e-3 * ra.stderr["train_loss"]
    assert np.max(np.abs(ra.M - rb.M)) < 1e-3 * np.max(ra.stderr["M"])
    with pytest.raises(ValueError, match="backend"):
        GeneralSolver(backend="fortran")


@pytest.mark.parametrize("L", [3, 4])
def test_linear_baseline_any_L_matches_monte_carlo(L):
    """eps_lin = (sigma^2/2) E ||T - E T||_F^2 for L = 3, 4 (book eq-general-linear) against a plain Monte-Carlo
    average of the definition (400 000 draws of T, batch standard error), within four standard errors; it does
    not depend on A."""
    a = np.linspace(1.0, -1.0, L)
    p = TaskParams(sigma=0.5, lam=0.01, omega=0.3, A=softmax_rows(np.outer(a, a)))
    value = linear_baseline_error(p)
    rng = np.random.default_rng(11)
    est = []
    for _ in range(20):
        u = p.sigma * rng.standard_normal((20000, L))
        T = teacher_attention(u, p.omega, p.A_array)
        est.append(0.5 * p.sigma**2 * np.mean(np.sum((T - T.mean(0)) ** 2, axis=(-1, -2))) * 20000 / 19999)
    mc, se = np.mean(est), np.std(est, ddof=1) / math.sqrt(len(est))
    assert abs(value - mc) < 4 * se
    uniform = TaskParams(sigma=0.5, lam=0.01, omega=0.3, A=np.full((L, L), 1.0 / L))
    assert linear_baseline_error(uniform) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("params, alpha, branch, rank", [(P3, 1.0, "positional", 1), (P2, 2.0, "free", 2)],
                         ids=["L3-positional", "L2-rank2"])
def test_chord_steps_reach_the_iterations_fixed_point(params, alpha, branch, rank):
    """With chord steps (the Jacobian of the first scrambling's map, attnlib.theory.solve.general_chord) the fixed point
    is the damped iteration's within two combined standard errors of the scramblings (the quadrature map is
    piecewise smooth: where nodes switch minimum, the two paths can stop on neighbouring fixed points, measured up
    to 8e-4 relative in q at L = 3, 2^14 points, 1.2 standard errors), in fewer maps; and a chord from one
    scrambling's fixed point to another's converges in a few steps."""
    solvers = [GeneralSolver(order=10, max_order=11, seeds=(3, 4, 5), chord=c) for c in (True, False)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ra, rb = (gse.solve_general(params, alpha, branch, rank=rank, solver=s) for s in solvers)
    assert ra.converged and rb.converged and ra.rule == rb.rule
    for k in ("q", "M", "theta", "train_loss", "test_error"):
        a, b = np.asarray(getattr(ra, k)), np.asarray(getattr(rb, k))
        err = np.hypot(ra.stderr[k], rb.stderr[k])
        assert np.all(np.abs(a - b) <= 2 * err + 1e-12), k
    assert ra.n_iter < rb.n_iter
    from attnlib.theory.solve.general_chord import chord_fixed_point, map_jacobian
    hold, G = gm._hold(branch), gm.simplex_gram(params.L)
    n3, n4 = (gm.general_nodes(params.L, rank, 11, s, hold) for s in (3, 4))
    first = gse._solve_one(params, alpha, ra.per_seed[0].canonical(), n3, hold, G, solvers[1])
    J = map_jacobian(params, alpha, first.x, n3, hold, G, first.ch.prox, solvers[0])
    out, _ = chord_fixed_point(params, alpha, first.x, n4, hold, G, J, first.x, solvers[0])
    assert out is not None and out.converged and out.n_iter <= 8


def test_three_tokens_converge_and_are_stationary():
    """solve_state_evolution with a 3 x 3 A returns the general engine's converged fixed point (semantic branch,
    alpha = 2): every scrambling's fixed point is stationary under its own rule, the errors are within the
    precision target, and M is held at zero."""
    res = solve_state_evolution(P3, 2.0, "semantic", solver=GeneralSolver(order=11, max_order=12))
    assert isinstance(res, GeneralResult) and res.converged and res.L == 3
    assert np.all(res.M == 0) and res.theta[0] > 0
    for name in ("q", "theta"):
        assert np.all(res.stderr[name] <= 2e-3 * np.abs(getattr(res, name)).max())
    order = int(res.rule.split("2^")[1].split()[0])
    x0 = res.per_seed[0]
    nodes = gm.general_nodes(3, 1, order, 3, (True, False))
    fx = gm.general_prior_update(P3, gm.general_channel(P3, 2.0, x0, nodes, (True, False)), gm.simplex_gram(3))
    assert np.allclose(fx.to_vector(), x0.to_vector(), rtol=2e-5, atol=1e-8)


def test_three_tokens_agree_with_finite_d():
    """L = 3, semantic branch at alpha = 2: L-BFGS from the teacher at d = 250, 500, 1000 (3 seeds each, simplex
    encodings), extrapolated linearly in 1/d, agrees with the theory's q, theta and eps_t within four standard
    errors of the intercept (plus the theory's own)."""
    theory = solve_state_evolution(P3, 2.0, "semantic", solver=GeneralSolver(order=11, max_order=12))
    rows = []
    for d in (250, 500, 1000):
        for seed in range(3):
            r = simulate_erm(P3, d=d, alpha=2.0, start="semantic", seed=seed, method="lbfgs", n_test=2000,
                             normalize_teacher=True)
            assert r.L == 3 and r.converged
            rows.append((1.0 / d, r.q, abs(r.theta), r.train_loss))
    a = np.array(rows)
    X = np.column_stack([np.ones(len(a)), a[:, 0]])
    for col, value, err in ((1, theory.q[0, 0], theory.stderr["q"][0, 0]),
                            (2, theory.theta[0], theory.stderr["theta"][0]),
                            (3, theory.train_loss, theory.stderr["train_loss"])):
        coef, res, *_ = np.linalg.lstsq(X, a[:, col], rcond=None)
        sigma2 = float(res[0]) / (len(a) - 2)
        se = math.sqrt(sigma2 * np.linalg.inv(X.T @ X)[0, 0])
        assert abs(coef[0] - value) <= 4 * math.hypot(se, err), (col, coef[0], value, se)


def test_rank_two_free_branch_converges_to_the_split_minimum():
    """Rank 2 at L = 2 (alpha = 1, free branch): the fixed point splits into a positional column and a semantic
    one (in the canonical gauge the positional overlap is all in one column, the teacher overlap in the other),
    with the training loss below the rank-1 branches, as the finite-d rank-2 minimisers of chapter 7 do
    (d = 1000: train loss 0.00183, test error 0.00251)."""
    res = solve_state_evolution(P2, 1.0, "free", rank=2, solver=GeneralSolver(order=11, max_order=11,
                                                                               precision=1.0))
    assert res.converged and res.rank == 2
    col_m, col_t = np.abs(res.M[0]), np.abs(res.theta)
    assert col_m.max() > 0.15 and col_t.max() > 0.04
    assert np.argmax(col_m) != np.argmax(col_t)  # split: positional and semantic in different columns
    assert min(col_m) < 0.05 * col_m.max() and min(col_t) < 0.1 * col_t.max()
    rank1 = [solve_state_evolution(P2, 1.0, b) for b in ("semantic", "positional")]
    assert res.train_loss < min(r.train_loss for r in rank1)
    assert res.train_loss == pytest.approx(0.00183, rel=0.05) and res.test_error == pytest.approx(0.00251, rel=0.05)


def test_gauge_representative_is_canonical():
    """canonical() is a gauge transformation (errors unchanged: q's eigenvalues, |theta|, M M^T) to the
    representative with the signal directions first and positive."""
    x = GeneralOverlaps(q=[[0.05, 0.004], [0.004, 0.03]], M=[[0.2, 0.03], [-0.2, -0.03]], V=[[6.0, 0.5], [0.5, 9.0]],
                        theta=[0.05, 0.01])
    y = x.canonical()
    assert np.allclose(np.linalg.eigvalsh(y.q), np.linalg.eigvalsh(x.q))
    assert np.allclose(y.M @ y.M.T, x.M @ x.M.T) and np.linalg.norm(y.theta) == pytest.approx(np.linalg.norm(x.theta))
    assert np.allclose(y.canonical().to_vector(), y.to_vector())
    t = 1.1
    O = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    assert np.allclose(x.rotated(O).canonical().to_vector(), y.to_vector())


def test_what_the_engine_cannot_do_is_refused():
    with pytest.raises(ValueError, match="rank"):
        solve_state_evolution(P2, 1.0, rank=gm.MAX_RANK + 1)
    big = TaskParams(A=np.full((gm.MAX_L + 1, gm.MAX_L + 1), 1.0 / (gm.MAX_L + 1)))
    with pytest.raises(ValueError, match="L"):
        solve_state_evolution(big, 1.0)
    with pytest.raises(ValueError, match="L = 2"):
        solve_state_evolution(P3, 1.0, fix_m=0.1)
    with pytest.raises(ValueError, match="GeneralSolver"):
        solve_state_evolution(P3, 1.0, solver=SESolver())
    for fn in (lambda: alpha_sweep(P3, [1.0]), lambda: conjugates_and_energy(P3, 1.0, Overlaps(0.1, 0, 1, 0.1),
                                                                              np.zeros((1, 4)), np.ones(1), SESolver())):
        with pytest.raises(ValueError, match="L = 2 tokens"):
            fn()
    with pytest.raises(ValueError, match="start"):
        solve_state_evolution(P3, 1.0, start=GeneralOverlaps([[0.1]], [[0.0], [0.0]], [[1.0]], [0.1]))


def test_task_params_any_L():
    assert P3.L == 3 and P2.L == 2 and not P3.swap_symmetric
    assert P3.as_dict()["L"] == 3 and "L" not in P2.as_dict() and P2.as_dict()["A22"] == 0.6
    for bad, word in ((np.ones((3, 2)) / 2, "L x L"), (np.eye(1), "L >= 2"), ([[0.5, 0.6], [0.5, 0.5]], "rows"),
                      ([[1.2, -0.2], [0.5, 0.5]], "entries")):
        with pytest.raises(ValueError, match=word):
            TaskParams(A=bad)


@pytest.mark.parametrize("L, d", [(2, 7), (3, 10), (4, 9), (5, 1000)])
def test_simplex_encodings(L, d):
    """Unit vectors with p_l . p_k = -1/(L-1): the Gram matrix of the general theory, for any d >= L."""
    P = positional_encodings(d, L)
    assert np.allclose(P @ P.T, gm.simplex_gram(L), atol=1e-12)

"""Diagnostics of the replica-symmetric fixed point, theory-vs-finite-d comparisons, the loss landscape between
the two finite-d minima and the symmetric Sobol rule."""

import numpy as np
import pytest

from attnlib import Overlaps, Quadrature, SESolver, TaskParams, solve_state_evolution
from attnlib.finite_d.arbiter import arbiter_table
from attnlib.finite_d.landscape import barrier_height, loss_along_path
from attnlib.finite_d.sim_sweeps import classify_minima
from attnlib.theory.studies.stability import replicon, rs_diagnostics, tie_density
from attnlib.theory.model.state_evolution import conjugates_and_energy, se_nodes, symmetry_generators
from attnlib.finite_d.validity import fixed_point_near, rs_breakdown, rs_validity

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))


def test_symmetric_sobol_rule_keeps_the_invariant_subspaces_exact():
    """With the symmetrised Sobol rule theta = 0 and m = 0 are exact fixed subspaces of the free map (the
    plain Sobol rule breaks them at the level of its quadrature error), and the folded rule integrates the
    Gaussian moments like the unfolded one."""
    x = Overlaps(q=0.05, m=0.0, V=25.0, theta=0.0)
    for rule, exact in (("sobol-sym", True), ("sobol", False)):
        solver = SESolver(quadrature=Quadrature(rule, 12))
        nodes, w = se_nodes(solver.quadrature, symmetry_generators(P, (None, None)))
        hat, _, _ = conjugates_and_energy(P, 0.6, x, nodes, w, solver, (None, None))
        if exact:
            assert abs(hat.theta_hat) < 1e-14 and abs(hat.m_hat) < 1e-14
        else:
            assert abs(hat.theta_hat) > 1e-8 or abs(hat.m_hat) > 1e-8
    q = Quadrature("sobol-sym", 12)
    full = q.points(4)
    folded = q.reduced_points(4, symmetry_generators(P, (0.0, None)))
    assert len(folded[1]) == len(full[1]) // 2 and folded[1].sum() == pytest.approx(1.0)
    np.testing.assert_allclose((folded[0] ** 2).T @ folded[1], (full[0] ** 2).T @ full[1], rtol=1e-12)
    with pytest.raises(ValueError, match="4-dimensional"):
        q.points(2)


def test_replicon_and_ties():
    """At alpha = 2 the RS fixed points are locally stable (replicon well below 1); the semantic proximal
    problem has a single minimum at every node there, the positional one a second minimum at a few nodes. At
    omega = 0, alpha = 0.55 (where finite-d descent and the theory part) a tenth of the positional nodes have
    two minima and near-ties are more than ten times as dense."""
    sem = solve_state_evolution(P, 2.0, "semantic", solver=SESolver())
    pos = solve_state_evolution(P, 2.0, "positional", solver=SESolver())
    for res in (sem, pos):
        assert 0 < replicon(res) < 1
    d_sem, d_pos = rs_diagnostics(sem, width=1e-3), rs_diagnostics(pos, width=1e-3)
    assert set(d_sem) == {"replicon", "tie_density", "two_minima"}
    assert d_sem["replicon"] == pytest.approx(replicon(sem))
    assert d_pos["tie_density"] == pytest.approx(tie_density(pos, width=1e-3))
    assert d_sem["two_minima"] == 0 and 0 < d_pos["two_minima"] < 0.01 and d_pos["tie_density"] > 0
    edge = solve_state_evolution(TaskParams(omega=0.0), 0.55, "positional", start=Overlaps(0.045, 0.15, 24.0, 0.0),
                                 solver=SESolver())
    d_edge = rs_diagnostics(edge, width=1e-3)
    assert d_edge["replicon"] < 1 and d_edge["two_minima"] > 0.05
    assert d_edge["tie_density"] > 10 * d_pos["tie_density"]
    with pytest.raises(ValueError, match="width"):
        tie_density(sem, width=0.0)


def test_classify_minima():
    kinds = classify_minima([0.26, 0.0, 0.2, 0.001], [0.0, 0.15, 0.1, 0.001], sigma=0.5)
    assert list(kinds) == ["positional", "semantic", "mixed", "uninformed"]


def test_loss_along_path_connects_the_two_minima():
    path = loss_along_path(P, 300, 1.5, seed=0, n_points=21)
    assert len(path) == 21 and path.t.min() == pytest.approx(-0.15) and path.t.max() == pytest.approx(1.15)
    # the two ends are local minima along the segment: the loss rises on both sides of each
    i0, i1 = int(np.argmin(np.abs(path.t - 0))), int(np.argmin(np.abs(path.t - 1)))
    assert path.train_loss[i0 - 1] > path.train_loss[i0] < path.train_loss[i0 + 1]
    assert path.train_loss[i1 - 1] > path.train_loss[i1] < path.train_loss[i1 + 1]
    assert path.m[i0] > 0.1 and abs(path.theta[i1]) > 0.05
    assert barrier_height(path) > 0
    with pytest.raises(ValueError, match="extend"):
        loss_along_path(P, 300, 1.5, extend=2.0)


def test_fixed_point_near_finds_the_branch_it_starts_on():
    sem = solve_state_evolution(P, 2.0, "semantic", solver=SESolver(quadrature=Quadrature("sobol-sym", 12)))
    res = fixed_point_near(P, 2.0, sem.q, 0.01, sem.theta, branch="free",
                           solver=SESolver(quadrature=Quadrature("sobol-sym", 12), tie_smoothing=5e-5))
    assert res.converged and abs(res.m) < 1e-4 and res.theta == pytest.approx(sem.theta, rel=2e-3)


@pytest.mark.slow
def test_rs_validity_on_a_small_table():
    """At omega = 0.3, alpha = 2, finite-d minimisers (d = 300, 600) agree with the branches within their
    extrapolation errors; the table has one row per (alpha, start) and the breakdown finds no disagreement."""
    table = arbiter_table(P, alphas=(2.0,), ds=(300, 600), seeds=range(4), n_jobs=2)
    val = rs_validity(table)
    assert len(val) == 2 and set(val.start) == {"semantic", "positional"}
    assert set(val.fixed_point) == {"semantic", "positional"}
    for row in val.itertuples():
        assert abs(row.diff_loss) < 4 * row.fd_loss_err + 0.03 * abs(row.theory_loss)
        assert abs(row.diff_overlap) < 4 * row.fd_overlap_err + 0.05 * row.theory_overlap
        assert 0 < row.replicon < 1
    br = rs_breakdown(val)
    assert br.last_disagreement.isna().all()


def test_solver_checks_at_the_edge():
    """omega = 0, alpha = 0.5384 (where theory and finite d part): the global proximal search finds the best
    minimum at every node even at the large width V ~ 25 there (brute force on a grid agrees); the training
    loss of the positional fixed point is the same under every quadrature rule and both proximal treatments to
    about 0.5 %, while m moves by much more; and the loss profile in m is flat: pinning m anywhere in
    [0.1, 0.19] costs less than 2 % of the relative loss."""
    from attnlib.finite_d.validity import pinned_profile, prox_coverage, solver_checks

    p = TaskParams(omega=0.0)
    a = 0.5384
    start = Overlaps(0.045, 0.145, 24.5, 0.0)
    res = solve_state_evolution(p, a, "positional", start=start, solver=SESolver())
    assert res.converged and res.m > 0.1 and res.V > 20
    cov = prox_coverage(res, Quadrature("sobol-sym", 8), points=121)
    assert cov["nodes"] > 0 and cov["share_worse"] == 0 and cov["max_deficit"] < 1e-12
    from attnlib.finite_d.validity import SOLVER_CHECK_RULES

    rules = [r for r in SOLVER_CHECK_RULES if "2^16" not in r[0]]  # (the 2^16 rule: in the book's data)
    checks = solver_checks(p, a, "positional", res.overlaps, rules=rules)
    assert len(checks) == len(rules)
    assert checks[checks.prox_mode == "global"].converged.all()
    rel = checks.rel_loss.to_numpy()
    assert (rel < 0).all() and (rel.max() - rel.min()) < 0.005 * abs(rel.mean())
    assert checks.m.max() - checks.m.min() > 0.01  # the overlap itself is much less determined
    gh = checks.iloc[0]
    assert gh.train_loss == pytest.approx(res.train_loss, rel=1e-5)
    prof = pinned_profile(p, a, "positional", [0.1, res.m, 0.19], res.overlaps)
    assert prof.converged.all()
    at_fp = prof.iloc[1].rel_loss
    assert at_fp == pytest.approx(res.train_loss - (checks.iloc[0].train_loss - gh.rel_loss), rel=1e-4)
    assert (prof.rel_loss >= at_fp - 1e-7).all()  # the fixed point is the minimum of the profile
    assert (prof.rel_loss - at_fp).max() < 0.02 * abs(at_fp)
    with pytest.raises(ValueError, match="branch"):
        pinned_profile(p, a, "agnostic", [0.1], res.overlaps)

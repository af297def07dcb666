"""The chord-Newton solve of pooled scrambled Sobol rules (attnlib.solve_chord) against the converged fixed
point, its linear-response error bar against each scrambling solved alone, and its flags.

"Converged" is the committed reference of tests/test_accurate.py (book/data/rule_study_fixed_points.csv: three
scramblings of 2^19-point symmetrised Sobol rules, seeds disjoint from the pooled rule's).
"""
import warnings

import numpy as np
import pytest

import attnlib
from converged_reference import converged_reference
from attnlib import Quadrature, SESolver, TaskParams, solve_chord, solve_state_evolution
from attnlib.theory.solve.chord import (CHORD_FIELDS, CHORD_ORDER, CHORD_SEEDS, _PooledMap, _free_indices,
                                        _start_jacobian, chord_start_solver, scrambling_fixed_points)
from attnlib.theory.model.state_evolution import _hold, _residual

POINTS = [(0.3, 1.25, "positional"), (0.3, 1.25, "semantic"), (0.3, 2.0, "positional"), (0.3, 2.0, "semantic"),
          (0.0, 0.55, "positional")]
TOLERANCE = 2e-3  # relative, the accuracy promised


@pytest.mark.parametrize("omega, alpha, branch", POINTS)
def test_chord_fixed_point_is_within_tolerance_of_the_converged_one(omega, alpha, branch):
    ref = converged_reference(omega, alpha, branch, CHORD_SEEDS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = solve_chord(TaskParams(sigma=0.5, lam=0.01, omega=omega), alpha, branch)
    assert res.converged and res.precise and not caught
    assert res.order >= CHORD_ORDER and res.runs == ()
    defining = res.m if branch == "positional" else res.theta
    assert defining > 0.05, "the branch was lost (uninformed point)"
    for k in CHORD_FIELDS:
        converged = ref[k].mean()
        if converged == 0.0:  # the overlap the branch holds at zero
            assert res.mean[k] == 0.0 and res.stderr[k] == 0.0
            continue
        both = np.hypot(res.stderr[k], ref[k].std(ddof=1) / np.sqrt(len(ref)))
        dev = abs(res.mean[k] - converged)
        if omega == 0.3:
            assert dev < TOLERANCE * abs(converged), (k, res.mean[k], converged)
        else:
            # at the edge the map is nearly neutral and both estimates carry errors near the tolerance:
            # the deviation must be within the tolerance plus two joint standard errors
            assert dev < TOLERANCE * abs(converged) + 2 * both, (k, res.mean[k], converged, both)
        assert dev < 4 * both + 1e-12 * abs(converged), (k, dev, both)  # the error bar is honest


def test_linear_response_predicts_each_scramblings_fixed_point():
    """The error bar rests on x*_k = x* + (I - J)^{-1} (F_k(x*) - x*): check it against each scrambling's own
    fixed point (a small rule, so that the scramblings differ visibly)."""
    params, alpha, branch, order, seeds = TaskParams(sigma=0.5, lam=0.01, omega=0.3), 1.25, "positional", 12, (0, 1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", attnlib.ConvergenceWarning)  # 2^12 points miss rtol: flagged
        res = solve_chord(params, alpha, branch, order=order, seeds=seeds, max_order=order, tol=1e-8,
                          noise_fraction=0.0)
    assert res.converged
    hold = _hold(params, branch)
    free = _free_indices(hold)
    x = res.overlaps.as_array()
    step = np.linalg.inv(np.eye(len(free)) - _start_jacobian(params, alpha, res.overlaps, hold, free,
                                                              chord_start_solver()))
    pooled = _PooledMap(params, alpha, hold, order, seeds, SESolver(n_ring=4))
    fx, _, _, hats, _ = pooled(res.overlaps, True)
    assert _residual(x, fx) < 1e-6, "the returned point is a fixed point of the pooled rule"
    predicted = scrambling_fixed_points(params, x, hats, step, free)
    for k, seed in enumerate(seeds):
        own = solve_state_evolution(params, alpha, branch, start=res.overlaps,
                                    solver=SESolver(quadrature=Quadrature("sobol-sym", order, seed), n_ring=4,
                                                    tol=1e-8))
        assert own.converged
        actual = own.overlaps.as_array()
        shift = np.abs(actual - x)[free]
        assert shift.max() > 1e-4 * np.abs(x[free]).max(), "the scramblings must differ for the check to bite"
        # first order: the prediction misses by a small fraction of the shift (and round-off)
        assert np.all(np.abs(predicted[k] - actual)[free] <= 0.3 * shift + 1e-7), (seed, predicted[k], actual)


def test_flags_and_arguments():
    params = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    with pytest.warns(attnlib.ConvergenceWarning, match="did not converge"):
        res = solve_chord(params, 2.0, "positional", order=12, max_order=12, max_steps=1)
    assert not res.converged and not res.precise
    with pytest.warns(attnlib.ConvergenceWarning, match="standard error"):
        res = solve_chord(params, 2.0, "semantic", order=8, seeds=(0, 1), max_order=8)
    assert res.converged and not res.precise
    row = res.as_row()
    assert row["n_seeds"] == 2 and row["order"] == 8 and all(row[f"{k}_err"] >= 0 for k in CHORD_FIELDS)
    for kwargs, name in (({"seeds": (1,)}, "seeds"), ({"order": 3}, "order"), ({"max_order": 23}, "max_order"),
                         ({"rtol": 0.0}, "rtol"), ({"tol": 1.0}, "tol"), ({"max_steps": 0}, "max_steps"),
                         ({"n_ring": -1}, "n_ring"), ({"start": (0.1, 0.0, 1.0, 0.1)}, "start")):
        with pytest.raises(ValueError, match=name):
            solve_chord(params, 2.0, "semantic", **kwargs)
    with pytest.raises(ValueError, match="branch"):
        solve_chord(params, 2.0, "free")
    with pytest.raises(ValueError, match="alpha"):
        solve_chord(params, 0.0, "semantic")


def test_solve_state_evolution_defaults_to_the_pooled_rule():
    """``solve_state_evolution`` without a solver returns solve_chord's fixed point (to the chord's tolerance)
    with its standard errors and the pooled conjugates (a fixed point of the pooled map: one map step from the
    returned overlaps gives them back); a pinned overlap, the free branch and a recorded history iterate the
    single Gauss-Hermite rule, without error bars."""
    params = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    res = solve_state_evolution(params, 2.0, "semantic")
    ref = solve_chord(params, 2.0, "semantic")
    assert res.converged and res.rule == f"sobol-sym 4 x 2^{ref.order} seeds 3,4,5,6" and res.n_iter >= 2
    for k in ("q", "m", "V", "theta", "test_error", "train_loss"):
        assert getattr(res, k) == pytest.approx(ref.mean[k], rel=1e-4, abs=1e-12), k
        assert res.stderr[k] == pytest.approx(ref.stderr[k], rel=0.2, abs=1e-12), k
    hold = _hold(params, "semantic")
    pooled = _PooledMap(params, 2.0, hold, ref.order, CHORD_SEEDS, SESolver(n_ring=4))
    fx, hat, *_ = pooled(res.overlaps, True)
    assert _residual(res.overlaps.as_array(), fx) < 1e-4
    assert res.theta_hat == pytest.approx(hat.theta_hat, rel=1e-3)
    single = SESolver()
    pinned = solve_state_evolution(params, 2.0, "semantic", fix_m=0.02, start=res.overlaps)
    free = solve_state_evolution(params, 2.0, "free", start=res.overlaps)
    history = solve_state_evolution(params, 2.0, "semantic", record_history=True)
    for r in (pinned, free, history):
        assert r.converged and r.rule == single.quadrature.label and r.stderr == {}
    assert history.residual_history and history.theta == pytest.approx(
        solve_state_evolution(params, 2.0, "semantic", solver=single).theta, rel=1e-9)
    with pytest.raises(ValueError, match="branch"):
        solve_state_evolution(params, 2.0, "nonsense")
    with pytest.raises(ValueError, match="start"):
        solve_state_evolution(params, 2.0, "semantic", start=(0.1, 0.0, 1.0, 0.1))


def test_error_bar_where_a_scramblings_response_leaves_the_domain():
    """Near the end of a branch ``(I - J)^{-1}`` is large, and a scrambling's first-order fixed point can leave
    the domain (theta^2 > rho q; met on the explorer's grid). The estimate stays finite: eps_g is taken at the
    nearest admissible overlaps, and the overlaps' standard errors are as large as the response says."""
    from attnlib.theory.solve.chord import _estimate

    params = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    hold = _hold(params, "semantic")
    free = _free_indices(hold)
    x0 = solve_state_evolution(params, 2.0, "semantic", solver=chord_start_solver()).overlaps
    pooled = _PooledMap(params, 2.0, hold, 8, (0, 1), SESolver(n_ring=4))
    fx, hat, mean_M, hats, means = pooled(x0, True)
    huge = 1e4 * np.eye(len(free))           # an almost singular I - J
    moved = scrambling_fixed_points(params, x0.as_array(), hats, huge, free)
    assert (moved[:, 3] ** 2 > params.rho * moved[:, 0]).any(), "the test needs a response out of the domain"
    mean, stderr = _estimate(params, 2.0, x0.as_array(), hat, mean_M, hats, means, huge, free)
    assert all(np.isfinite(v) for v in list(mean.values()) + list(stderr.values()))
    assert stderr["theta"] > 0.1 * mean["theta"]


def test_pooled_rule_jacobian_steps_to_the_same_fixed_point():
    """The pooled rule's own Jacobian (the retry of ``own_jacobian``, for where the start rule's is far off) is,
    where both rules are fine (omega = 0.3, alpha = 1.25, positional), the start rule's to within 10 % of its
    largest entry, and the chord with it, from a start 5 % off, reaches the fixed point that the start rule's
    Jacobian reaches, within the quadrature's standard error."""
    from attnlib.theory.solve.chord import _chord, _pooled_jacobian
    from attnlib.theory.model.state_evolution import Overlaps

    p = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    ref = solve_chord(p, 1.25, "positional", order=12)
    hold = _hold(p, "positional")
    free = _free_indices(hold)
    x = np.array([ref.mean[k] for k in ("q", "m", "V", "theta")])
    x[free] *= 1.05
    pooled = _PooledMap(p, 1.25, hold, 12, ref.seeds, SESolver(n_ring=4))
    J = _pooled_jacobian(pooled, x, free)
    J_start = _start_jacobian(p, 1.25, Overlaps.from_array(x), hold, free, chord_start_solver())
    assert np.max(np.abs(J - J_start)) <= 0.1 * np.max(np.abs(J_start))
    y, _, converged, failure, _, _ = _chord(pooled, x, np.linalg.inv(np.eye(len(free)) - J), free, 1e-5, 25, 0.5)
    assert converged, failure
    for k, i in zip(("q", "m", "V"), (0, 1, 2)):
        assert y[i] == pytest.approx(ref.mean[k], abs=3 * ref.stderr[k] + 1e-5 * abs(ref.mean[k]))


def test_start_jacobian_is_kept_by_its_arguments():
    """The start rule's Jacobian is kept for repeated arguments (the seed sets of one alpha in agreement_end start
    from the same point): the kept one equals a fresh computation bitwise, another alpha gets its own, and a caller
    that changes the returned matrix does not change what is kept."""
    from attnlib.theory.solve.chord import _difference_jacobian
    from attnlib.theory.model.state_evolution import Overlaps

    p = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    hold = _hold(p, "positional")
    free = _free_indices(hold)
    x0 = Overlaps(q=0.047, m=0.25, V=15.0, theta=0.0)
    J1 = _start_jacobian(p, 1.25, x0, hold, free, chord_start_solver())
    J1[0, 0] = np.nan
    J2 = _start_jacobian(p, 1.25, x0, hold, free, chord_start_solver())
    np.testing.assert_array_equal(J2, _difference_jacobian(p, 1.25, x0, hold, free, chord_start_solver()))
    J3 = _start_jacobian(p, 1.3, x0, hold, free, chord_start_solver())
    assert np.max(np.abs(J3 - J2)) > 1e-6

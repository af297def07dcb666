"""Pseudo-arclength continuation of the state evolution (attnlib.theory.branches.continuation): agreement with damped
iteration, folds as sign changes of the Jacobian determinant, free states, input checks."""
import math
from dataclasses import replace

import numpy as np
import pytest

from attnlib import Overlaps, SESolver, TaskParams, solve_state_evolution
from attnlib.theory.branches.continuation import trace_branch
from attnlib.theory.solve.newton import Continuation, FixedPointMap, jacobian_determinant, newton_fixed_point
from attnlib.theory.branches.traces import continuation_settings

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
GH = Continuation(solver=SESolver())  # Gauss-Hermite 12, hard proximal choice


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))


def test_continuation_agrees_with_damped_iteration():
    """Where both converge, the traced branch and the damped iteration give the same fixed points."""
    tr = trace_branch(P, "positional", 2.0, alpha_range=(1.5, 2.6), settings=GH,
                      start=Overlaps(0.05, 0.26, 11.0, 0.0))
    assert tr.converged and tr.lower.kind == "range" and tr.upper.kind == "range"
    assert len(tr.table) >= 3 and (tr.table.residual < GH.tol).all()
    # (plain damped steps do not converge here: the iteration's multiplier in m is about -5 on this branch,
    # so the comparison uses the default accelerated iteration)
    for row in tr.table.iloc[[0, len(tr.table) // 2, -1]].itertuples():
        it = solve_state_evolution(P, row.alpha, "positional", solver=GH.solver,
                                   start=Overlaps(1.05 * row.q, 0.95 * row.m, 1.1 * row.V, 0.0))
        assert it.converged
        for name in ("q", "m", "V"):
            assert getattr(it, name) == pytest.approx(getattr(row, name), rel=2e-4), name
        assert it.train_loss == pytest.approx(row.train_loss, rel=1e-6)


def test_newton_solves_a_point_and_reports_failure():
    it = solve_state_evolution(P, 2.0, "semantic", solver=GH.solver)
    nt = newton_fixed_point(P, 2.0, "semantic", Overlaps(1.1 * it.q, 0.0, 0.9 * it.V, 1.05 * it.theta), GH)
    assert nt.converged and nt.theta == pytest.approx(it.theta, rel=1e-4)
    # a fixed point is stationary under the map
    fmap = FixedPointMap(P, "semantic", GH.solver)
    assert np.max(np.abs(fmap.residual(fmap.to_u(nt.overlaps), math.log(2.0)))) < GH.tol
    with pytest.warns(Warning, match="Newton did not converge"):   # one step from 10 % off cannot reach 1e-14
        bad = newton_fixed_point(P, 2.0, "semantic", Overlaps(1.1 * it.q, 0.0, 0.9 * it.V, 1.05 * it.theta),
                                 replace(GH, max_newton=1, tol=1e-14))
    assert not bad.converged
    with pytest.raises(ValueError, match="outside the domain"):
        newton_fixed_point(P, 2.0, "semantic", Overlaps(0.01, 0.0, 10.0, 0.2), GH)


def test_free_state_at_a_branch_point_equals_the_branch():
    """With m and theta both free, started at (or near) the semantic fixed point, the state evolution returns
    the semantic fixed point: m = 0 is invariant and the fixed point is isolated."""
    sem = solve_state_evolution(P, 2.0, "semantic", solver=GH.solver)
    free = newton_fixed_point(P, 2.0, "free", Overlaps(sem.q, 0.01, sem.V, sem.theta), GH)
    assert free.converged and abs(free.m) < 1e-5
    assert free.theta == pytest.approx(sem.theta, rel=1e-4) and free.train_loss == pytest.approx(sem.train_loss,
                                                                                                rel=1e-6)
    it = solve_state_evolution(P, 2.0, "free", start=sem.overlaps)
    assert it.converged and abs(it.m) < 1e-5 and it.theta == pytest.approx(sem.theta, rel=1e-4)


@pytest.mark.slow
@pytest.mark.replay
def test_fold_is_a_turn_in_alpha_where_the_jacobian_turns_singular():
    """At omega = 0.15 the semantic branch, followed down in alpha with the smooth default rule, turns back at
    a fold and its unstable partner runs back up towards the agnostic point.

    What is asserted does not hinge on the sign of a number at its noise level (which depends on the machine's
    rounding: a Broyden-updated Jacobian near the fold has a determinant of order 1e-4 whose sign another CPU
    flipped): (1) the turn, the partner's points lie at larger alpha than the fold and below the stable
    branch in theta; (2) r_u turns singular there, |det| at the stable point nearest the fold is under 5 % of
    its value on the branch 10 % above the fold in alpha; (3) the determinant's sign, from fresh Jacobians,
    is compared only where |det| exceeds ten times its noise (its change when the finite-difference step is
    halved or doubled, measured here): opposite on the partner to the stable branch."""
    p = TaskParams(sigma=0.5, lam=0.01, omega=0.15)
    settings = continuation_settings()
    tr = trace_branch(p, "semantic", 0.8, alpha_range=(0.4, 0.8), settings=settings, past_fold=2)
    assert tr.lower.kind == "fold", tr.lower
    assert 0.45 < tr.lower.alpha < 0.6
    rows = tr.table.sort_values("s")
    stable, partner = rows[~rows.partner], rows[rows.partner]
    assert len(partner) >= 1 and partner.det_fresh.all()  # past the turn every determinant is a fresh one
    # (1) the turn
    assert tr.lower.alpha <= stable.alpha.min() + 1e-9 and tr.lower.alpha <= partner.alpha.min() + 1e-9
    assert partner.alpha.max() > tr.lower.alpha * (1 + 1e-3)  # it went back in alpha
    assert partner.theta.max() < stable.theta.min()  # the partner has the smaller overlap
    # (2) singular at the fold
    fmap = FixedPointMap(p, "semantic", settings.solver)
    near = stable.loc[stable.alpha.idxmin()]
    far = stable[stable.alpha > 1.1 * tr.lower.alpha].iloc[0]
    det_near, noise_near = jacobian_determinant(fmap, Overlaps(near.q, near.m, near.V, near.theta), near.alpha,
                                                settings.fd_step)
    det_far, noise_far = jacobian_determinant(fmap, Overlaps(far.q, far.m, far.V, far.theta), far.alpha,
                                              settings.fd_step)
    assert abs(det_far) > 10 * noise_far, (det_far, noise_far)
    assert abs(det_near) < 0.05 * abs(det_far), (det_near, det_far)
    # (3) the sign, where it is measured
    tip = partner.iloc[0]  # the partner point farthest past the fold
    det_tip, noise_tip = jacobian_determinant(fmap, Overlaps(tip.q, tip.m, tip.V, tip.theta), tip.alpha,
                                              settings.fd_step)
    if abs(det_tip) > 10 * noise_tip:
        assert np.sign(det_tip) != np.sign(det_far), (det_tip, noise_tip, det_far)


def test_smoothing_is_a_small_regularisation():
    """The tie smoothing of the continuation moves a fixed point less than the quadrature's own error (the
    spread over independent scramblings of the rule), and the training loss much less. Measured at the
    semantic branch near its end (omega = 0, alpha = 0.6), where the proximal ties matter most: the smoothing
    moves q by 0.35 %, theta by 0.4 % and eps_t by 2e-5 relative; the scramblings spread q by 0.5 %, theta by
    8 % and eps_t by 0.2 %."""
    start = Overlaps(0.053, 0.0, 24.7, 0.058)
    smooth = continuation_settings()
    hard = {seed: newton_fixed_point(TaskParams(omega=0.0), 0.6, "semantic", start, Continuation(
        solver=replace(smooth.solver, tie_smoothing=0.0,
                       quadrature=replace(smooth.solver.quadrature, seed=seed)))) for seed in (0, 1, 2)}
    soft = newton_fixed_point(TaskParams(omega=0.0), 0.6, "semantic", start, smooth)
    assert soft.converged and all(r.converged for r in hard.values())
    assert smooth.solver.quadrature.seed == 0
    for name, share in (("q", 1.0), ("theta", 0.2), ("train_loss", 0.1)):
        values = [getattr(r, name) for r in hard.values()]
        spread = max(values) - min(values)
        assert abs(getattr(soft, name) - getattr(hard[0], name)) < share * spread, name


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="ds"):
        Continuation(ds=-1.0)
    with pytest.raises(ValueError, match="ds_min <= ds <= ds_max"):
        Continuation(ds=1.0)
    with pytest.raises(ValueError, match="alpha0"):
        trace_branch(P, "semantic", 5.0, alpha_range=(0.5, 2.0), settings=GH)
    with pytest.raises(ValueError, match="vanished"):  # omega = 1: no content in the teacher
        trace_branch(TaskParams(omega=1.0), "semantic", 2.0, alpha_range=(1.0, 3.0), settings=GH)
    with pytest.raises(ValueError, match="tie_smoothing"):
        SESolver(tie_smoothing=-1.0)

"""Validation of the task parameters and of the theory's entry points: every rejected input raises
ValueError naming the parameter."""
import math

import numpy as np
import pytest

from attnlib import (Overlaps, Quadrature, SESolver, TaskParams, critical_alpha, linear_baseline_error,
                     solve_state_evolution, test_error_from_overlaps)
from attnlib.theory.model.proximal import solve_prox


@pytest.mark.parametrize("kwargs, name", [
    ({"omega": -0.1}, "omega"), ({"omega": 1.5}, "omega"), ({"omega": math.nan}, "omega"),
    ({"sigma": 0.0}, "sigma"), ({"sigma": -1.0}, "sigma"), ({"sigma": math.inf}, "sigma"),
    ({"lam": -0.01}, "lam"), ({"lam": math.nan}, "lam"),
    ({"A": ((0.6, 0.4), (0.4, 0.7))}, "A"), ({"A": ((1.2, -0.2), (0.4, 0.6))}, "A"),
    ({"A": ((0.5, 0.5, 0.0), (0.4, 0.6, 0.0))}, "A"), ({"A": ((math.nan, 0.5), (0.4, 0.6))}, "A"),
    ({"A": "not a matrix"}, "A"), ({"omega": "0.3"}, "omega"),
])
def test_task_params_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TaskParams(**kwargs)


def test_task_params_accepts_edges_and_is_hashable():
    p = TaskParams(omega=0.0, lam=0.0)
    q = TaskParams(omega=1.0, A=[[0.3, 0.7], [0.8, 0.2]])
    assert hash(p) != hash(q) and p == TaskParams(omega=0, lam=0)
    assert q.A == ((0.3, 0.7), (0.8, 0.2)) and not q.swap_symmetric
    assert p.rho == pytest.approx(0.25)


@pytest.mark.parametrize("alpha", [0.0, -1.0, math.nan, math.inf])
def test_alpha_rejected(alpha):
    with pytest.raises(ValueError, match="alpha"):
        solve_state_evolution(TaskParams(), alpha)


def test_other_rejections():
    p = TaskParams()
    with pytest.raises(ValueError, match="branch"):
        solve_state_evolution(p, 1.0, branch="nonsense")
    with pytest.raises(ValueError, match="start"):
        solve_state_evolution(p, 1.0, start=Overlaps(q=-1.0, m=0.0, V=1.0, theta=0.0))
    with pytest.raises(ValueError, match="start"):
        solve_state_evolution(p, 1.0, start=Overlaps(q=0.01, m=0.0, V=1.0, theta=1.0))
    with pytest.raises(ValueError, match="damping"):
        SESolver(damping=0.0)
    with pytest.raises(ValueError, match="tol"):
        SESolver(tol=-1.0)
    with pytest.raises(ValueError, match="prox_mode"):
        SESolver(prox_mode="best")
    with pytest.raises(ValueError, match="max_iter"):
        SESolver(max_iter=0)
    with pytest.raises(ValueError, match="prox_backend"):
        SESolver(prox_backend="cuda")
    with pytest.raises(ValueError, match="restart_factor"):
        SESolver(restart_factor=0.5)
    with pytest.raises(ValueError, match="order"):
        Quadrature("gauss-hermite", 1)
    with pytest.raises(ValueError, match="rule"):
        Quadrature("simpson", 10)
    with pytest.raises(ValueError, match="theta"):
        test_error_from_overlaps(p, q=0.01, m=0.0, theta=0.5)
    with pytest.raises(ValueError, match="q"):
        test_error_from_overlaps(p, q=math.nan, m=0.0, theta=0.0)
    with pytest.raises(ValueError, match="mode"):
        solve_prox(np.zeros((3, 2)), np.full((3, 2), 0.5), 1.0, 0.5, mode="other")
    with pytest.raises(ValueError, match="V"):
        solve_prox(np.zeros((3, 2)), np.full((3, 2), 0.5), 0.0, 0.5)
    with pytest.raises(ValueError, match="alpha"):
        critical_alpha(p, alphas=(1.0, -2.0), use_cache=False)
    assert math.isfinite(linear_baseline_error(p))


def test_agnostic_point_holds_both_overlaps_for_any_A():
    """m = 0 and theta = 0 are invariant for every A (book section (sec-branches)): the agnostic point of the
    alternative A (no token-swap symmetry) keeps both exactly at zero."""
    res = solve_state_evolution(TaskParams(A=((0.3, 0.7), (0.8, 0.2))), 1.0, branch="agnostic")
    assert res.converged and res.m == 0.0 and res.theta == 0.0 and res.q > 0

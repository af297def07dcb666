"""Input errors that teach: a wrong call says what was expected and how to get there (a misspelt keyword or branch
name suggests the right one, a dict of parameters points to TaskParams, a list of alpha to alpha_sweep), and a
valid shorthand (one branch name for ``branches``) is accepted."""
import pickle

import pytest

from attnlib import (SESolver, TaskParams, alpha_sweep, critical_alpha, population_minimum, solve_chord,
                     solve_state_evolution)


@pytest.mark.parametrize("keyword, hint", [("lambda_", "lam"), ("lambda", "lam"), ("sigm", "sigma"),
                                           ("omgea", "omega")])
def test_taskparams_suggests_the_field(keyword, hint):
    with pytest.raises(TypeError, match=f"did you mean '{hint}'"):
        TaskParams(**{keyword: 0.1})


def test_taskparams_is_still_a_frozen_value():
    """The explicit constructor keeps what the dataclass gave: positional and keyword fields, validation, equality
    and hashing (caches are keyed by it), replace and pickling."""
    p = TaskParams(0.7, 0.05, 0.2, ((0.8, 0.2), (0.3, 0.7)))
    assert p == TaskParams(sigma=0.7, lam=0.05, omega=0.2, A=((0.8, 0.2), (0.3, 0.7)))
    assert hash(p) == hash(TaskParams(sigma=0.7, lam=0.05, omega=0.2, A=[[0.8, 0.2], [0.3, 0.7]]))
    assert pickle.loads(pickle.dumps(p)) == p and p.with_(omega=0.3).omega == 0.3
    with pytest.raises(ValueError, match="omega must lie in"):
        TaskParams(omega=1.5)
    with pytest.raises(AttributeError):
        p.sigma = 1.0


@pytest.mark.parametrize("call", [lambda p: solve_state_evolution(p, 1.0), lambda p: critical_alpha(p),
                                  lambda p: population_minimum(p), lambda p: solve_chord(p, 1.0),
                                  lambda p: alpha_sweep(p, [1.0])])
def test_a_dict_of_parameters_points_to_taskparams(call):
    with pytest.raises(ValueError, match=r"TaskParams\(\*\*params\)"):
        call({"sigma": 0.5, "lam": 0.01, "omega": 0.3})


def test_several_alphas_point_to_alpha_sweep():
    with pytest.raises(ValueError, match="alpha_sweep"):
        solve_state_evolution(TaskParams(), [1.0, 2.0])


def test_a_misspelt_branch_is_suggested():
    with pytest.raises(ValueError, match="did you mean 'semantic'"):
        solve_state_evolution(TaskParams(), 1.0, "semantc")
    with pytest.raises(ValueError, match="did you mean 'positional'"):
        alpha_sweep(TaskParams(), [1.0], branches=("positonal",))


def test_one_branch_name_is_one_branch():
    rows = alpha_sweep(TaskParams(), [1.5], branches="semantic", solver=SESolver(), use_cache=False)
    assert list(rows.branch) == ["semantic"] and rows.status.iloc[0] == "on-branch"

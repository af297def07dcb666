"""The thresholds of the general state evolution (attnlib.theory.branches.general_thresholds): the bracket search on
functions with known roots, the threshold's own consistency (the function vanishes at the root within its
error), and the errors it raises."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from attnlib.exceptions import ConvergenceWarning
from attnlib.params import TaskParams
from attnlib.theory.branches import general_thresholds as gt
from attnlib.theory.model.attention import softmax_rows
from attnlib.theory.solve.general_state_evolution import solve_general
from attnlib.theory.model.generalisation import linear_baseline_error


def _decreasing(root):
    calls = []

    def f(alpha):
        calls.append(alpha)
        return math.log(root / alpha), 0.0, True
    return f, calls


@pytest.mark.parametrize("guess", [0.3, 0.9, 1.0, 2.5, 7.0])
def test_find_bracket_holds_the_root_whichever_side_the_guess_is(guess):
    f, calls = _decreasing(1.0)
    (lo, f_lo), (hi, f_hi), n, reason = gt.find_bracket(f, guess, (0.1, 8.0), factor=1.3)
    assert reason == "" and lo < hi and lo <= 1.0 <= hi and n == len(calls)
    assert hi / lo == pytest.approx(1.3) or lo == 0.1 or hi == 8.0
    assert f_lo[0] >= 0 >= f_hi[0]


def test_find_bracket_says_when_there_is_no_root_in_range():
    f, _ = _decreasing(20.0)
    _, (hi, _), n, reason = gt.find_bracket(f, 1.0, (0.1, 8.0))
    assert reason.startswith(gt.NO_ROOT) and "above zero" in reason and hi == 8.0
    f, _ = _decreasing(0.01)
    (lo, _), _, _, reason = gt.find_bracket(f, 1.0, (0.1, 8.0))
    assert reason.startswith(gt.NO_ROOT) and "below zero" in reason and lo == 0.1

    def failing(alpha):
        return 1.0, 0.0, alpha < 2.0
    assert "did not converge" in gt.find_bracket(failing, 1.0, (0.1, 8.0), factor=2.5)[3]

    def ending(alpha):  # a root at 1.9, fixed points only below 2
        return math.log(1.9 / alpha), 0.0, alpha < 2.0
    (lo, _), (hi, _), n, reason = gt.find_bracket(ending, 1.0, (0.1, 8.0), factor=2.5)
    assert reason == "" and lo <= 1.9 <= hi < 2.0 and n > 3  # failed steps shortened until one lands below 2


def _three_token(omega):
    a = np.array([1.0, 0.0, -1.0])
    return TaskParams(sigma=0.5, lam=0.01, omega=omega, A=tuple(map(tuple, softmax_rows(np.outer(a, a)).tolist())))


def test_alpha_l_from_a_guess_is_a_root_at_three_tokens():
    """alpha_l at L = 3, omega = 0.1 (semantic fixed points only) found from a guess: eps_g - eps_lin changes sign
    across the final bracket, the root lies in it, and the semantic branch's eps_g at the root equals eps_lin within
    four standard errors of the fixed point plus the bracket's width times the slope."""
    p = _three_token(0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = gt.general_threshold(p, "alpha_l", guess=1.0, alpha_c=0.5, use_cache=False)
        assert t.converged and not t.absent and t.bracket[0] <= t.alpha <= t.bracket[1]
        eps_lin = linear_baseline_error(p)
        lo, hi = (solve_general(p, a, "semantic") for a in t.bracket)
        assert lo.test_error - eps_lin >= -4 * lo.stderr["test_error"]
        assert hi.test_error - eps_lin <= 4 * hi.stderr["test_error"]
        at = solve_general(p, t.alpha, "semantic")
    slope = abs(hi.test_error - lo.test_error)
    assert abs(at.test_error - eps_lin) <= 4 * at.stderr["test_error"] + slope
    assert 0 < t.err < 0.05 * t.alpha


def test_alpha_l_at_alpha_c_when_the_semantic_branch_is_already_better():
    """With alpha_c placed where the semantic branch is already below the baseline, alpha_l is alpha_c."""
    p = _three_token(0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = gt.general_threshold(p, "alpha_l", guess=3.0, alpha_c=3.0, use_cache=False)
    assert t.alpha == 3.0 and t.reason.startswith(gt.AT_ALPHA_C) and t.converged and t.n_evals == 1


def test_threshold_arguments_are_checked():
    p = _three_token(0.3)
    with pytest.raises(ValueError, match="exactly one of bracket and guess"):
        gt.general_threshold(p, "alpha_c")
    with pytest.raises(ValueError, match="exactly one of bracket and guess"):
        gt.general_threshold(p, "alpha_c", bracket=(0.5, 1.0), guess=0.7)
    with pytest.raises(ValueError, match="factor"):
        gt.general_threshold(p, "alpha_c", guess=0.7, factor=1.0)
    with pytest.raises(ValueError, match="alpha_range"):
        gt.general_threshold(p, "alpha_c", guess=0.7, alpha_range=(2.0, 1.0))
    with pytest.raises(ValueError, match="name"):
        gt.general_threshold(p, "alpha_x", guess=0.7)

"""The thresholds under the pooled (default) rule (attnlib.theory.branches.pooled_thresholds): the root search on a
function with a known root, its failures said as such, and at omega = 0.3 a root that is one: the pooled rule's
training-loss gap (and the semantic test error minus eps_lin) changes sign across it, by more than the rule's
own error, with the same seed set."""
import math
import warnings

import numpy as np
import pytest

from attnlib import TaskParams
from attnlib.exceptions import ConvergenceWarning
from attnlib.theory.solve.chord import CHORD_ORDER
from attnlib.theory.model.generalisation import linear_baseline_error
from attnlib.theory.branches.pooled_end import pooled_seeds
from attnlib.theory.branches.pooled_thresholds import THRESHOLD_XTOL, _fixed_point, phase_thresholds, pooled_root
from attnlib.theory.branches.traces import branch_trace, continuation_settings, DEFAULT_RANGE, _trace_range

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))


def test_root_of_a_known_function():
    """f(alpha) = log(alpha / 1.3)^3 + 0.2 log(alpha / 1.3), started off the root with a rough slope: the search
    lands within xtol of 1.3 and reports the error of f divided by the slope."""
    def f(a):
        x = math.log(a / 1.3)
        return x**3 + 0.2 * x, 1e-6

    res = pooled_root(P, "alpha_c", 1.2, 0.5, f, (0.5, 3.0))
    assert res.converged and res.reason == "" and abs(math.log(res.alpha / 1.3)) < 2 * THRESHOLD_XTOL
    assert res.err == pytest.approx(1.3 * 1e-6 / 0.2, rel=0.2) and 2 <= res.n_evals <= 6


def test_failures_are_said():
    with pytest.warns(ConvergenceWarning, match="not found"):
        res = pooled_root(P, "alpha_c", 1.2, 1.0, lambda a: None, (0.5, 3.0))
    assert not res.converged and math.isnan(res.alpha) and "not found" in res.reason
    with pytest.warns(ConvergenceWarning, match="left the interval"):
        res = pooled_root(P, "alpha_c", 1.2, 1.0, lambda a: (math.log(a / 5.0), 0.0), (0.5, 3.0))
    assert not res.converged and math.isnan(res.alpha)
    with pytest.raises(ValueError, match="slope"):
        pooled_root(P, "alpha_c", 1.2, 0.0, lambda a: (0.0, 0.0), (0.5, 3.0))


@pytest.fixture(scope="module")
def traces_and_thresholds(tmp_path_factory):
    import os

    os.environ["ATTNLIB_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    settings = continuation_settings(None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rng = _trace_range(*DEFAULT_RANGE)
        sem = branch_trace(P, "semantic", rng, settings)
        pos = branch_trace(P, "positional", rng, settings)
        thr = phase_thresholds(P, settings)
    return sem, pos, thr


def test_pooled_thresholds_are_roots_of_the_pooled_rule(traces_and_thresholds):
    """At omega = 0.3 (seed set of scrambling 0): alpha_c and alpha_l are found, near the continuation's values
    (within 1 % in log alpha), and the pooled rule's functions change sign across them: at alpha e^(+-0.01)
    the gap and the excess test error have opposite signs, each by more than twice its own standard error."""
    sem, pos, thr = traces_and_thresholds
    assert thr["reason_alpha_c"] == "" and thr["reason_alpha_l"] == ""
    for name in ("alpha_c", "alpha_l"):
        assert abs(math.log(thr[name] / thr[f"{name}_trace"])) < 0.01, name
        assert 0 < thr[f"{name}_err"] < 0.01 * thr[name], name
    seeds, eps_lin = pooled_seeds(0), linear_baseline_error(P)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for h in (-0.01, 0.01):
            a = thr["alpha_c"] * math.exp(h)
            (ok_s, s), (ok_p, p) = (_fixed_point(P, a, "semantic", sem, seeds, CHORD_ORDER),
                                    _fixed_point(P, a, "positional", pos, seeds, CHORD_ORDER))
            assert ok_s and ok_p
            gap, err = s.train_loss - p.train_loss, math.hypot(s.stderr["train_loss"], p.stderr["train_loss"])
            assert np.sign(gap) == -np.sign(h) and abs(gap) > 2 * err, (h, gap, err)   # semantic lower above
            a = thr["alpha_l"] * math.exp(h)
            ok, s = _fixed_point(P, a, "semantic", sem, seeds, CHORD_ORDER)
            excess = s.test_error - eps_lin
            assert ok and np.sign(excess) == -np.sign(h) and abs(excess) > 2 * s.stderr["test_error"], (h, excess)


def test_one_branch_missing(traces_and_thresholds):
    """Where the continuation finds only the semantic branch there is no alpha_c, and alpha_l is still found on
    the semantic branch: at omega = 0.3 with the positional trace withheld, the same root as with both (within
    its quadrature error and the step tolerance); an alpha_c without its second branch is refused, with the reason."""
    from attnlib.theory.branches.pooled_thresholds import pooled_thresholds

    sem, _, thr = traces_and_thresholds
    seeds, eps_lin = pooled_seeds(0), linear_baseline_error(P)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = pooled_thresholds(P, sem, None, math.nan, thr["alpha_l_trace"], seeds, eps_lin)
        refused = pooled_thresholds(P, sem, None, thr["alpha_c_trace"], math.nan, seeds, eps_lin)
    assert math.isnan(alone["alpha_c"]) and "no alpha_c" in alone["reason_alpha_c"]
    assert alone["reason_alpha_l"] == ""
    assert abs(alone["alpha_l"] - thr["alpha_l"]) < 3 * thr["alpha_l_err"] + 2 * THRESHOLD_XTOL * thr["alpha_l"]
    assert math.isnan(refused["alpha_c"]) and refused["reason_alpha_c"] == "a branch is not traced"

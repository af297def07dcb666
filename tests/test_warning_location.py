"""Every warning of attnlib names the caller's line (attnlib.exceptions.warn_caller): the location printed and the
filters by module point at the code that called the library, however deep inside it the warning arose."""
import warnings

import pytest

import attnlib
from attnlib.exceptions import warn_caller

P = attnlib.TaskParams(sigma=0.5, lam=0.01, omega=0.3)


def test_a_solver_warning_names_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = attnlib.solve_state_evolution(P, 1.5, "semantic", solver=attnlib.SESolver(max_iter=2))
    assert not res.converged
    mine = [w for w in caught if issubclass(w.category, attnlib.ConvergenceWarning)]
    assert mine and all(w.filename == __file__ for w in mine), [(w.filename, w.lineno) for w in mine]


def test_a_filter_by_the_callers_module_silences_it():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=attnlib.ConvergenceWarning)
        warnings.filterwarnings("ignore", category=attnlib.ConvergenceWarning, module=__name__)
        attnlib.solve_state_evolution(P, 1.5, "semantic", solver=attnlib.SESolver(max_iter=2))


def test_warn_caller_from_outside_the_library_names_its_own_caller():
    with pytest.warns(attnlib.ConvergenceWarning) as record:
        warn_caller("a message")
    assert record[0].filename == __file__

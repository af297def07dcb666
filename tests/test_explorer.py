"""Tests of attnlib.explorer (book chapter 8): view data against the state evolution, figure, widget."""
import math
import warnings

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from attnlib import TaskParams, linear_baseline_error, solve_state_evolution  # noqa: E402
from attnlib.explorer import (DEFAULTS, EXPLORER_SOLVER, ExplorerView, draw_explorer, explorer_view,  # noqa: E402
                              make_explorer, phase_boundary)

PHASE = (pd.DataFrame({"omega": [0.0, 0.2, 0.4], "alpha_c": [0.55, 0.9, 1.9]}), "test table")


@pytest.fixture(scope="module")
def view() -> ExplorerView:
    return explorer_view(phase=PHASE)


def test_default_view_matches_state_evolution(view):
    params = TaskParams(sigma=DEFAULTS["sigma"], lam=DEFAULTS["lam"], omega=DEFAULTS["omega"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b in ("semantic", "positional"):
            ref = solve_state_evolution(params, DEFAULTS["alpha"], b, solver=EXPLORER_SOLVER)
            got = view.branches[b]
            for k in ("q", "m", "theta", "test_error", "train_loss"):
                assert getattr(got, k) == pytest.approx(getattr(ref, k), rel=1e-10, abs=1e-12), (b, k)
    assert view.eps_lin == pytest.approx(linear_baseline_error(params))
    et = {b: r.train_loss for b, r in view.branches.items()}
    assert view.global_branch == min(et, key=et.get)


def test_sampled_maps_consistent(view):
    for b, r in view.branches.items():
        # Monte-Carlo eps_g from the sampled attention maps agrees with the state evolution
        assert view.eps_g_mc[b] == pytest.approx(r.test_error, rel=0.05), b
        M = view.mean_attention[b]
        assert np.allclose(M.sum(axis=1), 1.0)
    T = view.mean_attention["teacher"]
    assert np.allclose(T.sum(axis=1), 1.0) and T[0, 0] > 0.5
    assert view.branches["semantic"].m == 0.0 and view.branches["positional"].theta == 0.0


def test_draw(view):
    fig = draw_explorer(view)
    assert len(fig.axes) == 7
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_phase_boundary_reads_csv(tmp_path):
    path = tmp_path / "pd.csv"
    PHASE[0].assign(alpha_l=[0.7, 1.1, 2.0], extra=1).to_csv(path, index=False)
    df, source = phase_boundary(path)
    assert list(df.columns) == ["omega", "alpha_c", "alpha_l"] and "pd.csv" in source


def test_widget_constructs():
    ipywidgets = pytest.importorskip("ipywidgets")
    w = make_explorer(initial=False)
    assert isinstance(w, ipywidgets.VBox)
    sliders = [c for box in w.children[:2] for c in box.children]
    assert sorted(s.description for s in sliders) == ["alpha", "lambda", "omega", "sigma"]
    assert math.isclose(sliders[0].value, DEFAULTS["omega"])

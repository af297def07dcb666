"""Tests of attnlib.explorer (book chapter 8): view data against the state evolution, figure, widget."""
import math
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from attnlib import TaskParams, linear_baseline_error, solve_state_evolution  # noqa: E402
from attnlib.explorer import (DEFAULTS, EXPLORER_SOLVER, ExplorerView, draw_explorer, explorer_view,  # noqa: E402
                              make_explorer, phase_boundary)

ROOT = Path(__file__).resolve().parents[1]
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


# ---- the grid of the static explorer -------------------------------------------------------------------------

from attnlib import alpha_sweep  # noqa: E402
from attnlib.explorer import attention_maps, explorer_grid, grid_thresholds  # noqa: E402
from attnlib.quadrature import Quadrature  # noqa: E402

P03 = TaskParams(sigma=0.5, lam=0.01, omega=0.3)


def test_attention_maps_law_of_total_expectation():
    """Averaging the student's E[S | h*] over the teacher's h* ~ N(0, rho I) gives its mean attention E[S]."""
    x, w = Quadrature("gauss-hermite", 30).points(2)
    for q, m, theta in [(0.09, 0.0, 0.13), (0.05, 0.26, 0.0), (0.2, 0.1, 0.2)]:
        maps = attention_maps(P03, q, m, theta, examples=x)
        assert maps["S_ex"].shape == (len(x), 2)
        assert np.allclose(w @ maps["S_ex"], maps["S_mean"], rtol=0, atol=1e-8), (q, m, theta)
        assert np.allclose(w @ maps["T_ex"], maps["T_mean"], rtol=0, atol=1e-8)
        # swapping the tokens (h -> (-h_2, -h_1)) maps S_11 to S_22: equal means
        assert maps["S_mean"][0] == pytest.approx(maps["S_mean"][1], abs=1e-10)


def test_attention_maps_limits():
    # a positional student (theta = 0) attends the same way whatever the input
    pos = attention_maps(P03, 0.05, 0.26, 0.0)
    assert np.allclose(pos["S_ex"], pos["S_mean"][None, :], atol=1e-12)
    # a student aligned with the teacher (theta^2 = rho q) has h = m s + (theta/rho) h*: no average left
    rho = P03.rho
    q = 0.3
    theta = math.sqrt(rho * q)
    maps = attention_maps(P03, q, 0.1, theta)
    from attnlib.attention import attention_diagonal
    h = 0.1 * np.array([1.0, -1.0]) + theta / rho * math.sqrt(rho) * np.array(maps_examples())
    assert np.allclose(maps["S_ex"], attention_diagonal(h), atol=1e-12)
    # the teacher's map on an input is (1 - omega) softmax + omega A
    assert np.allclose(maps["T_ex"].sum(axis=-1) > 0, True)
    with pytest.raises(ValueError, match="Cauchy-Schwarz"):
        attention_maps(P03, 0.01, 0.0, 0.2)
    with pytest.raises(ValueError, match="q in"):
        attention_maps(P03, -0.1, 0.0, 0.0)


def maps_examples():
    from attnlib.explorer import EXAMPLE_INPUTS
    return EXAMPLE_INPUTS


def test_attention_maps_agree_with_sampled_maps(view):
    """Quadrature means against the Monte-Carlo maps of explorer_view (20000 samples, an independent path)."""
    for b, r in view.branches.items():
        maps = attention_maps(view.params, r.q, r.m, r.theta)
        assert maps["S_mean"][0] == pytest.approx(view.mean_attention[b][0, 0], abs=2e-3), b
    assert maps["T_mean"][0] == pytest.approx(view.mean_attention["teacher"][0, 0], abs=3e-3)


@pytest.fixture(scope="module")
def small_grid(tmp_path_factory):
    import os
    old = os.environ.get("ATTNLIB_CACHE_DIR")
    os.environ["ATTNLIB_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield explorer_grid(omegas=[0.3], alphas=[1.0, 1.15, 1.3, 1.5], n_jobs=1)
    finally:
        if old is None:
            del os.environ["ATTNLIB_CACHE_DIR"]
        else:
            os.environ["ATTNLIB_CACHE_DIR"] = old


def test_grid_is_alpha_sweep_plus_maps(small_grid):
    g = small_grid
    assert len(g) == 8 and set(g.branch) == {"semantic", "positional"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = alpha_sweep(P03, [1.0, 1.15, 1.3, 1.5])   # same cache entries: an identity of the public API
    for col in ("q", "m", "theta", "test_error", "train_loss"):
        assert np.array_equal(g.sort_values(["branch", "alpha"])[col].to_numpy(),
                              ref.sort_values(["branch", "alpha"])[col].to_numpy()), col
    assert g.converged.all() and g.exists.all()
    assert g.eps_lin.iloc[0] == pytest.approx(linear_baseline_error(P03))
    glob = g[g.is_global].set_index("alpha").branch
    assert glob[1.0] == "positional" and glob[1.5] == "semantic" and len(glob) == 4
    r = g[(g.branch == "semantic") & (g.alpha == 1.5)].iloc[0]
    maps = attention_maps(P03, r.q, r.m, r.theta)
    assert r.S11_mean == pytest.approx(maps["S_mean"][0]) and r.S22_ex1 == pytest.approx(maps["S_ex"][1, 1])


def test_grid_thresholds_match_chapter_6(small_grid):
    """alpha_c read off a coarse grid (15 % steps) agrees with chapter 6's root-found value to 1 %."""
    thr = grid_thresholds(small_grid).set_index("omega")
    ref = pd.read_csv(ROOT / "book" / "data" / "phase_standard.csv").set_index("omega")
    assert 1.15 < thr.alpha_c[0.3] < 1.3
    assert thr.alpha_c[0.3] == pytest.approx(ref.alpha_c[0.3], rel=0.01)
    assert thr.alpha_l[0.3] == pytest.approx(ref.alpha_l[0.3], rel=0.01)


def test_grid_rejects_bad_input():
    with pytest.raises(ValueError, match="omegas"):
        explorer_grid(omegas=[])
    with pytest.raises(ValueError, match="omega"):
        explorer_grid(omegas=[1.5], alphas=[1.0])

"""Tests of attnlib.book.explorer (book chapter 9): view data against the state evolution, figure, widget."""
import math
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from attnlib import TaskParams, linear_baseline_error, solve_state_evolution  # noqa: E402
from attnlib.book.explorer import (DEFAULTS, EXPLORER_SOLVER, ExplorerView, draw_explorer,  # noqa: E402
                                   explorer_view, make_explorer)
from attnlib.book.phase_table import (END_KINDS, branch_exists, phase_boundary, phase_lines,  # noqa: E402
                                      table_applies, table_omegas)

ROOT = Path(__file__).resolve().parents[1]


def fake_table(sem_end_03=0.7, pos_end_03=None) -> pd.DataFrame:
    """A made-up phase table in the layout of book/data/phase_standard.csv (rows at omega 0, 0.2, 0.3, 0.4)."""
    return pd.DataFrame({
        "omega": [0.0, 0.2, 0.3, 0.4], "alpha_c": [0.6, np.nan, 1.25, 1.8], "alpha_l": [0.75, 1.1, 1.5, 2.3],
        "semantic_lower_alpha": [0.5, 0.6, sem_end_03, 0.9],
        "semantic_lower_kind": ["fold", "vanishes", "fold", "lost"],
        "positional_upper_alpha": [0.7, 1.3, 6.0 if pos_end_03 is None else pos_end_03, 2.5],
        "positional_upper_kind": ["fold", "vanishes", "range" if pos_end_03 is None else "fold", "lost"]})


PHASE = (fake_table(), "test table")


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
    assert view.exists == {"semantic": True, "positional": True} and view.phase_matches_params
    assert view.global_branch == min(et, key=et.get) == "semantic"
    assert view.train_loss_gap == pytest.approx(et["semantic"] - et["positional"])
    assert view.lines == {"alpha_c": 1.25, "alpha_l": 1.5, "semantic_end": 0.7,
                          "positional_end": pytest.approx(np.nan, nan_ok=True)}


def test_view_finds_a_branch_that_repels_the_iteration():
    """At omega = 0 the positional branch repels the state-evolution iteration; the widget follows it as the
    sweeps do (Newton's method where the iteration collapses) instead of showing the uninformed point."""
    v = explorer_view(omega=0.0, alpha=0.55, phase=PHASE)
    pos = v.branches["positional"]
    assert pos.converged and pos.m > 0.1
    assert v.exists["positional"]


def test_sampled_maps_consistent(view):
    for b, r in view.branches.items():
        # Monte-Carlo eps_g from the sampled attention maps agrees with the state evolution
        assert view.eps_g_mc[b] == pytest.approx(r.test_error, rel=0.05), b
        M = view.mean_attention[b]
        assert np.allclose(M.sum(axis=1), 1.0)
    T = view.mean_attention["teacher"]
    assert np.allclose(T.sum(axis=1), 1.0) and T[0, 0] > 0.5
    assert view.branches["semantic"].m == 0.0 and view.branches["positional"].theta == 0.0


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def test_draw_follows_the_house_style(view):
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from attnlib.book import style

    fig = draw_explorer(view)
    axes = _panels(fig)
    assert len(axes) == 6 and len(fig.axes) == 7                        # six panels and the colour bar
    assert fig.get_size_inches()[0] == pytest.approx(style.PAGE_WIDTH)
    # at most two panels side by side: three rows of two
    spans = [ax.get_subplotspec().get_topmost_subplotspec() for ax in axes]
    assert [(sp.rowspan.start, sp.colspan.start) for sp in spans] == [(r, c) for r in range(3) for c in range(2)]
    assert spans[0].get_gridspec().get_geometry() == (3, 2)
    letters = [t.get_text() for ax in axes for t in ax.texts if t.get_gid() == "panel-letter"]
    assert letters == ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"]
    ax_ov, ax_err, ax_gap, ax_pd, ax_map, ax_sc = axes
    # the phase panel as in chapter 6: alpha across (log), omega up; the table's lines, labelled
    assert ax_pd.get_xscale() == "log" and "alpha" in ax_pd.get_xlabel() and "omega" in ax_pd.get_ylabel()
    labels = [t.get_text() for t in ax_pd.texts if t.get_gid() == "line-label"]     # every line labelled
    assert sorted(labels) == sorted([r"$\alpha_c$", r"$\alpha_l$", "semantic end", "positional end", "both exist"])
    region = next(c for c in ax_pd.collections if c.get_label() == "both exist")
    assert to_hex(region.get_facecolor()[0]) == to_hex("0.88")
    # no positional end at omega = 0.3 in the table (the branch spans the range); the ends at 0 and 0.2 and the
    # one at 0.4 where the continuation lost the branch (it exists at least that far) are drawn
    pos_end = next(ln for ln in ax_pd.lines if ln.get_label() == "positional end")
    assert [float(y) for y in pos_end.get_ydata()] == [0.0, 0.2, 0.4]
    assert [float(x) for x in pos_end.get_xdata()] == [0.7, 1.3, 2.5]
    star = ax_pd.lines[-1]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (view.alpha, view.params.omega)
    assert to_hex(star.get_color()) == to_hex("C0")                    # semantic: the global minimum
    # m is shown as m / sigma^2; branch colours C0 / C3
    assert ax_ov.get_xticklabels()[1].get_text() == r"$m/\sigma^2$"
    heights = [b.get_height() for b in ax_ov.patches]
    assert heights[4] == pytest.approx(view.branches["positional"].m / view.params.sigma**2)
    assert {to_hex(b.get_facecolor()) for b in ax_err.patches} == {to_hex("C0"), to_hex("C3")}
    # the training-loss gap, not the two losses: one bar of eps_t(sem) - eps_t(pos)
    k = math.floor(math.log10(abs(view.train_loss_gap)))
    assert len(ax_gap.patches) == 1 and ax_gap.patches[0].get_width() == pytest.approx(view.train_loss_gap / 10**k)
    assert rf"10^{{{k}}}" in ax_gap.get_xlabel()
    assert all(im.get_cmap().name == style.ATTENTION_CMAP for im in ax_map.images)
    for ax in axes:
        for t in [ax.xaxis.label, ax.yaxis.label, ax.title] + ax.get_xticklabels():
            if t.get_text():
                assert t.get_fontsize() >= 8.5, (t.get_text(), t.get_fontsize())
    plt.close(fig)


def test_view_follows_the_phase_table():
    """A branch exists only inside its range in the table; the global minimum is the existing branch of lower
    eps_t, even when the other one has the lower loss."""
    import matplotlib.pyplot as plt

    below_sem = explorer_view(phase=(fake_table(sem_end_03=1.6), "test"))     # alpha = 1.5 < semantic end
    assert below_sem.branches["semantic"].train_loss < below_sem.branches["positional"].train_loss
    assert below_sem.exists == {"semantic": False, "positional": True}
    assert below_sem.global_branch == "positional" and math.isnan(below_sem.train_loss_gap)
    past_pos = explorer_view(phase=(fake_table(pos_end_03=1.4), "test"))       # alpha = 1.5 > positional end
    assert past_pos.exists == {"semantic": True, "positional": False} and past_pos.global_branch == "semantic"
    fig = draw_explorer(past_pos)
    ax_ov, ax_err, ax_gap = _panels(fig)[:3]
    assert len(ax_err.patches) == 1 and len(ax_ov.patches) == 3 and not ax_gap.patches
    assert any("only the semantic branch" in t.get_text() for t in ax_gap.texts)
    plt.close(fig)
    # other sigma: the table does not apply; the fixed points alone decide, and the view says so
    other = explorer_view(sigma=0.6, phase=PHASE)
    assert not other.phase_matches_params and "no phase table" in other.rule
    assert all(math.isnan(v) for v in other.lines.values())
    for b, r in other.branches.items():
        found = r.converged and abs(r.theta if b == "semantic" else r.m) >= 1e-3 * other.params.rho
        assert other.exists[b] == found, b


def test_phase_lines_interpolate_the_table():
    t = fake_table()
    lines = phase_lines(t, [0.0, 0.1, 0.25, 0.3, 0.4, 0.5]).set_index("omega")
    # a row's own values; positional end only where the kind is a fold or a vanishing
    assert lines.loc[0.0].tolist() == [0.6, 0.75, 0.5, 0.7]
    assert lines.loc[0.3, "semantic_end"] == 0.7 and math.isnan(lines.loc[0.3, "positional_end"])
    assert lines.loc[0.4, "positional_end"] == 2.5  # "lost": the branch exists at least that far
    # between rows: linear in omega where both rows have a value, NaN otherwise
    assert lines.loc[0.25, "alpha_l"] == pytest.approx(1.3) and lines.loc[0.25, "semantic_end"] == pytest.approx(0.65)
    assert math.isnan(lines.loc[0.1, "alpha_c"]) and math.isnan(lines.loc[0.25, "alpha_c"])
    assert lines.loc[0.1, "positional_end"] == pytest.approx(1.0)
    assert math.isnan(lines.loc[0.25, "positional_end"])
    assert lines.loc[0.5].isna().all()                                       # outside the table
    assert table_omegas([0.0, 0.1, 0.45, 0.5], t) == (0.0, 0.1)


def test_branch_exists_and_table_applies():
    a = np.array([0.5, 0.8, 1.2])
    line = {"semantic_end": 0.8, "positional_end": 1.0}
    ok = np.ones(3, bool)
    assert branch_exists("semantic", a, [0.1] * 3, ok, 0.25, line).tolist() == [False, True, True]
    assert branch_exists("positional", a, [0.1] * 3, ok, 0.25, line).tolist() == [True, True, False]
    no_end = {"semantic_end": np.nan, "positional_end": np.nan}
    assert branch_exists("semantic", a, [0.1] * 3, ok, 0.25, no_end).tolist() == [False] * 3
    assert branch_exists("positional", a, [0.1] * 3, ok, 0.25, no_end).tolist() == [True] * 3
    # a collapsed overlap or a failed fixed point is no branch, whatever the table says
    found = branch_exists("semantic", a, [1e-6, 0.1, 0.1], [True, True, False], 0.25, line)
    assert found.tolist() == [False, True, False]
    t = fake_table()
    assert table_applies(t, TaskParams(sigma=0.5, lam=0.01, omega=0.3))
    assert not table_applies(t, TaskParams(sigma=0.5, lam=0.02, omega=0.3))
    assert not table_applies(t.drop(columns="positional_upper_kind"), TaskParams(sigma=0.5, lam=0.01, omega=0.3))


def test_phase_boundary_reads_csv(tmp_path):
    path = tmp_path / "pd.csv"
    PHASE[0].assign(extra=1).to_csv(path, index=False)
    df, source = phase_boundary(path)
    assert "pd.csv" in source and df.positional_upper_kind.tolist() == PHASE[0].positional_upper_kind.tolist()
    assert table_applies(df, TaskParams(sigma=0.5, lam=0.01, omega=0.0))


def test_widget_constructs():
    ipywidgets = pytest.importorskip("ipywidgets")
    w = make_explorer(initial=False)
    assert isinstance(w, ipywidgets.VBox)
    sliders = [c for box in w.children[:2] for c in box.children]
    assert sorted(s.description for s in sliders) == ["alpha", "lambda", "omega", "sigma"]
    assert math.isclose(sliders[0].value, DEFAULTS["omega"])


def test_widget_readout(view):
    from attnlib.book.explorer import _readout_html

    html = _readout_html(view)
    assert "semantic (global minimum)" in html and f"{view.branches['positional'].m / 0.25:#.4g}" in html
    assert "= 1.250" in html and "up to the end of the table" in html         # alpha_c at 0.3; no positional end


# ---- the grid of the static explorer -------------------------------------------------------------------------

from attnlib import alpha_sweep  # noqa: E402
from attnlib.book.explorer_grid import GRID_ALPHAS, committed_fixed_points  # noqa: E402
from attnlib.book.explorer_grid import attention_maps, explorer_grid, grid_thresholds  # noqa: E402
from attnlib.theory.model.quadrature import Quadrature  # noqa: E402

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
    from attnlib.theory.model.attention import attention_diagonal
    h = 0.1 * np.array([1.0, -1.0]) + theta / rho * math.sqrt(rho) * np.array(maps_examples())
    assert np.allclose(maps["S_ex"], attention_diagonal(h), atol=1e-12)
    # the teacher's map on an input is (1 - omega) softmax + omega A
    assert np.allclose(maps["T_ex"].sum(axis=-1) > 0, True)
    with pytest.raises(ValueError, match="Cauchy-Schwarz"):
        attention_maps(P03, 0.01, 0.0, 0.2)
    with pytest.raises(ValueError, match="q in"):
        attention_maps(P03, -0.1, 0.0, 0.0)


def maps_examples():
    from attnlib.book.explorer_grid import EXAMPLE_INPUTS
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
        # points off the committed grid: computed by alpha_sweep's default rule (the same cache entries)
        ref = alpha_sweep(P03, [1.0, 1.15, 1.3, 1.5])
    for col in ("q", "m", "theta", "test_error", "train_loss"):
        assert np.array_equal(g.sort_values(["branch", "alpha"])[col].to_numpy(),
                              ref.sort_values(["branch", "alpha"])[col].to_numpy()), col
    assert g.converged.all() and g.exists.all() and g.found.all()
    # the thresholds and ends are the phase table's row at omega = 0.3
    ref = pd.read_csv(ROOT / "book" / "data" / "phase_standard.csv").set_index("omega").loc[0.3]
    assert (g.alpha_c == ref.alpha_c).all() and (g.alpha_l == ref.alpha_l).all()
    assert (g.semantic_end == ref.semantic_lower_alpha).all()
    if ref.positional_upper_kind in END_KINDS:
        assert (g.positional_end == ref.positional_upper_alpha).all()
    else:
        assert g.positional_end.isna().all()
    assert g.eps_lin.iloc[0] == pytest.approx(linear_baseline_error(P03))
    glob = g[g.is_global].set_index("alpha").branch
    assert glob[1.0] == "positional" and glob[1.5] == "semantic" and len(glob) == 4
    r = g[(g.branch == "semantic") & (g.alpha == 1.5)].iloc[0]
    maps = attention_maps(P03, r.q, r.m, r.theta)
    assert r.S11_mean == pytest.approx(maps["S_mean"][0]) and r.S22_ex1 == pytest.approx(maps["S_ex"][1, 1])


def test_grid_follows_the_table_not_the_fixed_points(small_grid):
    """With a table whose semantic branch ends at 1.2 and positional one at 1.2 too, the grid's fixed points
    (all found) exist only on their side; the global minimum is then the only existing branch."""
    t = fake_table(sem_end_03=1.2, pos_end_03=1.2)
    g = explorer_grid(omegas=[0.3], alphas=[1.0, 1.15, 1.3, 1.5], n_jobs=1, phase=t)   # cached curves
    assert g.found.all()
    ex = g.set_index(["branch", "alpha"]).exists
    assert [ex["semantic", a] for a in (1.0, 1.15, 1.3, 1.5)] == [False, False, True, True]
    assert [ex["positional", a] for a in (1.0, 1.15, 1.3, 1.5)] == [True, True, False, False]
    glob = g[g.is_global].set_index("alpha").branch
    assert glob.tolist() == ["positional", "positional", "semantic", "semantic"]
    with pytest.raises(ValueError, match="outside the phase table"):
        explorer_grid(omegas=[0.3, 0.45], alphas=[1.0], n_jobs=1, phase=t)


def test_grid_thresholds_read_the_crossings():
    """grid_thresholds (a diagnostic of a grid's own losses) finds the sign changes, log-linearly."""
    rows = []
    for a, gap, eg in ((1.0, 0.5, 3.0), (2.0, -1.0, 1.0)):
        for b, et in (("semantic", 1.0 + gap), ("positional", 1.0)):
            rows.append(dict(omega=0.3, alpha=a, branch=b, train_loss=et * 1e-3, exists=True,
                             test_error=eg * 1e-3 if b == "semantic" else 9e-3, eps_lin=2e-3))
    g = pd.DataFrame(rows)
    g["is_global"] = [False, True, True, False]
    thr = grid_thresholds(g).iloc[0]
    assert thr.alpha_c == pytest.approx(2 ** (1 / 3))        # gap +0.5 at 1, -1 at 2
    assert thr.alpha_l == pytest.approx(2 ** (7 / 8))        # global eps_g - eps_lin: +7 at 1, -1 at 2


def test_grid_matches_chapter_6_roughly(small_grid):
    """The grid's own crossing (12-point Gauss-Hermite rule) lies near the table's (smooth rule): within 4 %."""
    thr = grid_thresholds(small_grid).set_index("omega")
    ref = pd.read_csv(ROOT / "book" / "data" / "phase_standard.csv").set_index("omega")
    assert 1.15 < thr.alpha_c[0.3] < 1.3
    assert thr.alpha_c[0.3] == pytest.approx(ref.alpha_c[0.3], rel=0.04)


def test_grid_rejects_bad_input():
    with pytest.raises(ValueError, match="omegas"):
        explorer_grid(omegas=[])
    with pytest.raises(ValueError, match="omega"):
        explorer_grid(omegas=[1.5], alphas=[1.0])


def test_values_with_errors_show_the_digits_the_error_allows():
    from attnlib.book.style import with_error

    assert with_error(0.05105, 4e-5) == "0.05105 \u00b1 0.00004"
    assert with_error(0.114814, 3e-6) == "0.11481 \u00b1 0.000003"      # at most 5 significant digits
    assert with_error(1.0331, 3e-4) == "1.0331 \u00b1 0.0003"
    assert with_error(1.49299, 4.4e-5, digits=4, round_up=True) == "1.4930 \u00b1 0.0001"   # never "± 0.0000"
    assert with_error(0.61647, 9.53e-4, digits=4, round_up=True) == "0.6165 \u00b1 0.0010"
    assert with_error(0.0035905, 4e-8) == "0.0035905 \u00b1 0.00000004"
    assert with_error(1.25, 0.02) == "1.250 \u00b1 0.02"              # at least 4 significant digits
    assert with_error(0.0019714, 0.0) == "0.0019714"
    assert with_error(-1.537, 0.0388, digits=2) == "-1.54 \u00b1 0.04"       # fixed decimals for a column


def test_prose_numbers_have_no_e_notation():
    from attnlib.book.style import prose_number

    assert prose_number(0.534) == "0.53" and prose_number(12.3) == "12" and prose_number(0.0012) == "0.0012"
    assert prose_number(3.1e-7) == "3.1 \u00d7 10\u207b\u2077" and prose_number(2.4e6) == "2.4 \u00d7 10\u2076"
    assert prose_number(9.99e-5) == "1.0 \u00d7 10\u207b\u2074"  # rounding up carries into the exponent
    assert prose_number(0) == "0" and "e" not in prose_number(-3e-9)


def test_prose_lists_read_as_english():
    from attnlib.book.style import prose_list

    assert prose_list([]) == "" and prose_list(["0"]) == "0" and prose_list(("0", "0.1")) == "0 and 0.1"
    assert prose_list(f"{w:g}" for w in (0, 0.1, 0.2)) == "0, 0.1 and 0.2"
    assert prose_list(["a, b", "c"]) == "a, b and c"   # items with commas of their own stay whole


def test_committed_grid_is_the_default_rule():
    """The committed fixed points of the static explorer are the default rule's: at three grid points (both
    branches at omega = 0.3, alpha between alpha_c and alpha_l, and the positional branch at omega = 0, where it
    repels the iteration) a fresh solve lands within 2e-3 relative, and the lookup returns the committed rows
    only where the table holds all of them."""
    a = GRID_ALPHAS[22]
    table = committed_fixed_points([0.0, 0.3], [a], 0.5, 0.01, ((0.6, 0.4), (0.4, 0.6)))
    assert table is not None and len(table) == 4 and table[table.omega == 0.3].converged.all()
    assert table.q_err.notna().all()   # (at omega = 0 this alpha lies beyond the positional fold)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for w, b in ((0.3, "semantic"), (0.3, "positional")):
            row = table[(table.omega == w) & (table.branch == b)].iloc[0]
            fresh = solve_state_evolution(TaskParams(sigma=0.5, lam=0.01, omega=w), a, b)
            for k in ("q", "m", "theta", "test_error", "train_loss"):
                assert getattr(fresh, k) == pytest.approx(row[k], rel=2e-3, abs=1e-9), (w, b, k)
        a0 = GRID_ALPHAS[12]
        row = committed_fixed_points([0.0], [a0], 0.5, 0.01, ((0.6, 0.4), (0.4, 0.6)))
        row = row[row.branch == "positional"].iloc[0]
        fresh = solve_state_evolution(TaskParams(sigma=0.5, lam=0.01, omega=0.0), a0, "positional")
        assert row.m > 0.1 and fresh.m == pytest.approx(row.m, rel=5e-3) and fresh.q == pytest.approx(row.q, rel=2e-3)
    assert committed_fixed_points([0.3], [a, 1.0001], 0.5, 0.01, ((0.6, 0.4), (0.4, 0.6))) is None
    assert committed_fixed_points([0.3], [a], 0.4, 0.01, ((0.6, 0.4), (0.4, 0.6))) is None
    assert committed_fixed_points([0.3], [a], 0.5, 0.01, ((0.7, 0.3), (0.3, 0.7))) is None
    assert committed_fixed_points([0.3], [a], 0.5, 0.01, ((0.6, 0.4), (0.4, 0.6)),
                                  table=pd.DataFrame({"omega": [0.3]})) is None


def test_committed_grid_schema_and_sidecar():
    """book/data/explorer_fixed_points.csv (scripts/regenerate_explorer_data.py): every (omega, alpha, branch)
    of the explorer's grid once, the columns the sidecar describes, standard errors where a branch was found,
    and every row converged with finite numbers."""
    import json

    from attnlib.book.explorer_grid import EXPLORER_POINTS_CSV, FIXED_POINT_COLUMNS, GRID_OMEGAS

    data = ROOT / "book" / "data"
    df = pd.read_csv(data / EXPLORER_POINTS_CSV)
    meta = json.loads((data / EXPLORER_POINTS_CSV.replace(".csv", ".json")).read_text())
    assert meta["script"] == "scripts/regenerate_explorer_data.py" and meta["n_rows"] == len(df)
    assert list(df.columns) == list(FIXED_POINT_COLUMNS) + ["A11", "A12", "A21", "A22"]
    for c in df.columns:
        assert c in meta["description"], c
    assert len(df) == len(GRID_OMEGAS) * len(GRID_ALPHAS) * 2
    assert not df.duplicated(["omega", "alpha", "branch"]).any()
    assert df.converged.all() == (meta["n_unconverged"] == 0)
    assert np.isfinite(df[["q", "m", "V", "theta", "test_error", "train_loss"]].to_numpy()).all()
    found = df[np.where(df.branch == "semantic", df.theta, df.m) > 0.05]
    assert len(found) > 0.6 * len(df) and (found.q_err > 0).all()

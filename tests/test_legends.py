"""The legend check of the house style (attnlib.book.legends): a legend over a curve or markers is found, one in an
empty corner is not, reference lines across the panel do not count, and pyplot.show checks once installed."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnlib.book.legends import LegendOverData, check_figure, hidden_points, install  # noqa: E402


def _fig(loc, y):
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    x = np.linspace(0, 1, 50)
    ax.plot(x, y(x), "-", label="curve")
    ax.axhline(0.5, color="k", lw=0.5)          # a reference line: never counted
    ax.legend(loc=loc)
    fig.canvas.draw()
    return fig, ax


def test_legend_over_a_curve_is_found():
    fig, ax = _fig("upper left", lambda x: 1 - x)      # the curve starts in the upper-left corner
    assert hidden_points(ax)[1] > 10
    with pytest.raises(LegendOverData, match="covered"):
        check_figure(fig)
    plt.close(fig)


def test_legend_in_an_empty_corner_passes():
    fig, ax = _fig("upper right", lambda x: 1 - x)     # the curve is far from the upper-right corner
    assert hidden_points(ax) == (0, 0)
    check_figure(fig)
    plt.close(fig)


def test_markers_and_error_bars_count():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    ax.errorbar([0.1, 0.9], [0.9, 0.1], yerr=[0.05, 0.05], fmt="o", label="points")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")
    fig.canvas.draw()
    assert hidden_points(ax)[0] >= 1
    with pytest.raises(LegendOverData, match="markers"):
        check_figure(fig)
    plt.close(fig)


def test_show_checks_once_installed(monkeypatch, tmp_path):
    install()
    install()   # idempotent
    fig, _ = _fig("upper left", lambda x: 1 - x)
    with pytest.raises(LegendOverData):
        plt.show()
    report = tmp_path / "legends.txt"
    monkeypatch.setenv("ATTNLIB_LEGEND_REPORT", str(report))
    plt.show()
    assert "legend over data" in report.read_text()
    plt.close("all")

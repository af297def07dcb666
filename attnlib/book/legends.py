"""A legend never sits over data: the check behind the house rule, run on every figure a chapter shows.

:func:`hidden_points` measures, for one axes, which plotted points and line segments fall inside the box of its
legend (in display coordinates, after a draw). :func:`check_figure` runs it on every axes of a figure and raises
:class:`LegendOverData` naming the panels; :func:`install` makes ``matplotlib.pyplot.show`` call it first, so
that every figure of a chapter is checked without a call per figure (``attnlib.book.style.use`` installs it).
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["LegendOverData", "hidden_points", "check_figure", "install", "MAX_HIDDEN"]

#: Samples (every 2 px along a drawn line) a legend may cover before it counts as over the data: a line may
#: graze a corner of the box. A covered marker always counts.
MAX_HIDDEN = 3
_STEP_PX = 2.0


class LegendOverData(ValueError):
    """A figure's legend covers plotted data."""


def _display_points(xy, transform) -> np.ndarray:
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    xy = xy[np.isfinite(xy).all(axis=1)]
    return transform.transform(xy) if len(xy) else xy


def _densify(pts: np.ndarray) -> np.ndarray:
    """Points every :data:`_STEP_PX` pixels along the polyline ``pts`` (display coordinates)."""
    if len(pts) < 2:
        return pts
    out = [pts[:1]]
    for a, b in zip(pts[:-1], pts[1:]):
        n = int(np.ceil(np.hypot(*(b - a)) / _STEP_PX))
        if n > 0:
            t = np.linspace(0, 1, n + 1)[1:, None]
            out.append(a + t * (b - a))
    return np.concatenate(out)


def hidden_points(ax) -> tuple[int, int]:
    """What of the data of ``ax`` its legend covers: ``(markers, line samples)``, ``(0, 0)`` without a legend.

    Markers are those of the lines (error-bar caps included) and the offsets of scatter collections; line
    samples are points every 2 px along the drawn segments of the lines and of line collections (error bars).
    Not counted: lines drawn in axes or blended coordinates (``axhline``, ``axvline``: reference lines that
    cross the whole panel). The figure must have been drawn (``fig.canvas.draw()``).
    """
    from matplotlib.collections import LineCollection, PathCollection

    leg = ax.get_legend()
    if leg is None or not leg.get_visible():
        return 0, 0
    renderer = ax.figure.canvas.get_renderer()
    box = leg.get_window_extent(renderer).shrunk(0.98, 0.96)

    def inside(p):
        if not len(p):
            return 0
        return int(((p[:, 0] > box.x0) & (p[:, 0] < box.x1) & (p[:, 1] > box.y0) & (p[:, 1] < box.y1)).sum())

    markers = samples = 0
    for line in ax.get_lines():
        if not line.get_visible() or line.get_transform() != ax.transData:
            continue
        p = _display_points(line.get_xydata(), ax.transData)
        if line.get_marker() not in (None, "None", "", " "):
            markers += inside(p)
        if line.get_linestyle() not in ("None", "", " "):
            samples += inside(_densify(p))
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, LineCollection) and coll.get_transform() == ax.transData:
            samples += sum(inside(_densify(_display_points(seg, ax.transData))) for seg in coll.get_segments())
        elif isinstance(coll, PathCollection) and coll.get_offset_transform() == ax.transData:
            markers += inside(_display_points(coll.get_offsets(), ax.transData))
    return markers, samples


def check_figure(fig, max_hidden: int = MAX_HIDDEN) -> None:
    """Raise :class:`LegendOverData` if a legend of ``fig`` covers a marker, or more than ``max_hidden`` points
    sampled along its lines (a line may graze a corner of the box).

    Raises
    ------
    LegendOverData
        Naming each offending panel (its letter title or position) and the number of points covered.
    """
    fig.canvas.draw()
    bad = []
    for k, ax in enumerate(fig.axes):
        markers, samples = hidden_points(ax)
        if markers or samples > max_hidden:
            name = ax.get_title(loc="left") or ax.get_title() or f"axes {k}"
            labels = ", ".join(t.get_text() for t in ax.get_legend().get_texts())
            bad.append(f"{name} (legend {labels!r}): {markers} markers and {samples} points of lines covered")
    if bad:
        raise LegendOverData("legend over data (move it, or make room for it): " + "; ".join(bad))


def install() -> None:
    """Make ``matplotlib.pyplot.show`` check every open figure with :func:`check_figure` first (idempotent).

    With the environment variable ``ATTNLIB_LEGEND_REPORT`` set to a file path, offences are appended to that
    file instead of raised (a survey of every figure in one build)."""
    import matplotlib.pyplot as plt

    if getattr(plt.show, "_legend_checked", False):
        return
    original = plt.show

    def show(*args, **kwargs):
        report = os.environ.get("ATTNLIB_LEGEND_REPORT")
        for num in plt.get_fignums():
            try:
                check_figure(plt.figure(num))
            except LegendOverData as err:
                if not report:
                    raise
                with open(report, "a") as fh:  # survey mode: list every offence, stop at none
                    fh.write(f"{os.getcwd()} | {err}\n")
        return original(*args, **kwargs)

    show._legend_checked = True
    show.__doc__ = original.__doc__
    plt.show = show

"""House style of the book's figures and tables.

A notebook figure is shown at its natural size (``figure.dpi`` pixels per inch) unless it is wider than the
column of cell outputs (672 CSS pixels in a 1280 px window; the article is 752 px), when the browser shrinks it
and its text with it. A figure drawn :data:`PAGE_WIDTH` inches wide at :data:`DPI` fills that column without
being shrunk, and its fonts show at their nominal size (10 pt is about 14 px). The rules (README,
*Contributing*):

* at most two panels side by side at page width (more panels: a 2x2 grid, or rows of two);
* fonts readable at the displayed size (:func:`use` sets them);
* panel letters (a), (b), ... (:func:`panel_letters`);
* every line in a legend or labelled;
* one colour per branch across the book: semantic ``C0`` (blue), positional ``C3`` (red), linear baseline
  grey (:data:`COLOURS`);
* tables as styled HTML (:func:`table`), long ones in a collapsed block (cell tag ``hide-output``).

Usage in a chapter::

    from attnlib.book import style
    style.use()
    fig, axes = plt.subplots(1, 2, figsize=style.figsize(2))
    style.panel_letters(axes)
"""
from __future__ import annotations

import math
import string
from typing import Iterable, Mapping

import numpy as np

__all__ = ["PAGE_WIDTH", "ONE_PANEL_WIDTH", "DPI", "COLOURS", "ATTENTION_CMAP", "RC", "use", "figsize",
           "panel_letters", "plain_log_axis", "attention_mosaic", "table", "prose_number", "prose_list", "with_error"]

#: Width in inches of a figure that fills the cell-output column at :data:`DPI`: 670 px. (In a 1280 px
#: window the article is 752 px wide and a notebook output 672 px; a wider figure is scaled down.)
PAGE_WIDTH = 6.7
#: Default width of a single-panel figure (about two thirds of the column: a single panel at full width
#: would be needlessly large on the page).
ONE_PANEL_WIDTH = 4.8
#: Pixels per inch of the PNG figures (matplotlib's default; the inline backend keeps it).
DPI = 100

#: Colours of the two branches and of the linear baseline, the same in every chapter.
COLOURS = {"semantic": "C0", "positional": "C3", "linear": "0.4", "agnostic": "0.6"}
#: Colour map of attention weights: diverging, centred at 1/2 (no preference between the two tokens), and
#: neither blue nor red, which are the branches' colours.
ATTENTION_CMAP = "PuOr"

#: Matplotlib settings of the house style (fonts sized for a figure shown at natural size).
RC = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 8.5,
    "legend.framealpha": 0.9,
    "figure.constrained_layout.use": False,
}


def use() -> None:
    """Apply :data:`RC` to matplotlib's global settings (call once at the top of a chapter), and check every
    figure the chapter shows for a legend over its data (:func:`attnlib.book.legends.install`)."""
    import matplotlib as mpl

    from .legends import install

    mpl.rcParams.update(RC)
    install()


def figsize(ncols: int = 1, nrows: int = 1, *, row_height: float | None = None,
            width: float | None = None) -> tuple[float, float]:
    """Figure size in inches for ``nrows`` rows of ``ncols`` panels that fits the content column.

    Parameters
    ----------
    ncols : {1, 2}
        Panels side by side. The house style allows at most two; use more rows for more panels.
    nrows : int
        Rows of panels (>= 1).
    row_height : float, optional
        Height of one row in inches (default 2.8 for two columns, 3.3 for one).
    width : float, optional
        Figure width in inches, at most :data:`PAGE_WIDTH` (default: :data:`PAGE_WIDTH` for two columns,
        :data:`ONE_PANEL_WIDTH` for one).

    Returns
    -------
    (width, height) : tuple of float
    """
    if ncols not in (1, 2):
        raise ValueError(f"ncols must be 1 or 2 (at most two panels side by side), got {ncols!r}")
    if int(nrows) != nrows or nrows < 1:
        raise ValueError(f"nrows must be a positive integer, got {nrows!r}")
    if width is None:
        width = PAGE_WIDTH if ncols == 2 else ONE_PANEL_WIDTH
    if not 0 < width <= PAGE_WIDTH:
        raise ValueError(f"width must be in (0, {PAGE_WIDTH}] inches (the content column), got {width!r}")
    if row_height is None:
        row_height = 2.8 if ncols == 2 else 3.3
    if not row_height > 0:
        raise ValueError(f"row_height must be > 0, got {row_height!r}")
    return (float(width), float(nrows * row_height))


def panel_letters(axes, *, start: str = "a", fontsize: float = 11, offset: tuple[float, float] = (-30, 6)
                  ) -> list[str]:
    """Write (a), (b), ... above the top-left corner of each axes, in the order given (row by row).

    The letter sits ``offset`` points from the corner (by default left of the axes, above the y tick labels),
    so that it clears a title or column labels above the axes. Returns the letters.
    """
    axs = list(np.ravel(np.asarray(axes, dtype=object)))
    first = string.ascii_lowercase.index(start)
    if first + len(axs) > 26:
        raise ValueError(f"too many panels ({len(axs)}) for letters from {start!r}")
    letters = []
    for k, ax in enumerate(axs):
        letter = f"({string.ascii_lowercase[first + k]})"
        ax.annotate(letter, xy=(0, 1), xycoords="axes fraction", xytext=offset, textcoords="offset points",
                    ha="left", va="bottom", fontsize=fontsize, fontweight="bold", gid="panel-letter")
        letters.append(letter)
    return letters


def plain_log_axis(ax, axis: str = "x", ticks: Iterable[float] | None = None) -> None:
    """Log scale with a few plain tick labels (``200``, ``0.5``, not ``2 x 10^2``) and no minor labels.

    ``ticks`` fixes the labelled values; by default matplotlib chooses among 1, 2 and 5 times powers of ten.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    getattr(ax, f"set_{axis}scale")("log")
    target = ax.xaxis if axis == "x" else ax.yaxis
    if ticks is not None:
        ticks = [float(t) for t in ticks]
        if not ticks or min(ticks) <= 0:
            raise ValueError("ticks must be positive numbers on a log axis")
        target.set_major_locator(LogLocator(base=10, subs="all", numticks=len(ticks) + 2))
        getattr(ax, f"set_{axis}ticks")(ticks, [f"{t:g}" for t in ticks])
    else:
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=6))
        target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())


def attention_mosaic(ax, blocks, *, row_labels=None, col_labels=None, vmin: float = 0.2, vmax: float = 0.8,
                     fmt: str = "{:.2f}", gap: float = 0.7, fontsize: float = 8.5):
    """Draw a grid of small attention matrices in one axes, each entry annotated with its value.

    Parameters
    ----------
    ax : matplotlib Axes
    blocks : sequence of sequences of (L, L) arrays
        ``blocks[r][c]`` is drawn in row ``r``, column ``c``; in each matrix, rows are the query (attending)
        token and columns the key (attended) token.
    row_labels, col_labels : sequences of str, optional
        Written left of each row of blocks and above each column of blocks.
    vmin, vmax : float
        Colour range of :data:`ATTENTION_CMAP`; keep it symmetric about 1/2 so that white means "no
        preference". Values outside are clipped in colour (their numbers are still written).

    Returns
    -------
    The last image (for ``fig.colorbar``).
    """
    import matplotlib.transforms as mtransforms

    blocks = [[np.asarray(M, dtype=float) for M in row] for row in blocks]
    if not blocks or not blocks[0]:
        raise ValueError("blocks must be a non-empty grid of matrices")
    L = blocks[0][0].shape[0]
    if any(M.shape != (L, L) for row in blocks for M in row):
        raise ValueError("every block must be a square matrix of the same size")
    if not vmin < vmax:
        raise ValueError(f"need vmin < vmax, got {vmin}, {vmax}")
    step = L + gap
    im = None
    xt, xl, yt, yl = [], [], [], []
    for r, row in enumerate(blocks):
        for c, M in enumerate(row):
            x0, y0 = c * step, r * step
            im = ax.imshow(M, cmap=ATTENTION_CMAP, vmin=vmin, vmax=vmax, interpolation="nearest",
                           extent=(x0 - 0.5, x0 + L - 0.5, y0 + L - 0.5, y0 - 0.5))
            for (i, j), v in np.ndenumerate(M):
                strong = abs(v - 0.5 * (vmin + vmax)) > 0.3 * (vmax - vmin)
                ax.text(x0 + j, y0 + i, fmt.format(v), ha="center", va="center", fontsize=fontsize,
                        color="white" if strong else "black")
            if r == 0:
                xt += [x0 + j for j in range(L)]
                xl += [str(j + 1) for j in range(L)]
        yt += [y0 + i for i in range(L)]
        yl += [str(i + 1) for i in range(L)]
    ncols = max(len(row) for row in blocks)
    ax.set_xlim(-0.5, (ncols - 1) * step + L - 0.5)
    ax.set_ylim(len(blocks) * step - gap - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(xt, xl)
    ax.set_yticks(yt, yl)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    top = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
    for c, label in enumerate(col_labels or []):
        ax.text(c * step + (L - 1) / 2, 1.02, label, transform=top, ha="center", va="bottom",
                fontsize=fontsize + 0.5)
    left = mtransforms.blended_transform_factory(ax.transAxes, ax.transData)
    for r, label in enumerate(row_labels or []):
        ax.text(-0.1, r * step + (L - 1) / 2, label, transform=left, ha="right", va="center",
                fontsize=fontsize + 0.5)
    return im


def table(df, formats: Mapping[str, str] | str | None = None, *, caption: str | None = None,
          index: bool = True):
    """A pandas Styler in the house style: compact padding, numbers right-aligned, optional caption.

    ``formats`` is a format string for every cell or a mapping column -> format string; missing values are
    shown as a dash.
    """
    sty = df.style.format(na_rep="\u2014")   # a missing value shows as a dash, never "nan"
    if formats is not None:
        sty = sty.format(formats, na_rep="\u2014")
    if not index:
        sty = sty.hide(axis="index")
    if caption:
        sty = sty.set_caption(caption)
    return sty.set_table_styles([
        {"selector": "", "props": "font-size: 0.88em;"},
        {"selector": "th, td", "props": "padding: 0.15em 0.4em;"},
        {"selector": "th", "props": "white-space: normal; vertical-align: bottom;"},
        {"selector": "td", "props": "white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums;"},
        {"selector": "caption", "props": "white-space: normal; caption-side: top; text-align: left; font-weight: 600;"},
    ])


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def prose_number(x: float, digits: int = 2) -> str:
    """``x`` for running text: a plain decimal with ``digits`` significant digits where that reads well
    (``0.53``, ``12``), else ``m × 10ᵏ`` with a Unicode superscript (``3.1 × 10⁻⁷``), never e-notation."""
    x = float(x)
    if x == 0 or not np.isfinite(x):
        return f"{x:g}"
    k = int(np.floor(np.log10(abs(x))))
    if -3 <= k < 6:
        return f"{x:.{max(digits - 1 - k, 0)}f}"
    mant = f"{x / 10.0 ** k:.{digits - 1}f}"
    if mant.lstrip("-") == "10" or mant.lstrip("-").startswith("10."):
        mant, k = f"{x / 10.0 ** (k + 1):.{digits - 1}f}", k + 1
    return f"{mant} \u00d7 10{str(k).translate(_SUPERSCRIPT)}"


def prose_list(items) -> str:
    """The items (as ``str``) as an English list for running text: ``"a"``, ``"a and b"``, ``"a, b and c"``;
    ``""`` for no items."""
    items = [str(x) for x in items]
    return " and ".join([", ".join(items[:-1]), items[-1]]) if len(items) > 1 else "".join(items)


def with_error(value: float, err: float, digits: int | None = None, round_up: bool = False) -> str:
    """``"value \u00b1 error"`` for a table cell: the error to one significant digit, the value to that decimal
    or to 5 significant digits, whichever is coarser (with at least 4); the value alone when ``err`` is 0.
    With ``digits``, both to that many decimals instead (a column of values of one scale); with ``round_up``
    too, the error rounded up to that decimal (an error below its last digit is not shown as zero)."""
    value, err = float(value), float(err)
    if digits is not None:
        if round_up:
            err = math.ceil(err * 10**digits) / 10**digits
        return f"{value:.{digits}f} \u00b1 {err:.{digits}f}"
    lead = int(np.floor(np.log10(abs(value)))) if value else 0
    err_digit = int(np.ceil(-np.log10(err))) if err > 0 else 99
    digits = max(min(max(err_digit, 3 - lead), 4 - lead), 0)
    return f"{value:.{digits}f} \u00b1 {err:.{max(err_digit, 0)}f}" if err > 0 else f"{value:.{digits}f}"

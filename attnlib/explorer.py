"""Interactive explorer of the state-evolution solution (book chapter 8).

Three layers, so that the static book page and the live widget draw the same thing:

* :func:`explorer_view` computes the view data of one parameter point ``(omega, alpha, sigma, lambda)``:
  both fixed points of the state evolution (semantic and positional, :func:`attnlib.solve_state_evolution`),
  which of them exist there and which is the global minimum, the linear baseline, the attention maps the
  overlaps imply (sampled from the Gaussian representation of spec section 2: ``h = sqrt(q) xi + m s``,
  ``h* = (theta/sqrt(q)) xi + sqrt(rho - theta^2/q) eta``) and the phase diagram to place the point in;
* :func:`draw_explorer` draws an :class:`ExplorerView` into a matplotlib figure (house style,
  :mod:`attnlib.style`);
* :func:`make_explorer` returns an ipywidgets widget (sliders + the figure + a readout) that recomputes the
  view when a slider is released (it needs a running kernel: Binder, Thebe or a local Jupyter).

For the published (static) page, :func:`explorer_grid` precomputes both branches on an ``omega x alpha`` grid
(one tidy table, through :func:`attnlib.alpha_sweep`, cached), with the attention maps of
:func:`attention_maps`, and :mod:`attnlib.static_explorer` embeds the table in the page, where plain
JavaScript draws it.

**The phase table is the single source of thresholds and branch ends.** ``phase_standard.csv`` in the book's
data folder (:func:`attnlib.book_data_dir`; chapter 6, pseudo-arclength continuation with a smooth rule,
sigma = 0.5, lambda = 0.01, standard A) gives at each of its ``omega`` the thresholds ``alpha_c`` and
``alpha_l`` and where the branches end: the semantic branch towards small ``alpha``
(``semantic_lower_alpha``), the positional one towards large ``alpha`` where ``positional_upper_kind`` is a
fold or a vanishing (:data:`END_KINDS`; otherwise it runs to the end of the computed range). Both the
explorer grid and the widget read the lines from there (:func:`phase_lines`, linear in ``omega`` between rows),
never from their own solutions: a branch exists at a point only inside its range in the table (and where its
fixed point converged with its defining overlap not collapsed), and the global minimum is the existing branch
of lower training loss. Where the table does not apply (other ``sigma``, ``lambda`` or ``A``, or ``omega``
outside its rows) the widget falls back to the fixed points alone and says so. :func:`grid_thresholds` reads
``alpha_c`` and ``alpha_l`` off a grid's own training losses, as a diagnostic of the grid against the table.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from .book_data import book_data_dir
from .attention import attention_diagonal, attention_matrix, teacher_diagonal, teacher_matrix
from .generalisation import POSITION_SIGNS, linear_baseline_error
from .params import STANDARD_A, TaskParams
from .quadrature import Quadrature
from .state_evolution import SEResult, SESolver, solve_state_evolution
from .sweeps import alpha_sweep

__all__ = ["DEFAULTS", "EXPLORER_SOLVER", "PHASE_TABLE_CSV", "PHASE_TABLE_PARAMS", "END_KINDS", "ExplorerView",
           "explorer_view", "draw_explorer", "make_explorer", "phase_boundary", "coarse_phase_boundary",
           "table_applies", "table_omegas", "phase_lines", "branch_exists",
           "GRID_OMEGAS", "GRID_ALPHAS", "EXAMPLE_INPUTS", "attention_maps", "explorer_grid", "grid_thresholds"]

#: Default parameter point of the explorer (the paper's running example, between alpha_c and alpha_l).
DEFAULTS = dict(omega=0.3, alpha=1.5, sigma=0.5, lam=0.01)
#: Solver of the explorer: the library default (12-point Gauss-Hermite rule per dimension, a few seconds per
#: point). A cheaper 8-point rule moves the positional fixed point by ~10 % (m 0.231 instead of 0.258 at the
#: default point: the proximal point jumps between minima across the nodes), so it is not used.
EXPLORER_SOLVER = SESolver()
#: The phase table of book chapter 6, in the book's data folder (:func:`attnlib.book_data_dir`).
PHASE_TABLE_CSV = "phase_standard.csv"
#: Parameters the phase table was computed for.
PHASE_TABLE_PARAMS = dict(sigma=0.5, lam=0.01, A=STANDARD_A)
#: Kinds of a branch end inside the computed range, as chapter 6 draws them: a fold, a vanishing, or the point
#: where the continuation lost the branch (it exists at least that far). The other kind, ``range``: the branch
#: reaches the end of the computed range.
END_KINDS = ("fold", "vanishes", "lost")
#: Columns of :func:`phase_lines`.
LINE_COLUMNS = ("alpha_c", "alpha_l", "semantic_end", "positional_end")
_END_COLUMNS = {"semantic_lower_alpha", "positional_upper_alpha", "positional_upper_kind"}
#: A branch whose defining overlap (``theta`` semantic, ``m`` positional) is below this times ``rho`` has
#: merged with the uninformed fixed point: the branch is not there, whatever the table says.
ABSENT_BELOW = 1e-3

BRANCH_COLOURS = {"semantic": "C0", "positional": "C3"}  # house style (attnlib.style.COLOURS)
BRANCHES = ("semantic", "positional")
RULE_TABLE = "branch ends and thresholds from the phase table (chapter 6)"
RULE_FALLBACK = ("no phase table for these parameters: a branch counts as present where its fixed point "
                 "converged with its overlap not collapsed")


# --------------------------------------------------------------------------------------------------------------
# The phase table: thresholds and branch ends
# --------------------------------------------------------------------------------------------------------------

def phase_boundary(csv_path: Path | str | None = None) -> tuple[pd.DataFrame, str]:
    """The phase table of chapter 6 (``csv_path``, default :data:`PHASE_TABLE_CSV` in the book's data folder)
    if it is readable and has ``alpha_c``, sorted by ``omega``, and a description of its source; else the
    coarse fallback :func:`coarse_phase_boundary` (``omega``, ``alpha_c`` only: no branch ends, so
    :func:`table_applies` is false for it)."""
    if csv_path is not None:
        paths = [Path(csv_path)]
    else:
        try:
            paths = [book_data_dir() / PHASE_TABLE_CSV]
        except FileNotFoundError:
            paths = []
    for path in paths:
        if not path.is_file():
            continue
        try:
            df = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.ParserError):
            continue
        if {"omega", "alpha_c"} <= set(df.columns) and df["alpha_c"].notna().any():
            return df.sort_values("omega").reset_index(drop=True), f"{path.name} (chapter 6)"
    return coarse_phase_boundary(), "coarse fallback (6 alphas per omega, interpolated)"


def table_applies(table: pd.DataFrame | None, params: TaskParams) -> bool:
    """Whether ``table`` is a phase table with branch ends computed for ``params``' ``sigma``, ``lambda`` and
    ``A`` (:data:`PHASE_TABLE_PARAMS`)."""
    if table is None or not _END_COLUMNS <= set(table.columns) or not len(table):
        return False
    p = PHASE_TABLE_PARAMS
    return (math.isclose(params.sigma, p["sigma"]) and math.isclose(params.lam, p["lam"])
            and np.allclose(np.asarray(params.A, dtype=float), np.asarray(p["A"], dtype=float)))


def _covered(omegas, table: pd.DataFrame) -> np.ndarray:
    w = np.asarray(omegas, dtype=float)
    return (w >= table.omega.min() - 1e-9) & (w <= table.omega.max() + 1e-9)


def table_omegas(omegas, table: pd.DataFrame) -> tuple:
    """The ``omegas`` inside the range of the table's rows (where :func:`phase_lines` has values)."""
    w = np.asarray(omegas, dtype=float)
    return tuple(float(v) for v in w[_covered(w, table)])


def _interpolate(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """``fp`` at ``x``: a row's value where ``x`` is one of the ``xp``; between two rows, linear in ``x`` where
    both rows have a value (NaN otherwise); NaN outside ``[xp[0], xp[-1]]``."""
    out = np.full(len(x), np.nan)
    for k, v in enumerate(x):
        hit = np.flatnonzero(np.isclose(xp, v, rtol=0, atol=1e-9))
        if hit.size:
            out[k] = fp[hit[0]]
            continue
        i = int(np.searchsorted(xp, v))
        if 0 < i < len(xp) and np.isfinite(fp[i - 1]) and np.isfinite(fp[i]):
            t = (v - xp[i - 1]) / (xp[i] - xp[i - 1])
            out[k] = (1 - t) * fp[i - 1] + t * fp[i]
    return out


def phase_lines(table: pd.DataFrame, omegas) -> pd.DataFrame:
    """Thresholds and branch ends of the phase table at ``omegas``.

    Columns ``omega``, ``alpha_c``, ``alpha_l``, ``semantic_end`` (the table's ``semantic_lower_alpha``: the
    semantic branch exists above it) and ``positional_end`` (``positional_upper_alpha`` where
    ``positional_upper_kind`` is in :data:`END_KINDS`: the positional branch exists below it; NaN where it
    does not end in the computed range). At an ``omega`` of the table, the row's values; between two rows,
    linear interpolation in ``omega`` where both rows have a value, NaN otherwise (no threshold, no end); NaN
    outside the table's rows.
    """
    t = table.sort_values("omega")
    xp = t.omega.to_numpy(dtype=float)
    cols = {"alpha_c": t.alpha_c.to_numpy(dtype=float),
            "alpha_l": (t.alpha_l if "alpha_l" in t else pd.Series(np.nan, index=t.index)).to_numpy(dtype=float)}
    if _END_COLUMNS <= set(t.columns):
        cols["semantic_end"] = t.semantic_lower_alpha.to_numpy(dtype=float)
        cols["positional_end"] = np.where(t.positional_upper_kind.isin(END_KINDS),
                                          t.positional_upper_alpha.to_numpy(dtype=float), np.nan)
    else:
        cols["semantic_end"] = cols["positional_end"] = np.full(len(t), np.nan)
    w = np.atleast_1d(np.asarray(omegas, dtype=float))
    return pd.DataFrame({"omega": w, **{k: _interpolate(w, xp, v) for k, v in cols.items()}})


def branch_exists(branch: str, alpha, overlap, converged, rho: float, line=None) -> np.ndarray:
    """Whether ``branch`` exists at each ``alpha``.

    The fixed point must have converged with its defining ``overlap`` (``theta`` semantic, ``m`` positional)
    at least :data:`ABSENT_BELOW` times ``rho``; with ``line`` (one row of :func:`phase_lines`, or a dict with
    ``semantic_end`` and ``positional_end``) the point must also lie inside the branch's range in the phase
    table: ``alpha >= semantic_end`` for the semantic branch (a missing end: not known to exist),
    ``alpha <= positional_end`` for the positional one (a missing end: no end).
    """
    if branch not in BRANCHES:
        raise ValueError(f"branch must be 'semantic' or 'positional', got {branch!r}")
    alpha = np.asarray(alpha, dtype=float)
    found = np.asarray(converged, dtype=bool) & (np.abs(np.asarray(overlap, dtype=float)) >= ABSENT_BELOW * rho)
    if line is None:
        return found
    if branch == "semantic":
        end = float(line["semantic_end"])
        inside = alpha >= end if math.isfinite(end) else np.zeros(alpha.shape, bool)
    else:
        end = float(line["positional_end"])
        inside = alpha <= end if math.isfinite(end) else np.ones(alpha.shape, bool)
    return found & inside


@functools.lru_cache(maxsize=4)
def coarse_phase_boundary(sigma: float = 0.5, lam: float = 0.01,
                          omegas: tuple = (0.0, 0.15, 0.3, 0.4)) -> pd.DataFrame:
    """``alpha_c(omega)`` at a few ``omega``: both branches (default solver, warm-started along ``alpha``;
    the semantic one downwards from large ``alpha``) on a coarse grid of 6 ``alpha``, and log-linear
    interpolation of the training-loss gap at its sign change (a sketch good to a few hundredths; about a
    minute or two; memoised). Only used when the phase table is missing."""
    solver = SESolver()
    alphas = np.geomspace(0.4, 2.6, 6)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for w in omegas:
            p = TaskParams(sigma=sigma, lam=lam, omega=float(w))
            et = {}
            for b in BRANCHES:
                start, vals = None, {}
                for a in (alphas[::-1] if b == "semantic" else alphas):
                    r = solve_state_evolution(p, float(a), b, solver=solver, start=start)
                    start = r.overlaps if r.converged else None
                    vals[float(a)] = r.train_loss if r.converged else np.nan
                et[b] = np.array([vals[float(a)] for a in alphas])
            rows.append(dict(omega=float(w), alpha_c=_crossing(alphas, et["semantic"] - et["positional"])))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------------------
# One point: the view of the live widget
# --------------------------------------------------------------------------------------------------------------

@dataclass
class ExplorerView:
    """Everything the explorer shows at one parameter point.

    ``branches`` maps "semantic"/"positional" to their :class:`SEResult`; ``exists`` maps them to whether the
    branch exists there (:func:`branch_exists`, by ``rule``); ``global_branch`` is the existing one of lower
    training loss (None if neither exists). ``mean_attention`` maps "teacher", "semantic", "positional" to the
    mean 2x2 attention matrix over the input distribution; ``diag_samples`` maps each branch to an array
    ``(n, 2)`` of sampled ``(T_11, S_11)`` pairs; ``eps_g_mc`` is the Monte-Carlo test error of each branch from
    the same samples (a check of the sampled maps against ``SEResult.test_error``). ``phase`` is the phase
    table (:func:`phase_boundary`), ``phase_source`` where it comes from, ``phase_matches_params`` whether it
    applies to this point (:func:`table_applies`, and ``omega`` within its rows) and ``lines`` the thresholds
    and branch ends at this ``omega`` (:func:`phase_lines`; NaN where the table does not apply).
    """

    params: TaskParams
    alpha: float
    branches: dict
    eps_lin: float
    global_branch: str | None
    mean_attention: dict
    diag_samples: dict
    eps_g_mc: dict
    exists: dict = field(default_factory=dict)
    rule: str = ""
    lines: dict = field(default_factory=dict)
    phase: pd.DataFrame | None = None
    phase_source: str = ""
    phase_matches_params: bool = True
    extra: dict = field(default_factory=dict)

    @property
    def train_loss_gap(self) -> float:
        """``eps_t(semantic) - eps_t(positional)`` where both branches exist (NaN otherwise)."""
        if not all(self.exists.get(b, False) for b in BRANCHES):
            return math.nan
        return float(self.branches["semantic"].train_loss - self.branches["positional"].train_loss)


def _sample_maps(params: TaskParams, res: SEResult, xi: np.ndarray, eta: np.ndarray):
    """Student and teacher attention matrices at sampled inputs, from the overlaps of one fixed point."""
    rho = params.rho
    s = np.array([1.0, -1.0])
    q, m, theta = res.q, res.m, res.theta
    h = math.sqrt(q) * xi + m * s
    resid = max(rho - theta**2 / q, 0.0)
    h_star = (theta / math.sqrt(q)) * xi + math.sqrt(resid) * eta
    return attention_matrix(h), teacher_matrix(h_star, params)


def explorer_view(omega: float = DEFAULTS["omega"], alpha: float = DEFAULTS["alpha"],
                  sigma: float = DEFAULTS["sigma"], lam: float = DEFAULTS["lam"],
                  solver: SESolver | None = None, n_samples: int = 20000, seed: int = 0,
                  starts: dict | None = None, phase: tuple | None = None) -> ExplorerView:
    """View data of one parameter point (see the module docstring).

    ``solver`` defaults to :data:`EXPLORER_SOLVER`; ``starts`` may map a branch to warm-start overlaps;
    ``phase`` may give ``(table, source)`` to skip :func:`phase_boundary`. The same ``(xi, eta)`` samples
    (``seed``) are used for both branches.
    """
    params = TaskParams(sigma=float(sigma), lam=float(lam), omega=float(omega))
    solver = solver or EXPLORER_SOLVER
    starts = starts or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        branches = {b: solve_state_evolution(params, float(alpha), b, solver=solver, start=starts.get(b))
                    for b in BRANCHES}
    table, source = phase if phase is not None else phase_boundary()
    applies = table_applies(table, params) and bool(_covered([params.omega], table)[0])
    line = phase_lines(table, [params.omega]).iloc[0] if applies else None
    lines = {k: (float(line[k]) if applies else math.nan) for k in LINE_COLUMNS}
    exists = {b: bool(branch_exists(b, alpha, r.theta if b == "semantic" else r.m, r.converged, params.rho,
                                    line)) for b, r in branches.items()}
    live = [b for b in BRANCHES if exists[b]]
    global_branch = min(live, key=lambda b: branches[b].train_loss) if live else None
    rng = np.random.default_rng(seed)
    xi, eta = rng.standard_normal((n_samples, 2)), rng.standard_normal((n_samples, 2))
    mean_attention, diag_samples, eps_g_mc = {}, {}, {}
    for b, res in branches.items():
        S, T = _sample_maps(params, res, xi, eta)
        mean_attention[b] = S.mean(axis=0)
        diag_samples[b] = np.stack([T[:, 0, 0], S[:, 0, 0]], axis=1)
        eps_g_mc[b] = float(params.sigma**2 / 2 * np.mean(np.sum((S - T) ** 2, axis=(1, 2))))
    # teacher maps do not depend on the branch: h* ~ N(0, rho I_2)
    T = teacher_matrix(math.sqrt(params.rho) * eta, params)
    mean_attention = {"teacher": T.mean(axis=0), **mean_attention}
    return ExplorerView(params=params, alpha=float(alpha), branches=branches,
                        eps_lin=float(linear_baseline_error(params)), global_branch=global_branch,
                        mean_attention=mean_attention, diag_samples=diag_samples, eps_g_mc=eps_g_mc,
                        exists=exists, rule=RULE_TABLE if applies else RULE_FALLBACK, lines=lines,
                        phase=table, phase_source=source, phase_matches_params=applies)


def _sci(x: float) -> str:
    """``x`` as mathtext ``a \\times 10^{k}`` (three significant digits)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    k = int(math.floor(math.log10(abs(x))))
    return rf"{x / 10**k:.2f}\times 10^{{{k}}}"


def draw_explorer(view: ExplorerView, fig=None, title: bool = True):
    """Draw an :class:`ExplorerView` into a matplotlib figure (a new one unless ``fig`` is given), in the house
    style (:mod:`attnlib.style`): three rows of two panels at page width,

    (a) overlaps ``q``, ``m/sigma^2``, ``theta``; (b) test errors and the linear baseline; (c) the training-loss
    gap ``eps_t(semantic) - eps_t(positional)`` (negative: the semantic branch is the global minimum);
    (d) the phase diagram of the phase table (``alpha`` across, log scale; ``omega`` up, as in chapter 6) with
    the point; (e) the mean attention matrices; (f) per-sample diagonal attention entries. A branch that does
    not exist at the point (``view.exists``) is left out. ``title`` adds a line with the parameters.
    """
    import matplotlib as mpl
    import matplotlib.pyplot as plt

    from . import style

    with mpl.rc_context(style.RC):
        if fig is None:
            fig = plt.figure(figsize=style.figsize(2, 3, row_height=2.55))
        else:
            fig.clear()
        axes = fig.subplots(3, 2)
        _draw_panels(view, axes)
        style.panel_letters(axes)
        p = view.params
        if title:
            glob = view.global_branch or "neither branch exists"
            fig.suptitle(rf"$\omega={p.omega:.2f}$, $\alpha={view.alpha:.2f}$, $\sigma={p.sigma:.2f}$, "
                         rf"$\lambda={p.lam:.3g}$: global minimum {glob}", fontsize=10.5)
            fig.tight_layout(rect=(0, 0, 1, 0.97), h_pad=1.6)
        else:
            fig.tight_layout(h_pad=1.6)
    return fig


def _draw_panels(view: ExplorerView, axes) -> None:
    from . import style

    C = style.COLOURS
    p = view.params
    (ax_ov, ax_err), (ax_gap, ax_pd), (ax_map, ax_sc) = axes
    live = [b for b in BRANCHES if view.exists.get(b)]
    absent = [b for b in BRANCHES if b not in live]
    note = ", ".join(f"no {b} branch here" for b in absent)

    def label(b):
        return b + (" (global min.)" if b == view.global_branch else "")

    # (a) overlaps, m shown as m / sigma^2 as everywhere in the book
    x = np.arange(3)
    for k, b in enumerate(BRANCHES):
        if b in live:
            r = view.branches[b]
            vals = [r.q, r.m / p.sigma**2, r.theta]
            bars = ax_ov.bar(x + (k - 0.5) * 0.38, vals, 0.38, color=C[b], label=label(b))
            ax_ov.bar_label(bars, [f"{v:.2f}" for v in vals], fontsize=8, padding=1)
    ax_ov.set_xticks(x, ["$q$", r"$m/\sigma^2$", r"$\theta$"])
    ax_ov.set_ylabel("overlap")
    ax_ov.set_ylim(0, 1.75 * max([0.1] + [v.get_height() for v in ax_ov.patches]))
    ax_ov.set_title("overlaps of the fixed points" + (f"\n({note})" if note else ""))
    if live:
        ax_ov.legend(loc="upper right", fontsize=8)

    # (b) test errors and the linear baseline
    for k, b in enumerate(BRANCHES):
        if b in live:
            ax_err.bar(k, view.branches[b].test_error, 0.6, color=C[b])
    ax_err.axhline(view.eps_lin, color=C["linear"], ls="--", lw=1.2, label=r"linear baseline $\varepsilon_{\rm lin}$")
    ax_err.set_xticks(range(2), [label(b).replace(" (", "\n(") if b in live else f"{b}\n(no branch here)"
                                 for b in BRANCHES])
    ax_err.set_xlim(-0.7, 1.7)
    top = max([view.eps_lin] + [view.branches[b].test_error for b in live])
    ax_err.set_ylim(0, 1.4 * top)
    ax_err.set_ylabel(r"test error $\varepsilon_g$")
    ax_err.set_title("test error")
    ax_err.legend(loc="upper right", fontsize=8)

    # (c) training-loss gap: its sign says which branch is the global minimum
    gap = view.train_loss_gap
    ax_gap.axvline(0, color="k", lw=0.8)
    ax_gap.set_yticks([])
    ax_gap.set_xlabel(r"$\varepsilon_t(\mathrm{semantic}) - \varepsilon_t(\mathrm{positional})$")
    ax_gap.set_title("training-loss gap")
    if math.isfinite(gap):
        win = "semantic" if gap < 0 else "positional"
        k = int(math.floor(math.log10(abs(gap)))) if gap else 0        # the axis in units of 10^k
        ax_gap.barh(0, gap / 10**k, 0.5, color=C[win])
        half = 1.6 * abs(gap) / 10**k if gap else 1.0
        ax_gap.set_xlim(-half, half)
        ax_gap.set_ylim(-1, 1)
        ax_gap.set_xlabel(ax_gap.get_xlabel() + rf"  ($\times 10^{{{k}}}$)")
        ax_gap.text(0.03, 0.93, "semantic lower", transform=ax_gap.transAxes, ha="left", va="top",
                    color=C["semantic"], fontsize=9)
        ax_gap.text(0.97, 0.93, "positional lower", transform=ax_gap.transAxes, ha="right", va="top",
                    color=C["positional"], fontsize=9)
        ax_gap.text(0.5, 0.1, rf"${_sci(gap)}$", transform=ax_gap.transAxes, ha="center", va="bottom",
                    fontsize=9.5)
    else:
        ax_gap.set_xticks([])
        only = f"only the {live[0]} branch\nexists here" if live else "neither branch\nexists here"
        ax_gap.text(0.5, 0.5, only, transform=ax_gap.transAxes, ha="center", va="center", fontsize=9.5)

    # (d) the phase diagram of the phase table, as in chapter 6: alpha across (log), omega up
    _phase_panel(ax_pd, view)

    # (e) mean attention matrices (rows: query token; columns: key token)
    names = ["teacher"] + live
    mats = [view.mean_attention[k] for k in names]
    half = max(0.05, np.ceil(max(np.abs(M - 0.5).max() for M in mats) / 0.05) * 0.05)
    im = style.attention_mosaic(ax_map, [mats], col_labels=names, vmin=0.5 - half, vmax=0.5 + half,
                                fmt="{:.2f}", fontsize=9)
    ax_map.set_xlabel("key token")
    ax_map.set_ylabel("query token")
    ax_map.set_title("mean attention matrices", pad=16)
    ax_map.figure.colorbar(im, ax=ax_map, orientation="horizontal", fraction=0.08, pad=0.3,
                           label="mean attention weight")

    # (f) per-sample diagonal entries; the semantic cloud on top (it follows the teacher)
    for b in ("positional", "semantic"):
        if b in live:
            smp = view.diag_samples[b][:1500]
            ax_sc.plot(smp[:, 0], smp[:, 1], ".", ms=2, alpha=0.35, color=C[b], label=f"{b} student")
    allv = np.concatenate([view.diag_samples[b][:1500].ravel() for b in (live or BRANCHES)])
    lo, hi = max(0.0, np.quantile(allv, 0.002) - 0.03), min(1.0, np.quantile(allv, 0.998) + 0.03)
    ax_sc.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="$S_{11} = T_{11}$")
    ax_sc.set_xlim(lo, hi)
    ax_sc.set_ylim(lo, hi)
    ax_sc.set_xlabel(r"teacher $T_{11}$")
    ax_sc.set_ylabel(r"student $S_{11}$")
    ax_sc.set_title("per-sample attention")
    ax_sc.legend(loc="upper left", markerscale=5, fontsize=8)


def _phase_panel(ax, view: ExplorerView) -> None:
    """The phase diagram of the phase table, drawn as in chapter 6; the lines are labelled where they end at the
    top (the positional end at its highest row), the region where both branches exist by a small legend."""
    from . import style

    C = style.COLOURS
    p = view.params
    table = view.phase
    xlim = (0.25, 5.0)
    faded = {} if view.phase_matches_params else dict(alpha=0.35)
    labels = []                                   # (alpha, omega, text, colour, ha, va)

    def top_end(x, w):
        ok = np.isfinite(x)
        return (float(x[ok][-1]), float(w[ok][-1])) if ok.any() else None

    if table is not None and len(table):
        t = table.sort_values("omega")
        w = t.omega.to_numpy(dtype=float)
        if _END_COLUMNS <= set(t.columns):
            lines = phase_lines(t, w)
            sem_end = lines.semantic_end.to_numpy()
            pos_end = lines.positional_end.to_numpy()
            ax.fill_betweenx(w, sem_end, np.where(np.isfinite(pos_end), pos_end, xlim[1]), color="0.88",
                             lw=0, label="both exist", **faded)
            ax.plot(sem_end, w, "--", color=C["semantic"], label="semantic end", **faded)
            if (e := top_end(sem_end, w)):
                labels.append((e[0] / 1.04, e[1] + 0.012, "semantic end", C["semantic"], "right", "bottom"))
            ends = np.isfinite(pos_end)
            if ends.any():
                ax.plot(pos_end[ends], w[ends], "--", marker="o", ms=3, color=C["positional"],
                        label="positional end", **faded)
                e = top_end(pos_end, w)
                labels.append((e[0] * 1.06, e[1], "positional end", C["positional"], "left", "center"))
        alpha_c = t.alpha_c.to_numpy(dtype=float)
        ax.plot(alpha_c, w, "-", color="k", lw=1.6, label=r"$\alpha_c$", **faded)
        if (e := top_end(alpha_c, w)):
            labels.append((e[0], e[1] + 0.012, r"$\alpha_c$", "k", "center", "bottom"))
        if "alpha_l" in t:
            alpha_l = t.alpha_l.to_numpy(dtype=float)
            ax.plot(alpha_l, w, "-.", color="C2", lw=1.6, label=r"$\alpha_l$", **faded)
            if (e := top_end(alpha_l, w)):
                labels.append((e[0], e[1] + 0.012, r"$\alpha_l$", "C2", "center", "bottom"))
            # the region where both exist is labelled in its widest free stretch (right of every line)
            right = np.where(np.isfinite(pos_end), pos_end, xlim[1])
            others = [sem_end, t.alpha_c.to_numpy(dtype=float)] + ([t.alpha_l.to_numpy(dtype=float)] if "alpha_l" in t
                                                                    else [])
            left = np.nanmax(np.vstack(others), axis=0)
            free = np.where(np.isfinite(left) & (right > left), np.log(right / np.where(left > 0, left, np.nan)), -1)
            # prefer a row whose neighbours are wide as well (the fill is linear between rows)
            padded = np.concatenate([[-1.0], free, [-1.0]])
            wide = np.minimum(np.minimum(padded[:-2], padded[1:-1]), padded[2:])
            if np.nanmax(wide) > 0.4 or np.nanmax(free) > 0.4:
                k = int(np.nanargmax(wide)) if np.nanmax(wide) > 0.4 else int(np.nanargmax(free))
                labels.append((math.sqrt(left[k] * right[k]), w[k], "both exist", "0.3", "center", "center"))
        wmax = float(w.max())
    else:
        wmax = 0.45
    for x, y, text, colour, ha, va in labels:
        ax.text(x, y, text, color=colour, ha=ha, va=va, fontsize=9, gid="line-label", **faded)
    colour = C[view.global_branch] if view.global_branch else "white"
    ax.plot(view.alpha, p.omega, "*", ms=14, color=colour, mec="k", ls="none", zorder=10)
    style.plain_log_axis(ax, "x", ticks=(0.25, 0.5, 1, 2, 4))
    ax.set_xlim(*xlim)
    ax.set_ylim(-0.01, max(wmax + 0.08, p.omega + 0.03))
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel(r"positional weight $\omega$")
    ax.set_title("phase diagram" + ("" if view.phase_matches_params else " (table: $\\sigma=0.5$, $\\lambda=0.01$)"))


def _readout_html(view: ExplorerView) -> str:
    """HTML table of the numbers at the point (the widget's readout)."""
    s2 = view.params.sigma ** 2
    rows = []
    for b in BRANCHES:
        r = view.branches[b]
        name = b + (" (global minimum)" if b == view.global_branch else "")
        if view.exists[b]:
            cells = [f"{r.test_error:.5f}", f"{r.train_loss:.5f}", f"{r.q:.4f}", f"{r.m / s2:.4f}", f"{r.theta:.4f}"]
        else:
            cells = ["&mdash;"] * 4 + ["no branch here" if r.converged else "not converged"]
        rows.append(f"<tr><td style='text-align:left'>{name}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    rows.append(f"<tr><td style='text-align:left'>linear baseline</td><td>{view.eps_lin:.5f}</td>"
                "<td></td><td></td><td></td><td></td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("", "test error &epsilon;<sub>g</sub>",
                                             "training loss &epsilon;<sub>t</sub>", "q", "m/&sigma;&sup2;", "&theta;"))
    L = view.lines

    def val(k, name):
        return f"{name} = {L[k]:.3f}" if math.isfinite(L.get(k, math.nan)) else f"no {name}"

    if view.phase_matches_params:
        foot = (f"At &omega; = {view.params.omega:.2f}, from {view.phase_source}: "
                f"{val('alpha_c', '&alpha;<sub>c</sub>')}, "
                f"{val('alpha_l', '&alpha;<sub>l</sub>')}; the semantic branch exists above "
                f"&alpha; = {L['semantic_end']:.3f}, the positional one "
                + (f"below &alpha; = {L['positional_end']:.3f}." if math.isfinite(L["positional_end"])
                   else "up to the end of the table's range."))
    else:
        foot = view.rule[0].upper() + view.rule[1:] + "."
    return (f"<table style='border-collapse:collapse;text-align:right'><tr>{head}</tr>{''.join(rows)}</table>"
            f"<p>{foot}</p>")


def make_explorer(initial: bool = True, **defaults):
    """The ipywidgets explorer: sliders for omega, alpha, sigma and lambda, the figure of
    :func:`draw_explorer` and a readout of the numbers, recomputed when a slider is released (warm-started
    from the previous point).

    ``defaults`` override :data:`DEFAULTS`; ``initial=False`` skips the first computation.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import display

    v = {**DEFAULTS, **defaults}
    common = dict(continuous_update=False, style={"description_width": "60px"},
                  layout=widgets.Layout(width="320px"))
    sliders = {
        "omega": widgets.FloatSlider(value=v["omega"], min=0.0, max=1.0, step=0.02, description="omega",
                                     readout_format=".2f", **common),
        "alpha": widgets.FloatSlider(value=v["alpha"], min=0.25, max=4.0, step=0.05, description="alpha",
                                     readout_format=".2f", **common),
        "sigma": widgets.FloatSlider(value=v["sigma"], min=0.2, max=1.2, step=0.05, description="sigma",
                                     readout_format=".2f", **common),
        "lam": widgets.FloatLogSlider(value=v["lam"], base=10, min=-3, max=-0.5, step=0.1,
                                      description="lambda", readout_format=".3g", **common),
    }
    status = widgets.HTML(value="")
    readout = widgets.HTML(value="")
    out = widgets.Output()
    state = {"starts": {}, "phase": None}

    def update(change=None):
        status.value = "<i>solving the state evolution...</i>"
        vals = {k: s.value for k, s in sliders.items()}
        try:
            if state["phase"] is None:
                state["phase"] = phase_boundary()
            view = explorer_view(**vals, starts=state["starts"], phase=state["phase"])
        except Exception as exc:  # keep the widget alive on a failed point
            status.value = f"<b>failed:</b> {type(exc).__name__}: {exc}"
            return
        state["starts"] = {b: r.overlaps for b, r in view.branches.items() if r.converged}
        with out:
            out.clear_output(wait=True)
            fig = draw_explorer(view)
            display(fig)
            plt.close(fig)
        readout.value = _readout_html(view)
        unconv = [b for b, r in view.branches.items() if not r.converged]
        status.value = ("" if not unconv else f"<b>not converged:</b> {', '.join(unconv)}")

    for s in sliders.values():
        s.observe(update, names="value")
    box = widgets.VBox([widgets.HBox([sliders["omega"], sliders["alpha"]]),
                        widgets.HBox([sliders["sigma"], sliders["lam"]]), status, out, readout])
    box.update = update  # for programmatic refresh
    if initial:
        update()
    return box


# --------------------------------------------------------------------------------------------------------------
# The grid behind the static explorer of the published page
# --------------------------------------------------------------------------------------------------------------

#: ``omega`` values of the static explorer: 0 to 0.9 in steps of 0.05 (19 values); the book's page uses those
#: inside the rows of the phase table (:func:`table_omegas`), where it has thresholds and branch ends.
GRID_OMEGAS = tuple(float(w) for w in np.round(np.linspace(0.0, 0.9, 19), 4))
#: ``alpha`` values of the static explorer: 40 values, geometric from 0.25 to 5.
GRID_ALPHAS = tuple(float(a) for a in np.round(np.geomspace(0.25, 5.0, 40), 4))
#: Example inputs of the attention maps, as teacher pre-activations ``h*`` in units of ``sqrt(rho)``: token
#: contents of opposite sign (the teacher's content part attends to the own token) and of the same sign,
#: unequal (token 1 attends to token 2).
EXAMPLE_INPUTS = ((1.5, -1.5), (0.5, 2.0))
#: Rule of the two-dimensional Gaussian averages of the attention maps (smooth integrands).
_MAP_RULE = Quadrature("gauss-hermite", 40)


def attention_maps(params: TaskParams, q, m, theta, examples=EXAMPLE_INPUTS) -> dict:
    """Mean attention of a student with overlaps ``(q, m, theta)`` and of the teacher, over all inputs and on
    example inputs.

    In the Gaussian representation (spec section 2) the student's and the teacher's pre-activations are
    ``h = sqrt(q) xi + m s`` and ``h* ~ N(0, rho I_2)`` with ``Cov(h_l, h*_l) = theta``, so given the teacher's
    ``h*`` the student's ``h`` is Gaussian, ``h | h* ~ N(m s + (theta/rho) h*, (q - theta^2/rho) I_2)``.
    An example input is given by its ``h* = sqrt(rho) z`` (``z`` in ``examples``); on it the teacher attends
    with ``T(h*)`` and the student, on average over what its ``h`` does not share with ``h*``, with
    ``E[S(h) | h*]``. A 2x2 attention matrix is row-stochastic, so only its diagonal is returned.

    ``q``, ``m``, ``theta`` may be arrays of one shape ``(...)`` (one student each).

    Returns
    -------
    dict
        ``"S_mean"`` ``(..., 2)``: ``E[S_11], E[S_22]``; ``"S_ex"`` ``(..., k, 2)``: ``E[S | h*]`` on the ``k``
        examples; ``"T_mean"`` ``(2,)``: ``E[T_11], E[T_22]``; ``"T_ex"`` ``(k, 2)``: ``T(h*)`` on the examples.
    """
    q, m, theta = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (q, m, theta)))
    if np.any(~np.isfinite(q) | ~np.isfinite(m) | ~np.isfinite(theta)) or np.any(q < 0):
        raise ValueError("q, m and theta must be finite, with q in [0, inf)")
    rho = params.rho
    if np.any(theta**2 > rho * q * (1 + 1e-9) + 1e-300):
        raise ValueError("overlaps must satisfy theta^2 <= rho q (Cauchy-Schwarz)")
    z = np.asarray(examples, dtype=float).reshape(-1, 2)
    h_star_ex = math.sqrt(rho) * z                                     # (k, 2)
    x, w = _MAP_RULE.points(2)                                          # (N, 2), (N,)
    s = POSITION_SIGNS
    e = (...,) + (None,) * 2                                            # broadcast the overlaps over (N, 2)
    h = np.sqrt(q)[e] * x + m[e] * s                                    # (..., N, 2)
    S_mean = np.einsum("...nl,n->...l", attention_diagonal(h), w)
    resid = np.sqrt(np.maximum(q - theta**2 / rho, 0.0))
    e3 = (...,) + (None,) * 3
    h_ex = (m[e3] * s + (theta / rho)[e3] * h_star_ex[:, None, :]
            + resid[e3] * x[None, :, :])                                # (..., k, N, 2)
    S_ex = np.einsum("...knl,n->...kl", attention_diagonal(h_ex), w)
    T_mean = w @ teacher_diagonal(math.sqrt(rho) * x, params)
    T_ex = teacher_diagonal(h_star_ex, params)
    return {"S_mean": S_mean, "S_ex": S_ex, "T_mean": T_mean, "T_ex": T_ex}


def _defining_overlap(df: pd.DataFrame) -> np.ndarray:
    return np.where(df.branch == "semantic", df.theta.abs(), df.m.abs())


def explorer_grid(omegas=GRID_OMEGAS, alphas=GRID_ALPHAS, sigma: float = 0.5, lam: float = 0.01,
                  A=STANDARD_A, solver: SESolver | None = None, examples=EXAMPLE_INPUTS, n_jobs: int = 2,
                  use_cache: bool = True, phase: pd.DataFrame | None = None) -> pd.DataFrame:
    """Both branches of the state evolution on an ``omega x alpha`` grid, with what the explorer shows.

    For each ``omega`` the semantic and the positional branch are followed along ``alphas`` with warm starts
    by :func:`attnlib.alpha_sweep` (every branch curve cached on disk under all parameters and the library
    fingerprint; the ``2 x len(omegas)`` curves run in parallel through joblib with ``n_jobs`` workers). To each
    fixed point are added the linear baseline ``eps_lin``, the thresholds and branch ends of the phase table at
    its ``omega`` (``phase``, by default :func:`phase_boundary`; :func:`phase_lines`), whether the branch
    exists there (:func:`branch_exists`: inside its range in the table), whether it is the global minimum, and
    its attention maps (:func:`attention_maps`).

    Where the table does not apply (:func:`table_applies`: other ``sigma``, ``lambda`` or ``A``) the lines are
    NaN and a branch exists wherever its fixed point converged with its overlap not collapsed (``found``).

    Returns
    -------
    pandas.DataFrame
        One row per ``(omega, alpha, branch)``: ``omega, alpha, branch, q, m, theta, test_error, train_loss,
        converged, sigma, lam``, ``found`` (converged, defining overlap not collapsed), ``exists``,
        ``is_global``, ``eps_lin``, ``alpha_c, alpha_l, semantic_end, positional_end`` (NaN: none), the mean
        attention diagonals ``S11_mean, S22_mean`` (student) and ``T11_mean, T22_mean`` (teacher), and for each
        example ``j`` ``S11_ex{j}, S22_ex{j}, T11_ex{j}, T22_ex{j}``; sorted by ``omega, branch, alpha``.
        ``is_global`` marks the existing branch of lower training loss at each point.

    Raises
    ------
    ValueError
        If ``omegas`` is empty, or the table applies but some ``omega`` lies outside its rows (restrict the grid
        with :func:`table_omegas`).
    """
    omegas = np.atleast_1d(np.asarray(omegas, dtype=float))
    if omegas.size == 0:
        raise ValueError("omegas must contain at least one value")
    params_of = {float(w): TaskParams(sigma=float(sigma), lam=float(lam), omega=float(w), A=A) for w in omegas}
    if phase is None:
        phase = phase_boundary()[0]
    applies = table_applies(phase, next(iter(params_of.values())))
    if applies and not _covered(omegas, phase).all():
        raise ValueError(f"omegas {sorted(set(omegas) - set(table_omegas(omegas, phase)))} lie outside the phase "
                         f"table's rows ({phase.omega.min():g} to {phase.omega.max():g}): use table_omegas")
    lines = phase_lines(phase, omegas).set_index("omega") if applies else None
    tasks = [(w, b) for w in params_of for b in BRANCHES]

    def one(w, b):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return alpha_sweep(params_of[w], alphas, branches=(b,), solver=solver, use_cache=use_cache)

    # one task per (omega, branch), so that both workers stay busy (branch curves take unequal times)
    curves = (Parallel(n_jobs=n_jobs)(delayed(one)(w, b) for w, b in tasks) if n_jobs != 1
              else [one(w, b) for w, b in tasks])
    parts = []
    for w, params in params_of.items():
        df = pd.concat([c for (cw, _), c in zip(tasks, curves) if cw == w], ignore_index=True)
        df = df[["omega", "alpha", "branch", "q", "m", "theta", "test_error", "train_loss", "converged",
                 "sigma", "lam"]].copy()
        df["converged"] = df["converged"].astype(bool)
        line = lines.loc[w] if applies else None
        df["found"] = branch_exists("semantic", df.alpha, _defining_overlap(df), df.converged, params.rho)
        df["exists"] = False
        for b in BRANCHES:
            sel = (df.branch == b).to_numpy()
            df.loc[sel, "exists"] = branch_exists(b, df.alpha[sel], _defining_overlap(df)[sel],
                                                  df.converged[sel], params.rho, line)
        df["exists"] = df["exists"].astype(bool)
        for k in LINE_COLUMNS:
            df[k] = float(line[k]) if applies else np.nan
        df["eps_lin"] = linear_baseline_error(params)
        maps = attention_maps(params, df.q.to_numpy(), df.m.to_numpy(), df.theta.to_numpy(), examples)
        df["S11_mean"], df["S22_mean"] = maps["S_mean"][:, 0], maps["S_mean"][:, 1]
        df["T11_mean"], df["T22_mean"] = maps["T_mean"][0], maps["T_mean"][1]
        for j in range(maps["T_ex"].shape[0]):
            df[f"S11_ex{j}"], df[f"S22_ex{j}"] = maps["S_ex"][:, j, 0], maps["S_ex"][:, j, 1]
            df[f"T11_ex{j}"], df[f"T22_ex{j}"] = maps["T_ex"][j, 0], maps["T_ex"][j, 1]
        parts.append(df)
    grid = pd.concat(parts, ignore_index=True)
    loss = grid.train_loss.where(grid.exists, np.inf)
    best = loss.groupby([grid.omega, grid.alpha]).transform("min")
    grid["is_global"] = grid.exists & (loss == best)
    # a tie (equal losses to the last digit) keeps the semantic branch only
    dup = grid[grid.is_global].duplicated(["omega", "alpha"], keep="first")
    grid.loc[dup[dup].index, "is_global"] = False
    return grid.sort_values(["omega", "branch", "alpha"]).reset_index(drop=True)


def _crossing(x: np.ndarray, f: np.ndarray) -> float:
    """First sign change of ``f`` from + to - along increasing ``x`` (both finite there), linearly
    interpolated in ``log x``; NaN if there is none."""
    for i in range(len(x) - 1):
        if np.isfinite(f[i]) and np.isfinite(f[i + 1]) and f[i] > 0 >= f[i + 1]:
            t = f[i] / (f[i] - f[i + 1])
            return float(np.exp(np.log(x[i]) + t * np.log(x[i + 1] / x[i])))
    return math.nan


def grid_thresholds(grid: pd.DataFrame) -> pd.DataFrame:
    """``alpha_c`` and ``alpha_l`` at each ``omega``, read off an :func:`explorer_grid` table.

    ``alpha_c``: the first sign change (+ to -) of ``eps_t(semantic) - eps_t(positional)`` where both branches
    exist; ``alpha_l``: the first where the global minimum's ``eps_g`` falls below ``eps_lin``. Both are
    linearly interpolated in ``log alpha`` between grid points (the grid's resolution, not Brent's
    refinement of :func:`attnlib.critical_alpha`); NaN where there is no crossing on the grid.
    """
    rows = []
    for w, g in grid.groupby("omega", sort=True):
        sem = g[g.branch == "semantic"].set_index("alpha").sort_index()
        pos = g[g.branch == "positional"].set_index("alpha").sort_index()
        a = sem.index.to_numpy()
        both = (sem.exists & pos.exists).to_numpy()
        gap = np.where(both, (sem.train_loss - pos.train_loss).to_numpy(), np.nan)
        glob = g[g.is_global].groupby("alpha").first().reindex(a)
        above_lin = (glob.test_error - glob.eps_lin).to_numpy()
        rows.append(dict(omega=float(w), alpha_c=_crossing(a, gap), alpha_l=_crossing(a, above_lin)))
    return pd.DataFrame(rows)

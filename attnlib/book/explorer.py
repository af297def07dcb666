"""Interactive explorer of the state-evolution solution (book chapter 9).

Three layers, so that the static book page and the live widget draw the same thing:

* :func:`explorer_view` computes the view data of one parameter point ``(omega, alpha, sigma, lambda)``:
  both fixed points of the state evolution (semantic and positional, as :func:`attnlib.alpha_sweep` finds them),
  which of them exist there and which is the global minimum, the linear baseline, the attention maps the
  overlaps imply (sampled from the Gaussian representation of book :eq:`eq-gaussian-fields`: ``h = sqrt(q) xi + m s``,
  ``h* = (theta/sqrt(q)) xi + sqrt(rho - theta^2/q) eta``) and the phase diagram to place the point in;
* :func:`draw_explorer` draws an :class:`ExplorerView` into a matplotlib figure (house style,
  :mod:`attnlib.book.style`);
* :func:`make_explorer` returns an ipywidgets widget (sliders + the figure + a readout) that recomputes the
  view when a slider is released (it needs a running kernel: Binder, Thebe or a local Jupyter).

For the published (static) page, :mod:`attnlib.book.explorer_grid` precomputes the same on a grid, and
:mod:`attnlib.book.static_explorer` embeds it in the page.

Thresholds and branch ends come from the phase table of chapter 6 (:mod:`attnlib.book.phase_table`), never
from the explorer's own solutions; where the table does not apply (other ``sigma``, ``lambda`` or ``A``, or
``omega`` outside its rows) the widget falls back to the fixed points alone and says so.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..theory.model.attention import attention_matrix, teacher_matrix
from ..theory.model.generalisation import linear_baseline_error
from ..params import TaskParams
from ..theory.solve.dispatch import solve_state_evolution
from ..theory.model.state_evolution import SEResult, SESolver
from ..theory.solve.branch_points import follow_branch
from .phase_table import (BRANCHES, END_COLUMNS, LINE_COLUMNS, branch_exists, phase_boundary, phase_lines,
                          table_applies, table_covers)

__all__ = ["DEFAULTS", "EXPLORER_SOLVER", "ExplorerView", "explorer_view", "draw_explorer", "make_explorer"]

#: Default parameter point of the explorer (the paper's running example, between alpha_c and alpha_l).
DEFAULTS = dict(omega=0.3, alpha=1.5, sigma=0.5, lam=0.01)
#: Solver of the explorer: None, the library's default rule (pooled scrambled Sobol rules, about a second per
#: fixed point; the numbers of the other chapters and of the static grid). A single rule (an SESolver) is
#: faster but off by up to 3 % in q on the positional branch (Gauss-Hermite 12; an 8-point rule moves m by
#: ~10 % at the default point).
EXPLORER_SOLVER: SESolver | None = None
BRANCH_COLOURS = {"semantic": "C0", "positional": "C3"}  # house style (attnlib.book.style.COLOURS)
RULE_TABLE = "branch ends and thresholds from the phase table (chapter 6)"
RULE_FALLBACK = ("no phase table for these parameters: a branch counts as present where its fixed point "
                 "converged with its overlap not collapsed")



# --------------------------------------------------------------------------------------------------------------
# One point: the view of the live widget
# --------------------------------------------------------------------------------------------------------------

@dataclass
class ExplorerView:
    """Everything the explorer shows at one parameter point.

    ``branches`` maps "semantic"/"positional" to their :class:`SEResult`; ``exists`` maps them to whether the
    branch exists there (``branch_exists``, by ``rule``); ``global_branch`` is the existing one of lower
    training loss (None if neither exists). ``mean_attention`` maps "teacher", "semantic", "positional" to the
    mean 2x2 attention matrix over the input distribution; ``diag_samples`` maps each branch to an array
    ``(n, 2)`` of sampled ``(T_11, S_11)`` pairs; ``eps_g_mc`` is the Monte-Carlo test error of each branch from
    the same samples (a check of the sampled maps against ``SEResult.test_error``). ``phase`` is the phase
    table (``phase_boundary``), ``phase_source`` where it comes from, ``phase_matches_params`` whether it
    applies to this point (``table_applies``, and ``omega`` within its rows) and ``lines`` the thresholds
    and branch ends at this ``omega`` (``phase_lines``; NaN where the table does not apply).
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

    ``solver`` defaults to ``EXPLORER_SOLVER`` (None: the default rule of :func:`attnlib.solve_state_evolution`;
    an :class:`~attnlib.theory.model.state_evolution.SESolver`: its single rule, as a sweep follows it); ``starts`` may map a branch to warm-start overlaps;
    ``phase`` may give ``(table, source)`` to skip ``phase_boundary``. The same ``(xi, eta)`` samples
    (``seed``) are used for both branches.
    """
    params = TaskParams(sigma=float(sigma), lam=float(lam), omega=float(omega))
    solver = solver or EXPLORER_SOLVER
    starts = starts or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        branches = {b: (solve_state_evolution(params, float(alpha), b, start=starts.get(b)) if solver is None
                        else follow_branch(params, float(alpha), b, starts.get(b), solver))
                    for b in BRANCHES}
    table, source = phase if phase is not None else phase_boundary()
    applies = table_applies(table, params) and bool(table_covers([params.omega], table)[0])
    line = phase_lines(table, [params.omega]).iloc[0] if applies else None
    lines = {k: (float(line[k]) if applies else math.nan) for k in LINE_COLUMNS}
    # on the branch by the fixed point's own verdict (converged, its defining overlap present and above its
    # error: ``SEResult.status``), and inside the branch's range of the phase table where that applies
    exists = {b: bool(branch_exists(b, alpha, r.theta if b == "semantic" else r.m, r.status == "on-branch",
                                    params.rho, line)) for b, r in branches.items()}
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
    style (``attnlib.book.style``): three rows of two panels at page width,

    (a) overlaps ``q``, ``m/sigma^2``, ``theta/sigma^2``; (b) test errors and the linear baseline; (c) the training-loss
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

    # (a) overlaps, m and theta shown as m / sigma^2 and theta / sigma^2 as everywhere in the book
    x = np.arange(3)
    for k, b in enumerate(BRANCHES):
        if b in live:
            r = view.branches[b]
            vals = [r.q, r.m / p.sigma**2, r.theta / p.sigma**2]
            bars = ax_ov.bar(x + (k - 0.5) * 0.38, vals, 0.38, color=C[b], label=label(b))
            ax_ov.bar_label(bars, [f"{v:.2f}" for v in vals], fontsize=8, padding=1)
    ax_ov.set_xticks(x, ["$q$", r"$m/\sigma^2$", r"$\theta/\sigma^2$"])
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
    ax_sc.set_ylim(lo, hi + 0.35 * (hi - lo))   # head room above the cloud for the legend
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
        if END_COLUMNS <= set(t.columns):
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


def _four_digits(x: float) -> str:
    """``x`` to four significant digits; an exact zero (a symmetry of the branch) as ``0``."""
    return "0" if x == 0 else f"{x:#.4g}"


def _readout_html(view: ExplorerView) -> str:
    """HTML table of the numbers at the point (the widget's readout)."""
    s2 = view.params.sigma ** 2
    rows = []
    for b in BRANCHES:
        r = view.branches[b]
        name = b + (" (global minimum)" if b == view.global_branch else "")
        if view.exists[b]:
            cells = [_four_digits(v) for v in (r.test_error, r.train_loss, r.q, r.m / s2, r.theta / s2)]
        else:
            cells = ["&mdash;"] * 4 + ["no branch here" if r.converged else "not converged"]
        rows.append(f"<tr><td style='text-align:left'>{name}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    rows.append(f"<tr><td style='text-align:left'>linear baseline</td><td>{_four_digits(view.eps_lin)}</td>"
                "<td></td><td></td><td></td><td></td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("", "test error &epsilon;<sub>g</sub>",
                                             "training loss &epsilon;<sub>t</sub>", "q", "m/&sigma;&sup2;", "&theta;/&sigma;&sup2;"))
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

    ``defaults`` override ``DEFAULTS``; ``initial=False`` skips the first computation.
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

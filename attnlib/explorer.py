"""Interactive explorer of the state-evolution solution (book chapter 8).

Three layers, so that the static book page and the live widget draw the same thing:

* :func:`explorer_view` computes the view data of one parameter point ``(omega, alpha, sigma, lambda)``:
  both fixed points of the state evolution (semantic and positional, :func:`attnlib.solve_state_evolution`),
  the linear baseline, the attention maps the overlaps imply (sampled from the Gaussian representation of
  spec section 2: ``h = sqrt(q) xi + m s``, ``h* = (theta/sqrt(q)) xi + sqrt(rho - theta^2/q) eta``) and the
  phase boundary ``alpha_c(omega)`` to place the point in the phase diagram;
* :func:`draw_explorer` draws an :class:`ExplorerView` into a matplotlib figure;
* :func:`make_explorer` returns an ipywidgets widget (sliders + the figure) that recomputes the view when a
  slider is released (it needs a running kernel: Binder, Thebe or a local Jupyter).

For the published (static) page, :func:`explorer_grid` precomputes both branches on an ``omega x alpha`` grid
(one tidy table, through :func:`attnlib.alpha_sweep`, cached), with the attention maps of
:func:`attention_maps`; :func:`grid_thresholds` reads ``alpha_c`` and ``alpha_l`` off that grid, and
:mod:`attnlib.static_explorer` embeds the table in the page, where plain JavaScript draws it.

The phase boundary is read from ``phase_diagram_standard.csv`` (or ``phase_standard.csv``) in the book's data
folder (:func:`attnlib.book_data_dir`) when that file exists (columns ``omega``, ``alpha_c`` and optionally
``alpha_l``; computed for sigma = 0.5, lambda = 0.01, standard A); otherwise :func:`coarse_phase_boundary` computes ``alpha_c`` at a few ``omega`` on a coarse ``alpha`` grid (a minute or
two, memoised).
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

__all__ = ["DEFAULTS", "EXPLORER_SOLVER", "PHASE_DIAGRAM_CSV", "ExplorerView", "explorer_view",
           "draw_explorer", "make_explorer", "phase_boundary", "coarse_phase_boundary",
           "GRID_OMEGAS", "GRID_ALPHAS", "EXAMPLE_INPUTS", "attention_maps", "explorer_grid", "grid_thresholds"]

#: Default parameter point of the explorer (the paper's running example, between alpha_c and alpha_l).
DEFAULTS = dict(omega=0.3, alpha=1.5, sigma=0.5, lam=0.01)
#: Solver of the explorer: the library default (12-point Gauss-Hermite rule per dimension, a few seconds per
#: point). A cheaper 8-point rule moves the positional fixed point by ~10 % (m 0.231 instead of 0.258 at the
#: default point: the proximal point jumps between minima across the nodes), so it is not used.
EXPLORER_SOLVER = SESolver()
#: Phase diagram of book chapter 6 (if present; in the book's data folder, :func:`attnlib.book_data_dir`);
#: the first existing of these file names is used.
PHASE_DIAGRAM_CSV = "phase_diagram_standard.csv"
PHASE_DIAGRAM_CSV_ALTERNATIVES = (PHASE_DIAGRAM_CSV, "phase_standard.csv")
#: Parameters the phase-diagram CSV was computed for.
PHASE_DIAGRAM_PARAMS = dict(sigma=0.5, lam=0.01)

BRANCH_COLOURS = {"semantic": "tab:blue", "positional": "tab:red"}  # house style: C0 and C3


@dataclass
class ExplorerView:
    """Everything the explorer shows at one parameter point.

    ``branches`` maps "semantic"/"positional" to their :class:`SEResult`; ``global_branch`` is the one with
    the lower training loss. ``mean_attention`` maps "teacher", "semantic", "positional" to the mean 2x2
    attention matrix over the input distribution; ``diag_samples`` maps each branch to an array
    ``(n, 2)`` of sampled ``(T_11, S_11)`` pairs; ``eps_g_mc`` is the Monte-Carlo test error of each branch
    from the same samples (a check of the sampled maps against ``SEResult.test_error``). ``phase`` is the
    table of the phase boundary (columns ``omega``, ``alpha_c``, optionally ``alpha_l``) and
    ``phase_source`` says where it comes from.
    """

    params: TaskParams
    alpha: float
    branches: dict
    eps_lin: float
    global_branch: str
    mean_attention: dict
    diag_samples: dict
    eps_g_mc: dict
    phase: pd.DataFrame | None = None
    phase_source: str = ""
    phase_matches_params: bool = True
    extra: dict = field(default_factory=dict)


def _sample_maps(params: TaskParams, res: SEResult, xi: np.ndarray, eta: np.ndarray):
    """Student and teacher attention matrices at sampled inputs, from the overlaps of one fixed point."""
    rho = params.rho
    s = np.array([1.0, -1.0])
    q, m, theta = res.q, res.m, res.theta
    h = math.sqrt(q) * xi + m * s
    resid = max(rho - theta**2 / q, 0.0)
    h_star = (theta / math.sqrt(q)) * xi + math.sqrt(resid) * eta
    return attention_matrix(h), teacher_matrix(h_star, params)


def phase_boundary(csv_path: Path | str | None = None) -> tuple[pd.DataFrame, str]:
    """The phase boundary: the CSV of chapter 6 if it exists and is readable, else the coarse fallback.

    Returns the table (``omega``, ``alpha_c`` and possibly ``alpha_l``) and a description of its source.
    """
    if csv_path is not None:
        paths = [Path(csv_path)]
    else:
        try:
            folder = book_data_dir()
        except FileNotFoundError:
            folder = None
        paths = [folder / n for n in PHASE_DIAGRAM_CSV_ALTERNATIVES] if folder is not None else []
    for path in paths:
        if not path.is_file():
            continue
        try:
            df = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.ParserError):
            continue
        if {"omega", "alpha_c"} <= set(df.columns) and df["alpha_c"].notna().any():
            keep = [c for c in ("omega", "alpha_c", "alpha_l") if c in df.columns]
            return df[keep].sort_values("omega").reset_index(drop=True), f"{path.name} (chapter 6)"
    return coarse_phase_boundary(), "coarse fallback (6 alphas per omega, interpolated)"


@functools.lru_cache(maxsize=4)
def coarse_phase_boundary(sigma: float = 0.5, lam: float = 0.01,
                          omegas: tuple = (0.0, 0.15, 0.3, 0.4)) -> pd.DataFrame:
    """``alpha_c(omega)`` at a few ``omega``: both branches (default solver, warm-started along ``alpha``;
    the semantic one downwards from large ``alpha``) on a coarse grid of 6 ``alpha``, and log-linear
    interpolation of the training-loss gap at its sign change (a sketch good to a few hundredths; about a
    minute or two; memoised). A 6- or 8-point quadrature would be faster but is not accurate enough on the
    positional branch (see :data:`EXPLORER_SOLVER`)."""
    solver = SESolver()
    alphas = np.geomspace(0.4, 2.6, 6)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for w in omegas:
            p = TaskParams(sigma=sigma, lam=lam, omega=float(w))
            et = {}
            for b in ("semantic", "positional"):
                start, vals = None, {}
                for a in (alphas[::-1] if b == "semantic" else alphas):
                    r = solve_state_evolution(p, float(a), b, solver=solver, start=start)
                    start = r.overlaps if r.converged else None
                    vals[float(a)] = r.train_loss if r.converged else np.nan
                et[b] = np.array([vals[float(a)] for a in alphas])
            gap = et["semantic"] - et["positional"]
            ac = np.nan
            for i in range(len(alphas) - 1):
                if gap[i] > 0 >= gap[i + 1]:
                    t = gap[i] / (gap[i] - gap[i + 1])
                    ac = float(np.exp(np.log(alphas[i]) + t * np.log(alphas[i + 1] / alphas[i])))
                    break
            rows.append(dict(omega=float(w), alpha_c=ac))
    return pd.DataFrame(rows)


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
                    for b in ("semantic", "positional")}
    global_branch = min(branches, key=lambda b: branches[b].train_loss)
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
    table, source = phase if phase is not None else phase_boundary()
    matches = all(math.isclose(getattr(params, k), v) for k, v in PHASE_DIAGRAM_PARAMS.items())
    return ExplorerView(params=params, alpha=float(alpha), branches=branches,
                        eps_lin=float(linear_baseline_error(params)), global_branch=global_branch,
                        mean_attention=mean_attention, diag_samples=diag_samples, eps_g_mc=eps_g_mc,
                        phase=table, phase_source=source, phase_matches_params=matches)


def _matrix_panel(ax, M: np.ndarray, title: str) -> None:
    ax.imshow(M, vmin=0.2, vmax=0.8, cmap="viridis")
    for i in range(2):
        for j in range(2):
            ax.text(j, i, f"{M[i, j]:.3f}", ha="center", va="center",
                    color="white" if M[i, j] < 0.55 else "black", fontsize=10)
    ax.set_xticks([0, 1], ["tok 1", "tok 2"])
    ax.set_yticks([0, 1], ["tok 1", "tok 2"])
    ax.set_title(title, fontsize=10)


def draw_explorer(view: ExplorerView, fig=None):
    """Draw an :class:`ExplorerView` into a matplotlib figure (a new one unless ``fig`` is given)."""
    import matplotlib.pyplot as plt

    if fig is None:
        fig = plt.figure(figsize=(12, 7.4))
    else:
        fig.clear()
    p, sem, pos = view.params, view.branches["semantic"], view.branches["positional"]
    gs = fig.add_gridspec(2, 12, hspace=0.45, wspace=2.0)
    ax_ov, ax_err, ax_pd = fig.add_subplot(gs[0, 0:4]), fig.add_subplot(gs[0, 4:8]), fig.add_subplot(gs[0, 8:12])
    ax_T, ax_S, ax_P = fig.add_subplot(gs[1, 0:3]), fig.add_subplot(gs[1, 3:6]), fig.add_subplot(gs[1, 6:9])
    ax_sc = fig.add_subplot(gs[1, 9:12])

    # overlaps
    x = np.arange(3)
    for k, (b, r) in enumerate(view.branches.items()):
        vals = [r.q, r.m, r.theta]
        ax_ov.bar(x + (k - 0.5) * 0.38, vals, 0.38, color=BRANCH_COLOURS[b], label=b)
    ax_ov.set_xticks(x, ["$q$", "$m$", r"$\theta$"])
    ax_ov.set_title("overlaps at the fixed points", fontsize=10)
    ax_ov.legend(fontsize=8, frameon=False)

    # errors
    x = np.arange(2)
    for k, (b, r) in enumerate(view.branches.items()):
        ax_err.bar(x + (k - 0.5) * 0.38, [r.test_error, r.train_loss], 0.38, color=BRANCH_COLOURS[b],
                   label=b + (" (global min.)" if b == view.global_branch else ""))
    ax_err.axhline(view.eps_lin, color="k", ls="--", lw=1, label=r"linear $\varepsilon_{\rm lin}$")
    ax_err.set_xticks(x, [r"$\varepsilon_g$", r"$\varepsilon_t$"])
    ax_err.set_title("test error and training loss", fontsize=10)
    ax_err.legend(fontsize=7, frameon=False, loc="upper left")
    ax_err.set_ylim(0, 1.35 * max(sem.test_error, pos.test_error, sem.train_loss, pos.train_loss, view.eps_lin))

    # phase diagram
    if view.phase is not None and len(view.phase):
        ph = view.phase
        style = dict(lw=1.8) if view.phase_matches_params else dict(lw=1.2, alpha=0.45)
        ax_pd.plot(ph.omega, ph.alpha_c, "k-", label=r"$\alpha_c(\omega)$", **style)
        if "alpha_l" in ph:
            ax_pd.plot(ph.omega, ph.alpha_l, "k:", label=r"$\alpha_l(\omega)$", **style)
        top = max(float(np.nanmax(ph.alpha_c)) * 1.25, view.alpha * 1.1)
        ax_pd.fill_between(ph.omega, ph.alpha_c, top, color=BRANCH_COLOURS["semantic"], alpha=0.12, lw=0)
        ax_pd.fill_between(ph.omega, 0, ph.alpha_c, color=BRANCH_COLOURS["positional"], alpha=0.12, lw=0)
        ax_pd.set_ylim(0, top)
    ax_pd.plot([p.omega], [view.alpha], marker="*", ms=16, color=BRANCH_COLOURS[view.global_branch],
               mec="k", ls="none", label=f"this point: {view.global_branch}")
    ax_pd.set_xlim(0, max(0.5, p.omega + 0.05))
    if view.phase is None or not len(view.phase):
        ax_pd.set_ylim(0, max(3.0, 1.1 * view.alpha))
    ax_pd.set_xlabel(r"$\omega$")
    ax_pd.set_ylabel(r"$\alpha$")
    note = "" if view.phase_matches_params else "\n(boundary for $\\sigma=0.5,\\lambda=0.01$)"
    ax_pd.set_title("phase diagram" + note, fontsize=10)
    ax_pd.legend(fontsize=7, frameon=False, loc="upper left")

    _matrix_panel(ax_T, view.mean_attention["teacher"], r"teacher $\mathbb{E}[T]$")
    _matrix_panel(ax_S, view.mean_attention["semantic"], r"semantic $\mathbb{E}[S]$")
    _matrix_panel(ax_P, view.mean_attention["positional"], r"positional $\mathbb{E}[S]$")

    for b, smp in view.diag_samples.items():
        ax_sc.plot(smp[:1500, 0], smp[:1500, 1], ".", ms=2, alpha=0.4, color=BRANCH_COLOURS[b], label=b)
    allv = np.concatenate([s[:1500].ravel() for s in view.diag_samples.values()])
    lo, hi = max(0.0, np.quantile(allv, 0.002) - 0.03), min(1.0, np.quantile(allv, 0.998) + 0.03)
    ax_sc.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax_sc.set_xlim(lo, hi)
    ax_sc.set_ylim(lo, hi)
    ax_sc.set_xlabel("teacher $T_{11}$")
    ax_sc.set_ylabel("student $S_{11}$")
    ax_sc.set_title("per-sample attention", fontsize=10)
    ax_sc.legend(fontsize=7, frameon=False, markerscale=4, loc="lower right")

    fig.suptitle(rf"$\omega={p.omega:.2f}$, $\alpha={view.alpha:.2f}$, $\sigma={p.sigma:.2f}$, "
                 rf"$\lambda={p.lam:.3g}$:   semantic $\varepsilon_g={sem.test_error:.5f}$, "
                 rf"positional $\varepsilon_g={pos.test_error:.5f}$", fontsize=11)
    return fig


def make_explorer(initial: bool = True, **defaults):
    """The ipywidgets explorer: sliders for omega, alpha, sigma and lambda, and the figure of
    :func:`draw_explorer`, recomputed when a slider is released (warm-started from the previous point).

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
        unconv = [b for b, r in view.branches.items() if not r.converged]
        status.value = ("" if not unconv else f"<b>not converged:</b> {', '.join(unconv)} (last iterate shown)")

    for s in sliders.values():
        s.observe(update, names="value")
    box = widgets.VBox([widgets.HBox([sliders["omega"], sliders["alpha"]]),
                        widgets.HBox([sliders["sigma"], sliders["lam"]]), status, out])
    box.update = update  # for programmatic refresh
    if initial:
        update()
    return box


# --------------------------------------------------------------------------------------------------------------
# The grid behind the static explorer of the published page
# --------------------------------------------------------------------------------------------------------------

#: ``omega`` values of the static explorer: 0 to 0.9 in steps of 0.05 (19 values).
GRID_OMEGAS = tuple(float(w) for w in np.round(np.linspace(0.0, 0.9, 19), 4))
#: ``alpha`` values of the static explorer: 40 values, geometric from 0.25 to 5.
GRID_ALPHAS = tuple(float(a) for a in np.round(np.geomspace(0.25, 5.0, 40), 4))
#: Example inputs of the attention maps, as teacher pre-activations ``h*`` in units of ``sqrt(rho)``: token
#: contents of opposite sign (the teacher's content part attends to the own token) and of the same sign,
#: unequal (token 1 attends to token 2).
EXAMPLE_INPUTS = ((1.5, -1.5), (0.5, 2.0))
#: A branch whose defining overlap (``theta`` semantic, ``m`` positional) is below this times ``rho`` has
#: merged with the uninformed fixed point: the branch does not exist there.
ABSENT_BELOW = 1e-3
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
                  use_cache: bool = True) -> pd.DataFrame:
    """Both branches of the state evolution on an ``omega x alpha`` grid, with what the explorer shows.

    For each ``omega`` the semantic and the positional branch are followed along ``alphas`` with warm starts
    by :func:`attnlib.alpha_sweep` (every branch curve cached on disk under all parameters and the library
    fingerprint; the ``2 x len(omegas)`` curves run in parallel through joblib with ``n_jobs`` workers). To each fixed point are added the linear
    baseline ``eps_lin``, whether the branch exists there (its defining overlap is at least
    ``ABSENT_BELOW * rho``), whether it is the global minimum, and its attention maps
    (:func:`attention_maps`).

    Returns
    -------
    pandas.DataFrame
        One row per ``(omega, alpha, branch)``: ``omega, alpha, branch, q, m, theta, test_error, train_loss,
        converged, sigma, lam, exists, is_global, eps_lin``, the mean attention diagonals ``S11_mean,
        S22_mean`` (student) and ``T11_mean, T22_mean`` (teacher), and for each example ``j`` ``S11_ex{j}, S22_ex{j}, T11_ex{j},
        T22_ex{j}``; sorted by ``omega, branch, alpha``. ``is_global`` marks the existing, converged branch of
        lower training loss at each point.
    """
    omegas = np.atleast_1d(np.asarray(omegas, dtype=float))
    if omegas.size == 0:
        raise ValueError("omegas must contain at least one value")
    params_of = {float(w): TaskParams(sigma=float(sigma), lam=float(lam), omega=float(w), A=A) for w in omegas}
    tasks = [(w, b) for w in params_of for b in ("semantic", "positional")]

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
        df["exists"] = df["converged"] & (_defining_overlap(df) >= ABSENT_BELOW * params.rho)
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

"""The explorer of the published book page: precomputed data embedded in the HTML, drawn in the browser.

A static web page has no Python kernel, so the live widget (:func:`attnlib.book.explorer.make_explorer`) cannot
run there. Instead the book computes :func:`attnlib.book.explorer.explorer_grid` (both branches of the state
evolution on an ``omega x alpha`` grid) when it is built, and this module turns that table into

* :func:`explorer_payload`: a compact JSON document (arrays indexed ``[omega][alpha]``, numbers rounded to
  seven significant digits, ``null`` for what is not a number);
* :class:`StaticExplorer`: a notebook output whose HTML is an empty ``<div class="attnlib-explorer">`` holding
  that JSON in a ``<script type="application/json">``. The book's ``_static/explorer.js`` (plain JavaScript,
  loaded by every page of the book, no library, no network) finds such divs and draws sliders for ``omega``
  and ``alpha``, the test errors and the training-loss gap against ``alpha``, the phase diagram, the attention
  maps and a readout of the numbers. Outside the book (e.g. in JupyterLab) the div shows a short note instead.

The thresholds ``alpha_c``, ``alpha_l`` and the branch ends in the payload are those of the phase table at the
grid's ``omega`` (columns of the grid, :func:`attnlib.book.phase_table.phase_lines`), not read off the grid.
"""
from __future__ import annotations

import html
import json
import math

import numpy as np
import pandas as pd

from .explorer import DEFAULTS
from .explorer_grid import EXAMPLE_INPUTS
from .phase_table import LINE_COLUMNS

__all__ = ["PAYLOAD_VERSION", "SIGNIFICANT_DIGITS", "explorer_payload", "StaticExplorer", "static_explorer"]

#: Version of the JSON layout read by ``book/_static/explorer.js``.
PAYLOAD_VERSION = 2
#: Significant digits kept in the embedded numbers.
SIGNIFICANT_DIGITS = 7
BRANCH_NAMES = ("semantic", "positional")
_COLUMNS = ("q", "m", "theta", "test_error", "train_loss")
_KEYS = {"test_error": "eps_g", "train_loss": "eps_t"}


def _num(x):
    """A JSON number rounded to :data:`SIGNIFICANT_DIGITS`, or None for NaN/inf."""
    x = float(x)
    return float(f"{x:.{SIGNIFICANT_DIGITS}g}") if math.isfinite(x) else None


def _nums(a) -> list:
    arr = np.asarray(a, dtype=float)
    if arr.ndim == 0:
        return _num(arr)
    return [_nums(v) for v in arr]


def _n_examples(grid: pd.DataFrame) -> int:
    k = 0
    while f"S11_ex{k}" in grid.columns:
        k += 1
    return k


def explorer_payload(grid: pd.DataFrame, examples=EXAMPLE_INPUTS, initial: dict | None = None) -> dict:
    """The JSON document that the page's JavaScript draws, from an :func:`~attnlib.book.explorer.explorer_grid`
    table.

    ``examples`` are the example inputs the table was computed with (for the labels); ``initial`` gives the
    ``omega`` and ``alpha`` shown first (default :data:`attnlib.book.explorer.DEFAULTS`; the nearest grid point).

    Raises
    ------
    ValueError
        If the table is not a full ``omega x alpha x branch`` grid.
    """
    omegas = np.sort(grid.omega.unique())
    alphas = np.sort(grid.alpha.unique())
    n_w, n_a, k = len(omegas), len(alphas), _n_examples(grid)
    if len(grid) != n_w * n_a * len(BRANCH_NAMES) or set(grid.branch) != set(BRANCH_NAMES):
        raise ValueError(f"grid must have one row per (omega, alpha, branch): {n_w} x {n_a} x 2 rows expected, "
                         f"got {len(grid)}")
    if len(np.asarray(examples).reshape(-1, 2)) != k:
        raise ValueError(f"examples must list the {k} example inputs of the grid, got {examples!r}")
    g = grid.sort_values(["branch", "omega", "alpha"])
    branches = {}
    for b in BRANCH_NAMES:
        part = g[g.branch == b]

        def field(col, part=part):
            return part[col].to_numpy(dtype=float).reshape(n_w, n_a)

        entry = {_KEYS.get(c, c): _nums(field(c)) for c in _COLUMNS}
        entry["exists"] = part.exists.to_numpy(bool).reshape(n_w, n_a).astype(int).tolist()
        entry["converged"] = part.converged.to_numpy(bool).reshape(n_w, n_a).astype(int).tolist()
        entry["S_mean"] = _nums(np.stack([field("S11_mean"), field("S22_mean")], -1))
        entry["S_ex"] = _nums(np.stack([np.stack([field(f"S11_ex{j}"), field(f"S22_ex{j}")], -1)
                                        for j in range(k)], -2))
        entry["is_global"] = part.is_global.to_numpy(bool).reshape(n_w, n_a).astype(int).tolist()
        branches[b] = entry
    first = g[(g.branch == BRANCH_NAMES[0]) & (g.alpha == alphas[0])].set_index("omega").loc[omegas]
    teacher = {"mean": _nums(first[["T11_mean", "T22_mean"]].to_numpy()),
               "ex": _nums(np.stack([first[[f"T11_ex{j}", f"T22_ex{j}"]].to_numpy() for j in range(k)], 1))}
    missing = [c for c in LINE_COLUMNS if c not in grid.columns]
    if missing:
        raise ValueError(f"grid lacks the phase-table columns {missing} (made by attnlib.book.explorer.explorer_grid)")
    per_omega = grid.groupby("omega")[list(LINE_COLUMNS)]
    if (per_omega.nunique(dropna=False) > 1).any(axis=None):
        raise ValueError("the phase-table columns must be constant at each omega")
    lines = per_omega.first().loc[omegas]
    sem, pos = (np.array(branches[b]["is_global"]) for b in BRANCH_NAMES)
    glob = np.where(sem == 1, "semantic", np.where(pos == 1, "positional", None))
    init = {**DEFAULTS, **(initial or {})}
    params = grid.iloc[0]
    return {
        "version": PAYLOAD_VERSION,
        "params": {"sigma": _num(params.sigma), "lam": _num(params.lam)},
        "omega": _nums(omegas),
        "alpha": _nums(alphas),
        "eps_lin": _nums(first["eps_lin"].to_numpy()),
        "examples": _nums(np.asarray(examples, dtype=float).reshape(-1, 2)),
        "teacher": teacher,
        "branches": branches,
        "global": glob.tolist(),
        # from the phase table (chapter 6), at each omega; null: none (no threshold, no end in the table's range)
        **{k: _nums(lines[k].to_numpy()) for k in LINE_COLUMNS},
        "initial": {"omega_index": int(np.argmin(np.abs(omegas - init["omega"]))),
                    "alpha_index": int(np.argmin(np.abs(np.log(alphas / init["alpha"]))))},
    }


class StaticExplorer:
    """Notebook output of the static explorer: HTML with the embedded payload (drawn by the book's
    ``_static/explorer.js``) and a plain-text description."""

    FALLBACK = ("Interactive explorer: its sliders run in the published book page (book/_static/explorer.js). "
                "In a notebook with a Python kernel, use the live widget instead: "
                "from attnlib.book.explorer import make_explorer; make_explorer().")

    def __init__(self, payload: dict, element_id: str = "attnlib-explorer"):
        self.payload = payload
        self.element_id = element_id

    def to_json(self) -> str:
        """The payload as compact JSON, safe inside a ``<script>`` element."""
        text = json.dumps(self.payload, separators=(",", ":"), allow_nan=False)
        return text.replace("</", "<\\/")

    def _repr_html_(self) -> str:
        return (f'<div class="attnlib-explorer" id="{html.escape(self.element_id)}">'
                f'<p class="attnlib-explorer-fallback">{html.escape(self.FALLBACK)}</p>'
                f'<script type="application/json" class="attnlib-explorer-data">{self.to_json()}</script></div>')

    def __repr__(self) -> str:
        p = self.payload
        return (f"StaticExplorer({len(p['omega'])} omega x {len(p['alpha'])} alpha, sigma={p['params'].get('sigma')}, "
                f"lambda={p['params'].get('lam')}). {self.FALLBACK}")


def static_explorer(grid: pd.DataFrame, **kwargs) -> StaticExplorer:
    """:class:`StaticExplorer` of an :func:`~attnlib.book.explorer.explorer_grid` table (``kwargs`` go to
    :func:`explorer_payload`)."""
    return StaticExplorer(explorer_payload(grid, **kwargs))

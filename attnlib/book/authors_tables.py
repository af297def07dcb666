"""The state-evolution tables published by the paper's authors, and the transition they imply.

The book compares its thresholds with the paper's, whose ``alpha_c(omega)`` is a list typed into the authors'
plotting notebook (``paper_reference.csv``, column ``source``). Their own theory tables at ``omega = 0.3``
(``authors_theory_tables.csv``, a copy of four files of their repository with provenance in its ``.json``)
give an independent value: where their two branches' training losses cross (book :eq:`eq-train-loss`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..finite_d.arbiter import crossing_alpha
from .book_data import book_data_path

__all__ = ["AUTHORS_TABLES_CSV", "authors_tables", "authors_crossing"]

AUTHORS_TABLES_CSV = "authors_theory_tables.csv"
# the branches compared (the omega = 0.5 files carry a constant offset in Phi, which cancels in the difference
# of the two branches, so the crossing is meaningful there too)
_BRANCHES = ("semantic", "positional")


def authors_tables(path=None) -> pd.DataFrame:
    """The authors' tables with the book's names added: ``eps_g = mse / 2`` and ``eps_t = -Phi``.

    Parameters
    ----------
    path : str or Path, optional
        The CSV (default: the book's copy, :func:`attnlib.book.book_data.book_data_path`).
    """
    table = pd.read_csv(path if path is not None else book_data_path(AUTHORS_TABLES_CSV))
    return table.assign(eps_g=table.mse / 2.0, eps_t=-table.Phi).sort_values(["omega", "branch", "alpha"],
                                                                              ignore_index=True)


def authors_crossing(omega: float, table: pd.DataFrame | None = None) -> float:
    """``alpha`` where the semantic and positional training losses of the authors' tables cross at ``omega``.

    Both branches are tabulated on the same ``alpha`` grid; the crossing is the sign change of
    ``eps_t(semantic) - eps_t(positional)`` from positive (positional lower) to negative along increasing
    ``alpha``, linearly interpolated between the two grid points around it
    (:func:`attnlib.finite_d.arbiter.crossing_alpha`). NaN if the losses do not cross on the grid.

    Raises
    ------
    ValueError
        If the tables hold no pair of branches at ``omega``.
    """
    table = authors_tables() if table is None else table
    at = table[np.isclose(table.omega, float(omega))]
    if set(at.branch) != set(_BRANCHES):
        have = sorted(set(table.omega))
        raise ValueError(f"omega must be one of the tabulated {have}, got {omega!r}")
    loss = at.pivot_table(index="alpha", columns="branch", values="eps_t").dropna()
    if len(loss) < 2:
        raise ValueError(f"the tables at omega = {omega} share fewer than two alpha values")
    return crossing_alpha(loss.index.to_numpy(), (loss.semantic - loss.positional).to_numpy(), direction=-1)

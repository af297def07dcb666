"""The book's presentation helpers: figure and table style, the explorer of chapter 9, the book's data files.

Modules: :mod:`~attnlib.book.style` (house style), :mod:`~attnlib.book.explorer` (the live widget),
:mod:`~attnlib.book.explorer_grid` (the grid behind the static explorer), :mod:`~attnlib.book.phase_table`
(thresholds and branch ends from the phase table), :mod:`~attnlib.book.static_explorer` (the static page),
:mod:`~attnlib.book.book_data` (where the data files are), :mod:`~attnlib.book.authors_tables` (the paper's
published thresholds), :mod:`~attnlib.book.reproducing` (the inventory of the data files).

The chapters import from here or from :mod:`attnlib` only (``from attnlib.book import END_KINDS``): besides the
helpers, this namespace holds the library's settings that the chapters quote (the quadrature and seed sets of
the accurate rule and of the phase diagram, the branch ends' resolutions and verdicts), under the names the library
gives them. The top layer: nothing in the library imports from it except ``attnlib/__init__.py``.
"""
from ..theory.solve.accurate import ACCURATE_ORDER, ACCURATE_RTOL, ACCURATE_SEEDS
from ..theory.solve.chord import CHORD_FIELDS, CHORD_ORDER
from ..theory.branches.pooled_end import AGREEMENT_RESOLUTION, END_AGREEMENT, agreement_seeds, pooled_seeds
from ..theory.studies.rule_study import FIXED_POINT_FIELDS, IMAGE_FIELDS, rule_study_summary
from ..theory.studies.sweeps import ENDED_KINDS
from ..theory.branches.thresholds import REASON_ABSENT, REASON_BELOW_END
from ..theory.branches.traces import SMOOTH_N_RING, SMOOTH_QUADRATURE, TIE_SMOOTHING
from .authors_tables import authors_crossing, authors_tables
from .explorer import DEFAULTS
from .explorer_grid import (EXPLORER_POINTS_CSV, FIXED_POINT_COLUMNS, GRID_ALPHAS, GRID_OMEGAS, explorer_fixed_points,
                            grid_thresholds)
from .phase_table import END_KINDS, phase_boundary, table_omegas
from .reproducing import data_inventory
from .static_explorer import static_explorer
from .style import prose_list, prose_number

__all__ = [
    # the book's helpers
    "authors_crossing", "authors_tables", "DEFAULTS", "EXPLORER_POINTS_CSV", "FIXED_POINT_COLUMNS", "GRID_ALPHAS",
    "GRID_OMEGAS", "explorer_fixed_points", "grid_thresholds", "END_KINDS", "phase_boundary", "table_omegas",
    "data_inventory", "static_explorer", "prose_list", "prose_number",
    # the library's settings that the chapters quote
    "ACCURATE_ORDER", "ACCURATE_RTOL", "ACCURATE_SEEDS", "CHORD_FIELDS", "CHORD_ORDER", "AGREEMENT_RESOLUTION",
    "END_AGREEMENT", "agreement_seeds", "pooled_seeds", "FIXED_POINT_FIELDS", "IMAGE_FIELDS", "rule_study_summary",
    "ENDED_KINDS", "REASON_ABSENT", "REASON_BELOW_END", "SMOOTH_N_RING", "SMOOTH_QUADRATURE", "TIE_SMOOTHING",
]

"""attnlib: theory and simulations of the solvable model of dot-product attention.

Companion library of the book on Cui, Behrens, Krzakala & Zdeborova, "A phase transition between positional
and semantic learning in a solvable model of dot-product attention" (NeurIPS 2024).

Theory (``L = 2``, rank 1): :func:`solve_state_evolution` (one fixed point of a branch),
:func:`solve_accurately` (the same, converged in the quadrature, with its error), :func:`solve_chord` (as
accurate, ten times faster: pooled scramblings solved by chord-Newton steps),
:func:`alpha_sweep`, :func:`branch_trace` (pseudo-arclength continuation to a branch's ends),
:func:`critical_alpha`, :func:`linear_crossing_alpha`, :func:`branch_ends`, :func:`phase_diagram`,
:func:`linear_baseline_error`, :func:`test_error_from_overlaps`. Any ``L`` and student rank ``r``:
:func:`solve_general` (also reached through :func:`solve_state_evolution` with a larger ``A`` or ``rank > 1``) and
its thresholds, :func:`general_threshold`.

Finite d: :func:`simulate_erm`, :func:`erm_sweep`, :func:`run_gamp`, and the finite-d arbiter
:func:`arbiter_table`, :func:`finite_d_critical_alpha`.
"""
from ._version import __version__

from .exceptions import CacheWarning, ConvergenceWarning
from .theory.generalisation import linear_baseline_error, test_error_from_overlaps
from .params import ALTERNATIVE_A, STANDARD_A, TaskParams
from .theory.quadrature import Quadrature
from .theory.solve import solve_state_evolution
from .theory.state_evolution import BRANCHES, Overlaps, SEResult, SESolver
from .theory.accurate import AccurateFixedPoint, solve_accurately
from .theory.chord import solve_chord
from .theory.general_model import GeneralOverlaps, GeneralResult, GeneralSolver
from .theory.general_state_evolution import solve_general
from .theory.general_thresholds import GeneralThreshold, general_threshold
from .book.explorer import ExplorerView, draw_explorer, explorer_view, make_explorer
from .book.explorer_grid import explorer_grid
from .book.book_data import book_data_dir, book_data_path, use_book_data
from .theory.se_iterates import SEIterates, state_evolution_iterates
from .finite_d.gamp import GAMPResult, run_gamp
from .finite_d.gamp_tables import gamp_fixed_point_table, gamp_tracking_table
from .finite_d.data import make_task, positional_encodings, seed_streams
from .finite_d.simulation import (DEFAULT_N_TEST, ERMObjective, ERMResult, estimate_test_errors, fit_linear_baseline,
                         gradient_descent, minimize_lbfgs, simulate_erm, test_error_from_overlaps_rho)
from .finite_d.sim_sweeps import erm_point, erm_sweep, rows_to_columns
from .exceptions import ThresholdNotFound
from .theory.sweeps import alpha_sweep, branch_curvature, branch_ends, phase_diagram, semantic_takeover
from .theory.thresholds import critical_alpha, linear_crossing_alpha
from .theory.traces import branch_trace
from .theory.continuation import BranchEnd, BranchTrace, trace_branch
from .theory.newton import Continuation, newton_fixed_point
from .finite_d.arbiter import (FiniteDThreshold, arbiter_table, finite_d_critical_alpha, finite_d_minimum,
                      finite_d_theta_loss_alpha)

__all__ = [
    "__version__", "TaskParams", "STANDARD_A", "ALTERNATIVE_A", "ConvergenceWarning", "CacheWarning",
    "Quadrature", "Overlaps", "SEResult", "SESolver", "BRANCHES", "solve_state_evolution",
    "solve_accurately", "AccurateFixedPoint", "solve_chord",
    "GeneralOverlaps", "GeneralResult", "GeneralSolver", "solve_general", "GeneralThreshold", "general_threshold",
    "linear_baseline_error", "test_error_from_overlaps", "ThresholdNotFound", "alpha_sweep",
    "branch_curvature", "critical_alpha", "linear_crossing_alpha", "branch_trace", "branch_ends", "phase_diagram",
    "semantic_takeover",
    "BranchEnd", "BranchTrace", "Continuation", "newton_fixed_point", "trace_branch",
    "FiniteDThreshold", "arbiter_table", "finite_d_critical_alpha", "finite_d_minimum", "finite_d_theta_loss_alpha",
    "make_task", "positional_encodings", "seed_streams", "DEFAULT_N_TEST", "ERMObjective", "ERMResult",
    "estimate_test_errors", "fit_linear_baseline", "gradient_descent", "minimize_lbfgs", "simulate_erm",
    "test_error_from_overlaps_rho", "erm_point", "erm_sweep", "rows_to_columns",
    "run_gamp", "GAMPResult", "state_evolution_iterates", "SEIterates", "gamp_tracking_table",
    "gamp_fixed_point_table",
    "ExplorerView", "explorer_view", "draw_explorer", "make_explorer", "explorer_grid",
    "book_data_dir", "book_data_path", "use_book_data",
]

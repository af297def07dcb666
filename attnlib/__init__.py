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

The model's pieces: :func:`attention_matrix`, :func:`teacher_attention`, :func:`teacher_student_fields`, the
proximal step :func:`solve_prox`.

Finite d: :func:`simulate_erm`, :func:`erm_sweep`, :func:`run_gamp`, the finite-d arbiter
:func:`arbiter_table`, :func:`finite_d_critical_alpha`, :func:`finite_d_linear_alpha`, the landscape between the
minima (:func:`loss_along_path`), the minima with an overlap pinned (:func:`construction_summary`) and the
comparison with fixed points for any ``L`` (:func:`branch_minimisers`, :func:`seed_mean_extrapolation`).

The book's helpers and the settings its chapters quote: :mod:`attnlib.book`.
"""
from ._version import __version__

from .exceptions import CacheWarning, ConvergenceWarning
from .theory.model.generalisation import linear_baseline_error, teacher_student_fields, test_error_from_overlaps
from .theory.model.attention import attention_matrix, softmax_rows, teacher_attention, teacher_diagonal
from .theory.model.proximal import prox_objective, solve_prox
from .params import ALTERNATIVE_A, DOMAIN, STANDARD_A, TaskParams
from .theory.model.quadrature import Quadrature
from .theory.solve.dispatch import solve_state_evolution
from .theory.model.state_evolution import BRANCHES, Overlaps, SEResult, SESolver
from .theory.solve.accurate import AccurateFixedPoint, solve_accurately
from .theory.solve.chord import solve_chord
from .theory.model.general_model import GeneralOverlaps, GeneralResult, GeneralSolver
from .theory.solve.general_state_evolution import solve_general
from .theory.branches.general_thresholds import general_threshold
from .theory.branches.threshold import Threshold
from .book.explorer import ExplorerView, draw_explorer, explorer_view, make_explorer
from .book.explorer_grid import explorer_grid
from .book.book_data import book_data_dir, book_data_path, use_book_data
from .theory.studies.se_iterates import SEIterates, state_evolution_iterates
from .finite_d.gamp import GAMPResult, run_gamp
from .finite_d.gamp_tables import gamp_fixed_point_table, gamp_tracking_table
from .finite_d.data import make_task, positional_encodings, seed_streams
from .finite_d.simulation import (DEFAULT_N_TEST, ERMObjective, ERMResult, estimate_test_errors, fit_linear_baseline,
                                  gradient_descent, minimize_lbfgs, simulate_erm, test_error_from_overlaps_rho)
from .finite_d.sim_sweeps import erm_point, erm_sweep, rows_to_columns
from .exceptions import ThresholdNotFound
from .theory.studies.sweeps import alpha_sweep, branch_curvature, branch_ends, phase_diagram, semantic_takeover
from .theory.branches.thresholds import critical_alpha, linear_crossing_alpha
from .theory.branches.traces import branch_trace
from .theory.branches.continuation import BranchEnd, BranchTrace, trace_branch
from .theory.solve.newton import Continuation, newton_fixed_point
from .finite_d.arbiter import (FiniteDThreshold, arbiter_table, finite_d_critical_alpha, finite_d_linear_alpha,
                               finite_d_minimum, finite_d_theta_loss_alpha)
from .finite_d.landscape import barrier_height, loss_along_path
from .finite_d.sim_sweeps import classify_minima
from .finite_d.construction import construction_pairs, construction_summary, paired_profile
from .finite_d.extrapolation import (branch_minimisers, compare_with_fixed_points, nearest_branch_comparison,
                                     seed_mean_extrapolation)
from .finite_d.arbiter import loss_zero_theory
from .finite_d.construction import accurate_pinned_profile, construction_table
from .finite_d.data import make_teacher
from .finite_d.validity import fixed_point_near, pinned_profile, prox_coverage, rs_validity, solver_checks
from .theory.model.general_model import general_default_start, general_nodes, general_test_error
from .theory.model.status import STATUSES, branch_status
from .theory.model.population import PopulationMinimum, population_minimum
from .theory.branches.general_thresholds import distinct_branch
from .theory.branches.threshold import NO_ROOT
from .theory.studies.sweeps import summarise_phase_diagram
from .theory.branches.traces import continuation_settings
from .theory.branches.pooled_end import agreement_end, pooled_end
from .theory.studies.rule_study import fixed_point_errors, map_image_errors
from .cache import library_fingerprint, provenance
from .parallel import run_jobs

__all__ = [
    "__version__", "TaskParams", "STANDARD_A", "ALTERNATIVE_A", "DOMAIN", "ConvergenceWarning", "CacheWarning",
    "Quadrature", "STATUSES", "branch_status", "PopulationMinimum", "population_minimum",
    "Overlaps", "SEResult", "SESolver", "BRANCHES", "solve_state_evolution", "solve_accurately", "AccurateFixedPoint",
    "solve_chord", "GeneralOverlaps", "GeneralResult", "GeneralSolver", "solve_general", "Threshold",
    "general_threshold", "linear_baseline_error", "test_error_from_overlaps", "teacher_student_fields",
    "attention_matrix", "softmax_rows", "teacher_attention", "teacher_diagonal", "solve_prox", "prox_objective",
    "ThresholdNotFound", "alpha_sweep", "branch_curvature", "critical_alpha", "linear_crossing_alpha", "branch_trace",
    "branch_ends", "phase_diagram", "semantic_takeover", "BranchEnd", "BranchTrace", "Continuation",
    "newton_fixed_point", "trace_branch", "FiniteDThreshold", "arbiter_table", "finite_d_critical_alpha",
    "finite_d_minimum", "finite_d_theta_loss_alpha", "finite_d_linear_alpha", "barrier_height", "loss_along_path",
    "classify_minima", "construction_pairs", "construction_summary", "paired_profile", "branch_minimisers",
    "seed_mean_extrapolation", "compare_with_fixed_points", "nearest_branch_comparison", "loss_zero_theory",
    "accurate_pinned_profile",
    "construction_table", "make_teacher", "fixed_point_near", "pinned_profile", "prox_coverage", "rs_validity",
    "solver_checks", "general_default_start", "general_nodes", "general_test_error", "NO_ROOT", "distinct_branch",
    "summarise_phase_diagram", "fixed_point_errors", "map_image_errors", "library_fingerprint", "provenance",
    "run_jobs", "continuation_settings", "agreement_end", "pooled_end", "make_task", "positional_encodings",
    "seed_streams", "DEFAULT_N_TEST", "ERMObjective", "ERMResult", "estimate_test_errors", "fit_linear_baseline",
    "gradient_descent", "minimize_lbfgs", "simulate_erm", "test_error_from_overlaps_rho", "erm_point", "erm_sweep",
    "rows_to_columns", "run_gamp", "GAMPResult", "state_evolution_iterates", "SEIterates", "gamp_tracking_table",
    "gamp_fixed_point_table", "ExplorerView", "explorer_view", "draw_explorer", "make_explorer", "explorer_grid",
    "book_data_dir", "book_data_path", "use_book_data",
]

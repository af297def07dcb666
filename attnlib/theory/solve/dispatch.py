"""The public solve of the state evolution: one call for every sequence length, student rank and rule.

:func:`solve_state_evolution` chooses the engine and the rule from its arguments and calls the solver that holds
them, each defined below it: the two-token rank-1 equations (book chapter 4) under the pooled default rule
(:func:`attnlib.theory.solve.chord.accurate_result`) or under one rule (:func:`attnlib.theory.model.state_evolution.
iterate_state_evolution`), and the general engine (:func:`attnlib.solve_general`, any ``L`` and rank).
"""
from __future__ import annotations

from ...params import TaskParams, check_alpha, check_choice, check_int, check_params
from .chord import accurate_result
from ..model.general_model import GeneralSolver
from .general_state_evolution import solve_general
from ..model.state_evolution import BRANCHES, _hold, Overlaps, SESolver
from .iteration import iterate_state_evolution, resolve_start

__all__ = ["solve_state_evolution"]


def solve_state_evolution(params: TaskParams, alpha: float, branch: str = "semantic",
                          start: Overlaps | None = None, solver: SESolver | None = None,
                          record_history: bool = False, fix_m: float | None = None,
                          fix_theta: float | None = None, rank: int = 1):
    """The fixed point of the state evolution of book chapter 4 on a branch.

    By default (``solver=None``) the answer is the library's accurate one: the fixed point under four pooled
    scramblings of a symmetrised Sobol rule, found by chord-Newton steps from the Gauss-Hermite rule's fixed
    point, with standard errors in ``stderr`` (:func:`attnlib.solve_chord`; within 2e-3 relative of the
    converged answer at the paper's reference points, book :ref:`sec-accurate-rule`). With an explicit
    ``solver``, and for what the pooled solver does not do (a pinned overlap, the ``"free"`` branch, a
    recorded history), the equations are iterated under the single rule of ``solver`` (default
    :class:`SESolver`: Gauss-Hermite with 12 nodes per dimension, off by up to 3 % in ``q`` on the positional
    branch), damped and Anderson-accelerated, and ``stderr`` is empty.

    Parameters
    ----------
    params : TaskParams
        The task.
    alpha : float
        Sample complexity ``n/d``, in ``(0, inf)``.
    branch : {"semantic", "positional", "agnostic", "free"}
        Which fixed point to follow; symmetric overlaps are held at exactly zero (module docstring);
        ``"free"`` holds none (give ``start``).
    start : Overlaps, optional
        Initial overlaps (a warm start); default ``default_start``.
    solver : SESolver, optional
        Settings of a single-rule iteration (see above); None: the pooled default rule.
    record_history : bool
        Keep the residual of every iteration in ``residual_history``.
    fix_m, fix_theta : float, optional
        Pin an overlap at a given value (a constrained minimisation; see ``conjugates_and_energy``).
        Used to measure the curvature of the training loss across a branch (``attnlib.theory.studies.sweeps``).
    rank : int
        Student rank ``r``. For ``r > 1``, for ``L > 2`` tokens (a larger ``params.A``), or with a
        ``GeneralSolver`` as ``solver``, the call goes to the general engine
        (:func:`attnlib.solve_general`, book :ref:`sec-general-L`) and returns its
        ``GeneralResult`` (``start`` then a ``GeneralOverlaps``); ``fix_m``, ``fix_theta`` and ``record_history``
        are for the ``L = 2``, rank-1 solver only (``ValueError`` otherwise).

    Returns
    -------
    SEResult
        Its ``status`` says which of three outcomes it is: ``"on-branch"``, a fixed point on the requested branch
        (converged, the defining overlap present above its floor and its error); ``"branch-absent"``, the branch
        does not exist here and the numbers are the fixed point that does (the uninformed point, or the trivial
        one ``q = m = theta = 0`` where the ridge wins); ``"not-converged"``. Where the branch's cold start
        collapses, the branch is looked for by Newton's method from several starts and from neighbouring
        ``alpha`` before it is declared absent (``attnlib.theory.solve.branch_points.rescue_branch_point``).
        Inside :data:`attnlib.DOMAIN` no valid input raises (property-based tests).
        With ``converged=False`` (and a :class:`~attnlib.exceptions.ConvergenceWarning`) if the tolerance
        was not reached (in ``solver.max_iter`` iterations, or in the chord steps of the pooled rule; a pooled
        rule whose standard error misses its target at the largest size also warns) or the iteration left the domain
        (``V <= 0``); the numbers are then the last valid iterate. The overlaps are defined up to the global
        sign of ``Q``; the representative returned has ``theta >= 0`` on the semantic branch and ``m >= 0`` on
        the positional one, and ``theta >= 0`` on the free one (unless an overlap is pinned with ``fix_m`` /
        ``fix_theta``).
    """
    check_params(params, "solve_state_evolution")
    rank = check_int("rank", rank, 1)
    if rank != 1 or params.L != 2 or isinstance(solver, GeneralSolver):
        if fix_m is not None or fix_theta is not None or record_history:
            raise ValueError(f"fix_m, fix_theta and record_history need L = 2 and rank = 1 (got L = {params.L}, "
                             f"rank = {rank})")
        if solver is not None and not isinstance(solver, GeneralSolver):
            raise ValueError(f"solver must be a GeneralSolver (or None) for L = {params.L}, rank = {rank}, got "
                             f"{type(solver).__name__}")
        return solve_general(params, alpha, branch, rank=rank, start=start, solver=solver)
    alpha = check_alpha(alpha)
    pinned = fix_m is not None or fix_theta is not None
    if solver is None and not (pinned or record_history or branch == "free"):
        check_choice("branch", branch, BRANCHES)
        if start is not None:
            resolve_start(params, branch, start, _hold(params, branch))
        return accurate_result(params, alpha, branch, start)
    return iterate_state_evolution(params, alpha, branch, start=start, solver=solver,
                                   record_history=record_history, fix_m=fix_m, fix_theta=fix_theta)

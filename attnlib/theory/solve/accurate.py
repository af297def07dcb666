"""Fixed points converged in the quadrature: several scramblings of a large symmetrised Sobol rule.

The default rule of :class:`~attnlib.theory.model.state_evolution.SESolver` (tensor Gauss-Hermite, 12 nodes per
dimension) is fast and exact for smooth integrands, but on the positional branch the proximal point jumps
between two local minima on a surface through the node space (book :ref:`sec-quadrature`), and that rule's
fixed point is off by 1-3 % in ``q`` and ``m``. Randomised quasi-Monte Carlo does not care where the jump lies:
every scrambling of a Sobol rule gives an unbiased estimate of each expectation, and the spread over
scramblings measures the error. :func:`solve_accurately` solves the state evolution with
``"sobol-sym"`` rules of ``2**ACCURATE_ORDER`` points under ``ACCURATE_SEEDS`` scramblings and returns the
mean fixed point with its standard error (book :eq:`eq-conjugates` to :eq:`eq-free-energy`).

With ``2**17`` points the mean over three scramblings lies within ``2e-3`` relative of the converged answer
(``2**19`` points, three other scramblings) in ``q``, ``m``, ``theta``, ``eps_g`` and ``eps_t`` at the
reference points of the paper; where a standard error exceeds ``1e-3`` relative (near the end of a branch,
as at ``omega = 0``, ``alpha = 0.55``) the rule is doubled, up to ``2**19`` points
(``tests/test_accurate.py``; the study of candidate rules is :mod:`attnlib.theory.studies.rule_study`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from ...exceptions import warn_caller
from ...params import (TaskParams, check_alpha, check_choice, check_finite_scalar, check_int, check_params,
                       check_seeds)
from ..model.quadrature import Quadrature, scrambling_mean
from ..model.state_evolution import BRANCHES, Overlaps, SESolver
from .branch_points import follow_branch

__all__ = ["ACCURATE_ORDER", "ACCURATE_SEEDS", "ACCURATE_RTOL", "ACCURATE_MAX_ORDER", "ACCURATE_FIELDS", "AccurateFixedPoint", "accurate_solver",
           "solve_accurately"]

#: log2 of the number of points of each scrambled rule
ACCURATE_ORDER = 17
#: scrambling seeds of the rules whose fixed points are averaged
ACCURATE_SEEDS = (3, 4, 5)
#: target of the relative standard error of every quantity (half the accuracy promised, 2e-3)
ACCURATE_RTOL = 1e-3
#: largest log2 point count the rule is raised to while the standard error exceeds the target
ACCURATE_MAX_ORDER = 19
#: quantities averaged, with their standard errors
ACCURATE_FIELDS = ("q", "m", "V", "theta", "test_error", "train_loss")


def accurate_solver(seed: int = ACCURATE_SEEDS[0], order: int = ACCURATE_ORDER, base: SESolver | None = None
                    ) -> SESolver:
    """The solver settings of one scrambling: ``base`` (default :class:`SESolver`) with the quadrature replaced by
    ``Quadrature("sobol-sym", order, seed)``."""
    base = base if base is not None else SESolver()
    if not isinstance(base, SESolver):
        raise ValueError(f"base must be an SESolver, got {type(base).__name__}")
    return replace(base, quadrature=Quadrature("sobol-sym", order, seed))


@dataclass(frozen=True)
class AccurateFixedPoint:
    """The mean fixed point over scramblings, with its standard error.

    Attributes
    ----------
    params, alpha, branch
        The point.
    mean, stderr : dict
        Per quantity of ``ACCURATE_FIELDS``: the mean over the scramblings and its standard error
        (sample standard deviation over ``sqrt(n)``).
    runs : tuple of SEResult
        The fixed point of each scrambling, in the order of ``seeds``.
    seeds : tuple of int
        The scrambling seeds.
    order : int
        log2 of the points of each rule.
    converged : bool
        True when every scrambling's iteration converged.
    precise : bool
        True when every standard error is at most ``rtol`` relative (see :func:`solve_accurately`).
    seconds : float
        Wall time of all solves.
    """

    params: TaskParams
    alpha: float
    branch: str
    mean: dict
    stderr: dict
    runs: tuple = field(repr=False)
    seeds: tuple
    order: int
    converged: bool
    precise: bool
    seconds: float

    q = property(lambda self: self.mean["q"], doc="Mean ``q``.")
    m = property(lambda self: self.mean["m"], doc="Mean ``m``.")
    V = property(lambda self: self.mean["V"], doc="Mean ``V``.")
    theta = property(lambda self: self.mean["theta"], doc="Mean ``theta``.")
    test_error = property(lambda self: self.mean["test_error"], doc="Mean test error ``eps_g``.")
    train_loss = property(lambda self: self.mean["train_loss"], doc="Mean training loss ``eps_t``.")

    @property
    def overlaps(self) -> Overlaps:
        """The mean overlaps."""
        return Overlaps(self.mean["q"], self.mean["m"], self.mean["V"], self.mean["theta"])

    def as_row(self) -> dict:
        """Tidy-table row: the point, each quantity and its ``<name>_err``, the rule and the flag."""
        row = {"alpha": self.alpha, "branch": self.branch}
        for k in ACCURATE_FIELDS:
            row[k] = self.mean[k]
            row[f"{k}_err"] = self.stderr[k]
        row.update(order=self.order, n_seeds=len(self.seeds), converged=self.converged, precise=self.precise,
                   seconds=self.seconds)
        row.update(self.params.as_dict())
        return row


def check_rule_arguments(alpha, branch, seeds, order, max_order, rtol) -> tuple:
    """Validate the arguments that :func:`solve_accurately` and :func:`attnlib.solve_chord` share; returns
    ``(alpha, seeds, order, max_order, rtol)`` normalised, or raises ``ValueError`` naming the argument."""
    alpha = check_alpha(alpha)
    rtol = check_finite_scalar("rtol", rtol)
    if not rtol > 0:
        raise ValueError(f"rtol must lie in (0, inf), got {rtol!r}")
    order = check_int("order", order, 6)
    max_order = check_int("max_order", max_order, order)
    if max_order > 22:
        raise ValueError(f"max_order must lie in [order, 22] = [{order}, 22], got {max_order}")
    check_choice("branch", branch, tuple(b for b in BRANCHES if b != "free"))
    return alpha, check_seeds("seeds", seeds), order, max_order, rtol


def solve_accurately(params: TaskParams, alpha: float, branch: str = "semantic", seeds=ACCURATE_SEEDS,
                     order: int = ACCURATE_ORDER, start: Overlaps | None = None, base: SESolver | None = None,
                     rtol: float = ACCURATE_RTOL, max_order: int = ACCURATE_MAX_ORDER) -> AccurateFixedPoint:
    """The fixed point of a branch, averaged over scrambled Sobol rules, with its standard error.

    Each scrambling's point is found as a sweep finds it (``follow_branch`` of ``attnlib.theory.studies.sweeps``): the
    iteration, and Newton's method where the branch repels the iteration (the positional branch at
    ``omega = 0``). The first scrambling starts from ``start`` (default: the branch's point under the base
    solver's own rule, found the same way); the others start from its fixed point. Where the branch does not
    exist, every scrambling returns the uninformed point of its subspace.

    Parameters
    ----------
    params : TaskParams
        The task.
    alpha : float
        Sample complexity, in ``(0, inf)``.
    branch : {"semantic", "positional", "agnostic"}
        The branch (``"free"`` needs a start of its own for each scrambling and is not averaged).
    seeds : sequence of int
        At least two distinct scrambling seeds.
    order : int
        log2 of the points of each ``"sobol-sym"`` rule (6 to 22) to begin with.
    start : Overlaps, optional
        Start of the first scrambling (default: the branch's point under ``base``'s quadrature).
    base : SESolver, optional
        The other solver settings (tolerance, damping, proximal search).
    rtol : float
        Target of the relative standard error of every quantity: while it is missed, the rule is doubled
        (``order + 1``), up to ``max_order``, and the scramblings are solved again from the mean.
    max_order : int
        Largest ``order`` tried (``order`` to 22).

    Returns
    -------
    AccurateFixedPoint
        ``converged`` is False (each failing solve has warned) when a scrambling did not converge; the
        means then include its last iterate. ``precise`` is False (with a
        :class:`~attnlib.exceptions.ConvergenceWarning`) when ``rtol`` was missed at ``max_order``.

    Notes
    -----
    Near the end of a branch the map is nearly neutral there (its fixed point barely restores itself), so the
    small irregularities of a finite rule move the fixed point further: at ``omega = 0``, ``alpha = 0.55`` on
    the positional branch the fixed points of three scramblings of ``2**17`` points have a standard
    deviation of 0.6 % in ``m``, and the rule is raised to ``2**19`` points.
    """
    check_params(params, "solve_accurately").require_two_tokens("solve_accurately")
    alpha, seeds, order, max_order, rtol = check_rule_arguments(alpha, branch, seeds, order, max_order, rtol)
    if base is not None and not isinstance(base, SESolver):
        raise ValueError(f"base must be an SESolver, got {type(base).__name__}")
    t0 = time.perf_counter()
    if start is None:
        # the branch's point under the base rule (cheap, and rescued by Newton where the branch repels the
        # iteration) is a start a few iterations from the point of every scrambling
        start = follow_branch(params, alpha, branch, None, base).overlaps
    while True:
        runs = []
        for seed in seeds:
            runs.append(follow_branch(params, alpha, branch, runs[0].overlaps if runs else start,
                                      accurate_solver(seed, order, base)))
        means, errors = scrambling_mean([[getattr(r, k) for k in ACCURATE_FIELDS] for r in runs])
        mean = dict(zip(ACCURATE_FIELDS, means.tolist()))
        stderr = dict(zip(ACCURATE_FIELDS, errors.tolist()))
        worst = max(stderr[k] / abs(mean[k]) for k in ACCURATE_FIELDS if mean[k] != 0.0)
        if worst <= rtol or order >= max_order:
            break
        order += 1  # twice the points: the scramblings' spread roughly halves
        start = Overlaps(mean["q"], mean["m"], mean["V"], mean["theta"])
    precise = worst <= rtol
    if not precise:
        warn_caller(f"solve_accurately: relative standard error {worst:.2g} > rtol {rtol:g} with 2^{order} "
                    f"points (branch={branch}, alpha={alpha:g}, omega={params.omega:g}); raise max_order")
    return AccurateFixedPoint(params=params, alpha=alpha, branch=branch, mean=mean, stderr=stderr,
                              runs=tuple(runs), seeds=seeds, order=int(order),
                              converged=all(r.converged for r in runs), precise=precise,
                              seconds=time.perf_counter() - t0)

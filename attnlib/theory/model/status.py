"""The outcome of a solve on a branch, in one word: on the branch, the branch absent, or not converged.

A branch is a fixed point of the state evolution with one overlap held at zero and the other, its *defining
overlap*, non-zero (book :ref:`sec-branches`): ``theta`` on the semantic branch, the positional overlap ``m`` on the
positional one. Where the branch does not exist the solve lands on the fixed point that does, with the defining
overlap vanished: the uninformed point (``m = theta = 0``) or the trivial one (``Q = 0``, ``q = 0``, where the
ridge wins). :func:`branch_status` names which of the three outcomes a result is; every result of the state
evolution carries it as ``status`` (:class:`attnlib.SEResult`, :class:`attnlib.GeneralResult`) and every sweep
table as a column.
"""
from __future__ import annotations

import math

__all__ = ["STATUSES", "VANISH_FLOOR", "DETECTION_SIGMAS", "IMPOSSIBLE_SIGMAS", "defining_overlap", "branch_status",
           "impossible"]

#: The outcomes of a solve: a verified fixed point on the requested branch; the branch does not exist there (the
#: numbers are the fixed point that does); the tolerance was not reached (the numbers are the last iterate).
STATUSES = ("on-branch", "branch-absent", "not-converged")

#: A defining overlap below ``VANISH_FLOOR * rho`` counts as vanished (the branch is the agnostic point).
VANISH_FLOOR = 1e-3

#: A defining overlap counts as present only where it exceeds this many standard errors of its own.
DETECTION_SIGMAS = 2.0


def defining_overlap(branch: str, x) -> float:
    """``|theta|`` for the semantic branch, ``|m|`` for the positional one (the overlap whose vanishing ends
    the branch); for the free state, the smaller of the two; 0 for the agnostic point."""
    if branch == "semantic":
        return abs(x.theta)
    if branch == "positional":
        return abs(x.m)
    if branch == "free":
        return min(abs(x.m), abs(x.theta))
    return 0.0


def branch_status(branch: str, converged: bool, overlap: float, overlap_err: float, rho: float) -> str:
    """The outcome of a solve on ``branch`` (one of :data:`STATUSES`).

    ``"not-converged"`` when ``converged`` is False; on the semantic and positional branches ``"branch-absent"``
    when the defining ``overlap`` (:func:`defining_overlap`) is below ``VANISH_FLOOR * rho`` or not above
    ``DETECTION_SIGMAS`` times its standard error ``overlap_err`` (NaN or 0 where no error is measured);
    ``"on-branch"`` otherwise (always, when converged, for the agnostic and free states, which hold no overlap
    that can vanish).
    """
    if not converged:
        return "not-converged"
    if branch not in ("semantic", "positional"):
        return "on-branch"
    overlap = abs(float(overlap))
    err = float(overlap_err) if overlap_err is not None and math.isfinite(overlap_err) else 0.0
    if not math.isfinite(overlap) or overlap < VANISH_FLOOR * rho or overlap <= DETECTION_SIGMAS * err:
        return "branch-absent"
    return "on-branch"


#: A result counts as impossible only where it lies this many standard errors beyond a physical bound.
IMPOSSIBLE_SIGMAS = 4.0


def impossible(params, x, stderr: dict | None = None) -> str | None:
    """Why the overlaps and losses ``x`` (with ``q, m, theta, train_loss``) cannot be a student's, or None.

    Two bounds hold at every fixed point that is a student: the training loss (a squared loss plus a ridge) is not
    negative, and the student's norm bounds its parts along the positional direction and the teacher,
    ``q >= sigma^2 m^2 + theta^2 / sigma^2`` (``attnlib.theory.model.population``). A point beyond either by more
    than :data:`IMPOSSIBLE_SIGMAS` standard errors (``stderr``, empty for a single rule) is a failure of the solve.
    """
    err = stderr or {}
    s2 = params.sigma ** 2
    if x.train_loss < -IMPOSSIBLE_SIGMAS * err.get("train_loss", 0.0) - 1e-12:
        return f"a negative training loss ({x.train_loss:.3g})"
    slack = IMPOSSIBLE_SIGMAS * (err.get("q", 0.0) + 2 * s2 * abs(x.m) * err.get("m", 0.0)
                                 + 2 * abs(x.theta) * err.get("theta", 0.0) / s2) + 1e-9 * max(x.q, 1e-300)
    bound = s2 * x.m ** 2 + x.theta ** 2 / s2
    if x.q < bound - slack:
        return f"q = {x.q:.3g} below sigma^2 m^2 + theta^2 / sigma^2 = {bound:.3g}"
    return None

"""Branches as curves in ``alpha``: continuation to their ends, cached traces, the ends under the pooled rule,
and the thresholds where branches cross.

:mod:`~attnlib.theory.branches.continuation` (pseudo-arclength continuation), :mod:`~attnlib.theory.branches.traces`
(cached traces and their settings), :mod:`~attnlib.theory.branches.thresholds` (``alpha_c``, ``alpha_l``),
:mod:`~attnlib.theory.branches.pooled_end` and :mod:`~attnlib.theory.branches.pooled_thresholds` (ends and
thresholds under the pooled rule), :mod:`~attnlib.theory.branches.general_thresholds` (any ``L`` and rank).

Imports from :mod:`attnlib.theory.solve`, :mod:`attnlib.theory.model` and the shared ground only.
"""

"""The high-dimensional theory: the paper's case (``L = 2`` tokens, rank-1 student) and any ``L`` and rank.

Imports flow one way, from what the equations are to what is computed with them (README, *Architecture*):

* the map: :mod:`~attnlib.theory.quadrature` (Gaussian expectations), :mod:`~attnlib.theory.attention` (the
  attention maps and the output loss), :mod:`~attnlib.theory.proximal` (the non-convex proximal step),
  :mod:`~attnlib.theory.generalisation` (test errors), :mod:`~attnlib.theory.state_evolution` (the fixed-point
  map of ``L = 2``, rank 1), :mod:`~attnlib.theory.general_prox` and :mod:`~attnlib.theory.general_model` (the
  same for any ``L`` and student rank);
* solving it: :mod:`~attnlib.theory.iteration` (one rule's damped, accelerated iteration),
  :mod:`~attnlib.theory.newton` (the map as a residual, Newton's method), :mod:`~attnlib.theory.continuation`
  (pseudo-arclength continuation), :mod:`~attnlib.theory.branch_points`, :mod:`~attnlib.theory.accurate`, :mod:`~attnlib.theory.chord`
  (pooled scramblings), :mod:`~attnlib.theory.general_chord`, :mod:`~attnlib.theory.general_state_evolution`,
  and :mod:`~attnlib.theory.solve` (:func:`~attnlib.solve_state_evolution`, which picks the engine and rule);
* branches: :mod:`~attnlib.theory.traces`, :mod:`~attnlib.theory.thresholds`, :mod:`~attnlib.theory.pooled_end`,
  :mod:`~attnlib.theory.pooled_thresholds`, :mod:`~attnlib.theory.general_thresholds`;
* studies: :mod:`~attnlib.theory.sweeps` (sweeps in ``alpha``, branch ends, the phase diagram),
  :mod:`~attnlib.theory.rule_study`, :mod:`~attnlib.theory.se_iterates` (the map iterated step by step),
  :mod:`~attnlib.theory.stability` (replicon and near-ties).

This layer imports only from the shared ground (:mod:`attnlib.params`, :mod:`attnlib.cache`,
:mod:`attnlib.parallel`, :mod:`attnlib.exceptions`).
"""

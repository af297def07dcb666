"""The high-dimensional theory: the paper's case (``L = 2`` tokens, rank-1 student) and any ``L`` and rank.

Modules: :mod:`~attnlib.theory.quadrature` (Gaussian expectations), :mod:`~attnlib.theory.attention` (the
attention maps and the output loss), :mod:`~attnlib.theory.proximal` (the non-convex proximal step),
:mod:`~attnlib.theory.generalisation` (test errors), :mod:`~attnlib.theory.state_evolution` (the fixed-point
equations and their solver), :mod:`~attnlib.theory.se_iterates` (the same map iterated step by step),
:mod:`~attnlib.theory.continuation` (pseudo-arclength continuation of a branch), :mod:`~attnlib.theory.stability`
(replicon and near-ties), :mod:`~attnlib.theory.sweeps` (sweeps in ``alpha``, thresholds, phase diagram);
:mod:`~attnlib.theory.general_prox` and :mod:`~attnlib.theory.general_state_evolution` (the proximal step and
the fixed-point equations for any ``L`` and student rank).

This layer imports only from the shared ground (:mod:`attnlib.params`, :mod:`attnlib.cache`,
:mod:`attnlib.parallel`, :mod:`attnlib.exceptions`).
"""

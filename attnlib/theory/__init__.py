"""The high-dimensional theory of the paper's case (``L = 2`` tokens, rank-1 student).

Modules: :mod:`~attnlib.theory.quadrature` (Gaussian expectations), :mod:`~attnlib.theory.attention` (the
attention maps and the output loss), :mod:`~attnlib.theory.proximal` (the non-convex proximal step),
:mod:`~attnlib.theory.generalisation` (test errors), :mod:`~attnlib.theory.state_evolution` (the fixed-point
equations and their solver), :mod:`~attnlib.theory.se_iterates` (the same map iterated step by step),
:mod:`~attnlib.theory.continuation` (pseudo-arclength continuation of a branch), :mod:`~attnlib.theory.stability`
(replicon and near-ties), :mod:`~attnlib.theory.sweeps` (sweeps in ``alpha``, thresholds, phase diagram).

This layer imports only from the shared ground (:mod:`attnlib.params`, :mod:`attnlib.cache`,
:mod:`attnlib.parallel`, :mod:`attnlib.exceptions`).
"""

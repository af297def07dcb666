"""The high-dimensional theory: the paper's case (``L = 2`` tokens, rank-1 student) and any ``L`` and rank.

Four rooms, imports flowing one way, from what the equations are to what is computed with them (README,
*Architecture*; ``tests/test_layering.py`` holds the order):

* :mod:`attnlib.theory.model`: what the equations are (quadrature rules, the attention maps, the proximal step,
  the test errors, the fixed-point map and its free energy for ``L = 2`` and for any ``L`` and rank);
* :mod:`attnlib.theory.solve`: how a fixed point is found (iteration, Newton and chord steps, pooled scramblings
  with their errors, and :func:`~attnlib.solve_state_evolution`, which picks the engine and the rule);
* :mod:`attnlib.theory.branches`: branches as curves in ``alpha`` (continuation, traces, their ends, the
  thresholds);
* :mod:`attnlib.theory.studies`: what is computed with them (sweeps and the phase diagram, the rule study, the
  map's iterates, stability).

A new capability goes into the lowest room that holds what it needs. The theory imports only from the shared
ground (:mod:`attnlib.params`, :mod:`attnlib.cache`, :mod:`attnlib.parallel`, :mod:`attnlib.exceptions`).
"""

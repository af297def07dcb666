"""How a fixed point is found: one rule's damped iteration, Newton's method on the map as a residual, pooled
scrambled rules with their errors (chord-Newton steps), and the public solve functions.

:mod:`~attnlib.theory.solve.iteration`, :mod:`~attnlib.theory.solve.newton`,
:mod:`~attnlib.theory.solve.branch_points` (a branch's point as a sweep finds it), :mod:`~attnlib.theory.solve.accurate`
and :mod:`~attnlib.theory.solve.chord` (pooled scramblings, ``L = 2``), :mod:`~attnlib.theory.solve.differences`,
:mod:`~attnlib.theory.solve.general_chord` and :mod:`~attnlib.theory.solve.general_state_evolution` (any ``L`` and
rank), and :mod:`~attnlib.theory.solve.dispatch` (:func:`~attnlib.solve_state_evolution`, which picks the engine
and the rule).

Imports from :mod:`attnlib.theory.model` and the shared ground only.
"""

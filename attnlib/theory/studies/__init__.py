"""What is computed with the branches: sweeps in ``alpha`` and the phase diagram, the quadrature-rule study, the
map iterated step by step, and the stability of a fixed point.

:mod:`~attnlib.theory.studies.sweeps`, :mod:`~attnlib.theory.studies.rule_study`,
:mod:`~attnlib.theory.studies.se_iterates`, :mod:`~attnlib.theory.studies.stability` (replicon and near-ties).

The top room of the theory: imports from the three below it and the shared ground.
"""

"""What the equations are: Gaussian expectations, the attention maps, the proximal step, the test errors, and the
state-evolution map with its free energy.

:mod:`~attnlib.theory.model.quadrature` (rules for Gaussian expectations), :mod:`~attnlib.theory.model.attention`
(the attention maps and the output loss), :mod:`~attnlib.theory.model.proximal` (the non-convex proximal step of
``L = 2``, with its compiled kernels), :mod:`~attnlib.theory.model.generalisation` (test errors and the linear
baseline), :mod:`~attnlib.theory.model.status` (the outcome of a solve: on the branch, branch absent, not
converged), :mod:`~attnlib.theory.model.population` (the ``alpha -> inf`` limit of each branch, the minimiser of the
population risk), :mod:`~attnlib.theory.model.state_evolution` (the fixed-point map of ``L = 2``, rank 1: overlaps,
solver settings, results), :mod:`~attnlib.theory.model.general_prox` and :mod:`~attnlib.theory.model.general_model`
(the same for any ``L`` and student rank).

The lowest room of the theory: it imports only from the shared ground.
"""

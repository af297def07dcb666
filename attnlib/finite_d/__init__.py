"""The model at finite dimension ``d``: data, empirical risk minimisation, GAMP and the finite-d arbiter.

Modules: :mod:`~attnlib.finite_d.data` (positional encodings, teacher, samples), :mod:`~attnlib.finite_d.simulation`
(the risk, L-BFGS and gradient descent, measurements), :mod:`~attnlib.finite_d.sim_sweeps` (cached sweeps of runs),
:mod:`~attnlib.finite_d.gamp` (GAMP on finite-d data) and :mod:`~attnlib.finite_d.gamp_tables` (its tables),
:mod:`~attnlib.finite_d.arbiter` (finite-d thresholds from both starts), :mod:`~attnlib.finite_d.landscape`
(the loss along paths between minima), :mod:`~attnlib.finite_d.validity` (finite d against the theory),
:mod:`~attnlib.finite_d.extrapolation` (minimisers against fixed points for any L and rank, extrapolated in 1/d),
:mod:`~attnlib.finite_d.construction` (minima with the defining overlap pinned: the edge verdict).

This layer imports from the shared ground and from :mod:`attnlib.theory`, never from :mod:`attnlib.book`.
"""

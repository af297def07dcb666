"""Central-difference Jacobians of the state-evolution maps (shared by the two-token chord solver,
:mod:`attnlib.theory.solve.chord`, and the general engine's, :mod:`attnlib.theory.solve.general_chord`)."""
from __future__ import annotations

import numpy as np

__all__ = ["central_jacobian"]


def central_jacobian(image, x: np.ndarray, free, steps: np.ndarray) -> np.ndarray:
    """The Jacobian of ``image`` (array -> array of the same length) at ``x`` on the coordinates ``free``, by
    central differences with step ``steps[j]`` for coordinate ``free[j]``: ``J[:, j] = (image(x + h e) -
    image(x - h e))[free] / (2 h)``, shape ``(len(free), len(free))``."""
    free = list(free)
    J = np.empty((len(free), len(free)))
    for j, (i, h) in enumerate(zip(free, steps)):
        images = []
        for sign in (1.0, -1.0):
            e = np.array(x, dtype=float)
            e[i] += sign * h
            images.append(image(e))
        J[:, j] = (images[0] - images[1])[free] / (2.0 * h)
    return J

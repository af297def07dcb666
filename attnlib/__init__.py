"""attnlib: theory and simulations of the solvable model of dot-product attention.

Companion library of the book on Cui, Behrens, Krzakala & Zdeborova, "A phase transition between positional
and semantic learning in a solvable model of dot-product attention" (NeurIPS 2024).
"""
__version__ = "0.1.0"

from .exceptions import CacheWarning, ConvergenceWarning
from .params import ALTERNATIVE_A, STANDARD_A, TaskParams

__all__ = ["__version__", "TaskParams", "STANDARD_A", "ALTERNATIVE_A", "ConvergenceWarning", "CacheWarning"]

"""Warnings and errors raised by :mod:`attnlib`."""


class ConvergenceWarning(RuntimeWarning):
    """An iterative solver stopped before reaching its tolerance.

    The result it returned carries ``converged=False``; its numbers are the last iterate and must not be
    read as a fixed point / minimum.
    """


class CacheWarning(RuntimeWarning):
    """A disk-cache file was unreadable or corrupt and has been recomputed."""


class ThresholdNotFound(RuntimeError):
    """A threshold has no crossing inside the searched ``alpha`` range."""

"""Warnings and errors raised by :mod:`attnlib`, and :func:`warn_caller`, which every warning of the library goes
through."""
import os
import sys
import warnings


class ConvergenceWarning(RuntimeWarning):
    """An iterative solver stopped before reaching its tolerance.

    The result it returned carries ``converged=False``; its numbers are the last iterate and must not be
    read as a fixed point / minimum.
    """


class CacheWarning(RuntimeWarning):
    """A disk-cache file was unreadable or corrupt and has been recomputed."""


class ThresholdNotFound(RuntimeError):
    """A threshold has no crossing inside the searched ``alpha`` range."""


def warn_caller(message: str, category: type[Warning] = ConvergenceWarning) -> None:
    """Warn with ``category``, attributed to the first frame outside attnlib: the shown location and the filters
    by module (``warnings.filterwarnings(..., module=...)``) name the caller's code, the line that called the
    library, however deep inside it the warning arose."""
    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(0), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)

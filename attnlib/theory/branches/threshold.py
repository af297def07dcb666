"""One result type for every threshold search of the theory: :class:`Threshold`.

Both root searches of the library return it: :func:`~attnlib.general_threshold` (the bracket search of the
engine for any ``L`` and rank, which fills ``bracket``) and the pooled rule's search of
:mod:`attnlib.theory.branches.pooled_thresholds` (secant steps from the continuation's value, which fills
``start``). A field a search does not fill is NaN.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Threshold", "NO_ROOT"]

#: ``reason`` of a threshold whose function keeps one sign over the searched range (no root there)
NO_ROOT = "no sign change"


@dataclass(frozen=True)
class Threshold:
    """A threshold, ``alpha_c`` or ``alpha_l``, as a root search returns it.

    Attributes
    ----------
    name : str
        ``"alpha_c"`` or ``"alpha_l"``.
    alpha, err : float
        The root and its error (book :eq:`eq-thresholds`); NaN where none was found (``reason`` says why; where it
        starts with :data:`NO_ROOT` the searched range holds no sign change and ``absent`` is true).
    n_evals : int
        Evaluations of the function (fixed points solved: one or two per evaluation).
    converged : bool
        Whether the search met its tolerance.
    reason : str
        Empty when converged without remark; otherwise what stopped the search or qualifies the root.
    seconds : float
        Wall time of the search.
    bracket : tuple of float
        The last bracket of a bracketing search (NaN, NaN otherwise).
    start : float
        The value a secant search started from (NaN for a bracketing search).
    """

    name: str
    alpha: float
    err: float
    n_evals: int
    converged: bool
    reason: str
    seconds: float
    bracket: tuple = (math.nan, math.nan)
    start: float = math.nan

    @property
    def absent(self) -> bool:
        """The function keeps one sign over the searched range: there is no threshold there (``alpha`` NaN)."""
        return self.reason.startswith(NO_ROOT)

    def as_row(self) -> dict:
        """A flat row (``bracket`` as ``bracket_lo``, ``bracket_hi``) for tidy tables and caches."""
        return {"name": self.name, "alpha": self.alpha, "err": self.err, "bracket_lo": self.bracket[0],
                "bracket_hi": self.bracket[1], "start": self.start, "n_evals": self.n_evals,
                "converged": self.converged, "reason": self.reason, "seconds": self.seconds}

    @classmethod
    def from_row(cls, row: dict) -> "Threshold":
        """The inverse of :meth:`as_row` (a row without ``start``, as older caches hold, gets NaN)."""
        row = dict(row)
        row["bracket"] = (row.pop("bracket_lo"), row.pop("bracket_hi"))
        return cls(**row)

"""Shared rule of the tests that replay a committed minimiser: what a recomputation on another machine must
agree on, and to what precision its stopping rule guarantees it.

What the replay depends on: the rounding of the matrix products and sums, which changes with the OpenBLAS
kernel (``OPENBLAS_CORETYPE``, chosen from the CPU), the BLAS thread count and numpy's SIMD dispatch (the
CPU's instruction set). The non-convex L-BFGS run then takes another path to the same minimum and stops at
another point of the stopping region. Bit equality holds only on the machine that made the data.

The stopping rule (:func:`attnlib.finite_d.simulation.minimize_lbfgs`): scipy's ``gtol = 1e-10`` on the largest
gradient entry, which leaves ``G = ||grad R||_F / sqrt(d)`` at 1e-10 to 3e-9 in the committed tables
(converged is ``G <= 1e-7``). Near a minimum whose Hessian is bounded below by ``mu``, the stopping point lies
within ``||dQ||_F / sqrt(d) <= G / mu`` of it, and

* the overlaps (bilinear forms in ``Q`` normalised by ``d``) and the Monte-Carlo test errors on the fixed test
  set, first order in ``dQ``, agree to about ``(G_new + G_old) / mu``: with the ridge ``mu ~ lambda = 0.01``,
  a few 1e-7; allowed: :data:`OVERLAP_RTOL` relative plus :data:`OVERLAP_ATOL` (measured across the Haswell,
  Sandybridge and Nehalem kernels at one and two threads: at most 1.5e-6 relative, at ``m ~ 0.01``);
* the training loss, stationary, agrees to second order, ``G |dQ| ~ G^2 / mu ~ 1e-15``, plus the rounding of
  its sum over ``n`` samples: :data:`LOSS_RTOL` (measured: at most 4e-14 relative);
* what does not depend on the minimiser (the data's ``n``, ``rho_hat``, the zero student's loss, the linear
  baseline) agrees to the rounding of a sum: :data:`DATA_RTOL`;
* the gradient norm and the iteration count are properties of the path, not of the minimum: the replay must
  itself be converged (``G <= grad_tol``), nothing more.
"""
from __future__ import annotations

import math

OVERLAP_RTOL = 1e-5
OVERLAP_ATOL = 1e-8
LOSS_RTOL = 1e-10
DATA_RTOL = 1e-12

#: the columns of the committed tables by what they depend on
MINIMISER = ("q", "m", "theta", "test_error", "test_error_stderr", "test_error_cv", "test_error_cv_stderr", "dist")
LOSS = ("train_loss",)
DATA = ("n", "rho_hat", "train_loss_zero", "linear_test_error")
PATH = ("grad_norm", "n_iter", "n_evaluations", "seconds")


def tolerance(column: str) -> tuple[float, float]:
    """``(rtol, atol)`` of a replayed column (module docstring); KeyError for a path-dependent column."""
    if column in MINIMISER:
        return OVERLAP_RTOL, OVERLAP_ATOL
    if column in LOSS:
        return LOSS_RTOL, 0.0
    if column in DATA:
        return DATA_RTOL, 0.0
    raise KeyError(f"{column} depends on the minimiser's path, not on the minimum: not replayed")


def mismatches(new: dict, old, columns, grad_tol: float = 1e-7) -> list[str]:
    """The columns of ``columns`` in which the replay ``new`` differs from the committed row ``old`` beyond its
    tolerance, plus ``grad_norm`` if the replay is not converged (``G > grad_tol``); empty when they agree."""
    bad = []
    for k in columns:
        if k in PATH:
            continue
        rtol, atol = tolerance(k)
        a, b = float(new[k]), float(old[k])
        if math.isnan(a) and math.isnan(b):
            continue
        if not abs(a - b) <= atol + rtol * abs(b):
            bad.append(f"{k}: {a!r} vs {b!r} (rel {abs(a - b) / max(abs(b), 1e-300):.2e}, allowed {rtol:g})")
    if "grad_norm" in columns and not float(new["grad_norm"]) <= grad_tol:
        bad.append(f"grad_norm: {new['grad_norm']!r} > {grad_tol:g} (not converged)")
    return bad

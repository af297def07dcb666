"""Timing and accuracy of GAMP on finite-d data (attnlib.finite_d.gamp) at the reference task, d = 2000, alpha = 2.

For each branch start: one GAMP run to its fixed point (wall time, iterations, time per iteration), the
L-BFGS ERM minimum from the same start and seed (attnlib.finite_d.simulation.simulate_erm), and the differences of
the overlaps; then the per-iteration deviation of GAMP from its state evolution (damping 0.3, 20 iterations).

Run: ``python benchmarks/bench_gamp.py [d]``.
"""
import sys
import time
import warnings

import numpy as np

from attnlib import ConvergenceWarning, run_gamp, simulate_erm, state_evolution_iterates, TaskParams


def main(d: int = 2000, alpha: float = 2.0) -> None:
    P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    for start, extra in (("semantic", {}), ("positional", {"message_damping": 0.5, "max_iter": 60})):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            run = run_gamp(P, d, alpha, start=start, seed=0, **extra)
        t0 = time.perf_counter()
        erm = simulate_erm(P, d, alpha, start=start, seed=0, method="lbfgs", n_test=100)
        t_erm = time.perf_counter() - t0
        th, m, q = (run.theta[-2:].mean(), run.m[-2:].mean(), run.q[-2:].mean())
        print(f"{start:10s} GAMP {run.seconds:6.1f} s, {run.n_iter} it ({run.seconds / run.n_iter:.2f} s/it), "
              f"converged={run.converged}, residual={run.residual:.1e}, grad={run.grad_norm:.1e}")
        print(f"{'':10s} GAMP   theta={th:.4f} m={m:.4f} q={q:.4f}  (mean of last two iterates)")
        print(f"{'':10s} L-BFGS theta={erm.theta:.4f} m={erm.m:.4f} q={erm.q:.4f}  ({t_erm:.1f} s)")
        print(f"{'':10s} delta  theta={th - erm.theta:+.4f} m={m - erm.m:+.4f} q={q - erm.q:+.4f}")
    for start in ("semantic", "positional"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            run = run_gamp(P, d, alpha, start=start, seed=0, max_iter=20, tol=1e-9, normalize_teacher=True)
        se = state_evolution_iterates(P, alpha, run.start, n_iter=20)
        devs = {k: np.abs(getattr(run, k) - getattr(se, k)) for k in ("m", "theta", "q", "V")}
        print(f"{start:10s} GAMP vs SE over 20 iterations: max |dm|={devs['m'].max():.4f} "
              f"|dtheta|={devs['theta'].max():.4f} |dq|={devs['q'].max():.4f} "
              f"|dV/V|={np.max(devs['V'] / se.V):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)

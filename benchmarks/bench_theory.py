"""Speed of the state-evolution solver (prints measured figures; not a timed test).

Targets (issue: theory core, 2-core machine): one converged fixed point <= 0.5 s (median); both branches on a
40-point alpha grid <= 20 s; alpha_c(omega) and alpha_l(omega) at >= 10 values of omega <= 2 min.
Reference runs in the same process: the proximal step solved node by node with scipy.optimize.minimize (the
approach of the paper's own code), timed on one state-evolution iteration and extrapolated per fixed point;
and the same fixed points with the vectorised numpy backend of the proximal step instead of the compiled one.

Run: python benchmarks/bench_theory.py [--quick]
"""
import argparse
import os
import statistics
import tempfile
import time
import warnings
from dataclasses import replace

import numpy as np
from scipy.optimize import minimize

from attnlib import SESolver, TaskParams, alpha_sweep, critical_alpha, linear_crossing_alpha, phase_diagram
from attnlib import solve_state_evolution
from attnlib.attention import teacher_diagonal
from attnlib.proximal import prox_objective, solve_prox
from attnlib.state_evolution import se_nodes, symmetry_generators

warnings.simplefilter("ignore")


def main(quick: bool):
    os.environ["ATTNLIB_CACHE_DIR"] = tempfile.mkdtemp(prefix="attnlib-bench-")  # no cache hits
    p = TaskParams()
    solver = SESolver()
    print(f"quadrature: {solver.quadrature}")

    solve_state_evolution(p, 2.0, "semantic", solver=solver)  # load the compiled kernels (numba's disk cache)
    iters = []
    for backend in ("numba", "numpy"):
        times = []
        for alpha in (1.0, 1.25, 1.5, 2.0, 2.5):
            for branch in ("semantic", "positional"):
                r = solve_state_evolution(p, alpha, branch, solver=replace(solver, prox_backend=backend))
                times.append(r.seconds)
                iters.append(r.n_iter)
        print(f"one fixed point (cold start, 10 points), {backend} prox: median {statistics.median(times):.3f} s, "
              f"max {max(times):.3f} s, median {statistics.median(iters):.0f} iterations")

    # reference: scipy.optimize.minimize per node for one state-evolution iteration
    nodes, _ = se_nodes(solver.quadrature, symmetry_generators(p, (0.0, None)))
    r = solve_state_evolution(p, 2.0, "semantic")
    xi, eta = nodes[:, :2], nodes[:, 2:]
    c = np.sqrt(r.q) * xi
    t = teacher_diagonal((r.theta / np.sqrt(r.q)) * xi + np.sqrt(p.rho - r.theta**2 / r.q) * eta, p)
    k = 300
    t0 = time.perf_counter()
    for i in range(k):
        minimize(lambda h: prox_objective(h, c[i], t[i], r.V, p.sigma), np.zeros(2), method="BFGS")
    per_node = (time.perf_counter() - t0) / k
    n = len(c)
    print(f"proximal step over {n} nodes: scipy minimize per node (one start) {per_node * 1e3:.2f} ms/node -> "
          f"{per_node * n:.1f} s per iteration, {per_node * n * statistics.median(iters):.0f} s per fixed point")
    for backend in ("numba", "numpy"):
        t0 = time.perf_counter()
        for _ in range(5):
            solve_prox(c, t, r.V, p.sigma, mode="global", backend=backend)
        vec = (time.perf_counter() - t0) / 5
        print(f"  global search ({2 + solver.n_ring} starts per node), {backend}: {vec:.3f} s per iteration "
              f"({per_node * n / vec:.0f}x faster than one scipy start per node)")

    t0 = time.perf_counter()
    alpha_sweep(p, np.linspace(0.3, 3.0, 40), use_cache=False, n_jobs=2)
    print(f"both branches on a 40-point alpha grid (2 jobs): {time.perf_counter() - t0:.1f} s")

    omegas = np.linspace(0.0, 0.45, 4 if quick else 10)
    t0 = time.perf_counter()
    df = phase_diagram(p, omegas, n_jobs=2)  # fresh cache directory: no hits from earlier runs
    print(f"alpha_c, alpha_l at {len(omegas)} values of omega (2 jobs): {time.perf_counter() - t0:.1f} s")
    print(df[["omega", "alpha_c", "alpha_l", "eps_lin"]].to_string(index=False))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)

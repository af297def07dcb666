"""Speed of the state-evolution solver (prints measured figures; not a timed test).

Targets (2-core machine): one converged fixed point <= 0.5 s (median), both with the default rule and
converged in the quadrature (attnlib.solve_accurately and attnlib.solve_chord, within 2e-3 of the converged
answer); both branches on a 40-point alpha grid
<= 20 s; the phase diagram with continuation-based thresholds and branch ends at 10 values of omega <= 3 min;
one continuation step (median); the finite-d arbiter at one omega for d up to 4000, 4 seeds, <= 5 min.
Reference runs in the same process: the proximal step solved node by node with scipy.optimize.minimize (the
approach of the paper's own code), timed on one state-evolution iteration and extrapolated per fixed point;
the same fixed points with the vectorised numpy backend of the proximal step; the phase diagram with the previous
continuation settings (every evaluation a full search with 12 ring starts); the previous threshold method
(both branches by warm-started iteration on a 16-point grid, gap interpolated, no branch ends); and the
previous finite-d runs (attnlib.simulate_erm with L-BFGS, which also draws a 60 000-sample test set).

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

from attnlib import (SESolver, TaskParams, alpha_sweep, erm_sweep, phase_diagram, solve_accurately, solve_chord,
                     solve_state_evolution)
from attnlib import arbiter_table, finite_d_critical_alpha, trace_branch
from attnlib.theory.studies.sweeps import DEFAULT_ALPHA_GRID
from attnlib.theory.branches.traces import continuation_settings
from attnlib import prox_objective, solve_prox, teacher_diagonal
from attnlib.theory.model.state_evolution import se_nodes, symmetry_generators

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
        if backend == "numba":
            default_times = times

    # the fixed point converged in the quadrature (three scrambled Sobol rules), beside the default rule's above
    acc_times = []
    for alpha, branch in ((1.25, "positional"), (2.0, "positional"), (1.25, "semantic"), (2.0, "semantic")):
        a = solve_accurately(p, alpha, branch)
        acc_times.append(a.seconds)
        print(f"accurate fixed point ({branch}, alpha={alpha}): {a.seconds:.1f} s, 2^{a.order} points x "
              f"{len(a.seeds)} scramblings, largest relative standard error "
              f"{max(a.stderr[k] / abs(a.mean[k]) for k in a.mean if a.mean[k]):.1e}")
    print(f"accurate fixed point: median {statistics.median(acc_times):.1f} s (target 0.5 s; default rule "
          f"median {statistics.median(default_times):.3f} s)")
    # the same accuracy from pooled scramblings solved by chord-Newton steps (attnlib.solve_chord), same points
    chord_times = []
    for alpha, branch in ((1.25, "positional"), (2.0, "positional"), (1.25, "semantic"), (2.0, "semantic")):
        a = solve_chord(p, alpha, branch)
        chord_times.append(a.seconds)
        print(f"chord fixed point ({branch}, alpha={alpha}): {a.seconds:.2f} s, {len(a.seeds)} x 2^{a.order} points, "
              f"largest relative standard error {max(a.stderr[k] / abs(a.mean[k]) for k in a.mean if a.mean[k]):.1e}")
    print(f"chord fixed point: median {statistics.median(chord_times):.2f} s, max {max(chord_times):.2f} s "
          f"(target 0.5 s; averaged scramblings above: median {statistics.median(acc_times):.1f} s)")

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
    # the compiled search with and without stopping a start at a minimum found before (SAME_MINIMUM), on the nodes
    # of a pooled-rule evaluation near the semantic end (omega = 0.35, alpha = 0.8: 14 % of nodes with two minima)
    from attnlib.theory.model import _prox_kernels
    from attnlib.theory.model.proximal import SAME_MINIMUM
    from attnlib import Quadrature
    from attnlib.theory.model.state_evolution import POSITION_SIGNS, _hold

    pe = replace(p, omega=0.35)
    fe = solve_chord(pe, 0.8, "semantic").mean
    nodes, _ = se_nodes(Quadrature("sobol-sym", 16, 7), symmetry_generators(pe, _hold(pe, "semantic")))
    sq = np.sqrt(fe["q"])
    ce = np.ascontiguousarray(sq * nodes[:, :2] + fe["m"] * POSITION_SIGNS)
    te = np.ascontiguousarray(teacher_diagonal((fe["theta"] / sq) * nodes[:, :2]
                                               + np.sqrt(pe.rho - fe["theta"]**2 / fe["q"]) * nodes[:, 2:], pe))
    times = {}
    for merge in (SAME_MINIMUM, 0.0):
        _prox_kernels.global_prox(ce, te, fe["V"], pe.sigma, 4, 1e-10, 60, merge)
        t0 = time.perf_counter()
        for _ in range(5):
            _prox_kernels.global_prox(ce, te, fe["V"], pe.sigma, 4, 1e-10, 60, merge)
        times[merge] = (time.perf_counter() - t0) / 5
    print(f"  global search (6 starts) on {len(ce)} nodes near the semantic end: {times[SAME_MINIMUM]:.3f} s with "
          f"starts stopped at a minimum found before, {times[0.0]:.3f} s with every start descended to the end")

    grid40 = np.linspace(0.3, 3.0, 40)
    t0 = time.perf_counter()
    alpha_sweep(p, grid40, solver=solver, use_cache=False, n_jobs=2)
    single = time.perf_counter() - t0
    t0 = time.perf_counter()
    alpha_sweep(p, grid40, use_cache=False, n_jobs=2)
    print(f"both branches on a 40-point alpha grid (2 jobs): default pooled rule {time.perf_counter() - t0:.1f} s "
          f"(single Gauss-Hermite rule {single:.1f} s)")

    # one continuation step: a trace of the semantic branch at omega = 0.3 between alpha = 1 and 3
    tr = trace_branch(p, "semantic", 3.0, (1.0, 3.0), continuation_settings())
    steps = tr.seconds / max(len(tr.table) - 1, 1)
    print(f"continuation (sobol-sym 2^14, semantic, omega = 0.3, alpha 3 -> 1): {len(tr.table)} points in "
          f"{tr.seconds:.1f} s ({steps:.2f} s per step incl. the first point, {tr.n_evaluations} map evaluations)")

    omegas = np.linspace(0.0, 0.45, 4 if quick else 10)
    t0 = time.perf_counter()
    df = phase_diagram(p, omegas, n_jobs=2)  # fresh cache directory: no hits from earlier runs
    print(f"phase diagram by continuation (alpha_c, alpha_l, branch ends) at {len(omegas)} values of omega "
          f"(2 jobs): {time.perf_counter() - t0:.1f} s")
    cols = ["omega", "alpha_c", "alpha_l", "semantic_lower_alpha", "semantic_lower_kind", "positional_upper_alpha",
            "positional_upper_kind"]
    print(df[cols].to_string(index=False))
    lost = int((df.semantic_lower_kind == "lost").sum() + (df.positional_upper_kind == "lost").sum())
    print(f"  continuations lost before an end: {lost} of {2 * len(omegas)}")

    # reference: the same phase diagram with the previous continuation settings (every evaluation a full proximal
    # search with 12 ring starts, a fresh finite-difference Jacobian every 3 steps)
    base = continuation_settings()
    previous = replace(base, solver=replace(base.solver, n_ring=12), jacobian_every=3, cheap=False)
    t0 = time.perf_counter()
    ref_df = phase_diagram(p, omegas, solver=previous, n_jobs=2)
    lost_ref = int((ref_df.semantic_lower_kind == "lost").sum() + (ref_df.positional_upper_kind == "lost").sum())
    print(f"reference: previous continuation settings, same omegas (2 jobs): {time.perf_counter() - t0:.1f} s, "
          f"{lost_ref} of {2 * len(omegas)} continuations lost; largest |alpha_c difference| "
          f"{np.nanmax(np.abs(ref_df.alpha_c - df.alpha_c)):.1e}")

    # reference: the previous method (iteration on a coarse grid, first sign change, linear interpolation)
    t0 = time.perf_counter()
    ref = []
    for w in omegas:
        sw = alpha_sweep(p.with_(omega=float(w)), DEFAULT_ALPHA_GRID, solver=solver, n_jobs=2, use_cache=False)
        sem, pos = sw[sw.branch == "semantic"].set_index("alpha"), sw[sw.branch == "positional"].set_index("alpha")
        gap = (sem.train_loss - pos.train_loss).to_numpy()
        a = np.array(sem.index)
        i = next((j for j in range(len(a) - 1) if gap[j] > 0 >= gap[j + 1]), None)
        ref.append(np.nan if i is None else a[i] + (a[i + 1] - a[i]) * gap[i] / (gap[i] - gap[i + 1]))
    print(f"reference: previous grid method, alpha_c only, no ends ({len(omegas)} omegas, 2 jobs): "
          f"{time.perf_counter() - t0:.1f} s; alpha_c = {np.round(ref, 3).tolist()}")

    # the finite-d arbiter at omega = 0.3: d = 1000, 2000, 4000, 4 seeds, both starts, 7 alphas
    alphas = np.round(1.22 * np.geomspace(0.8, 1.25, 4 if quick else 7), 4)
    ds = (1000, 2000) if quick else (1000, 2000, 4000)
    t0 = time.perf_counter()
    table = arbiter_table(p, alphas, ds=ds, seeds=range(4), n_jobs=2)
    est = finite_d_critical_alpha(table)
    print(f"finite-d arbiter, omega = 0.3, {len(alphas)} alphas x d {ds} x 4 seeds x 2 starts (2 jobs): "
          f"{time.perf_counter() - t0:.1f} s; alpha_c(d->inf) = {est.value:.4f} +- {est.stderr:.4f}")
    print(est.per_d.to_string(index=False))
    t0 = time.perf_counter()
    erm_sweep(p, alphas=alphas[:2], ds=(ds[-1],), seeds=(0,), starts=("semantic", "positional"),
              methods=("lbfgs",), n_jobs=2, use_cache=False, normalize_teacher=True)
    ref_t = time.perf_counter() - t0
    arb = table[(table.d == ds[-1]) & table.alpha.isin(alphas[:2]) & (table.seed == 0)].seconds.sum()
    print(f"reference: simulate_erm (L-BFGS + 60 000 test samples) for the 4 runs at d = {ds[-1]}, seed 0, "
          f"two alphas: {ref_t:.1f} s wall (2 jobs), against {arb:.1f} s of arbiter run time (1 job each)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)

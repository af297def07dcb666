"""Speed of the state evolution for any L and student rank (prints measured figures; not a timed test).

Targets (2-core machine): one fixed point at L = 3, r = 1 <= 3 s and at L = 2, r = 2 <= 5 s at the precision of
the default rule (2e-3 relative); the L = 2, rank-1 path no slower than before (0.22 s median).
References in the same process: the L = 2, rank-1 solver at the same points (the general engine forced at L = 2
by a GeneralSolver), the numpy proximal descents against the compiled (numba) ones on the same fixed points, the
compiled descent on one thread against numba's threads and the rule doubled one order at a time against the
default jump by the missed precision (same fixed points), chord steps against the iteration throughout, and the
general proximal search with the earlier start set (two radii and the diagonals) and without stopping starts that
reach an earlier start's minimum.

Run: python benchmarks/bench_general.py [--quick]
"""
import argparse
import statistics
import time
import warnings

import numpy as np

from attnlib import ConvergenceWarning, GeneralSolver, solve_state_evolution, TaskParams
from attnlib.theory.model import general_model as gm
from attnlib.theory.solve import general_state_evolution as gse
from attnlib import softmax_rows, teacher_attention
from attnlib.theory.model.general_prox import prox_global


def timed(fn, repeat=1):
    out, times = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main(quick: bool):
    warnings.simplefilter("ignore", ConvergenceWarning)
    p2 = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    a = np.array([1.0, 0.0, -1.0])
    p3 = p2.with_(A=tuple(map(tuple, softmax_rows(np.outer(a, a)).tolist())))

    print("L = 2, rank 1 (default pooled rule) against the general engine at L = 2 (forced, 4 x 2^12 points):")
    for branch, alpha in (("semantic", 1.25), ("positional", 1.25), ("positional", 2.0)):
        ref, t_ref = timed(lambda: solve_state_evolution(p2, alpha, branch), repeat=1 if quick else 3)
        gen, t_gen = timed(lambda: solve_state_evolution(p2, alpha, branch,
                                                         solver=GeneralSolver(order=12, max_order=12)))
        print(f"  {branch:10s} alpha {alpha}: L=2 solver {t_ref:.2f} s (q {ref.q:.5f} +- {ref.stderr['q']:.5f}); "
              f"general {t_gen:.2f} s (q {gen.q[0, 0]:.5f} +- {gen.stderr['q'][0, 0]:.5f})")

    print("L = 3, rank 1, A = softmax(a a^T), a = (1, 0, -1), default GeneralSolver (precision 2e-3):")
    for branch, alpha in (("semantic", 1.0), ("semantic", 2.0), ("positional", 1.0), ("positional", 2.0)):
        res, t = timed(lambda: solve_state_evolution(p3, alpha, branch))
        print(f"  {branch:10s} alpha {alpha}: {t:.1f} s, {res.rule}, converged {res.converged}, "
              f"eps_t {res.train_loss:.6f} +- {res.stderr['train_loss']:.6f}")

    print("proximal descents, compiled (numba, the default) against numpy, the same fixed point (rules to 2^13):")
    cases = [("L = 3 positional alpha 1", p3, 1.0, "positional", 1)]
    if not quick:
        cases.append(("L = 2 rank 2 free alpha 1", p2, 1.0, "free", 2))
    solve_state_evolution(p3, 2.0, "semantic", solver=GeneralSolver(order=8, max_order=8))  # compile the kernel
    for label, p_, alpha, branch, rank in cases:
        out = {}
        for be in ("numba", "numpy"):
            out[be] = timed(lambda: solve_state_evolution(p_, alpha, branch, rank=rank,
                                                          solver=GeneralSolver(max_order=13, backend=be)))
        (ra, ta), (rb, tb) = out["numba"], out["numpy"]
        print(f"  {label}: numba {ta:.1f} s, numpy {tb:.1f} s ({tb / ta:.1f}x); eps_t {ra.train_loss:.6f} vs "
              f"{rb.train_loss:.6f} (s.e. {ra.stderr['train_loss']:.1e})")

    print("one thread + one doubling at a time (before) | threads + doubling | threads + order jump (default):")
    import numba
    jump = gse._next_order
    for label, p_, alpha, branch, rank in cases:
        row = []
        for threads, step in ((1, "double"), (None, "double"), (None, "jump")):
            numba.set_num_threads(threads or numba.config.NUMBA_NUM_THREADS)
            gse._next_order = jump if step == "jump" else (lambda order, ratio, top: min(order + 1, top))
            try:
                res, t = timed(lambda: solve_state_evolution(p_, alpha, branch, rank=rank))
            finally:
                gse._next_order = jump
                numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
            row.append(f"{t:.1f} s ({res.rule}, eps_t {res.train_loss:.6f})")
        print(f"  {label}: " + " | ".join(row))

    print("L = 2, rank 2, free branch (split minimum), and L = 3 positional: chord steps (the default) against the "
          "iteration throughout (chord=False), the same stopping rule:")
    for label, p_, alpha, branch, rank in ([("L = 2 rank 2 free", p2, 1.0, "free", 2)] if quick else
                                           [("L = 2 rank 2 free", p2, 1.0, "free", 2),
                                            ("L = 2 rank 2 free", p2, 2.0, "free", 2),
                                            ("L = 3 positional", p3, 1.0, "positional", 1)]):
        row = []
        for chord in (True, False):
            res, t = timed(lambda: solve_state_evolution(p_, alpha, branch, rank=rank,
                                                         solver=GeneralSolver(chord=chord)))
            row.append(f"{'chord' if chord else 'iteration'} {t:.1f} s ({res.n_iter} maps, {res.rule}, converged "
                       f"{res.converged}, eps_t {res.train_loss:.6f} +- {res.stderr['train_loss']:.6f})")
        print(f"  {label} alpha {alpha}: " + " | ".join(row))

    # the proximal search: default start set against the earlier, larger one, at a hard L = 3 state
    x = gm.GeneralOverlaps(q=[[0.05]], M=[[0.3], [0.0], [-0.3]], V=[[40.0]], theta=[0.0])
    p = p3.with_(omega=0.0)
    xi, eta, _ = gm.general_nodes(3, 1, 12, 3, (False, True))
    c, hs, _, _ = gm._fields(p, x, xi, eta)
    T = teacher_attention(hs, p.omega, p.A_array)
    small, t_small = timed(lambda: prox_global(c, T, x.V, p.sigma))
    big, t_big = timed(lambda: prox_global(c, T, x.V, p.sigma, radii=(0.35, 0.75), diagonals=True))
    print(f"proximal search, {len(c)} nodes at L = 3 (V = 40, {100 * big.multi_fraction:.0f} % with two minima): "
          f"default starts {t_small:.2f} s, earlier start set {t_big:.2f} s; nodes where the default is higher: "
          f"{int(np.sum(small.value - big.value > 1e-10))}")
    import attnlib.theory.model.general_prox as gp
    merge = gp.MERGE
    try:
        gp.MERGE = 0.0
        whole, t_whole = timed(lambda: prox_global(c, T, x.V, p.sigma), repeat=3)
    finally:
        gp.MERGE = merge
    again, t_merge = timed(lambda: prox_global(c, T, x.V, p.sigma), repeat=3)
    print(f"  starts stopped within {merge:g} of an earlier start's minimum (the default) {t_merge:.2f} s against "
          f"every start descended to the end {t_whole:.2f} s; largest difference of the minimum: "
          f"{np.max(np.abs(again.value - whole.value)):.1e}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)

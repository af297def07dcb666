"""Benchmark of the finite-d ERM training loop (prints figures; not a test).

Times, in one run on the same data (d = 1000, n = 2000, L = 2, r = 1 by default):

* numpy: full-batch gradient descent with the Gram-matrix objective of :class:`attnlib.finite_d.simulation.ERMObjective`
  (book eq. (eq-gram-risk): two passes over the data per step), float64;
* PyTorch autograd on the CPU, float64 and float32: the paper-style loop that forms the attention output
  ``S X`` explicitly and backpropagates through it (optional: skipped if torch is not installed; torch is a
  benchmark-only dependency, not in requirements.txt);
* L-BFGS-B (:func:`attnlib.finite_d.simulation.minimize_lbfgs`) from the same start, its total time and its distance
  to the gradient-descent minimum.

Usage: ``python benchmarks/bench_simulation.py [--d 1000] [--alpha 2] [--steps 5000] [--torch-steps 300]
[--threads N]``. ``--threads`` sets the BLAS / OpenMP thread count of numpy and torch (through the
environment, before numpy is imported, and ``torch.set_num_threads``). On a busy 2-core machine a
multi-threaded OpenBLAS matrix-vector product can be several times slower than a single-threaded one (its
threads wait for each other), so compare runs at equal thread counts and read the load average printed.
Torch steps are timed on a shorter run (``--torch-steps``) and reported per step; the torch float64
trajectory is checked against numpy's after the same number of steps.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Benchmark of the finite-d ERM training loop")
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=2.0)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--torch-steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", choices=("semantic", "positional"), default="semantic")
    ap.add_argument("--threads", type=int, default=None, help="BLAS/OpenMP/torch threads (default: library default)")
    return ap.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.threads is not None and "numpy" not in sys.modules:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402  (after the thread settings)

from attnlib import make_task  # noqa: E402
from attnlib import TaskParams  # noqa: E402
from attnlib.finite_d.simulation import ERMObjective, gradient_descent, minimize_lbfgs, overlaps  # noqa: E402


def torch_loop(samples, Q0, lam, lr, steps, dtype_name, threads=None):
    """The paper-style loop in PyTorch: explicit ``S X``, autograd backward, in-place SGD update."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    X = torch.as_tensor(samples.X, dtype=dtype)
    Y = torch.as_tensor(samples.Y, dtype=dtype)
    d = X.shape[-1]
    Q = torch.as_tensor(Q0[:, 0].copy(), dtype=dtype).requires_grad_(True)
    inv = 1.0 / math.sqrt(d)

    def step():
        h = (X @ Q) * inv                                   # (n, L)
        S = torch.softmax(h[:, :, None] * h[:, None, :], dim=-1)
        out = S @ X                                         # (n, L, d): the attention output
        loss = ((out - Y) ** 2).sum() / (2 * d) + 0.5 * lam * (Q * Q).sum()
        loss.backward()
        with torch.no_grad():
            Q.sub_(lr * Q.grad)
        Q.grad = None

    step()  # warm-up (allocations); not counted, undone below
    with torch.no_grad():
        Q.copy_(torch.as_tensor(Q0[:, 0], dtype=dtype))
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    elapsed = time.perf_counter() - t0
    return elapsed / steps, Q.detach().double().numpy()


def main(args):

    params = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
    d = args.d
    n = int(round(args.alpha * d))
    teacher, samples = make_task(params, d, n, seed=args.seed)
    Q0 = (teacher.Q_star if args.start == "semantic" else np.full(d, 1 / math.sqrt(d)))[:, None].copy()
    print(f"# ERM benchmark: d = {d}, n = {n}, L = 2, r = 1, lr = {args.lr}, start = {args.start}, "
          f"cores = {os.cpu_count()}, threads = {args.threads or 'default'}, "
          f"load average = {os.getloadavg()[0]:.2f}")

    t0 = time.perf_counter()
    obj = ERMObjective(samples, params.lam, 1)
    t_setup = time.perf_counter() - t0

    # numpy gradient descent (float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gradient_descent(obj, Q0, lr=args.lr, steps=20)  # warm-up
        t0 = time.perf_counter()
        gd = gradient_descent(obj, Q0, lr=args.lr, steps=args.steps)
        t_gd = time.perf_counter() - t0
    ms_numpy = 1e3 * t_gd / max(args.steps, 1)
    print(f"numpy  f64 GD : {ms_numpy:7.2f} ms/step   ({args.steps} steps in {t_gd:6.1f} s; "
          f"one-off Gram setup {1e3 * t_setup:.0f} ms; final grad norm {gd.grad_norm:.2e})")

    # torch, paper-style loop
    ms_torch = {}
    try:
        import torch
    except ImportError:
        print("torch      : not installed, torch columns skipped (pip install torch to compare)")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            short = gradient_descent(obj, Q0, lr=args.lr, steps=args.torch_steps)
        for name in ("float64", "float32"):
            per_step, Q_t = torch_loop(samples, Q0, params.lam, args.lr, args.torch_steps, name, args.threads)
            ms_torch[name] = 1e3 * per_step
            dev = np.max(np.abs(Q_t - short.Q[:, 0]))
            print(f"torch  f{name[-2:]} AD: {ms_torch[name]:7.2f} ms/step   (timed on {args.torch_steps} steps, "
                  f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
                  f"max |Q_torch - Q_numpy| after them {dev:.1e})")
        for name, ms in ms_torch.items():
            print(f"ratio numpy / torch {name}: {ms_numpy / ms:.3f}   (target <= 1.0)")

    # L-BFGS from the same start
    t0 = time.perf_counter()
    lb = minimize_lbfgs(obj, Q0)
    t_lb = time.perf_counter() - t0
    ov_gd, ov_lb = overlaps(gd.Q, teacher), overlaps(lb.Q, teacher)
    dist = np.linalg.norm(lb.Q - gd.Q) / math.sqrt(d)
    print(f"L-BFGS        : {t_lb:7.2f} s total  ({lb.n_iter} iterations, {lb.n_evaluations} evaluations, "
          f"grad norm {lb.grad_norm:.1e}, converged {lb.converged})")
    print(f"speed-up of L-BFGS over {args.steps} GD steps: {t_gd / t_lb:.1f}x   (target >= 10x)")
    print(f"distance to the GD minimum: ||Q_lbfgs - Q_gd||/sqrt(d) = {dist:.2e}, "
          f"|d theta| = {abs(ov_lb['theta'][0] - ov_gd['theta'][0]):.1e}, "
          f"|d m| = {abs(ov_lb['m'][0] - ov_gd['m'][0]):.1e}, "
          f"|d eps_t| = {abs(lb.value - gd.value) / d:.1e}, R_gd - R_lbfgs = {gd.value - lb.value:.2e}")


if __name__ == "__main__":
    main(ARGS)

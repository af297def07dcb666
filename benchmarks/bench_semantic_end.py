"""The lower end of the semantic branch under the pooled rule: today's sweep (attnlib.theory.pooled_end.semantic_end,
each fixed point solved from the last one found, end where theta collapses) against the path-independent level
crossing (attnlib.theory.pooled_end.level_end, each fixed point solved from the continuation's interpolation, end
where theta falls to END_LEVEL * rho), on the same traces and seed sets (prints measured figures; not a timed test).

Targets (issue: speed and ends): the spread of the end over three disjoint seed sets <= 0.02 in alpha at every
omega; the end's cost a small part of the phase diagram's 180 s at 10 omega on 2 cores. Then both methods at two
other (sigma, lambda), where the level crossing is biased (attnlib.theory.pooled_end's docstring).

Run: python benchmarks/bench_semantic_end.py [--quick] [--level 0.12]
"""
import argparse
import os
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

from attnlib import TaskParams
from attnlib.parallel import run_jobs
from attnlib.theory.pooled_end import END_LEVEL, level_end, pooled_seeds, semantic_end
from attnlib.theory.sweeps import DEFAULT_RANGE, _range, _trace_range, _with_scrambling, branch_trace, \
    continuation_settings


def one(omega: float, scrambling: int, level: float, sigma: float = 0.5, lam: float = 0.01) -> dict:
    warnings.simplefilter("ignore")
    p = TaskParams(sigma=sigma, lam=lam, omega=omega)
    st = _with_scrambling(continuation_settings(), scrambling)
    lo, hi = _trace_range(*_range(DEFAULT_RANGE, None))
    t0 = time.perf_counter()
    trace = branch_trace(p, "semantic", (lo, hi), st, True)
    t_trace = time.perf_counter() - t0
    t0 = time.perf_counter()
    old = semantic_end(p, st, use_cache=False)
    t_old = time.perf_counter() - t0
    new = level_end(p, "semantic", "lower", trace, seeds=pooled_seeds(scrambling), level=level)
    return {"sigma": sigma, "lam": lam, "omega": omega, "scrambling": scrambling, "trace_s": t_trace,
            "sweep_alpha": np.nan if old is None else old["alpha"], "sweep_kind": None if old is None else old["kind"],
            "sweep_solves": 0 if old is None else old["n_solves"], "sweep_s": t_old,
            "level_alpha": new.alpha, "level_kind": new.kind, "level_solves": new.n_solves, "level_s": new.seconds}


def main(quick: bool, level: float):
    os.environ.setdefault("ATTNLIB_CACHE_DIR", tempfile.mkdtemp(prefix="attnlib-bench-"))
    omegas = np.linspace(0.0, 0.45, 4 if quick else 10)
    t0 = time.perf_counter()
    rows = run_jobs([(one, dict(omega=float(w), scrambling=s, level=level)) for w in omegas for s in range(3)],
                    n_jobs=2)
    wall = time.perf_counter() - t0
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 160)
    print(df.round(4).to_string(index=False))
    spread = df.groupby("omega").agg(sweep=("sweep_alpha", lambda v: v.max() - v.min()),
                                     level=("level_alpha", lambda v: v.max() - v.min()))
    print(f"\nspread of the end over 3 seed sets (level {level:g} rho):")
    print(spread.round(4).to_string())
    print(f"largest spread: sweep {spread.sweep.max():.4f}, level crossing {spread.level.max():.4f} (target 0.02)")
    print(f"fixed points per end: sweep {df.sweep_solves.mean():.1f}, level crossing {df.level_solves.mean():.1f}; "
          f"seconds per end (one job): sweep {df.sweep_s.median():.1f}, level crossing {df.level_s.median():.1f} "
          f"(median); traces {df.trace_s.median():.1f} s; wall {wall:.0f} s on 2 jobs")
    # where theta rises gently from the end, a fixed level cuts off a resolved part of the branch
    other = pd.DataFrame(run_jobs([(one, dict(omega=w, scrambling=0, level=level, sigma=s, lam=lam))
                                   for s, lam, w in ((0.4, 0.01, 0.0), (0.5, 0.03, 0.4))], n_jobs=2))
    print("\nother (sigma, lambda), scrambling 0: the sweep's end against the level crossing")
    print(other[["sigma", "lam", "omega", "sweep_alpha", "sweep_kind", "level_alpha", "level_kind"]].round(4)
          .to_string(index=False))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--level", type=float, default=END_LEVEL)
    args = ap.parse_args()
    main(args.quick, args.level)

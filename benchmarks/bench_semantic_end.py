"""The lower end of the semantic branch under the pooled rule: the collapse sweep (attnlib.theory.branches.pooled_end.pooled_end,
each fixed point solved from the last one found, end where theta collapses; the phase diagram's method until the
agreement end) against the agreement end (attnlib.theory.branches.pooled_end.agreement_end, the phase diagram's method: each
fixed point solved from the continuation's interpolation at its own alpha, end where three disjoint seed sets stop
agreeing), on the same traces (prints measured figures; not a timed test).

Targets (issue: speed and ends): the spread of the end over three scramblings (each with its own seed sets)
<= 0.02 in alpha at every omega; the end's cost a small part of the phase diagram's 180 s at 10 omega on 2 cores.
Then both methods at two other (sigma, lambda), where theta rises gently from the end.

Run: python benchmarks/bench_semantic_end.py [--quick]
"""
import argparse
import os
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

from attnlib import agreement_end, branch_trace, continuation_settings, pooled_end, run_jobs, TaskParams
from attnlib.book import agreement_seeds, pooled_seeds


def sweep_start(trace) -> float:
    """The collapse sweep's start: the smallest alpha above which the trace's theta stays above half its value at
    the top of the range (how the phase diagram started it)."""
    st = trace.stable
    theta = st.theta.abs().to_numpy()
    below = st.alpha.to_numpy()[theta < 0.5 * theta[-1]]
    alpha0 = float(below.max()) if len(below) else float(st.alpha.min())
    return float(st.alpha[st.alpha > alpha0].min()) if (st.alpha > alpha0).any() else alpha0


def one(omega: float, scrambling: int, sigma: float = 0.5, lam: float = 0.01) -> dict:
    warnings.simplefilter("ignore")
    p = TaskParams(sigma=sigma, lam=lam, omega=omega)
    st = continuation_settings(seed=scrambling)
    t0 = time.perf_counter()
    trace = branch_trace(p, "semantic", solver=st)     # over the thresholds' default range
    lo = trace.alpha_range[0]
    t_trace = time.perf_counter() - t0
    old = pooled_end(p, "semantic", "lower", sweep_start(trace), trace, seeds=pooled_seeds(scrambling), alpha_limit=lo)
    new = agreement_end(p, "semantic", "lower", trace, seed_sets=agreement_seeds(scrambling))
    return {"sigma": sigma, "lam": lam, "omega": omega, "scrambling": scrambling, "trace_s": t_trace,
            "trace_alpha": trace.lower.alpha, "trace_kind": trace.lower.kind,
            "sweep_alpha": old.alpha, "sweep_kind": old.kind, "sweep_solves": old.n_solves, "sweep_s": old.seconds,
            "agree_alpha": new.alpha, "agree_kind": new.kind, "agree_solves": new.n_solves, "agree_s": new.seconds}


def main(quick: bool):
    os.environ.setdefault("ATTNLIB_CACHE_DIR", tempfile.mkdtemp(prefix="attnlib-bench-"))
    omegas = np.linspace(0.0, 0.45, 4 if quick else 10)
    t0 = time.perf_counter()
    rows = run_jobs([(one, dict(omega=float(w), scrambling=s)) for w in omegas for s in range(3)], n_jobs=2)
    wall = time.perf_counter() - t0
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(df.round(4).to_string(index=False))
    spread = df.groupby("omega").agg(trace=("trace_alpha", lambda v: v.max() - v.min()),
                                     sweep=("sweep_alpha", lambda v: v.max() - v.min()),
                                     agreement=("agree_alpha", lambda v: v.max() - v.min()))
    print("\nspread of the end over 3 scramblings (continuation trace, collapse sweep, agreement end):")
    print(spread.round(4).to_string())
    print(f"largest spread: trace {spread.trace.max():.4f}, sweep {spread.sweep.max():.4f}, "
          f"agreement {spread.agreement.max():.4f} (target 0.02)")
    print(f"fixed points per end: sweep {df.sweep_solves.mean():.1f}, agreement {df.agree_solves.mean():.1f}; "
          f"seconds per end (one job): sweep {df.sweep_s.median():.1f}, agreement {df.agree_s.median():.1f} "
          f"(median); traces {df.trace_s.median():.1f} s; wall {wall:.0f} s on 2 jobs")
    # where theta rises gently from the end (a fixed resolution level in units of rho would cut the branch short)
    other = pd.DataFrame(run_jobs([(one, dict(omega=w, scrambling=s, sigma=sg, lam=lam))
                                   for sg, lam, w in ((0.4, 0.01, 0.0), (0.5, 0.03, 0.4)) for s in range(3)],
                                  n_jobs=2))
    print("\nother (sigma, lambda), 3 scramblings: the collapse sweep's end against the agreement end")
    print(other[["sigma", "lam", "omega", "scrambling", "trace_alpha", "sweep_alpha", "sweep_kind", "agree_alpha",
                 "agree_kind"]].round(4).to_string(index=False))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    main(ap.parse_args().quick)

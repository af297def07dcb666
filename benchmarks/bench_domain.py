"""Answers everywhere in the domain: the default solve at random points of ``attnlib.DOMAIN`` (prints figures; not a
timed test).

Every call of ``solve_state_evolution`` with valid input must return one of three outcomes (``result.status``): a
fixed point on the requested branch, a "branch absent" verdict with the fixed point that exists, or a flagged
non-convergence. Counted here over a large random sample (sigma, lambda and alpha log-uniform, omega and the
entries of A uniform, either branch): the outcomes, the raw exceptions (target 0), the results with a NaN (target 0)
and the results on the branch whose defining overlap is not above its error (target 0, by the definition of the
status); and the time per call on one core (target: median <= 1 s, max <= 10 s), beside the same figures at the
paper's point (sigma 0.5, lambda 0.01, omega 0.3, alpha 1-4) in the same process.

Run: python benchmarks/bench_domain.py [--n 500] [--seed 0] [--workers 2] [--csv out.csv]
"""
import argparse
import math
import os
import time
import warnings

os.environ.setdefault("NUMBA_NUM_THREADS", "1")   # the time per call on one core
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from attnlib import DOMAIN, ConvergenceWarning, TaskParams, run_jobs, solve_state_evolution


def sample_domain(n: int, seed: int) -> list[dict]:
    """``n`` random points of the domain, each a dict of ``sigma, lam, omega, A, alpha, branch``."""
    rng = np.random.default_rng(seed)

    def log_uniform(name):
        lo, hi = DOMAIN[name]
        return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))

    points = []
    for _ in range(n):
        a11, a22 = rng.uniform(*DOMAIN["A_entry"], size=2)
        points.append({"sigma": log_uniform("sigma"), "lam": log_uniform("lam"),
                       "omega": float(rng.uniform(*DOMAIN["omega"])),
                       "A": ((float(a11), 1.0 - float(a11)), (1.0 - float(a22), float(a22))),
                       "alpha": log_uniform("alpha"), "branch": str(rng.choice(["semantic", "positional"]))})
    return points


def one_call(sigma, lam, omega, A, alpha, branch) -> dict:
    """The outcome of one default solve, timed, with any exception caught and named."""
    row = {"sigma": sigma, "lam": lam, "omega": omega, "A11": A[0][0], "A22": A[1][1], "alpha": alpha,
           "branch": branch}
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = solve_state_evolution(TaskParams(sigma=sigma, lam=lam, omega=omega, A=A), alpha, branch)
        except Exception as exc:  # noqa: BLE001 - counting raw exceptions is the point
            row.update(status="exception", error=f"{type(exc).__name__}: {exc}"[:200])
            r = None
    row["seconds"] = time.perf_counter() - t0
    row["warnings"] = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    if r is not None:
        key = "theta" if branch == "semantic" else "m"
        values = [r.q, r.m, r.V, r.theta, r.test_error, r.train_loss]
        row.update(status=r.status, error="", q=r.q, m=r.m, V=r.V, theta=r.theta, test_error=r.test_error,
                   train_loss=r.train_loss, overlap=abs(getattr(r, key)), overlap_err=r.stderr.get(key, 0.0),
                   nan=not all(math.isfinite(v) for v in values))
    return row


def summary(df: pd.DataFrame, label: str) -> None:
    counts = df.status.value_counts().to_dict()
    ok = df[df.status != "exception"]
    weak = ok[(ok.status == "on-branch") & (ok.overlap <= ok.overlap_err)]
    t = df.seconds.to_numpy()
    print(f"{label}: {len(df)} calls; outcomes {counts}; raw exceptions {int((df.status == 'exception').sum())}; "
          f"NaN results {int(ok.nan.sum()) if len(ok) else 0}; on-branch with overlap <= its error {len(weak)}")
    print(f"  time per call: median {np.median(t):.2f} s, 95 % {np.quantile(t, 0.95):.2f} s, max {t.max():.2f} s")


def main(n: int, seed: int, workers: int, csv: str | None) -> None:
    reference = [dict(sigma=0.5, lam=0.01, omega=0.3, A=((0.6, 0.4), (0.4, 0.6)), alpha=a, branch=b)
                 for a in (1.0, 2.0, 4.0) for b in ("semantic", "positional")]
    ref = pd.DataFrame(run_jobs([(one_call, p) for p in reference], n_jobs=workers))
    summary(ref, "reference (the paper's point)")
    t0 = time.perf_counter()
    df = pd.DataFrame(run_jobs([(one_call, p) for p in sample_domain(n, seed)], n_jobs=workers, progress=False))
    summary(df, f"random sample (seed {seed})")
    print(f"  wall time {time.perf_counter() - t0:.0f} s on {workers} workers")
    bad = df[(df.status == "exception") | df.get("nan", False).fillna(False).astype(bool)]
    for row in bad.head(10).itertuples():
        print(f"  sigma={row.sigma:.3g} lam={row.lam:.3g} omega={row.omega:.3g} A11={row.A11:.3g} "
              f"A22={row.A22:.3g} alpha={row.alpha:.3g} {row.branch}: {row.error}")
    slow = df.sort_values("seconds", ascending=False).head(5)
    for row in slow.itertuples():
        print(f"  slow: {row.seconds:.1f} s sigma={row.sigma:.3g} lam={row.lam:.3g} omega={row.omega:.3g} "
              f"alpha={row.alpha:.3g} {row.branch} -> {row.status}")
    if csv:
        df.to_csv(csv, index=False)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--csv", default=None)
    args = ap.parse_args()
    main(args.n, args.seed, args.workers, args.csv)

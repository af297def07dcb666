#!/usr/bin/env python
"""Regenerate the phase-diagram data read by book/06-phase-diagram.md (and the spinodal of chapter 5).

Writes tidy CSVs under ``book/data/`` and a sidecar ``book/data/phase_meta.json`` recording the parameters,
the solver, the grids, ``attnlib.__version__`` and fingerprint, and the runtime of each part:

* ``phase_standard.csv``  -- standard A: ``alpha_c``, ``alpha_l``, ``eps_lin`` and both spinodals vs ``omega``;
* ``phase_heatmap.csv``   -- standard A: both branches on the (alpha, omega) grid (training-loss gap,
  global-minimum test error, ``eps_lin - eps_g``); the alpha grid is the one used to bracket the thresholds,
  so these sweeps come from the cache filled by the first part;
* ``phase_alternative.csv`` -- alternative A = [[0.3, 0.7], [0.8, 0.2]]: ``alpha_c``, ``alpha_l``, positional
  spinodal vs ``omega`` (coarser);
* ``phase_slices.csv``    -- ``alpha_c``, ``alpha_l`` vs ``omega`` for other ``sigma`` and ``lambda`` (coarse).

Usage (from the repository root; about 20-30 min on 2 cores at the default order 12, seconds when the attnlib
cache is warm)::

    python scripts/regenerate_phase_data.py                   # everything
    python scripts/regenerate_phase_data.py --parts standard  # one part (standard, alternative, slices)
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

import attnlib
from attnlib.cache import library_fingerprint
from attnlib.sweeps import DEFAULT_ALPHA_GRID

ROOT = Path(__file__).resolve().parents[1]
BASE = dict(sigma=0.5, lam=0.01, omega=0.3)
SIGMAS = (0.4, 0.6)   # sigma = 0.3 learns nothing on this alpha range (q -> 0); 0.4 and 0.6 bracket 0.5
LAMS = (0.003, 0.03)  # lambda = 0.001 puts alpha_c below 0.25 at small omega, 0.1 above 5


def make_solver(order: int) -> attnlib.SESolver:
    """The solver used throughout the book's sweeps: Gauss-Hermite with ``order`` nodes per dimension."""
    return attnlib.SESolver(quadrature=attnlib.Quadrature("gauss-hermite", order))


def omega_grid(n: int, hi: float = 0.45) -> list[float]:
    return [round(float(w), 4) for w in np.linspace(0.0, hi, n)]


def safe_spinodal(params, branch, solver, alphas=DEFAULT_ALPHA_GRID):
    """``attnlib.spinodal_alpha`` with failures recorded instead of raised.

    Returns ``(value, status)``: ``status`` is "found", "none" (no sign change on the grid), "undefined"
    (semantic branch of a non-swap-symmetric A) or "failed: ..." (an exception from attnlib, recorded
    rather than raised so that one bad point does not lose the rest of the table).
    """
    if branch == "semantic" and not params.swap_symmetric:
        return math.nan, "undefined"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = attnlib.spinodal_alpha(params, branch, solver, alphas=alphas)
    except (ValueError, RuntimeError) as exc:
        return math.nan, f"failed: {type(exc).__name__}: {exc}"[:120]
    return (math.nan, "none") if s is None else (float(s), "found")


def spinodal_table(params, omegas, solver, n_jobs):
    from joblib import Parallel, delayed

    tasks = [(w, b) for w in omegas for b in ("semantic", "positional")]
    out = Parallel(n_jobs=n_jobs)(delayed(safe_spinodal)(replace(params, omega=w), b, solver) for w, b in tasks)
    rows = {}
    for (w, b), (v, st) in zip(tasks, out):
        rows.setdefault(w, {"omega": w})
        rows[w][f"spinodal_{b}"] = v
        rows[w][f"spinodal_{b}_status"] = st
    return pd.DataFrame(list(rows.values()))


def phase_table(params, omegas, solver, n_jobs):
    """``attnlib.phase_diagram`` (thresholds) plus the spinodals computed with :func:`safe_spinodal`."""
    d = attnlib.phase_diagram(params, omegas, solver=solver, spinodals=False, n_jobs=n_jobs)
    return d.merge(spinodal_table(params, omegas, solver, n_jobs), on="omega")


def safe_thresholds(params, solver):
    """alpha_c and alpha_l at one point, failures recorded instead of raised."""
    row = {"omega": params.omega, "eps_lin": attnlib.linear_baseline_error(params)}
    for name, fn in (("alpha_c", attnlib.critical_alpha), ("alpha_l", attnlib.linear_crossing_alpha)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row[name], row[f"{name}_status"] = fn(params, solver), "found"
        except attnlib.ThresholdNotFound:
            row[name], row[f"{name}_status"] = math.nan, "no crossing on the grid"
        except (ValueError, RuntimeError) as exc:
            row[name], row[f"{name}_status"] = math.nan, f"failed: {type(exc).__name__}: {exc}"[:120]
    return row


def heatmap_rows(params, omegas, solver, n_jobs):
    rows = []
    for w in omegas:
        p = replace(params, omega=w)
        eps_lin = attnlib.linear_baseline_error(p)
        df = attnlib.alpha_sweep(p, DEFAULT_ALPHA_GRID, solver=solver, n_jobs=n_jobs)
        sem = df[df.branch == "semantic"].set_index("alpha")
        pos = df[df.branch == "positional"].set_index("alpha")
        for a in sem.index:
            s, q = sem.loc[a], pos.loc[a]
            gap = float(s.train_loss - q.train_loss)
            glob = "semantic" if gap < 0 else "positional"
            eg = float(s.test_error if gap < 0 else q.test_error)
            rows.append(dict(omega=w, alpha=float(a), eps_t_semantic=float(s.train_loss),
                             eps_t_positional=float(q.train_loss), eps_t_gap=gap,
                             eps_g_semantic=float(s.test_error), eps_g_positional=float(q.test_error),
                             theta_semantic=float(s.theta), m_positional=float(q.m),
                             global_branch=glob, eps_g_global=eg, eps_lin=float(eps_lin),
                             lin_minus_global=float(eps_lin - eg),
                             converged_semantic=bool(s.converged), converged_positional=bool(q.converged)))
    return pd.DataFrame(rows)


FINE_ALPHAS = tuple(np.round(np.geomspace(0.4, 2.0, 16), 4))
EDGE_THETA = 0.05   # theta / sigma^2 below which the semantic branch is considered gone


def semantic_edge(params, solver):
    """The lower end of the semantic branch at one omega, on the fine grid FINE_ALPHAS.

    The branch (m held at 0) is followed downwards; ``edge_hi`` is the smallest grid alpha where
    theta/sigma^2 > EDGE_THETA, ``edge_lo`` the next one below. The curvature spinodal is then searched with
    ``attnlib.spinodal_alpha`` on a local grid from ``edge_hi`` up (the window where the branch is a saddle
    is narrow, and the default grid of ``spinodal_alpha`` steps over it). Returns the branch rows and a
    summary row.
    """
    sigma2 = params.sigma ** 2
    df = attnlib.alpha_sweep(params, FINE_ALPHAS, branches=("semantic",), solver=solver)
    df = df.sort_values("alpha")
    alive = df[df.converged & (df.theta / sigma2 > EDGE_THETA)]
    row = {"omega": params.omega, "edge_lo": math.nan, "edge_hi": math.nan, "spinodal_semantic_fine": math.nan,
           "spinodal_status": "no semantic branch"}
    if len(alive):
        hi = float(alive.alpha.min())
        below = df[df.alpha < hi]
        row["edge_hi"] = hi
        row["edge_lo"] = float(below.alpha.max()) if len(below) else math.nan
        local = tuple(np.round(np.geomspace(hi, 1.5 * hi, 5), 4))
        row["spinodal_semantic_fine"], row["spinodal_status"] = safe_spinodal(params, "semantic", solver, local)
    branch = df[["alpha", "q", "theta", "train_loss", "test_error", "converged"]].assign(omega=params.omega)
    return branch, row


def curvature_rows(params, solver, alphas):
    """theta and the curvature along m across the semantic branch (m held at 0), followed downwards."""
    rows, start = [], None
    for a in sorted(alphas, reverse=True):
        base = attnlib.solve_state_evolution(params, float(a), "semantic", solver=solver, start=start)
        start = base.overlaps if base.converged else start
        k = attnlib.branch_curvature(params, float(a), "semantic", solver=solver, start=start)
        rows.append(dict(alpha=float(a), theta=float(base.theta), q=float(base.q), kappa=float(k),
                         converged=bool(base.converged)))
    return pd.DataFrame(rows).sort_values("alpha")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "book" / "data")
    ap.add_argument("--parts", nargs="+", default=["standard", "edge", "dual", "alternative", "slices"],
                    choices=["standard", "spinodals", "edge", "dual", "alternative", "slices"],
                    help="spinodals: recompute only the spinodal columns of phase_standard.csv")
    ap.add_argument("--n-omega", type=int, default=10, help="omega values in [0, 0.45] (standard A)")
    ap.add_argument("--n-omega-alt", type=int, default=5, help="omega values in [0, 0.4] (alternative A)")
    ap.add_argument("--n-omega-slices", type=int, default=5, help="omega values in [0, 0.4] (sigma, lambda slices)")
    ap.add_argument("--order", type=int, default=12, help="Gauss-Hermite nodes per dimension")
    ap.add_argument("--n-jobs", type=int, default=2)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    solver = make_solver(args.order)
    std = attnlib.TaskParams(**BASE)
    alt = attnlib.TaskParams(**BASE, A=attnlib.ALTERNATIVE_A)
    om = omega_grid(args.n_omega)
    om_c = omega_grid(args.n_omega_alt, 0.4)
    om_s = omega_grid(args.n_omega_slices, 0.4)
    meta_path = args.out / "phase_meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta.update({"generated_by": "scripts/regenerate_phase_data.py",
                 "attnlib_version": attnlib.__version__, "attnlib_fingerprint": library_fingerprint(),
                 "solver": {"quadrature": "gauss-hermite", "order": args.order, "prox_mode": solver.prox_mode,
                            "tol": solver.tol},
                 "alpha_grid": [float(a) for a in DEFAULT_ALPHA_GRID],
                 "base_params": {"sigma": std.sigma, "lam": std.lam, "A_standard": np.asarray(std.A).tolist(),
                                 "A_alternative": np.asarray(alt.A).tolist()}})
    meta.setdefault("runtime_s", {})
    meta.setdefault("files", {})

    def done(part, t0, files):
        if meta_path.exists():   # another run may have written parts meanwhile: merge
            old = json.loads(meta_path.read_text())
            meta["runtime_s"] = {**old.get("runtime_s", {}), **meta["runtime_s"]}
            meta["files"] = {**old.get("files", {}), **meta["files"]}
        meta["runtime_s"][part] = round(time.time() - t0, 1)
        meta["files"].update(files)
        meta["date"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
        print(f"[{part}] {meta['runtime_s'][part]:.0f} s -> {', '.join(files)}", flush=True)

    if "standard" in args.parts:
        t0 = time.time()
        pd_std = phase_table(std, om, solver, args.n_jobs)
        pd_std.to_csv(args.out / "phase_standard.csv", index=False)
        hm = heatmap_rows(std, om, solver, args.n_jobs)
        hm.to_csv(args.out / "phase_heatmap.csv", index=False)
        done("standard", t0, {"phase_standard.csv": {"omegas": om, "A": "standard"},
                              "phase_heatmap.csv": {"omegas": om, "alphas": "alpha_grid", "A": "standard"}})
    if "spinodals" in args.parts and "standard" not in args.parts:
        t0 = time.time()
        path = args.out / "phase_standard.csv"
        old = pd.read_csv(path)
        old = old[[c for c in old.columns if not c.startswith("spinodal_")]]
        new = old.merge(spinodal_table(std, list(old.omega), solver, args.n_jobs), on="omega")
        new.to_csv(path, index=False)
        done("spinodals", t0, {"phase_standard.csv": {"omegas": list(old.omega), "A": "standard",
                                                      "spinodals_recomputed": meta["date"] if "date" in meta
                                                      else ""}})
    if "edge" in args.parts:
        from joblib import Parallel, delayed

        t0 = time.time()
        out = Parallel(n_jobs=args.n_jobs)(delayed(semantic_edge)(replace(std, omega=w), solver) for w in om)
        pd.concat([b for b, _ in out]).to_csv(args.out / "phase_semantic_branch.csv", index=False)
        pd.DataFrame([r for _, r in out]).to_csv(args.out / "phase_semantic_edge.csv", index=False)
        done("edge", t0, {"phase_semantic_branch.csv": {"omegas": om, "alphas": list(FINE_ALPHAS)},
                          "phase_semantic_edge.csv": {"omegas": om, "edge_theta_over_sigma2": EDGE_THETA}})
    if "dual" in args.parts:
        t0 = time.time()
        alphas = tuple(np.round(np.geomspace(0.55, 1.4, 13), 4))
        curvature_rows(std, solver, alphas).to_csv(args.out / "dual_minima_curvature.csv", index=False)
        done("dual", t0, {"dual_minima_curvature.csv": {"omega": std.omega, "alphas": list(alphas)}})
    if "alternative" in args.parts:
        t0 = time.time()
        pd_alt = phase_table(alt, om_c, solver, args.n_jobs)
        pd_alt.to_csv(args.out / "phase_alternative.csv", index=False)
        done("alternative", t0, {"phase_alternative.csv": {"omegas": om_c, "A": "alternative"}})
    if "slices" in args.parts:
        t0 = time.time()
        from joblib import Parallel, delayed

        tasks = [(key, replace(std, **{key: v}, omega=w)) for key, values in (("sigma", SIGMAS), ("lam", LAMS))
                 for v in values for w in om_s]
        rows = Parallel(n_jobs=args.n_jobs)(delayed(safe_thresholds)(p, solver) for _, p in tasks)
        parts = [pd.DataFrame([{"slice": key, "sigma": p.sigma, "lam": p.lam, **r} for (key, p), r in zip(tasks, rows)])]
        parts[0]["found_alpha_c"] = np.isfinite(parts[0].alpha_c)
        parts[0]["found_alpha_l"] = np.isfinite(parts[0].alpha_l)
        pd.concat(parts).to_csv(args.out / "phase_slices.csv", index=False)
        done("slices", t0, {"phase_slices.csv": {"omegas": om_s, "sigmas": list(SIGMAS), "lams": list(LAMS),
                                                 "A": "standard"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())

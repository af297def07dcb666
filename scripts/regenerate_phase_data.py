#!/usr/bin/env python
"""Regenerate the phase-diagram data of the book (book/data/phase_*.csv, branch_traces.csv, rs_validity.csv,
free_states.csv + phase_meta.json).

Every threshold and branch end comes from the continuation-based functions of :mod:`attnlib.theory.studies.sweeps`
(pseudo-arclength continuation of both branches to their ends, with the symmetrised Sobol rule of
``attnlib.theory.branches.traces.SMOOTH_QUADRATURE``), except the semantic branch's lower end, the positional branch's
upper end (where the continuation stops inside the range) and the two thresholds, which are then placed under the
default pooled rule by :mod:`attnlib.theory.branches.pooled_end` and :mod:`attnlib.theory.branches.pooled_thresholds` (the
continuation's own values are kept beside them as ``semantic_lower_trace_*``, ``positional_upper_trace_*``,
``alpha_c_trace`` and ``alpha_l_trace``); each point is cached on disk under
``$ATTNLIB_CACHE_DIR``, so an interrupted run resumes.

Parts (``--parts``):

* ``standard``: standard A, sigma = 0.5, lambda = 0.01, at every omega of the paper's figure and a regular
  grid (15 values, 0 to 0.45), each with 3 independent scramblings of the quadrature
  (``phase_diagram(..., scramblings=3)``): ``phase_standard_runs.csv`` (one row per omega and scrambling) and
  ``phase_standard.csv`` (their means and standard errors, :func:`attnlib.theory.studies.sweeps.summarise_phase_diagram`,
  with the paper's values from ``paper_reference.csv`` beside them);
* ``traces``: the two branches traced at omega in {0, 0.1, 0.2, 0.3, 0.4} (scrambling 0): ``branch_traces.csv``;
* ``alternative``: the paper's alternative A at omega in {0, 0.05, 0.1, 0.15, 0.2, 0.3} (one scrambling):
  ``phase_alternative.csv`` and its traces at omega in {0.1, 0.15} (appended to ``branch_traces.csv``);
* ``slices``: alpha_c, alpha_l and the branch ends at other sigma (0.4, 0.6) and lambda (0.003, 0.03), standard
  A, omega in {0, 0.2, 0.4} (one scrambling): ``phase_slices.csv``;
* ``validity``: theory against the finite-d minimisers of ``arbiter_standard.csv``
  (:func:`attnlib.finite_d.validity.rs_validity`, with the replicon and tie density of every fixed point):
  ``rs_validity.csv``; and the fixed points of the state evolution nearest to some finite-d minima
  (:func:`attnlib.finite_d.validity.fixed_point_near`): ``free_states.csv``;
* ``solver``: at omega = 0, alpha = 0.5384 (where theory and finite d part), the positional fixed point under
  several quadrature rules and both proximal treatments (:func:`attnlib.finite_d.validity.solver_checks`,
  ``edge_solver_checks.csv``), the training-loss profile with m pinned (:func:`attnlib.finite_d.validity.pinned_profile`,
  ``edge_profile.csv``) and a brute-force check of the proximal search there (in ``phase_meta.json``).

Usage::

    python scripts/regenerate_phase_data.py [--n-jobs 2] [--parts standard traces alternative slices validity solver]
"""
import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from attnlib import (ALTERNATIVE_A, branch_trace, Continuation, fixed_point_near, Overlaps, phase_diagram,
                     pinned_profile, provenance, prox_coverage, rs_validity, SESolver, solve_state_evolution,
                     solver_checks, summarise_phase_diagram, TaskParams)
from attnlib.book import SMOOTH_N_RING, SMOOTH_QUADRATURE, TIE_SMOOTHING

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"
STANDARD = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
ALTERNATIVE = STANDARD.with_(A=ALTERNATIVE_A)
#: omega values: the paper's (alpha_c and alpha_l) and a regular grid.
OMEGAS = sorted({0.0, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.275, 0.3, 0.325, 0.35, 0.38, 0.4, 0.425, 0.45})
SCRAMBLINGS = 3
TRACE_OMEGAS = (0.0, 0.1, 0.2, 0.3, 0.4)
ALT_OMEGAS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)
#: The (sigma, lambda) slices: each value changes one parameter of the standard task.
SLICES = (("sigma", 0.4), ("sigma", 0.6), ("lam", 0.003), ("lam", 0.03))
SLICE_OMEGAS = (0.0, 0.2, 0.4)
#: Finite-d minima whose nearest fixed point of the theory is looked for: (A, omega, alpha, start).
FREE_POINTS = [("standard", 0.0, 0.55, "positional"), ("standard", 0.0, 0.55, "semantic"),
               ("standard", 0.3, 0.6, "semantic"), ("standard", 0.3, 0.6, "positional"),
               ("alternative", 0.1, 1.0, "positional"), ("alternative", 0.15, 2.0, "semantic")]


def with_paper(summary: pd.DataFrame, folder: Path) -> pd.DataFrame:
    paper = pd.read_csv(folder / "paper_reference.csv")
    out = summary.copy()
    for q in ("alpha_c", "alpha_l"):
        ref = paper[paper.quantity == q].set_index("omega").value
        out[f"paper_{q}"] = [float(ref.get(round(w, 6), np.nan)) for w in out.omega]
    return out


def part_standard(args, meta):
    runs = phase_diagram(STANDARD, OMEGAS, n_jobs=args.n_jobs, progress=True, scramblings=SCRAMBLINGS)
    runs.to_csv(args.out / "phase_standard_runs.csv", index=False, float_format="%.10g")
    with_paper(summarise_phase_diagram(runs), args.out).to_csv(args.out / "phase_standard.csv", index=False,
                                                     float_format="%.10g")
    meta["standard"] = {"omegas": OMEGAS, "scramblings": SCRAMBLINGS}


def trace_rows(params, label, omegas):
    rows = []
    for w in omegas:
        p = params.with_(omega=float(w))
        for b in ("semantic", "positional"):
            tr = branch_trace(p, b)
            if tr is None:
                continue
            t = tr.table[["alpha", "q", "m", "V", "theta", "train_loss", "test_error", "residual", "s", "dlogalpha_ds",
                          "det_ru", "partner"]].copy()
            t.insert(0, "branch", b)
            t.insert(0, "omega", float(w))
            t.insert(0, "A", label)
            t["lower_kind"], t["lower_alpha"] = tr.lower.kind, tr.lower.alpha
            t["upper_kind"], t["upper_alpha"] = tr.upper.kind, tr.upper.alpha
            rows.append(t)
    return rows


def part_traces(args, meta):
    rows = trace_rows(STANDARD, "standard", TRACE_OMEGAS) + trace_rows(ALTERNATIVE, "alternative", (0.1, 0.15))
    pd.concat(rows, ignore_index=True).to_csv(args.out / "branch_traces.csv", index=False, float_format="%.10g")
    meta["traces"] = {"standard": TRACE_OMEGAS, "alternative": [0.1, 0.15]}


def part_alternative(args, meta):
    df = phase_diagram(ALTERNATIVE, ALT_OMEGAS, n_jobs=args.n_jobs, progress=True)
    df.to_csv(args.out / "phase_alternative.csv", index=False, float_format="%.10g")
    meta["alternative"] = {"omegas": ALT_OMEGAS, "A": ALTERNATIVE_A}


def part_slices(args, meta):
    parts = []
    for key, value in SLICES:
        df = phase_diagram(STANDARD.with_(**{key: value}), SLICE_OMEGAS, n_jobs=args.n_jobs, progress=True)
        df.insert(0, "lam", STANDARD.lam if key == "sigma" else value)
        df.insert(0, "sigma", value if key == "sigma" else STANDARD.sigma)
        df.insert(0, "slice", key)
        parts.append(df)
    pd.concat(parts, ignore_index=True).to_csv(args.out / "phase_slices.csv", index=False, float_format="%.10g")
    meta["slices"] = {"slices": SLICES, "omegas": SLICE_OMEGAS}


def part_validity(args, meta):
    table = pd.read_csv(args.out / "arbiter_standard.csv")
    val = rs_validity(table[table.omega.isin([0.0, 0.1, 0.3])])
    val.to_csv(args.out / "rs_validity.csv", index=False, float_format="%.10g")
    rows = []
    arb = {"standard": table, "alternative": pd.read_csv(args.out / "arbiter_alternative.csv")}
    for label, w, a, start in FREE_POINTS:
        t = arb[label]
        sub = t[np.isclose(t.omega, w) & np.isclose(t.alpha, a) & (t.start == start)]
        sub = sub[sub.d == sub.d.max()]
        if sub.empty:
            continue
        params = (STANDARD if label == "standard" else ALTERNATIVE).with_(omega=w)
        q, m, th = sub.q.mean(), sub.m.abs().mean(), sub.theta.abs().mean()
        row = dict(A=label, omega=w, alpha=a, start=start, d=int(sub.d.iloc[0]), fd_q=q, fd_m=m, fd_theta=th,
                   fd_train_loss_rel=float((sub.train_loss - sub.train_loss_zero).mean()))
        for branch in ("free", "positional", "semantic"):
            res = fixed_point_near(params, a, q, m, th, branch=branch)
            row.update({f"{branch}_converged": res.converged, f"{branch}_q": res.q, f"{branch}_m": res.m,
                        f"{branch}_theta": res.theta, f"{branch}_train_loss": res.train_loss})
        rows.append(row)
    pd.DataFrame(rows).to_csv(args.out / "free_states.csv", index=False, float_format="%.10g")
    meta["validity"] = {"omegas": [0.0, 0.1, 0.3], "free_points": FREE_POINTS}


#: The point of the solver checks: (omega, alpha) on the arbiter's grid, where theory and finite d part.
EDGE = (0.0, 0.5384)
EDGE_M = (0.0, 0.03, 0.06, 0.09, 0.12, 0.145, 0.17, 0.19, 0.21, 0.24)


def part_solver(args, meta):
    w, a = EDGE
    params = STANDARD.with_(omega=w)
    res = solve_state_evolution(params, a, "positional", start=Overlaps(0.045, 0.145, 24.5, 0.0), solver=SESolver())
    solver_checks(params, a, "positional", res.overlaps).to_csv(args.out / "edge_solver_checks.csv", index=False,
                                                                 float_format="%.10g")
    pinned_profile(params, a, "positional", sorted(set(EDGE_M) | {round(res.m, 6)}), res.overlaps).to_csv(
        args.out / "edge_profile.csv", index=False, float_format="%.10g")
    meta["solver"] = {"omega": w, "alpha": a, "m_values": EDGE_M,
                      "prox_coverage": prox_coverage(res, points=161), "fixed_point": res.as_row()}


PARTS = {"standard": part_standard, "traces": part_traces, "alternative": part_alternative,
         "slices": part_slices, "validity": part_validity, "solver": part_solver}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--parts", nargs="*", choices=list(PARTS), default=list(PARTS))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    meta_path = args.out / "phase_meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta = {k: v for k, v in meta.items() if k in PARTS}
    for name in args.parts:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            PARTS[name](args, meta)
        meta[name]["wall_time_s"] = round(time.perf_counter() - t0, 1)
        meta[name]["library"] = provenance()["library"]  # parts not rerun keep the library they were made with
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    meta["provenance"] = dict(script="scripts/regenerate_phase_data.py", quadrature=str(SMOOTH_QUADRATURE),
                              tie_smoothing=TIE_SMOOTHING, n_ring=SMOOTH_N_RING, cheap=Continuation().cheap, params=dict(sigma=STANDARD.sigma, lam=STANDARD.lam),
                              n_jobs=args.n_jobs, **provenance())
    meta_path.write_text(json.dumps(meta, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Regenerate the histogram-task data of book chapter 1 (book/data/histogram_*.csv + histogram.json).

For each restricted variant ("semantic", "positional") and seed, :func:`attnlib.histogram.histogram_experiment`
draws the paper's data (L = 10, T = 15, 50,000 unique sequences, 70/30 split; data seed = seed), trains the
restricted layer with Adam (learning rate 1e-3, betas 0.9/0.98, eps 1e-9, batch 32) for :data:`EPOCHS`
epochs (the paper: 200), re-expresses it as an unrestricted layer plus a 1e-3 perturbation and retrains that
with plain SGD (learning rate 1e-3) for :data:`RETRAIN_EPOCHS` epochs; a fresh unrestricted layer trained with
the same SGD budget gives the scale of the distance moved. Full training and validation sets are evaluated
every :data:`EVAL_EVERY` epochs (every 2 in the retraining).

Outputs (10 significant digits):

* ``histogram_curves.csv``: one row per (variant, seed, phase, evaluated epoch);
* ``histogram_summary.csv``: one row per (variant, seed): final accuracies and losses, before/after the
  retraining, relative distances moved, attention statistics;
* ``histogram_attention.csv``: attention maps on :data:`attnlib.histogram.EXAMPLE_SEQUENCES`, before
  (``stage = restricted``) and after (``retrained``) the unrestricted retraining;
* ``histogram.json``: provenance (command, settings, versions, machine, date, wall time).

Every run is cached under ``$ATTNLIB_CACHE_DIR`` (an interrupted regeneration resumes). Each worker runs
XLA single-threaded (set by attnlib.histogram), so ``--n-jobs 2`` uses two cores.

Usage::

    python scripts/regenerate_histogram_data.py [--n-jobs 2] [--seeds 0 1 2 3]
"""
import argparse
import json
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data"

VARIANTS = ("semantic", "positional")
SEEDS = (0, 1, 2, 3)
EPOCHS = 100           # the paper trains 200 epochs
RETRAIN_EPOCHS = 20
EVAL_EVERY = 5         # full-set evaluations during the restricted training (every 2 epochs in the retraining)
N_SAMPLES = 50_000     # as the paper: 35,000 training and 15,000 validation sequences


def settings():
    """The keyword arguments of histogram_experiment used for the committed data (also by the data test)."""
    from attnlib import histogram as H

    return dict(task=H.HistogramTask(n_samples=N_SAMPLES),
                config=H.TrainConfig(epochs=EPOCHS, eval_every=EVAL_EVERY),
                retrain=H.TrainConfig(optimizer="sgd", epochs=RETRAIN_EPOCHS, eval_every=2),
                perturbation=1e-3, n_probe=2000)


def run_one(variant, seed):
    from attnlib import histogram as H

    return H.histogram_experiment(variant, seed, **settings())


def tables(results):
    """The three tidy tables from a list of histogram_experiment results."""
    curves, summary, attention = [], [], []
    for res in results:
        s = res["summary"]
        summary.append(s)
        curves += [dict(variant=s["variant"], seed=s["seed"], **row) for row in res["curves"]]
        for stage, maps in res["attention"].items():
            for e, (seq, A) in enumerate(zip(res["examples"], maps)):
                for q in range(len(seq)):
                    for k in range(len(seq)):
                        attention.append(dict(variant=s["variant"], seed=s["seed"], stage=stage, example=e,
                                              query=q, key=k, query_token=seq[q], key_token=seq[k],
                                              weight=A[q][k]))
    return pd.DataFrame(curves), pd.DataFrame(summary), pd.DataFrame(attention)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    jobs = [(v, s) for s in args.seeds for v in VARIANTS]
    results = Parallel(n_jobs=args.n_jobs)(delayed(run_one)(v, s) for v, s in jobs)
    wall = time.perf_counter() - t0
    curves, summary, attention = tables(results)
    for name, df in (("curves", curves), ("summary", summary), ("attention", attention)):
        df.to_csv(args.out / f"histogram_{name}.csv", index=False, float_format="%.10g")

    import jax
    import jaxlib
    import optax

    import attnlib
    from attnlib import histogram as H
    from attnlib import library_fingerprint

    kw = settings()
    meta = dict(script="scripts/regenerate_histogram_data.py", command=" ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
                function="attnlib.histogram.histogram_experiment", variants=list(VARIANTS), seeds=args.seeds,
                task=asdict(kw["task"]), shape=asdict(H.LayerShape()), config=asdict(kw["config"]),
                retrain=asdict(kw["retrain"]), perturbation=kw["perturbation"], n_probe=kw["n_probe"],
                examples=[list(e) for e in H.EXAMPLE_SEQUENCES],
                paper_differences=dict(epochs=dict(paper=200, here=EPOCHS)),
                float_dtype="float32", xla_flags=H.XLA_DETERMINISTIC_FLAGS, n_jobs=args.n_jobs,
                attnlib_version=attnlib.__version__, attnlib_fingerprint=library_fingerprint(),
                jax=jax.__version__, jaxlib=jaxlib.__version__, optax=optax.__version__,
                numpy=np.__version__, python=sys.version.split()[0], machine=platform.machine(),
                processor=platform.processor() or platform.machine(),
                wall_time_s=round(wall, 1), generated=time.strftime("%Y-%m-%dT%H:%M:%S"))
    (args.out / "histogram.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{len(results)} runs in {wall:.0f} s", flush=True)
    print(summary[["variant", "seed", "val_acc", "val_acc_after_retrain", "retrain_distance",
                   "control_distance"]].to_string(index=False))


if __name__ == "__main__":
    main()

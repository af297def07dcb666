"""attnlib.parallel.run_jobs: local workers (loky) and a Dask cluster give the same results, in job order, also
through ``$ATTNLIB_PARALLEL_BACKEND``; the caller's cache folder reaches the Dask workers; bad backends fail
clearly. The Dask tests start a two-worker LocalCluster once (skipped without ``distributed``)."""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest
from replay import mismatches

from attnlib.finite_d.sim_sweeps import erm_sweep
from attnlib.params import TaskParams
from attnlib.parallel import run_jobs

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
SMALL = dict(ds=(30,), alphas=(1.0, 2.0), seeds=(0, 1), starts=("semantic",), methods=("lbfgs",), n_test=200)


def spectrum(seed: int, n: int = 256) -> list[float]:
    """A small deterministic numpy job (no BLAS, so no thread-dependent rounding): a seeded power spectrum."""
    x = np.random.default_rng(seed).standard_normal(n)
    return (np.abs(np.fft.rfft(np.sin(x) ** 2)) ** 2).tolist()


def late_first(i: int, n: int) -> int:
    """Returns ``i``; the first jobs finish last, so completion order is not job order."""
    time.sleep(0.05 * (n - i))
    return i


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.fixture(autouse=True)
def no_backend_env(monkeypatch):
    monkeypatch.delenv("ATTNLIB_PARALLEL_BACKEND", raising=False)
    monkeypatch.delenv("ATTNLIB_DASK_SCHEDULER", raising=False)


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       timeout=60)
    try:
        client = distributed.Client(cluster, timeout=60)
        try:
            yield cluster, client
        finally:
            client.close(timeout=30)
    finally:
        cluster.close(timeout=30)


def test_local_workers_equal_this_process():
    jobs = [(spectrum, dict(seed=s)) for s in range(6)]
    serial = run_jobs(jobs, n_jobs=1)
    assert run_jobs(jobs, n_jobs=2) == serial
    assert run_jobs(jobs, n_jobs=2, backend="loky", progress=True) == serial
    assert run_jobs(jobs, n_jobs=2, backend="threading") == serial


def test_bad_backend_names_raise(monkeypatch):
    jobs = [(spectrum, dict(seed=0))]
    with pytest.raises(ValueError, match="backend"):
        run_jobs(jobs, backend="spark")
    monkeypatch.setenv("ATTNLIB_PARALLEL_BACKEND", "spark")
    with pytest.raises(ValueError, match="ATTNLIB_PARALLEL_BACKEND"):
        run_jobs(jobs)
    monkeypatch.setenv("ATTNLIB_PARALLEL_BACKEND", "")        # empty: unset
    assert run_jobs(jobs) == [spectrum(0)]


def test_dask_without_dask_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)      # import distributed -> ImportError
    with pytest.raises(ImportError, match="pip install dask distributed"):
        run_jobs([(spectrum, dict(seed=0))], backend="dask")


@pytest.mark.replay
def test_sweep_on_dask_equals_serial(dask_cluster, monkeypatch):
    serial = without_timing(erm_sweep(P, use_cache=False, **SMALL))
    assert without_timing(erm_sweep(P, use_cache=False, **SMALL)) == serial    # an open Client changes nothing
    jobs = [(erm_sweep, dict(params=P, use_cache=False, **SMALL))]
    on_dask = without_timing(run_jobs(jobs, n_jobs=1, backend="dask")[0])           # the whole sweep, one job
    monkeypatch.setenv("ATTNLIB_PARALLEL_BACKEND", "dask")
    via_env = without_timing(erm_sweep(P, use_cache=False, **SMALL))                # its points, on the workers
    # the workers run OpenBLAS on one thread, this process on all cores: the L-BFGS runs agree to the
    # precision of their stopping rule (tests/replay.py); the two runs on the workers agree bit for bit
    assert via_env == on_dask
    assert [(r["alpha"], r["seed"]) for r in via_env] == [(r["alpha"], r["seed"]) for r in serial]
    for a, b in zip(via_env, serial):
        assert a["converged"] and b["converged"]
        bad = mismatches(a, b, ("q", "m", "theta", "test_error", "train_loss", "n", "rho_hat", "grad_norm"))
        assert not bad, bad


def test_dask_workers_write_the_callers_cache(dask_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))      # set after the workers started
    monkeypatch.setenv("ATTNLIB_PARALLEL_BACKEND", "dask")
    rows = erm_sweep(P, **SMALL)
    assert len(list(tmp_path.glob("erm-*.json"))) == 4
    monkeypatch.delenv("ATTNLIB_PARALLEL_BACKEND")
    assert erm_sweep(P, **SMALL) == rows                        # read back here, timings included


def test_dask_progress_keeps_job_order(dask_cluster, capsys):
    n = 6
    jobs = [(late_first, dict(i=i, n=n)) for i in range(n)]
    assert run_jobs(jobs, progress=True, desc="ordered", backend="dask") == list(range(n))
    assert f"{n}/{n}" in capsys.readouterr().err


def test_dask_scheduler_address_from_the_environment(dask_cluster, monkeypatch):
    import distributed

    cluster, _ = dask_cluster
    made = []

    class Recorded(distributed.Client):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    def no_open_client(*args, **kwargs):
        raise ValueError("No global client found and no address provided")

    monkeypatch.setattr(distributed, "get_client", no_open_client)
    monkeypatch.setattr(distributed, "Client", Recorded)
    jobs = [(spectrum, dict(seed=s)) for s in range(3)]
    with pytest.raises(RuntimeError, match="ATTNLIB_DASK_SCHEDULER"):
        run_jobs(jobs, backend="dask")
    monkeypatch.setenv("ATTNLIB_DASK_SCHEDULER", cluster.scheduler_address)
    assert run_jobs(jobs, backend="dask") == [spectrum(s) for s in range(3)]
    assert len(made) == 1 and made[0].status == "closed"       # connected for the call, closed after it

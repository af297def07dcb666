"""Caching of finite-d ERM sweeps (attnlib.finite_d.sim_sweeps + attnlib.cache): resume after interruption,
corrupt files recomputed with a CacheWarning."""
import json

import pytest
from replay import mismatches

import attnlib.finite_d.sim_sweeps as sim_sweeps
from attnlib.exceptions import CacheWarning
from attnlib.params import TaskParams
from attnlib.finite_d.sim_sweeps import erm_point, erm_sweep, rows_to_columns, sweep_grid

P = TaskParams(sigma=0.5, lam=0.01, omega=0.3)
SMALL = dict(ds=(30,), alphas=(1.0, 2.0), seeds=(0, 1), starts=("semantic",), methods=("lbfgs",), n_test=200)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def counter(monkeypatch):
    calls = []
    real = sim_sweeps.simulate_erm

    def counting(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(sim_sweeps, "simulate_erm", counting)
    return calls


def test_interrupted_sweep_recomputes_only_missing_and_corrupt_points(cache_dir, counter):
    rows = erm_sweep(P, **SMALL)
    assert len(rows) == 4 and len(counter) == 4
    files = sorted(cache_dir.glob("erm-*.json"))
    assert len(files) == 4
    # second run: everything from the cache
    again = erm_sweep(P, **SMALL)
    assert len(counter) == 4 and again == rows
    # "interrupt": lose one point, corrupt another
    files[0].unlink()
    files[1].write_text("{ not json at all")
    mtimes = {f: f.stat().st_mtime_ns for f in files[2:]}
    with pytest.warns(CacheWarning):
        resumed = erm_sweep(P, **SMALL)
    assert len(counter) == 6                      # exactly the two damaged points were recomputed
    assert resumed == rows                        # and gave the same numbers
    assert all(f.stat().st_mtime_ns == mtimes[f] for f in files[2:])
    assert len(list(cache_dir.glob("erm-*.json"))) == 4


def test_checksum_mismatch_is_recomputed(cache_dir, counter):
    row = erm_point(P, 30, 1.0, method="lbfgs", n_test=200)
    (path,) = cache_dir.glob("erm-*.json")
    doc = json.loads(path.read_text())
    doc["payload"] = doc["payload"].replace('"d": 30', '"d": 31')
    path.write_text(json.dumps(doc))
    with pytest.warns(CacheWarning):
        assert erm_point(P, 30, 1.0, method="lbfgs", n_test=200) == row
    assert len(counter) == 2


def test_key_covers_every_option(cache_dir, counter):
    erm_point(P, 30, 1.0, method="lbfgs", n_test=200)
    erm_point(P, 30, 1.0, method="lbfgs", n_test=201)
    erm_point(P, 30, 1.0, method="lbfgs", n_test=200, seed=1)
    erm_point(P.with_(omega=0.4), 30, 1.0, method="lbfgs", n_test=200)
    erm_point(P, 30, 1.0, method="lbfgs", n_test=200)
    assert len(counter) == 4
    erm_point(P, 30, 1.0, method="lbfgs", n_test=200, use_cache=False)
    assert len(counter) == 5


@pytest.mark.replay
def test_parallel_sweep_equals_serial_and_columns(cache_dir):
    serial = erm_sweep(P, omegas=(0.2, 0.3), use_cache=False, **SMALL)
    parallel = erm_sweep(P, omegas=(0.2, 0.3), n_jobs=2, use_cache=False, **SMALL)
    assert len(serial) == 8
    # joblib caps the workers at cpu_count // n_jobs BLAS threads, this process runs with its default: the
    # products round differently, so the L-BFGS runs agree to the precision of their stopping rule
    # (tests/replay.py), not bit for bit
    for a, b in zip(serial, parallel):
        assert a["converged"] and b["converged"]
        bad = mismatches(b, a, ("q", "m", "theta", "test_error", "train_loss", "n"))
        assert not bad, bad
    cols = rows_to_columns(serial)
    assert cols["omega"].dtype == float and sorted(set(cols["omega"])) == [0.2, 0.3]
    assert cols["converged"].dtype == bool and cols["d"].dtype == int and cols["start"].dtype.kind == "U"
    assert cols["q"].shape == (8,) and cols["A"].dtype == object


def test_grid_validation():
    assert len(sweep_grid(P, alphas=[1, 2, 3], seeds=range(2), starts=("semantic", "positional"))) == 12
    with pytest.raises(ValueError, match="starts"):
        sweep_grid(P, starts=("nowhere",))
    with pytest.raises(ValueError, match="methods"):
        sweep_grid(P, methods=("sgd",))
    with pytest.raises(ValueError, match="d"):
        sweep_grid(P, ds=(0,))
    with pytest.raises(ValueError, match="params"):
        sweep_grid({"sigma": 0.5})


def test_parallel_sweep_writes_the_callers_cache(cache_dir, counter):
    rows = erm_sweep(P, n_jobs=2, progress=True, **SMALL)
    assert len(list(cache_dir.glob("erm-*.json"))) == 4
    assert erm_sweep(P, **SMALL) == rows and len(counter) == 0   # all read back, none recomputed

"""attnlib.histogram: the histogram task's data, the one-layer model, re-expression, training, caching."""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from attnlib import histogram as H

jax = pytest.importorskip("jax")

TASK = H.HistogramTask(n_samples=2000, seed=3)
SHAPE = H.LayerShape()


@pytest.fixture(scope="module")
def data():
    return H.make_histogram_data(TASK)


def test_xla_runs_on_cpu_single_threaded():
    assert jax.default_backend() == "cpu"
    assert "--xla_cpu_multi_thread_eigen=false" in os.environ["XLA_FLAGS"]
    assert os.environ["JAX_PLATFORMS"] == "cpu"


def test_targets_are_histograms(data):
    for tokens, counts in ((data.tokens_train, data.counts_train), (data.tokens_val, data.counts_val)):
        for seq, target in zip(tokens, counts):
            c = collections.Counter(seq.tolist())
            assert target.tolist() == [c[s] for s in seq.tolist()]
    assert H.histogram_targets([[1, 1, 2, 1]]).tolist() == [[3, 3, 1, 3]]
    assert H.histogram_targets([[0, 1, 2, 3]]).tolist() == [[1, 1, 1, 1]]


def test_data_unique_split_and_seeded(data):
    both = np.concatenate([data.tokens_train, data.tokens_val])
    assert len(data.tokens_train) == 1400 and len(data.tokens_val) == 600
    assert len(np.unique(both, axis=0)) == 2000, "sequences must be unique"
    assert both.min() >= 0 and both.max() == TASK.n_symbols - 1 and both.shape[1] == TASK.seq_len
    # roughly uniform symbols
    freq = np.bincount(both.ravel(), minlength=TASK.n_symbols) / both.size
    assert np.abs(freq - 1 / 15).max() < 0.01
    again = H.make_histogram_data(TASK)
    assert np.array_equal(again.tokens_train, data.tokens_train) and np.array_equal(again.tokens_val,
                                                                                    data.tokens_val)
    other = H.make_histogram_data(H.HistogramTask(n_samples=2000, seed=4))
    assert not np.array_equal(other.tokens_train, data.tokens_train)


def test_count_distribution_matches_the_data():
    task = H.HistogramTask(n_samples=20_000, seed=1)
    d = H.make_histogram_data(task)
    counts = np.concatenate([d.counts_train, d.counts_val]).ravel()
    emp = np.bincount(counts, minlength=task.seq_len + 1) / counts.size
    p = H.count_distribution(task)
    assert p.shape == (11,) and p[0] == 0 and p.sum() == pytest.approx(1, abs=1e-12)
    assert p[1] == pytest.approx((14 / 15) ** 9)
    # 200,000 positions (correlated within a sequence): agreement to a few 1e-3
    np.testing.assert_allclose(emp, p, atol=4e-3)


def test_unique_even_for_small_space():
    task = H.HistogramTask(seq_len=3, n_symbols=4, n_samples=60, seed=0)  # 64 possible sequences
    d = H.make_histogram_data(task)
    both = np.concatenate([d.tokens_train, d.tokens_val])
    assert len(np.unique(both, axis=0)) == 60


@pytest.mark.parametrize("kwargs, name", [
    (dict(seq_len=1), "seq_len"), (dict(n_symbols=1), "n_symbols"), (dict(train_fraction=1.0), "train_fraction"),
    (dict(seq_len=2, n_symbols=2, n_samples=5), "n_samples"), (dict(seed=-1), "seed")])
def test_task_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        H.HistogramTask(**kwargs)


@pytest.mark.parametrize("kwargs, name", [
    (dict(optimizer="rmsprop"), "optimizer"), (dict(learning_rate=0.0), "learning_rate"),
    (dict(batch_size=0), "batch_size"), (dict(b2=1.0), "b1 and b2"), (dict(epochs=-1), "epochs")])
def test_config_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        H.TrainConfig(**kwargs)


def test_bad_variant_and_width():
    with pytest.raises(ValueError, match="variant"):
        H.variant_masks("content", 64)
    with pytest.raises(ValueError, match="width"):
        H.LayerShape(width=63)
    with pytest.raises(ValueError, match="variant"):
        H.histogram_experiment("full", 0)


def test_restricted_attention_depends_on_the_right_half():
    """Positional-only: one attention matrix for every sequence; semantic-only: A[l, k] depends on the two
    tokens only, so permuting the sequence permutes A."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 15, size=(50, 10)).astype(np.int32)
    for variant in ("semantic", "positional"):
        # start from unmasked parameters: the masks of the forward pass alone must impose the restriction
        p = H.init_params(jax.random.key(1), TASK, SHAPE, "full")
        A = H.attention_maps(p, tokens, variant)
        np.testing.assert_allclose(A.sum(-1), 1, atol=1e-6)
        if variant == "positional":
            np.testing.assert_allclose(A, np.broadcast_to(A[0], A.shape), atol=1e-6)
        else:
            perm = rng.permutation(10)
            Ap = H.attention_maps(p, tokens[:, perm], variant)
            np.testing.assert_allclose(Ap, A[:, perm][:, :, perm], atol=1e-6)
            assert A.std(axis=0).mean() > 1e-3  # and it does depend on the content
    A_full = H.attention_maps(H.init_params(jax.random.key(1), TASK, SHAPE, "full"), tokens, "full")
    assert A_full.std(axis=0).mean() > 1e-3


@pytest.mark.parametrize("variant", ["semantic", "positional"])
def test_unrestrict_preserves_the_function(variant, data):
    # unmasked random parameters used as a restricted model: the entries its masks ignore are non-zero,
    # so the re-expression must remove them
    p = H.init_params(jax.random.key(2), TASK, SHAPE, "full")
    logits_r, attn_r = H.forward(p, data.tokens_val, variant)
    q = H.unrestrict(p, variant)
    logits_f, attn_f = H.forward(q, data.tokens_val, "full")
    scale = float(np.abs(logits_r).max())
    assert np.abs(np.asarray(logits_f - logits_r)).max() <= 1e-5 * scale
    assert np.abs(np.asarray(attn_f - attn_r)).max() <= 1e-6
    # the same parameters read as an unrestricted layer compute a different function
    assert np.abs(np.asarray(H.forward(p, data.tokens_val, "full")[0] - logits_r)).max() > 1e-2 * scale
    # perturbation: i.i.d. N(0, perturbation^2) added to every entry
    qp = H.unrestrict(p, variant, perturbation=1e-3, seed=5)
    diff = np.concatenate([np.ravel(qp[k] - q[k]) for k in q])
    assert abs(diff.std() - 1e-3) < 5e-5 and abs(diff.mean()) < 5e-5
    with pytest.raises(ValueError, match="perturbation"):
        H.unrestrict(p, variant, perturbation=-1.0)


def test_training_lowers_the_loss_and_is_bit_reproducible(data):
    cfg = H.TrainConfig(epochs=2, seed=7)
    p0 = H.init_params(jax.random.key(7), TASK, SHAPE, "semantic")
    r1 = H.train(p0, data, "semantic", cfg)
    r2 = H.train(p0, data, "semantic", cfg)
    h = r1.history
    assert h["epoch"] == [0, 1, 2]
    assert h["train_loss"][2] < h["train_loss"][1] < 0.8 * h["train_loss"][0]
    assert h["val_loss"][2] < 0.8 * h["val_loss"][0]
    for k in p0:
        assert np.array_equal(np.asarray(r1.params[k]), np.asarray(r2.params[k])), k
    assert r1.history == r2.history
    # masked-out entries stay exactly zero under Adam (their gradient is zero)
    m = H.variant_masks("semantic", SHAPE.width)
    assert not np.any(np.asarray(r1.params["W_Q"])[m["qk"] == 0])
    assert not np.any(np.asarray(r1.params["pos"])[:, m["pos"] == 0])
    # the first epoch of a 2-epoch run is a 1-epoch run
    r3 = H.train(p0, data, "semantic", H.TrainConfig(epochs=1, seed=7))
    assert r3.history["val_loss"] == h["val_loss"][:2]
    # another shuffling seed gives other parameters
    r4 = H.train(p0, data, "semantic", H.TrainConfig(epochs=1, seed=8))
    assert not np.array_equal(np.asarray(r4.params["W_1"]), np.asarray(r3.params["W_1"]))


def test_sgd_and_evaluation_agree_with_numpy(data):
    """One plain-SGD epoch with one batch of the whole set equals a gradient step; evaluate() equals the
    direct mean over the set (checks the padding and chunking)."""
    p = H.init_params(jax.random.key(3), TASK, SHAPE, "full")
    logits, _ = H.forward(p, data.tokens_val, "full")
    logits = np.asarray(logits, np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    nll = -np.take_along_axis(logp, data.counts_val[..., None], -1).mean()
    acc = (logits.argmax(-1) == data.counts_val).mean()
    loss_e, acc_e = H.evaluate(p, data.tokens_val, data.counts_val, "full")
    assert abs(loss_e - nll) < 1e-5 * nll and abs(acc_e - acc) < 1e-6
    n = len(data.tokens_train)
    r = H.train(p, data, "full", H.TrainConfig(epochs=1, batch_size=n, optimizer="sgd", learning_rate=0.1))
    g = jax.grad(lambda q: H.loss_and_accuracy(q, data.tokens_train, data.counts_train, "full")[0])(p)
    for k in p:
        np.testing.assert_allclose(r.params[k], p[k] - 0.1 * g[k], atol=1e-6, err_msg=k)


def test_accuracy_by_count(data):
    p = H.init_params(jax.random.key(4), TASK, SHAPE, "positional")
    by = H.accuracy_by_count(p, data.tokens_val, data.counts_val, "positional")
    n = sum(k for _, k in by.values())
    assert n == data.counts_val.size and set(by) == set(np.unique(data.counts_val).tolist())
    total = sum(a * k for a, k in by.values()) / n
    assert total == pytest.approx(H.evaluate(p, data.tokens_val, data.counts_val, "positional")[1], abs=1e-6)


def test_relative_distance():
    a = {"x": np.array([3.0, 4.0]), "y": np.array([0.0])}
    b = {"x": np.array([3.0, 4.0]), "y": np.array([1.0])}
    assert H.relative_distance(b, a) == pytest.approx(0.2)
    assert H.relative_distance(b, a, ["x"]) == 0.0


def test_experiment_cached_and_consistent(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE_DIR", str(tmp_path))
    kw = dict(task=H.HistogramTask(n_samples=400), config=H.TrainConfig(epochs=2),
              retrain=H.TrainConfig(optimizer="sgd", epochs=1), n_probe=50)
    out = H.histogram_experiment("positional", 1, **kw)
    assert len(list(tmp_path.glob("histogram_experiment-*.json"))) == 1
    assert H.histogram_experiment("positional", 1, **kw) == out
    fresh = H.histogram_experiment("positional", 1, use_cache=False, **kw)
    wall = ("seconds_train", "seconds_retrain")  # wall times: the only entries a rerun changes
    assert {k: v for k, v in fresh["summary"].items() if k not in wall} == \
        {k: v for k, v in out["summary"].items() if k not in wall}
    assert {k: v for k, v in fresh.items() if k != "summary"} == {k: v for k, v in out.items() if k != "summary"}
    s = out["summary"]
    assert [r["epoch"] for r in out["curves"]] == [0, 1, 2, 0, 1]
    assert s["spread_over_sequences"] < 1e-6  # positional-only: one pattern for all sequences
    assert s["val_acc_before_retrain"] == pytest.approx(s["val_acc"], abs=0.01)
    assert 0 < s["retrain_distance"] < 1 and 0 < s["control_distance"]
    maps = np.array(out["attention"]["restricted"])
    assert maps.shape == (2, 10, 10)
    np.testing.assert_allclose(maps[0], maps[1], atol=1e-6)
    params = H.params_from_lists(out["params"])
    assert H.evaluate(params, *[np.asarray(x) for x in (H.make_histogram_data(
        H.HistogramTask(n_samples=400, seed=1)).tokens_val, H.make_histogram_data(
        H.HistogramTask(n_samples=400, seed=1)).counts_val)], "positional")[1] == pytest.approx(s["val_acc"])


RUN = """
import json, numpy as np
from attnlib import histogram as H
import jax
task = H.HistogramTask(n_samples=600, seed=2)
data = H.make_histogram_data(task)
p = H.init_params(jax.random.key(2), task, H.LayerShape(), "positional")
r = H.train(p, data, "positional", H.TrainConfig(epochs=1, seed=2))
print(json.dumps(H.params_to_lists(r.params)))
"""


def test_bit_reproducible_across_processes():
    outs = [subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for o in outs:
        assert o.returncode == 0, o.stderr[-2000:]
        assert o.stderr == "", o.stderr  # no warnings from JAX on CPU
    assert json.loads(outs[0].stdout) == json.loads(outs[1].stdout)

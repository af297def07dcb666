"""The histogram (counting) task: one trained transformer layer with a positional and a semantic solution.

Section 2 of Cui, Behrens, Krzakala & Zdeborova (NeurIPS 2024) opens with real training: sequences of
``L = 10`` tokens drawn uniformly from ``T = 15`` symbols, target at each position the number of times that
position's token occurs in the sequence (``L + 1`` classes), learned by a single layer

    x_l = t(s_l) + p_l                                     (token + learned positional embedding, width d)
    A   = softmax_row( (x W_Q)(x W_K)^T / sqrt(d) )        (one dot-product attention head)
    z   = LayerNorm(A x W_V)                               (no residual connection)
    h   = ReLU(z W_1 + b_1) W_2 + b_2                      (hidden width 128, model width d = 64)
    logits = h W_c + b_c                                   (L + 1 classes)

In the *restricted* variants the token embedding lives in the first half of the width and the positional
embedding in the second, and the query/key input is restricted to one half: ``"semantic"`` (query/key see
the token half only, so attention depends on content only) or ``"positional"`` (query/key see the position
half only, so the attention matrix is the same for every sequence). The value always sees the full
embedding. ``"full"`` is the unrestricted layer. All three are one model (:func:`forward`) with different
0/1 masks on the embeddings and on the query/key input (:func:`variant_masks`);
:func:`unrestrict` rewrites a restricted model as a ``"full"`` one computing the same function.

Numerics: JAX on CPU in float32 (JAX's default; ``jax_enable_x64`` is not touched), gradients by
``jax.grad``, optimisers from optax. One epoch is one ``jax.lax.scan`` over its mini-batches inside one
jit-compiled function. Importing this module, before JAX is first imported, sets ``JAX_PLATFORMS=cpu``
(silences the accelerator probe) and XLA flags for a single-threaded CPU runtime
(:data:`XLA_DETERMINISTIC_FLAGS`), so that a seed gives bit-identical results run after run on one machine.
On a different CPU the sums round differently (XLA compiles for the host's instruction set) and, training
being chaotic, a run departs from the one made elsewhere after a few hundred steps: compare it with the
spread over seeds (:func:`compare_with_seeds`), not bit for bit.
``attnlib/__init__.py`` does not import this module: the rest of the library does not need JAX.

Randomness: the data come from ``numpy.random.default_rng(task.seed)``; initialisation, the epoch shuffles
and the retraining perturbation from ``jax.random.key(seed)`` folded with a fixed tag and the epoch number,
so the first ``k`` epochs of a run of ``E > k`` epochs are exactly a run of ``k`` epochs.
"""
from __future__ import annotations

import os
import sys

#: XLA flags set by this module (single-threaded Eigen and intra-op pool; deterministic and, for this
#: tiny model, not slower).
XLA_DETERMINISTIC_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

if "jax" not in sys.modules:  # only effective before JAX initialises its backend
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    _flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in _flags:
        os.environ["XLA_FLAGS"] = f"{_flags} {XLA_DETERMINISTIC_FLAGS}".strip()

import functools
import math
import time
from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .cache import cached
from .params import check_int

__all__ = [
    "VARIANTS", "HistogramTask", "LayerShape", "TrainConfig", "HistogramData", "TrainResult",
    "XLA_DETERMINISTIC_FLAGS", "EXAMPLE_SEQUENCES", "histogram_targets", "count_distribution", "make_histogram_data",
    "variant_masks", "init_params", "forward", "loss_and_accuracy", "evaluate", "accuracy_by_count", "train",
    "unrestrict",
    "relative_distance", "attention_maps", "attention_statistics", "histogram_experiment",
    "params_to_lists", "params_from_lists", "CURVE_COLUMNS", "EPOCH0_RTOL", "compare_with_seeds",
]

#: the three architectures (query/key input restricted to the token half, to the position half, or not)
VARIANTS = ("semantic", "positional", "full")

#: illustrative inputs for attention maps (L = 10, symbols 0..14), with repeated tokens
EXAMPLE_SEQUENCES = ((3, 7, 3, 11, 0, 7, 3, 14, 5, 9), (12, 12, 4, 8, 1, 12, 6, 4, 10, 2))


# ----------------------------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class HistogramTask:
    """The data: ``n_samples`` unique sequences of ``seq_len`` symbols from ``n_symbols``, split train/val.

    Parameters
    ----------
    seq_len : int
        Sequence length ``L >= 2`` (paper: 10).
    n_symbols : int
        Alphabet size ``T >= 2`` (paper: 15).
    n_samples : int
        Number of unique sequences (paper: up to 50,000); must not exceed ``T**L``.
    train_fraction : float
        Fraction in the training set, in (0, 1) (paper: 0.7).
    seed : int
        Seed of ``numpy.random.default_rng`` for the draw and the split.
    """

    seq_len: int = 10
    n_symbols: int = 15
    n_samples: int = 50_000
    train_fraction: float = 0.7
    seed: int = 0

    def __post_init__(self):
        check_int("seq_len", self.seq_len, 2)
        check_int("n_symbols", self.n_symbols, 2)
        check_int("n_samples", self.n_samples, 2)
        check_int("seed", self.seed, 0)
        if self.n_samples > self.n_symbols ** self.seq_len:
            raise ValueError(f"n_samples must be <= n_symbols**seq_len = {self.n_symbols ** self.seq_len} "
                             f"(unique sequences), got {self.n_samples}")
        if not 0.0 < self.train_fraction < 1.0:
            raise ValueError(f"train_fraction must be in (0, 1), got {self.train_fraction!r}")
        n_train = int(round(self.train_fraction * self.n_samples))
        if not 1 <= n_train <= self.n_samples - 1:
            raise ValueError(f"train_fraction * n_samples must leave both sets non-empty, got n_train={n_train}")


@dataclass(frozen=True)
class LayerShape:
    """Widths of the layer: model width ``width`` (even, >= 2; paper 64) and MLP hidden width (paper 128)."""

    width: int = 64
    hidden: int = 128

    def __post_init__(self):
        check_int("width", self.width, 2)
        check_int("hidden", self.hidden, 1)
        if self.width % 2:
            raise ValueError(f"width must be even (token and position halves), got {self.width}")


@dataclass(frozen=True)
class TrainConfig:
    """One training run: optimiser, learning rate, batch size, epochs, seed of the shuffles.

    ``optimizer`` is ``"adam"`` (with ``b1``, ``b2``, ``eps``; paper: 1e-3, 0.9, 0.98, 1e-9) or ``"sgd"``
    (plain SGD, the paper's retraining). Each epoch visits ``n_train // batch_size`` batches of a fresh
    permutation (the last ``n_train % batch_size`` sequences of that permutation are left out).
    ``eval_every`` sets how often (in epochs) the full training and validation sets are evaluated.
    """

    epochs: int = 200
    batch_size: int = 32
    learning_rate: float = 1e-3
    optimizer: str = "adam"
    b1: float = 0.9
    b2: float = 0.98
    eps: float = 1e-9
    seed: int = 0
    eval_every: int = 1

    def __post_init__(self):
        check_int("epochs", self.epochs, 0)
        check_int("batch_size", self.batch_size, 1)
        check_int("seed", self.seed, 0)
        check_int("eval_every", self.eval_every, 1)
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        if not (np.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1):
            raise ValueError(f"b1 and b2 must be in [0, 1), got {self.b1!r}, {self.b2!r}")
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {self.eps!r}")

    def optax(self) -> optax.GradientTransformation:
        if self.optimizer == "adam":
            return optax.adam(self.learning_rate, b1=self.b1, b2=self.b2, eps=self.eps)
        return optax.sgd(self.learning_rate)


def _check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return variant


# --------------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class HistogramData:
    """Integer tokens ``(n, L)`` and targets ``(n, L)`` of the training and validation sets."""

    tokens_train: np.ndarray
    counts_train: np.ndarray
    tokens_val: np.ndarray
    counts_val: np.ndarray


def histogram_targets(tokens) -> np.ndarray:
    """Target of the histogram task: ``y[i, l] = #{k : tokens[i, k] == tokens[i, l]}`` (in 1..L)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be a 2-d array (sequences x positions), got shape {tokens.shape}")
    return (tokens[:, :, None] == tokens[:, None, :]).sum(axis=2).astype(np.int32)


def count_distribution(task: HistogramTask) -> np.ndarray:
    """Probability of each class ``c = 0..L`` at one position for independent uniform tokens.

    The other ``L - 1`` tokens equal the position's own with probability ``1/T`` each, so the count is
    ``1 + Binomial(L - 1, 1/T)``; class 0 has probability 0. (Deduplication of the ``n_samples`` sequences
    changes this by less than ``n_samples / T**L``.) Its maximum, at ``c = 1``, is the accuracy of always
    predicting the most frequent class.
    """
    L, T = task.seq_len, task.n_symbols
    k = np.arange(L)
    pmf = np.array([math.comb(L - 1, int(j)) for j in k]) * (1 / T) ** k * (1 - 1 / T) ** (L - 1 - k)
    return np.concatenate([[0.0], pmf])


def make_histogram_data(task: HistogramTask) -> HistogramData:
    """Draw ``task.n_samples`` distinct uniform sequences and split them into training and validation sets.

    Sequences are drawn in batches from ``default_rng(task.seed)``; repeats of an already drawn sequence are
    discarded (first occurrence kept, order of drawing kept); the kept sequences are then permuted by the
    same generator and the first ``round(train_fraction * n_samples)`` form the training set.
    """
    rng = np.random.default_rng(task.seed)
    L, T, n = task.seq_len, task.n_symbols, task.n_samples
    seqs = np.empty((0, L), dtype=np.int32)
    while len(seqs) < n:
        draw = rng.integers(0, T, size=(max(n - len(seqs), 64) * 11 // 10, L), dtype=np.int32)
        both = np.concatenate([seqs, draw])
        _, first = np.unique(both, axis=0, return_index=True)
        seqs = both[np.sort(first)]
    seqs = seqs[:n][rng.permutation(n)]
    n_train = int(round(task.train_fraction * n))
    counts = histogram_targets(seqs)
    return HistogramData(seqs[:n_train], counts[:n_train], seqs[n_train:], counts[n_train:])


# -------------------------------------------------------------------------------------------------- model
def variant_masks(variant: str, width: int) -> dict[str, np.ndarray]:
    """0/1 masks of a variant: ``tok``, ``pos`` (embedding halves) and ``qk`` (query/key input), shape (width,).

    Restricted variants put the token embedding in the first half of the width and the positional one in
    the second; ``"semantic"`` lets the query/key see the first half, ``"positional"`` the second. For
    ``"full"`` every mask is one.
    """
    _check_variant(variant)
    first = (np.arange(width) < width // 2).astype(np.float32)
    if variant == "full":
        one = np.ones(width, np.float32)
        return {"tok": one, "pos": one, "qk": one}
    return {"tok": first, "pos": 1 - first, "qk": first if variant == "semantic" else 1 - first}


def init_params(key, task: HistogramTask, shape: LayerShape, variant: str) -> dict[str, jax.Array]:
    """Random parameters (float32): embeddings N(0, 1), weights N(0, 1/fan_in), biases 0, LN scale 1.

    Entries that the variant masks out (embedding halves, query/key rows) are set to zero.
    """
    d, H, L, C = shape.width, shape.hidden, task.seq_len, task.seq_len + 1
    ks = jax.random.split(key, 8)
    m = variant_masks(variant, d)
    normal = lambda k, shp, fan_in: jax.random.normal(k, shp, jnp.float32) / np.float32(np.sqrt(fan_in))
    return {
        "tok": normal(ks[0], (task.n_symbols, d), 1) * m["tok"],
        "pos": normal(ks[1], (L, d), 1) * m["pos"],
        "W_Q": normal(ks[2], (d, d), d) * m["qk"][:, None],
        "W_K": normal(ks[3], (d, d), d) * m["qk"][:, None],
        "W_V": normal(ks[4], (d, d), d),
        "ln_scale": jnp.ones(d, jnp.float32), "ln_bias": jnp.zeros(d, jnp.float32),
        "W_1": normal(ks[5], (d, H), d), "b_1": jnp.zeros(H, jnp.float32),
        "W_2": normal(ks[6], (H, d), H), "b_2": jnp.zeros(d, jnp.float32),
        "W_c": normal(ks[7], (d, C), d), "b_c": jnp.zeros(C, jnp.float32),
    }


def forward(params, tokens, variant: str):
    """Logits ``(n, L, L+1)`` and attention matrices ``(n, L, L)`` of the layer on integer ``tokens (n, L)``.

    The restricted attention is ``A = softmax_row((x M W_Q)(x M W_K)^T / sqrt(d))`` with the diagonal 0/1
    mask ``M`` of :func:`variant_masks` (``qk``); written here as ``x (M W_Q)``, which is the same product.
    """
    m = variant_masks(variant, params["W_Q"].shape[0])
    d = params["W_Q"].shape[0]
    x = (params["tok"] * m["tok"])[tokens] + params["pos"] * m["pos"]            # (n, L, d)
    q = x @ (params["W_Q"] * m["qk"][:, None])
    k = x @ (params["W_K"] * m["qk"][:, None])
    attn = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / np.float32(np.sqrt(d)), axis=-1)
    u = attn @ (x @ params["W_V"])
    mu = u.mean(-1, keepdims=True)
    var = ((u - mu) ** 2).mean(-1, keepdims=True)
    z = (u - mu) / jnp.sqrt(var + np.float32(1e-5)) * params["ln_scale"] + params["ln_bias"]
    h = jax.nn.relu(z @ params["W_1"] + params["b_1"]) @ params["W_2"] + params["b_2"]
    return h @ params["W_c"] + params["b_c"], attn


def loss_and_accuracy(params, tokens, counts, variant: str, weights=None):
    """Mean cross-entropy and accuracy over all positions (optionally weighted per sequence)."""
    logits, _ = forward(params, tokens, variant)
    nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), counts[..., None], axis=-1)[..., 0]
    hit = (jnp.argmax(logits, axis=-1) == counts).astype(jnp.float32)
    if weights is None:
        return nll.mean(), hit.mean()
    w = jnp.broadcast_to(weights[:, None], nll.shape)
    return (nll * w).sum() / w.sum(), (hit * w).sum() / w.sum()


_EVAL_CHUNK = 2500


@functools.partial(jax.jit, static_argnames="variant")
def _eval_sums(params, tokens, counts, weights, variant):
    def chunk(args):
        t, c, w = args
        loss, acc = loss_and_accuracy(params, t, c, variant, w)
        return loss * w.sum(), acc * w.sum()

    n_chunks = tokens.shape[0] // _EVAL_CHUNK
    resh = lambda a: a.reshape((n_chunks, _EVAL_CHUNK) + a.shape[1:])
    loss, acc = jax.lax.map(chunk, (resh(tokens), resh(counts), resh(weights)))
    return loss.sum(), acc.sum()


def evaluate(params, tokens, counts, variant: str) -> tuple[float, float]:
    """Mean cross-entropy and accuracy (fraction of positions whose count is predicted) on a whole set."""
    _check_variant(variant)
    n = len(tokens)
    pad = -n % _EVAL_CHUNK
    t = np.concatenate([np.asarray(tokens), np.zeros((pad, tokens.shape[1]), np.int32)])
    c = np.concatenate([np.asarray(counts), np.ones((pad, tokens.shape[1]), np.int32)])
    w = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])
    loss, acc = _eval_sums(params, t, c, w, variant)
    return float(loss) / n, float(acc) / n


def accuracy_by_count(params, tokens, counts, variant: str) -> dict[int, tuple[float, int]]:
    """Accuracy at the positions whose target is ``c``, for each ``c`` present: ``{c: (accuracy, positions)}``."""
    _check_variant(variant)
    counts = np.asarray(counts)
    chunks = np.array_split(np.asarray(tokens, np.int32), max(1, len(tokens) // _EVAL_CHUNK))
    pred = np.concatenate([np.asarray(jnp.argmax(forward(params, jnp.asarray(t), variant)[0], axis=-1))
                           for t in chunks])
    return {int(c): (float(np.mean(pred[counts == c] == c)), int(np.sum(counts == c))) for c in np.unique(counts)}


# ----------------------------------------------------------------------------------------------- training
_EPOCH_FNS: dict = {}


def _epoch_fn(variant: str, config: TrainConfig):
    """jit-compiled epoch: permute, then ``lax.scan`` one optimiser step per mini-batch."""
    key = (variant, config.optimizer, config.learning_rate, config.b1, config.b2, config.eps,
           config.batch_size)
    if key not in _EPOCH_FNS:
        opt = config.optax()
        bs = config.batch_size
        grad = jax.value_and_grad(lambda p, t, c: loss_and_accuracy(p, t, c, variant), has_aux=True)

        def step(carry, batch):
            params, state = carry
            (loss, acc), g = grad(params, *batch)
            updates, state = opt.update(g, state, params)
            return (optax.apply_updates(params, updates), state), (loss, acc)

        @jax.jit
        def epoch(params, state, tokens, counts, key):
            n_batches = tokens.shape[0] // bs
            perm = jax.random.permutation(key, tokens.shape[0])[: n_batches * bs].reshape(n_batches, bs)
            (params, state), (loss, acc) = jax.lax.scan(step, (params, state), (tokens[perm], counts[perm]))
            return params, state, loss.mean(), acc.mean()

        _EPOCH_FNS[key] = (opt, epoch)
    return _EPOCH_FNS[key]


@dataclass(frozen=True)
class TrainResult:
    """Final parameters and the per-epoch history (epoch 0 = before training).

    ``history`` maps ``epoch``, ``train_loss``, ``train_acc``, ``val_loss``, ``val_acc`` (full-set
    evaluations at the end of the epoch) and ``batch_loss`` (mean of the epoch's mini-batch losses; None at
    epoch 0) to lists; ``seconds`` is the wall time of the optimisation steps (without evaluations).
    """

    params: dict
    history: dict
    seconds: float


def train(params, data: HistogramData, variant: str, config: TrainConfig) -> TrainResult:
    """Train ``params`` of ``variant`` on ``data.tokens_train`` with ``config``; evaluate along the way."""
    _check_variant(variant)
    if config.batch_size > len(data.tokens_train):
        raise ValueError(f"batch_size must be <= the training set size {len(data.tokens_train)}, "
                         f"got {config.batch_size}")
    opt, epoch_fn = _epoch_fn(variant, config)
    state = opt.init(params)
    tokens, counts = jnp.asarray(data.tokens_train), jnp.asarray(data.counts_train)
    base = jax.random.fold_in(jax.random.key(config.seed), 1)
    hist = {k: [] for k in ("epoch", "train_loss", "train_acc", "val_loss", "val_acc", "batch_loss")}

    def record(e, batch_loss):
        tl, ta = evaluate(params, data.tokens_train, data.counts_train, variant)
        vl, va = evaluate(params, data.tokens_val, data.counts_val, variant)
        for k, v in zip(hist, (e, tl, ta, vl, va, batch_loss)):
            hist[k].append(v)

    record(0, None)
    seconds = 0.0
    for e in range(1, config.epochs + 1):
        t0 = time.perf_counter()
        params, state, bl, _ = epoch_fn(params, state, tokens, counts, jax.random.fold_in(base, e))
        bl = float(bl)  # blocks until the epoch is done
        seconds += time.perf_counter() - t0
        if not np.isfinite(bl):
            raise FloatingPointError(f"training diverged at epoch {e} (mini-batch loss {bl})")
        if e % config.eval_every == 0 or e == config.epochs:
            record(e, bl)
    return TrainResult(params, hist, seconds)


# ----------------------------------------------------------------------------------- re-expression, probes
def unrestrict(params, variant: str, *, perturbation: float = 0.0, seed: int = 0) -> dict:
    """The ``"full"`` parameters computing the same function as restricted ``params`` of ``variant``.

    The masks are folded into the parameters (``t -> M_tok t``, ``p -> M_pos p``, ``W_Q -> M_qk W_Q``,
    ``W_K -> M_qk W_K``); then, if ``perturbation > 0``, ``perturbation * N(0, 1)`` is added to every
    entry of every parameter (key ``jax.random.key(seed)`` folded with tag 2).
    """
    _check_variant(variant)
    if not (np.isfinite(perturbation) and perturbation >= 0):
        raise ValueError(f"perturbation must be >= 0, got {perturbation!r}")
    m = variant_masks(variant, params["W_Q"].shape[0])
    out = dict(params, tok=params["tok"] * m["tok"], pos=params["pos"] * m["pos"],
               W_Q=params["W_Q"] * m["qk"][:, None], W_K=params["W_K"] * m["qk"][:, None])
    if perturbation > 0:
        leaves, tree = jax.tree_util.tree_flatten(out)
        keys = jax.random.split(jax.random.fold_in(jax.random.key(seed), 2), len(leaves))
        leaves = [a + np.float32(perturbation) * jax.random.normal(k, a.shape, a.dtype)
                  for a, k in zip(leaves, keys)]
        out = jax.tree_util.tree_unflatten(tree, leaves)
    return out


def relative_distance(params, reference, names=None) -> float:
    """``||params - reference|| / ||reference||`` over all entries (or the parameters in ``names``)."""
    names = sorted(reference) if names is None else names
    diff = sum(float(jnp.sum((params[k] - reference[k]) ** 2)) for k in names)
    norm = sum(float(jnp.sum(reference[k] ** 2)) for k in names)
    return float(np.sqrt(diff / norm))


def attention_maps(params, tokens, variant: str) -> np.ndarray:
    """Attention matrices ``(n, L, L)`` (rows: query position, columns: key position) on ``tokens``."""
    _check_variant(variant)
    return np.asarray(forward(params, jnp.asarray(np.asarray(tokens, np.int32)), variant)[1])


def attention_statistics(params, tokens, variant: str) -> dict[str, float]:
    """How the attention depends on content, on a set of sequences.

    ``same_token_mass``: mean over sequences and query positions of the attention weight on keys holding the
    query's token (itself included); ``spread_over_sequences``: mean over (query, key) of the standard
    deviation of ``A[query, key]`` across the sequences (zero for a content-independent pattern);
    ``same_token_mass_uniform``: the same-token mass of uniform attention on these sequences, for reference.
    """
    A = attention_maps(params, tokens, variant)
    same = (np.asarray(tokens)[:, :, None] == np.asarray(tokens)[:, None, :])
    return {"same_token_mass": float((A * same).sum(-1).mean()),
            "spread_over_sequences": float(A.std(axis=0).mean()),
            "same_token_mass_uniform": float(same.mean())}


def params_to_lists(params) -> dict[str, list]:
    """Parameters as nested lists of floats (JSON-able, exact for float32)."""
    return {k: np.asarray(v).tolist() for k, v in params.items()}


def params_from_lists(lists) -> dict[str, jax.Array]:
    """Inverse of :func:`params_to_lists`."""
    return {k: jnp.asarray(np.asarray(v, np.float32)) for k, v in lists.items()}


# ----------------------------------------------------------------------------------------------- the study
def _experiment(variant, seed, task, shape, config, retrain, perturbation, n_probe, examples):
    data = make_histogram_data(task)
    key = jax.random.key(seed)
    params0 = init_params(jax.random.fold_in(key, 0), task, shape, variant)
    first = train(params0, data, variant, config)
    start = unrestrict(first.params, variant, perturbation=perturbation, seed=seed)
    second = train(start, data, "full", retrain)
    control_start = init_params(jax.random.fold_in(key, 3), task, shape, "full")
    control = train(control_start, data, "full", retrain)
    probe = data.tokens_val[:n_probe]
    qk = ["W_Q", "W_K"]
    summary = {
        "variant": variant, "seed": seed,
        "val_acc": first.history["val_acc"][-1], "val_loss": first.history["val_loss"][-1],
        "train_acc": first.history["train_acc"][-1], "train_loss": first.history["train_loss"][-1],
        "seconds_train": first.seconds, "seconds_retrain": second.seconds,
        **{f"{k}_{when}": second.history[k][i] for k in ("train_loss", "train_acc", "val_loss", "val_acc")
           for when, i in (("before_retrain", 0), ("after_retrain", -1))},
        "retrain_distance": relative_distance(second.params, start),
        "retrain_distance_qk": relative_distance(second.params, start, qk),
        "control_distance": relative_distance(control.params, control_start),
        "control_distance_qk": relative_distance(control.params, control_start, qk),
        "control_val_acc": control.history["val_acc"][-1],
    }
    by_count = accuracy_by_count(first.params, data.tokens_val, data.counts_val, variant)
    for c in range(1, 5):
        summary[f"val_acc_count{c}"] = by_count[c][0] if c in by_count else None
    for tag, p, v in (("", first.params, variant), ("_retrained", second.params, "full")):
        for name, value in attention_statistics(p, probe, v).items():
            summary[name + tag] = value
    curves = [dict(phase=phase, **{k: h[k][i] for k in h}) for phase, h in
              (("restricted", first.history), ("retrain", second.history))
              for i in range(len(h["epoch"]))]
    maps = {"restricted": attention_maps(first.params, examples, variant).tolist(),
            "retrained": attention_maps(second.params, examples, "full").tolist()}
    return {"summary": summary, "curves": curves, "attention": maps, "examples": [list(e) for e in examples],
            "params": params_to_lists(first.params)}


def histogram_experiment(variant: str, seed: int, *, task: HistogramTask | None = None,
                         shape: LayerShape = LayerShape(), config: TrainConfig | None = None,
                         retrain: TrainConfig | None = None, perturbation: float = 1e-3, n_probe: int = 2000,
                         examples=EXAMPLE_SEQUENCES, use_cache: bool = True) -> dict[str, Any]:
    """The paper's section-2 experiment for one restricted ``variant`` and ``seed`` (cached on disk).

    1. draw the data (``task`` with ``seed=seed``; default :class:`HistogramTask`),
    2. train the restricted ``variant`` from ``init_params(fold_in(key(seed), 0))`` with ``config``
       (default: Adam, 200 epochs, seed ``seed``),
    3. re-express it as a ``"full"`` layer (:func:`unrestrict`, plus ``perturbation``),
    4. retrain that without restriction with ``retrain`` (default: plain SGD, learning rate 1e-3, 20 epochs),
    5. as a scale for step 4, train a fresh ``"full"`` layer (``fold_in(key(seed), 3)``) with the same
       ``retrain`` budget ("control").

    Returns a JSON-able dict: ``summary`` (accuracies, losses, validation accuracy at the positions of
    count 1 to 4 of the restricted layer (``val_acc_count1`` ...), relative distances moved by the retraining
    and by the control, in all parameters and in ``W_Q, W_K`` alone, attention statistics before and after
    on the first ``n_probe`` validation sequences), ``curves`` (per-epoch rows of both trainings, column
    ``phase``), ``attention`` (maps on ``examples`` before and after retraining) and ``params`` (the trained
    restricted parameters, nested lists).
    """
    _check_variant(variant)
    if variant == "full":
        raise ValueError("variant must be 'semantic' or 'positional' (a restricted layer), got 'full'")
    check_int("seed", seed, 0)
    check_int("n_probe", n_probe, 1)
    task = replace(task or HistogramTask(), seed=seed)
    config = replace(config or TrainConfig(), seed=seed)
    retrain = replace(retrain or TrainConfig(optimizer="sgd", epochs=20), seed=seed)
    examples = tuple(tuple(int(s) for s in e) for e in examples)
    if any(len(e) != task.seq_len or min(e) < 0 or max(e) >= task.n_symbols for e in examples):
        raise ValueError(f"examples must be sequences of {task.seq_len} symbols in 0..{task.n_symbols - 1}")
    return cached("histogram_experiment",
                  lambda: _experiment(variant, seed, task, shape, config, retrain, perturbation, n_probe, examples),
                  use_cache=use_cache, variant=variant, seed=seed, task=task, shape=shape, config=config,
                  retrain=retrain, perturbation=perturbation, n_probe=n_probe, examples=examples,
                  jax_version=jax.__version__, optax_version=optax.__version__)


# ------------------------------------------------------------------------------ replaying a training run
#: columns of a training curve compared by :func:`compare_with_seeds`, each on the scale where the seeds'
#: spread is roughly Gaussian: losses and error rates (``1 - accuracy``) on a logarithmic scale
CURVE_COLUMNS = ("train_loss", "val_loss", "batch_loss", "train_acc", "val_acc")

#: relative agreement of the untrained model's losses and accuracies (epoch 0 = one float32 forward pass
#: over the data set, whose sums another CPU rounds differently by a few float32 ulps times sqrt(n))
EPOCH0_RTOL = 1e-4


def _curve_scale(column: str, values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return np.log(1.0 - v) if column.endswith("_acc") else np.log(v)


def compare_with_seeds(live, stored, seed: int = 0, level: float = 0.999, columns=CURVE_COLUMNS):
    """Compare a recomputed (live) training curve with the committed curves of every seed, statistically.

    A training run is chaotic: on a machine whose CPU differs from the one that made the committed data (XLA
    compiles for the host's instruction set, so float32 sums round differently), the same seed's trajectory
    departs from the committed one after a few hundred Adam steps and is then one more draw from the seeds'
    distribution. The live run of ``seed`` therefore agrees with the committed one

    * at epoch 0 (no step taken) to :data:`EPOCH0_RTOL` relative, and
    * at every later epoch within the two-sided ``level`` prediction interval of one new draw from the
      committed seeds at that epoch: ``|y_live - mean| <= t_{(1+level)/2, n-1} s sqrt(1 + 1/n)``, with mean
      and sample standard deviation ``s`` of ``y`` over the ``n`` committed seeds, ``y`` being the log of a
      loss or of an error rate ``1 - accuracy``.

    On the machine that made the data the live run is bit-identical (``rel_diff == 0``).

    Parameters
    ----------
    live, stored : pandas.DataFrame
        Curves with columns ``variant``, ``epoch``, ``seed`` (``stored`` only) and ``columns``, one phase
        (for example ``phase == "restricted"``); ``live`` holds the recomputed run of ``seed``.
    seed : int
        The seed of the live run.
    level : float
        Coverage of the prediction interval, in (0, 1).
    columns : sequence of str
        Curve columns to compare.

    Returns
    -------
    pandas.DataFrame
        One row per variant, epoch and column: ``live``, ``stored`` (the committed run of ``seed``),
        ``rel_diff`` (``|live / stored - 1|``), ``n_seeds``, ``z`` (``(y_live - mean) / s``, NaN at epoch 0),
        ``z_max`` (the interval's half-width in units of ``s``) and ``ok``.
    """
    import pandas as pd
    from scipy import stats

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    rows = []
    for (variant, epoch), lv in live.groupby(["variant", "epoch"]):
        ref = stored[(stored.variant == variant) & (stored.epoch == epoch)]
        mine = ref[ref.seed == seed]
        if len(mine) != 1 or len(ref) < 3:
            raise ValueError(f"stored curves need seed {seed} and at least 3 seeds at {variant!r}, epoch {epoch}")
        n = len(ref)
        z_max = float(stats.t.ppf(0.5 + level / 2, n - 1) * math.sqrt(1 + 1 / n))
        for col in columns:
            x, x0 = float(lv[col].iloc[0]), float(mine[col].iloc[0])
            if not (np.isfinite(x) and np.isfinite(x0)):
                if epoch == 0 and col == "batch_loss":  # no batch before the first step
                    continue
                raise ValueError(f"{col} is not finite at {variant!r}, epoch {epoch}")
            rel = abs(x / x0 - 1)
            if epoch == 0:
                z, ok = math.nan, rel <= EPOCH0_RTOL
            else:
                y = _curve_scale(col, ref[col])
                z = float((_curve_scale(col, [x])[0] - y.mean()) / y.std(ddof=1))
                ok = abs(z) <= z_max
            rows.append({"variant": variant, "epoch": int(epoch), "column": col, "live": x, "stored": x0,
                         "rel_diff": rel, "n_seeds": n, "z": z, "z_max": z_max, "ok": bool(ok)})
    return pd.DataFrame(rows)

"""Time per training epoch of the histogram-task layer (attnlib.histogram), at the paper's sizes.

One epoch = 35,000 training sequences in mini-batches of 32 (1,093 Adam steps). Measured: the library's
epoch (one jit-compiled function, ``lax.scan`` over the batches) and, as the reference in the same process,
a Python loop calling a jit-compiled single step per batch; then the full-set evaluation (35,000 + 15,000
sequences) that the training loop runs after an epoch. Also prints the floating-point work per step, to
read the time as throughput. The XLA runtime is single-threaded (set by attnlib.histogram).

Run: ``python benchmarks/bench_histogram.py [variant] [repeats]``.
"""
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attnlib import histogram as H


def best_of(fn, repeats):
    jax.block_until_ready(fn())  # compile / warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return min(times)


def main(variant: str = "semantic", repeats: int = 3) -> None:
    task, shape, cfg = H.HistogramTask(), H.LayerShape(), H.TrainConfig()
    data = H.make_histogram_data(task)
    params = H.init_params(jax.random.key(0), task, shape, variant)
    tokens, counts = jnp.asarray(data.tokens_train), jnp.asarray(data.counts_train)
    opt, epoch = H._epoch_fn(variant, cfg)
    state = opt.init(params)
    key = jax.random.key(1)
    n_batches = len(tokens) // cfg.batch_size

    t_scan = best_of(lambda: epoch(params, state, tokens, counts, key), repeats)

    grad = jax.value_and_grad(lambda p, t, c: H.loss_and_accuracy(p, t, c, variant), has_aux=True)

    @jax.jit
    def step(p, s, t, c):
        (loss, _), g = grad(p, t, c)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s, loss

    perm = np.asarray(jax.random.permutation(key, len(tokens)))[: n_batches * cfg.batch_size]
    batches = [(tokens[i], counts[i]) for i in perm.reshape(n_batches, cfg.batch_size)]

    def python_loop():
        p, s = params, state
        for t, c in batches:
            p, s, loss = step(p, s, t, c)
        return p

    t_loop = best_of(python_loop, repeats)
    t_eval = best_of(lambda: (H.evaluate(params, data.tokens_train, data.counts_train, variant),
                              H.evaluate(params, data.tokens_val, data.counts_val, variant)), repeats)

    d, h, L, C = shape.width, shape.hidden, task.seq_len, task.seq_len + 1
    macs_per_token = 3 * d * d + 2 * L * d + d * h + h * d + d * C  # q, k, v; scores and mixing; MLP; classifier
    flops_step = 3 * 2 * macs_per_token * L * cfg.batch_size  # forward + backward ~ 3x forward
    print(f"variant {variant}, {n_batches} steps of batch {cfg.batch_size} per epoch, best of {repeats}, "
          f"XLA flags: {H.XLA_DETERMINISTIC_FLAGS}")
    print(f"  lax.scan epoch (attnlib)    {t_scan:6.2f} s/epoch  {1e3 * t_scan / n_batches:6.3f} ms/step  "
          f"{flops_step * n_batches / t_scan / 1e9:5.1f} GFLOP/s")
    print(f"  Python loop of jit steps    {t_loop:6.2f} s/epoch  {1e3 * t_loop / n_batches:6.3f} ms/step  "
          f"(reference; scan is {t_loop / t_scan:.2f}x faster)")
    print(f"  evaluation, 50,000 seqs     {t_eval:6.2f} s")
    print(f"  paper's 200 epochs (scan + evaluation every epoch): {200 * (t_scan + t_eval) / 60:.1f} min per run")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "semantic", int(sys.argv[2]) if len(sys.argv) > 2 else 3)

"""How close graphfit's `fit` comes to the fastest XLA program of the same training, on a CPU.

`throughput.py` compares graphfit with Keras and measures the step against the matmul peak of one
large square product. That peak is not reachable by a step whose products are 128 x 784 x 256
and smaller. This benchmark asks the narrower question: for the MLP of `throughput.py`
(784-256-256-10, batch 128, SGD with momentum 0.9, sparse cross-entropy from logits), how much
of the time of a `fit` epoch could any framework remove? Three contenders, timed in interleaved
rounds in one process, float32:

1. **graphfit**: `Model.fit` with its default settings, as in `throughput.py` (XLA's fused loop,
   accuracy metric, shuffling; the timed call includes converting the arrays).
2. **minimal program**: one `tf.function(jit_compile=True)` per epoch whose `while` loop does
   only the arithmetic of training: gather the batch from a shuffled index matrix, forward,
   backward, momentum update. No metrics, no loss tracking, no callbacks, data already tensors.
   No framework can do less per step.
3. **products only**: the step's eight matrix products alone (three forward, three weight
   gradients, two input gradients, in the shapes and transposes the step uses), in one XLA
   `while` loop: the time a step would take with every element-wise op, gather and update free.

For each: samples/s, the training step's GFLOP/s (`model.flops`, as `throughput.py` counts it),
and that as a fraction of the float32 matmul peak (`matmul_peak.py`, timed in the same rounds).
Medians over `--repeats` rounds. The ratios say where the time goes: graphfit / minimal program
is what graphfit itself costs; minimal program / products only is what the element-wise work,
the gather and the update cost; products only / peak is how far the step's small products run
from the large product's speed.

This is a benchmark, not a test: pytest never runs it and nothing asserts on time.

Usage:

    python benchmarks/step_ceiling.py                  # 5 rounds of 2 epochs
    python benchmarks/step_ceiling.py --repeats 9 --epochs 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matmul_peak import MatmulPeak  # noqa: E402
from throughput import LEARNING_RATE, MOMENTUM, GraphfitContender, mlp_workload  # noqa: E402
from throughput_report import machine_line  # noqa: E402


class MinimalProgram:
    """The MLP's training as one XLA `while` loop per epoch, nothing but the arithmetic."""

    name = "minimal program"

    def __init__(self, x: np.ndarray, y: np.ndarray, initial: list[np.ndarray], batch: int):
        self.samples, self.batch = len(x), batch
        self.steps = self.samples // batch
        self.x, self.y = tf.constant(x), tf.constant(y)
        self.weights = [tf.Variable(w) for w in initial]
        self.velocity = [tf.Variable(tf.zeros_like(w)) for w in initial]
        self._epoch = tf.function(self._epoch_program, jit_compile=True)
        self._rng = np.random.default_rng(1)

    def _epoch_program(self, order):
        w0, b0, w1, b1, w2, b2 = self.weights

        def body(i):
            x = tf.gather(self.x, order[i])
            y = tf.gather(self.y, order[i])
            with tf.GradientTape() as tape:
                h = tf.nn.relu(x @ w0 + b0)
                h = tf.nn.relu(h @ w1 + b1)
                logits = h @ w2 + b2
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            grads = tape.gradient(loss, self.weights)
            for weight, velocity, grad in zip(self.weights, self.velocity, grads):
                velocity.assign(MOMENTUM * velocity - LEARNING_RATE * grad)
                weight.assign_add(velocity)
            return (i + 1,)

        tf.while_loop(lambda i: i < self.steps, body, (tf.constant(0),))

    def run(self, epochs: int) -> None:
        for _ in range(epochs):
            order = self._rng.permutation(self.samples)[:self.steps * self.batch]
            self._epoch(tf.constant(order.reshape(self.steps, self.batch).astype(np.int32)))
        self.weights[0].numpy()  # wait for the last epoch

    def samples_per_epoch(self) -> int:
        return self.steps * self.batch


class ProductsOnly:
    """The step's eight products, in its shapes and transposes, `steps` per XLA program."""

    name = "products only"

    def __init__(self, width: int, batch: int, steps: int):
        rng = tf.random.Generator.from_seed(0)
        self.steps, self.batch = steps, batch
        shapes = {"x": (batch, 784), "w0": (784, width), "h": (batch, width),
                  "w1": (width, width), "w2": (width, 10), "g": (batch, 10),
                  "gh": (batch, width)}
        self.values = {name: rng.normal(shape) for name, shape in shapes.items()}
        self._program = tf.function(self._products, jit_compile=True)

    def _products(self, v):
        def body(i, total):
            # Make each round's inputs depend on the loop, so XLA cannot hoist the products.
            shift = tf.cast(i, tf.float32) * 0.0
            x, h, g, gh = v["x"] + shift, v["h"] + shift, v["g"] + shift, v["gh"] + shift
            products = [
                x @ v["w0"], h @ v["w1"], h @ v["w2"],                  # forward
                tf.matmul(h, g, transpose_a=True),                       # dW2
                tf.matmul(g, v["w2"], transpose_b=True),                 # dh (last layer)
                tf.matmul(h, gh, transpose_a=True),                      # dW1
                tf.matmul(gh, v["w1"], transpose_b=True),                # dh (middle layer)
                tf.matmul(x, gh, transpose_a=True),                      # dW0
            ]
            return i + 1, total + tf.add_n([p[0, 0] for p in products])

        return tf.while_loop(lambda i, _: i < self.steps, body, (0, 0.0))[1]

    def run(self, epochs: int) -> None:
        for _ in range(epochs):
            self._program(self.values).numpy()

    def samples_per_epoch(self) -> int:
        return self.steps * self.batch


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=2, help="epochs per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args(argv)

    workload = mlp_workload(args.samples, args.width, args.batch_size)
    graphfit = GraphfitContender(workload, workload.build_graphfit())
    minimal = MinimalProgram(workload.x, workload.y, graphfit.weights(), args.batch_size)
    products = ProductsOnly(args.width, args.batch_size, minimal.steps)
    peak = MatmulPeak("float32")
    flops_per_sample = graphfit.flops_per_sample

    graphfit.warm_up()
    for contender in (minimal, products):
        contender.run(1)
    runs: dict[str, list[float]] = {"graphfit": [], minimal.name: [], products.name: []}
    for _ in range(args.repeats):
        started = time.perf_counter()
        graphfit.train(args.epochs)
        runs["graphfit"].append(args.epochs * len(workload.x) / (time.perf_counter() - started))
        for contender in (minimal, products):
            started = time.perf_counter()
            contender.run(args.epochs)
            elapsed = time.perf_counter() - started
            runs[contender.name].append(args.epochs * contender.samples_per_epoch() / elapsed)
        peak.time_once()

    peak_gflops, path = peak.gflops()
    medians = {name: statistics.median(values) for name, values in runs.items()}
    print(f"{workload.title}, batch {args.batch_size}, float32: median of {args.repeats} "
          f"interleaved rounds of {args.epochs} epochs")
    print(f"{'':16s} {'samples/s':>10s} {'GFLOP/s':>8s} {'of peak':>8s}   runs")
    for name, median in medians.items():
        gflops = median * flops_per_sample / 1e9
        spread = ", ".join(f"{value:,.0f}" for value in runs[name])
        print(f"{name:16s} {median:10,.0f} {gflops:8.0f} {gflops / peak_gflops:8.2f}   "
              f"[{spread}]")
    fit, bare, dots = (medians[name] for name in runs)
    print(f"graphfit / minimal program: {fit / bare:.2f} (what graphfit's fit costs beyond "
          f"the arithmetic)")
    print(f"minimal program / products only: {bare / dots:.2f} (what the element-wise work, "
          f"gather and update cost)")
    print(f"products only / matmul peak: {dots * flops_per_sample / 1e9 / peak_gflops:.2f} "
          f"(the step's small products against one {peak.size}x{peak.size} product)")
    print(f"matmul peak: float32 {peak_gflops:.0f} GFLOP/s ({path})")
    print(f"machine: {machine_line()}")


if __name__ == "__main__":
    main()

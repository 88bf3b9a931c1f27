"""Throughput of `fit`: graphfit next to Keras 3 and a hand-written `tf.function` loop.

Samples per second of training on two workloads, per dtype policy, measured in one run on the
same machine, and how close graphfit's training step comes to the machine's matmul peak:

- MLP: Dense 784-256-256-10 (relu) on 60 000 synthetic samples (fixed-seed normal features,
  labels 0..9 from a fixed random linear teacher, so the loss has somewhere to go);
- conv: Conv2D(32, 3, same, relu) -> MaxPooling2D -> Conv2D(64, 3, same, relu) ->
  GlobalAveragePooling2D -> Dense(10) on the digits images, replicated to a few thousand samples.

Contenders, on the identical model with the identical initial weights (graphfit builds first;
Keras and the hand loop copy its `get_weights()`), for each dtype policy of `--dtype-policy`
(default: float32 and mixed_bfloat16):

1. graphfit `Model.fit`, default compile settings (jit_compile="auto", steps_per_execution="auto")
   and `compile(dtype_policy=P)`;
2. Keras 3 `Model.fit`, default compile settings (what a Keras user gets), its model built under
   `keras.config.set_dtype_policy(P)` (restored afterwards): Keras's own mixed precision;
3. a hand-written loop, float32 only: a `tf.function(jit_compile=True)` train step (GradientTape,
   SGD with momentum written by hand, sparse softmax cross-entropy, running loss and accuracy)
   called per batch from Python over `from_tensor_slices(...).shuffle(...).batch(128)
   .prefetch(...)`.

Where the limit is. Beside graphfit's samples per second the table gives the GFLOP/s its
training step achieves, samples/s x the training FLOPs per sample (`model.flops(128)
["training_step"] / 128`: forward pass, loss, backward pass and update, as TensorFlow's
profiler counts the traced step), and that as a fraction of the machine's matmul peak in the
policy's compute dtype: the median GFLOP/s of one large square product (`matmul_peak.py`,
2048 x 2048 on a CPU and 8192 x 8192 on a GPU unless `--peak-size`; the faster of TensorFlow's
kernel and XLA), timed once per round of the same interleaved repeats.

All use batch 128 (`--batch-size`), SGD(learning_rate=0.01, momentum=0.9),
SparseCategoricalCrossentropy(from_logits=True), accuracy, a fresh shuffle every epoch, and
`verbose=0` (no progress bar to draw). Each contender is warmed up on one epoch of the same
arrays (tracing and compilation excluded: graphfit compiles its loop for the arrays' length),
then one timed call trains `--epochs` epochs; this is repeated `--repeats` times, interleaved
across contenders, and the best run (or, with `--stat median`, the median) is reported: other
processes can only slow a run down, so the best run is the most reproducible estimate of each
contender's speed. A timed call is the whole `fit` (or the whole hand loop), data conversion
included. Afterwards every contender's final weights are scored by the same hand-written forward
pass on a fixed subset: one whose loss did not go down fails the run, so nobody measures a
no-op.

This is a benchmark, not a test: pytest never runs it and nothing asserts on time. The targets
printed next to the ratios are the project's goals, not checks: graphfit at least 2.5x Keras on
the MLP (1.0x on the conv net) and 0.9x the hand loop; its float32 MLP step at 0.6 of the float32
matmul peak; mixed_bfloat16 at least 1.5x graphfit's own float32 throughput.

Usage:

    python benchmarks/throughput.py                 # both workloads, text table
    python benchmarks/throughput.py --markdown      # the table as Markdown, for the README
    python benchmarks/throughput.py --workloads mlp --epochs 3 --repeats 7 --stat median
    python benchmarks/throughput.py --dtype-policy float32   # float32 rows only
    python benchmarks/throughput.py --hand-jit off  # the hand loop without XLA (faster for convs
                                                    # on CPU, where XLA loses to oneDNN)
    python benchmarks/throughput.py --dtype-policy float32 mixed_float16   # on a GPU
    python benchmarks/throughput.py --workloads mlp --mlp-width 4096 --batch-size 2048 \
        --mlp-samples 131072 --dtype-policy float32 mixed_float16   # a GPU-sized MLP
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import graphfit as gf  # noqa: E402
from graphfit import layers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matmul_peak import DEFAULT_SIZE, GPU_SIZE, MatmulPeak  # noqa: E402
from throughput_report import BATCH_SIZE, COMPUTE_DTYPES, report  # noqa: E402

LEARNING_RATE = 0.01
MOMENTUM = 0.9
CHECK_SAMPLES = 4096  # the fixed subset every contender's final weights are scored on

POLICIES = tuple(COMPUTE_DTYPES)  # each policy's compute dtype: the peak it is measured against


# ------------------------------------------------------------------------------ workloads
@dataclasses.dataclass
class Workload:
    """A model (as three builders of the same network) and its training data."""

    key: str
    title: str
    x: np.ndarray
    y: np.ndarray
    build_graphfit: Callable[[], gf.Model]
    build_keras: Callable[[], keras.Model]
    forward: Callable[[list, tf.Tensor], tf.Tensor]  # hand-written, on Keras-ordered weights
    batch_size: int = BATCH_SIZE


def _mlp_forward(weights, x):
    w0, b0, w1, b1, w2, b2 = weights
    h = tf.nn.relu(tf.matmul(x, w0) + b0)
    h = tf.nn.relu(tf.matmul(h, w1) + b1)
    return tf.matmul(h, w2) + b2


def mlp_workload(samples: int, width: int = 256, batch_size: int = BATCH_SIZE) -> Workload:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((samples, 784)).astype(np.float32)
    teacher = rng.standard_normal((784, 10)).astype(np.float32)
    y = np.argmax(x @ teacher, axis=1).astype(np.int32)

    def build_graphfit():
        return gf.Sequential(
            [layers.Dense(width, activation="relu"), layers.Dense(width, activation="relu"),
             layers.Dense(10)],
            input_shape=(784,),
        )

    def build_keras():
        return keras.Sequential(
            [keras.Input((784,)), keras.layers.Dense(width, activation="relu"),
             keras.layers.Dense(width, activation="relu"), keras.layers.Dense(10)]
        )

    return Workload("mlp", f"MLP 784-{width}-{width}-10", x, y, build_graphfit, build_keras,
                    _mlp_forward, batch_size)


def _conv_forward(weights, x):
    k0, b0, k1, b1, w2, b2 = weights
    h = tf.nn.relu(tf.nn.conv2d(x, k0, 1, "SAME") + b0)
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.relu(tf.nn.conv2d(h, k1, 1, "SAME") + b1)
    h = tf.reduce_mean(h, axis=[1, 2])
    return tf.matmul(h, w2) + b2


def conv_workload(copies: int, batch_size: int = BATCH_SIZE) -> Workload:
    images, labels = gf.datasets.load_digits(as_images=True)
    x = np.tile(images, (copies, 1, 1, 1))
    y = np.tile(labels, copies)

    def build_graphfit():
        return gf.Sequential(
            [layers.Conv2D(32, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
             layers.Conv2D(64, 3, padding="same", activation="relu"),
             layers.GlobalAveragePooling2D(), layers.Dense(10)],
            input_shape=(8, 8, 1),
        )

    def build_keras():
        return keras.Sequential(
            [keras.Input((8, 8, 1)),
             keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
             keras.layers.MaxPooling2D(),
             keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
             keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)]
        )

    title = f"conv net, digits x{copies}"
    return Workload("conv", title, x, y, build_graphfit, build_keras, _conv_forward, batch_size)


# ----------------------------------------------------------------------------- contenders
class _FitContender:
    """A model trained by its framework's own `fit`, with its default compile settings."""

    def __init__(self, workload: Workload, model, optimizer, policy: str, **compile_kwargs):
        self.model, self.policy = model, policy
        model.compile(optimizer=optimizer, metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      **compile_kwargs)
        self.x, self.y = workload.x, workload.y
        self.batch_size = workload.batch_size
        self.losses: list[float] = []

    def warm_up(self) -> None:
        self.model.fit(self.x, self.y, batch_size=self.batch_size, epochs=1, verbose=0,
                       shuffle=True)

    def train(self, epochs: int) -> None:
        history = self.model.fit(self.x, self.y, batch_size=self.batch_size, epochs=epochs,
                                 verbose=0, shuffle=True)
        self.losses += history.history["loss"]

    def weights(self) -> list[np.ndarray]:
        return [np.asarray(w, np.float32) for w in self.model.get_weights()]


class GraphfitContender(_FitContender):
    name = "graphfit"

    def __init__(self, workload: Workload, model: gf.Model, policy: str = "float32"):
        super().__init__(workload, model,
                         gf.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM),
                         policy, **({} if policy == "float32" else {"dtype_policy": policy}))
        # The arithmetic of one training step, per sample (the batch's share).
        batch = workload.batch_size
        self.flops_per_sample = model.flops(batch_size=batch)["training_step"] / batch

    def settings(self) -> str:
        state = self.model.compile_state
        sizer = state.sizers["train"]
        chunk = sizer.next_size()  # what "auto" settled on after the timed epochs
        batch = self.batch_size
        calls = -(-(len(self.x) // batch) // chunk) + (1 if len(self.x) % batch else 0)
        return (f"jit_compile={state.jit_compile_setting!r} -> {state.jit_compile} "
                f"({state.steps.loop_kind('train')} loop), steps_per_execution="
                f"{sizer.setting!r} -> {chunk} steps/call (~{calls} calls/epoch)")


class KerasContender(_FitContender):
    name = "Keras"

    def __init__(self, workload: Workload, initial: list[np.ndarray], policy: str = "float32"):
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy(policy)  # Keras's own mixed precision: set, then build
        try:
            model = workload.build_keras()
        finally:
            keras.config.set_dtype_policy(previous)
        model.set_weights(initial)
        super().__init__(workload, model,
                         keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM),
                         policy)

    def settings(self) -> str:
        model = self.model
        return (f"dtype policy {model.dtype_policy.name}, jit_compile={model.jit_compile}, "
                f"steps_per_execution={model.steps_per_execution}")


class HandLoopContender:
    """A `tf.function` step (XLA unless told otherwise) per batch, driven from Python over
    tf.data. The step keeps a running loss and accuracy, as `fit`'s metrics do."""

    name = "hand loop"
    policy = "float32"  # written by hand in float32 only

    def __init__(self, workload: Workload, initial: list[np.ndarray], jit_compile: bool = True,
                 shuffle_buffer: int | None = None):
        self.x, self.y = workload.x, workload.y
        self.batch_size = workload.batch_size
        self.jit_compile = jit_compile
        self.shuffle_buffer = shuffle_buffer  # None: the whole data set, a full shuffle like fit's
        self.variables = [tf.Variable(w) for w in initial]
        self.velocities = [tf.Variable(tf.zeros_like(w)) for w in initial]
        self.loss_sum = tf.Variable(0.0)
        self.correct = tf.Variable(0.0)
        self.seen = tf.Variable(0.0)
        self.losses: list[float] = []
        forward = workload.forward

        @tf.function(jit_compile=jit_compile)
        def train_step(x, y):
            with tf.GradientTape() as tape:
                logits = forward(self.variables, x)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            gradients = tape.gradient(loss, self.variables)
            for variable, velocity, gradient in zip(self.variables, self.velocities, gradients):
                velocity.assign(velocity * MOMENTUM - gradient * LEARNING_RATE)  # Keras's rule
                variable.assign_add(velocity)
            count = tf.cast(tf.shape(y)[0], tf.float32)
            self.loss_sum.assign_add(loss * count)
            self.seen.assign_add(count)
            hits = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), y)
            self.correct.assign_add(tf.reduce_sum(tf.cast(hits, tf.float32)))

        self.train_step = train_step

    def _dataset(self, x, y) -> tf.data.Dataset:
        return (tf.data.Dataset.from_tensor_slices((x, y))
                .shuffle(self.shuffle_buffer or len(x), reshuffle_each_iteration=True)
                .batch(self.batch_size)
                .prefetch(tf.data.AUTOTUNE))

    def _epochs(self, dataset: tf.data.Dataset, epochs: int) -> None:
        for _ in range(epochs):
            for variable in (self.loss_sum, self.correct, self.seen):
                variable.assign(0.0)
            for x, y in dataset:
                self.train_step(x, y)
            self.losses.append(float(self.loss_sum.numpy() / self.seen.numpy()))

    def warm_up(self) -> None:
        self._epochs(self._dataset(self.x, self.y), 1)
        self.losses.clear()

    def train(self, epochs: int) -> None:
        self._epochs(self._dataset(self.x, self.y), epochs)

    def weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.variables]

    def settings(self) -> str:
        buffer = self.shuffle_buffer or "all samples"
        return f"jit_compile={self.jit_compile}, 1 step per Python call, shuffle buffer {buffer}"


# ------------------------------------------------------------------------------ measuring
@dataclasses.dataclass
class Result:
    name: str
    policy: str
    samples_per_second: float
    all_runs: list[float]
    loss_before: float
    loss_after: float
    reported_losses: list[float]  # the epoch losses the contender itself reported while timed
    settings: str
    flops_per_sample: float | None = None  # graphfit's training step, per sample

    @property
    def trained(self) -> bool:
        # Any real training moves the loss by far more than this; a no-op leaves it unchanged.
        return bool(np.isfinite(self.loss_after) and self.loss_after < 0.999 * self.loss_before)

    @property
    def gflops(self) -> float | None:
        if self.flops_per_sample is None:
            return None
        return self.samples_per_second * self.flops_per_sample / 1e9


def _check_loss(workload: Workload, weights: list[np.ndarray]) -> float:
    x = tf.constant(workload.x[:CHECK_SAMPLES])
    y = tf.constant(workload.y[:CHECK_SAMPLES])
    logits = workload.forward([tf.constant(w) for w in weights], x)
    return float(tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)))


def _contenders(workload: Workload, args) -> tuple[list, list[np.ndarray]]:
    gf.set_seed(0)
    model = workload.build_graphfit()
    initial = model.get_weights()
    contenders = []
    for policy in args.dtype_policy:
        if contenders:  # the same network and weights, compiled under another policy
            model = workload.build_graphfit()
            model.set_weights(initial)
        contenders.append(GraphfitContender(workload, model, policy))
        contenders.append(KerasContender(workload, initial, policy))
        if policy == "float32":
            contenders.append(HandLoopContender(workload, initial,
                                                jit_compile=args.hand_jit == "on",
                                                shuffle_buffer=args.hand_shuffle_buffer))
    return contenders, initial


def measure(workload: Workload, args, peaks: dict[str, MatmulPeak]) -> list[Result]:
    """Every contender's timed runs, interleaved; each round also times the matmul peaks."""
    contenders, initial = _contenders(workload, args)
    loss_before = _check_loss(workload, initial)
    for contender in contenders:
        contender.warm_up()
    runs: list[list[float]] = [[] for _ in contenders]
    samples = args.epochs * len(workload.x)
    # Interleaved repeats: a slow spell of the machine hits every contender alike.
    for _ in range(args.repeats):
        for contender, timings in zip(contenders, runs):
            started = time.perf_counter()
            contender.train(args.epochs)
            timings.append(samples / (time.perf_counter() - started))
        for peak in peaks.values():
            peak.time_once()
    pick = max if args.stat == "best" else statistics.median
    return [
        Result(c.name, c.policy, pick(r), r, loss_before, _check_loss(workload, c.weights()),
               list(c.losses), c.settings(), getattr(c, "flops_per_sample", None))
        for c, r in zip(contenders, runs)
    ]



def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="epochs per timed fit call")
    parser.add_argument("--repeats", type=int, default=5, help="timed fit calls per contender")
    parser.add_argument("--stat", choices=("best", "median"), default="best",
                        help="how repeats are summarized (default: best, the fastest run)")
    parser.add_argument("--workloads", nargs="+", choices=("mlp", "conv"),
                        default=["mlp", "conv"])
    parser.add_argument("--mlp-samples", type=int, default=60_000)
    parser.add_argument("--mlp-width", type=int, default=256,
                        help="units of the MLP's two hidden layers")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--conv-copies", type=int, default=4,
                        help="how many times the 1797 digits images are replicated")
    parser.add_argument("--dtype-policy", nargs="+", choices=POLICIES,
                        default=["float32", "mixed_bfloat16"],
                        help="dtype policies to train under (default: float32 mixed_bfloat16)")
    parser.add_argument("--peak-size", type=int, default=None,
                        help="side of the square matmul the peak is measured on (default "
                             f"{DEFAULT_SIZE} on a CPU, {GPU_SIZE} on a GPU)")
    parser.add_argument("--hand-jit", choices=("on", "off"), default="on",
                        help="XLA for the hand loop's step (default: on, as specified)")
    parser.add_argument("--hand-shuffle-buffer", type=int, default=None,
                        help="the hand loop's shuffle buffer (default: all samples)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    args.dtype_policy = list(dict.fromkeys(args.dtype_policy))  # each once, in order
    for name in ("epochs", "repeats", "mlp_samples", "mlp_width", "batch_size", "conv_copies",
                 "peak_size", "hand_shuffle_buffer"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    builders = {"mlp": lambda: mlp_workload(args.mlp_samples, args.mlp_width, args.batch_size),
                "conv": lambda: conv_workload(args.conv_copies, args.batch_size)}
    workloads = [builders[key]() for key in args.workloads]
    peaks = {COMPUTE_DTYPES[p]: MatmulPeak(COMPUTE_DTYPES[p], args.peak_size)
             for p in args.dtype_policy}
    all_results = {w.key: measure(w, args, peaks) for w in workloads}
    report(workloads, all_results, peaks, args)
    untrained = [f"{w.key}/{r.name}/{r.policy}" for w in workloads
                 for r in all_results[w.key] if not r.trained]
    if untrained:
        print(f"ERROR: no training progress for {untrained}; the timings above are not valid.",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Throughput of `fit`: graphfit next to Keras 3 and a hand-written `tf.function` loop.

Samples per second of training on two workloads, measured in one run on the same machine:

- MLP: Dense 784-256-256-10 (relu) on 60 000 synthetic samples (fixed-seed normal features,
  labels 0..9 from a fixed random linear teacher, so the loss has somewhere to go);
- conv: Conv2D(32, 3, same, relu) -> MaxPooling2D -> Conv2D(64, 3, same, relu) ->
  GlobalAveragePooling2D -> Dense(10) on the digits images, replicated to a few thousand samples.

Contenders, on the identical model with the identical initial weights (graphfit builds first;
Keras and the hand loop copy its `get_weights()`):

1. graphfit `Model.fit`, default compile settings (jit_compile="auto", steps_per_execution="auto");
2. Keras 3 `Model.fit`, default compile settings (what a Keras user gets);
3. a hand-written loop: a `tf.function(jit_compile=True)` train step (GradientTape, SGD with
   momentum written by hand, sparse softmax cross-entropy, running loss and accuracy) called per
   batch from Python over `from_tensor_slices(...).shuffle(...).batch(128).prefetch(...)`.

All use batch 128, SGD(learning_rate=0.01, momentum=0.9), SparseCategoricalCrossentropy
(from_logits=True), accuracy, a fresh shuffle every epoch, and `verbose=0` (no progress bar to
draw). Each contender is warmed up on one short epoch (tracing and compilation excluded), then
one timed call trains `--epochs` epochs; this is repeated `--repeats` times, interleaved across
contenders, and the best run (or, with `--stat median`, the median) is reported: other processes
can only slow a run down, so the best run is the most reproducible estimate of each contender's
speed. A timed call is the whole `fit` (or the whole hand loop), data conversion included.
Afterwards every contender's final weights are scored by the same hand-written forward pass on a
fixed subset: one whose loss did not go down fails the run, so nobody measures a no-op.

This is a benchmark, not a test: pytest never runs it and nothing asserts on time. The targets
printed next to the ratios are the project's goals, not checks.

Usage:

    python benchmarks/throughput.py                 # both workloads, text table
    python benchmarks/throughput.py --markdown      # the table as Markdown, for the README
    python benchmarks/throughput.py --workloads mlp --epochs 3 --repeats 7 --stat median
    python benchmarks/throughput.py --hand-jit off  # the hand loop without XLA (faster for convs
                                                    # on CPU, where XLA loses to oneDNN)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
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

BATCH_SIZE = 128
LEARNING_RATE = 0.01
MOMENTUM = 0.9
CHECK_SAMPLES = 4096  # the fixed subset every contender's final weights are scored on

# The project's goals (printed, never asserted): graphfit / Keras and graphfit / hand loop.
TARGETS_VS_KERAS = {"mlp": 1.3, "conv": 1.0}
TARGET_VS_HAND = 0.9


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


def _mlp_forward(weights, x):
    w0, b0, w1, b1, w2, b2 = weights
    h = tf.nn.relu(tf.matmul(x, w0) + b0)
    h = tf.nn.relu(tf.matmul(h, w1) + b1)
    return tf.matmul(h, w2) + b2


def mlp_workload(samples: int) -> Workload:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((samples, 784)).astype(np.float32)
    teacher = rng.standard_normal((784, 10)).astype(np.float32)
    y = np.argmax(x @ teacher, axis=1).astype(np.int32)

    def build_graphfit():
        return gf.Sequential(
            [layers.Dense(256, activation="relu"), layers.Dense(256, activation="relu"),
             layers.Dense(10)],
            input_shape=(784,),
        )

    def build_keras():
        return keras.Sequential(
            [keras.Input((784,)), keras.layers.Dense(256, activation="relu"),
             keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)]
        )

    return Workload("mlp", "MLP 784-256-256-10", x, y, build_graphfit, build_keras, _mlp_forward)


def _conv_forward(weights, x):
    k0, b0, k1, b1, w2, b2 = weights
    h = tf.nn.relu(tf.nn.conv2d(x, k0, 1, "SAME") + b0)
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.relu(tf.nn.conv2d(h, k1, 1, "SAME") + b1)
    h = tf.reduce_mean(h, axis=[1, 2])
    return tf.matmul(h, w2) + b2


def conv_workload(copies: int) -> Workload:
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
    return Workload("conv", title, x, y, build_graphfit, build_keras, _conv_forward)


# ----------------------------------------------------------------------------- contenders
def _warmup_slice(n: int, batches: int) -> slice:
    """A short epoch with the same last partial batch as the full one, so that a framework
    that traces per batch shape traces both shapes during the warm-up, not while timed."""
    return slice(0, min(n, batches * BATCH_SIZE + n % BATCH_SIZE))


class _FitContender:
    """A model trained by its framework's own `fit`, with its default compile settings."""

    def __init__(self, workload: Workload, model, optimizer):
        self.model = model
        model.compile(optimizer=optimizer, metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        self.x, self.y = workload.x, workload.y
        self.losses: list[float] = []

    def warm_up(self, batches: int) -> None:
        part = _warmup_slice(len(self.x), batches)
        self.model.fit(self.x[part], self.y[part], batch_size=BATCH_SIZE, epochs=1, verbose=0,
                       shuffle=True)

    def train(self, epochs: int) -> None:
        history = self.model.fit(self.x, self.y, batch_size=BATCH_SIZE, epochs=epochs,
                                 verbose=0, shuffle=True)
        self.losses += history.history["loss"]

    def weights(self) -> list[np.ndarray]:
        return self.model.get_weights()


class GraphfitContender(_FitContender):
    name = "graphfit"

    def __init__(self, workload: Workload, model: gf.Model):
        super().__init__(workload, model,
                         gf.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM))

    def settings(self) -> str:
        state = self.model.compile_state
        sizer = state.sizers["train"]
        chunk = sizer.next_size()  # what "auto" settled on after the timed epochs
        calls = -(-(len(self.x) // BATCH_SIZE) // chunk) + (1 if len(self.x) % BATCH_SIZE else 0)
        return (f"jit_compile={state.jit_compile_setting!r} -> {state.jit_compile}, "
                f"steps_per_execution={sizer.setting!r} -> {chunk} steps/call "
                f"(~{calls} calls/epoch)")


class KerasContender(_FitContender):
    name = "Keras"

    def __init__(self, workload: Workload, initial: list[np.ndarray]):
        model = workload.build_keras()
        model.set_weights(initial)
        super().__init__(workload, model,
                         keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM))

    def settings(self) -> str:
        return (f"jit_compile={self.model.jit_compile}, "
                f"steps_per_execution={self.model.steps_per_execution}")


class HandLoopContender:
    """A `tf.function` step (XLA unless told otherwise) per batch, driven from Python over
    tf.data. The step keeps a running loss and accuracy, as `fit`'s metrics do."""

    name = "hand loop"

    def __init__(self, workload: Workload, initial: list[np.ndarray], jit_compile: bool = True,
                 shuffle_buffer: int | None = None):
        self.x, self.y = workload.x, workload.y
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
                .batch(BATCH_SIZE)
                .prefetch(tf.data.AUTOTUNE))

    def _epochs(self, dataset: tf.data.Dataset, epochs: int) -> None:
        for _ in range(epochs):
            for variable in (self.loss_sum, self.correct, self.seen):
                variable.assign(0.0)
            for x, y in dataset:
                self.train_step(x, y)
            self.losses.append(float(self.loss_sum.numpy() / self.seen.numpy()))

    def warm_up(self, batches: int) -> None:
        part = _warmup_slice(len(self.x), batches)
        self._epochs(self._dataset(self.x[part], self.y[part]), 1)
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
    samples_per_second: float
    all_runs: list[float]
    loss_before: float
    loss_after: float
    reported_losses: list[float]  # the epoch losses the contender itself reported while timed
    settings: str

    @property
    def trained(self) -> bool:
        # Any real training moves the loss by far more than this; a no-op leaves it unchanged.
        return bool(np.isfinite(self.loss_after) and self.loss_after < 0.999 * self.loss_before)


def _check_loss(workload: Workload, weights: list[np.ndarray]) -> float:
    x = tf.constant(workload.x[:CHECK_SAMPLES])
    y = tf.constant(workload.y[:CHECK_SAMPLES])
    logits = workload.forward([tf.constant(w) for w in weights], x)
    return float(tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)))


def measure(workload: Workload, args) -> dict[str, Result]:
    gf.set_seed(0)
    model = workload.build_graphfit()
    initial = model.get_weights()
    loss_before = _check_loss(workload, initial)
    contenders = [
        GraphfitContender(workload, model),
        KerasContender(workload, initial),
        HandLoopContender(workload, initial, jit_compile=args.hand_jit == "on",
                          shuffle_buffer=args.hand_shuffle_buffer),
    ]
    for contender in contenders:
        contender.warm_up(args.warmup_batches)
    runs: dict[str, list[float]] = {c.name: [] for c in contenders}
    samples = args.epochs * len(workload.x)
    # Interleaved repeats: a slow spell of the machine hits every contender alike.
    for _ in range(args.repeats):
        for contender in contenders:
            started = time.perf_counter()
            contender.train(args.epochs)
            runs[contender.name].append(samples / (time.perf_counter() - started))
    pick = max if args.stat == "best" else statistics.median
    return {
        c.name: Result(pick(runs[c.name]), runs[c.name], loss_before,
                       _check_loss(workload, c.weights()), list(c.losses), c.settings())
        for c in contenders
    }


# ------------------------------------------------------------------------------ reporting
def _ratio_cell(value: float, target: float) -> str:
    verdict = "met" if value >= target else "MISSED"
    return f"{value:.2f}x (>= {target:.1f}x {verdict})"


def _rows(workloads: list[Workload], all_results: dict[str, dict[str, Result]]):
    header = ["workload", "samples", "graphfit", "Keras", "hand loop",
              "graphfit / Keras", "graphfit / hand loop"]
    rows = []
    for workload in workloads:
        r = all_results[workload.key]
        gf_speed = r["graphfit"].samples_per_second
        rows.append([
            workload.title, f"{len(workload.x):,}",
            *(f"{r[name].samples_per_second:,.0f}" for name in ("graphfit", "Keras", "hand loop")),
            _ratio_cell(gf_speed / r["Keras"].samples_per_second,
                        TARGETS_VS_KERAS[workload.key]),
            _ratio_cell(gf_speed / r["hand loop"].samples_per_second, TARGET_VS_HAND),
        ])
    return header, rows


def _machine() -> str:
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    gpus = len(tf.config.list_physical_devices("GPU"))
    return (f"{usable} usable CPU cores (of {cpus}), {gpus} GPU(s), {platform.machine()} "
            f"{platform.system()}; Python {platform.python_version()}, TensorFlow "
            f"{tf.__version__}, Keras {keras.__version__}, graphfit {gf.__version__}")


def report(workloads, all_results, args) -> None:
    header, rows = _rows(workloads, all_results)
    caption = (f"fit throughput in samples/s ({args.stat} of {args.repeats} repeats of "
               f"{args.epochs} epochs; batch {BATCH_SIZE}, SGD(0.01, momentum 0.9), sparse CE "
               f"from logits, accuracy, shuffle on; hand loop XLA {args.hand_jit})")
    if args.markdown:
        print(f"{caption}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print()
    else:
        widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
        print(caption)
        for row in [header, *rows]:
            print("  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))
        print()
    bullet = "- " if args.markdown else "  "
    print(f"machine: {_machine()}")
    print("settings and checks:")
    for workload in workloads:
        for name, result in all_results[workload.key].items():
            runs = ", ".join(f"{v:,.0f}" for v in result.all_runs)
            trained = "trained" if result.trained else "DID NOT TRAIN"
            reported = result.reported_losses
            print(f"{bullet}{workload.key} / {name}: {result.settings}; runs [{runs}] samples/s; "
                  f"epoch loss {reported[0]:.3f} -> {reported[-1]:.3f}; check loss on "
                  f"{CHECK_SAMPLES} samples {result.loss_before:.3f} -> {result.loss_after:.3f} "
                  f"({trained})")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="epochs per timed fit call")
    parser.add_argument("--repeats", type=int, default=5, help="timed fit calls per contender")
    parser.add_argument("--stat", choices=("best", "median"), default="best",
                        help="how repeats are summarized (default: best, the fastest run)")
    parser.add_argument("--workloads", nargs="+", choices=("mlp", "conv"),
                        default=["mlp", "conv"])
    parser.add_argument("--mlp-samples", type=int, default=60_000)
    parser.add_argument("--conv-copies", type=int, default=4,
                        help="how many times the 1797 digits images are replicated")
    parser.add_argument("--warmup-batches", type=int, default=20,
                        help="full batches in the (untimed) warm-up epoch")
    parser.add_argument("--hand-jit", choices=("on", "off"), default="on",
                        help="XLA for the hand loop's step (default: on, as specified)")
    parser.add_argument("--hand-shuffle-buffer", type=int, default=None,
                        help="the hand loop's shuffle buffer (default: all samples)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    for name in ("epochs", "repeats", "mlp_samples", "conv_copies", "warmup_batches",
                 "hand_shuffle_buffer"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    builders = {"mlp": lambda: mlp_workload(args.mlp_samples),
                "conv": lambda: conv_workload(args.conv_copies)}
    workloads = [builders[key]() for key in args.workloads]
    all_results = {w.key: measure(w, args) for w in workloads}
    report(workloads, all_results, args)
    untrained = [f"{w.key}/{name}" for w in workloads
                 for name, r in all_results[w.key].items() if not r.trained]
    if untrained:
        print(f"ERROR: no training progress for {untrained}; the timings above are not valid.",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`fit(..., cache_frozen=True)`: epoch time with and without the cache on a frozen conv base.

A synthetic 32x32x3 image set (seeded) and, per row, a frozen convolutional base of growing
depth, flattened, plus a trainable head (Dense 64 -> Dense 10). For each model, the same initial
weights are trained once without and once with the cache, in the same run; an epoch's time
is the median over the epochs after the first (the first traces the steps and, with the
cache, computes the frozen outputs: shown as "build").

The bound: `model.flops()` counts the training step's FLOPs per layer; the frozen part's
share f (its forward pass in training mode, plus any backward FLOPs attributed to it) is all
the cache can remove, so the speed-up is at most 1 / (1 - f). Python and dispatch overhead per
step are not removed, so small steps stay below it.

This is a benchmark, not a test: nothing here asserts.

    python benchmarks/frozen_cache.py [--samples 2048] [--epochs 4] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import graphfit as gf  # noqa: E402
from graphfit import layers  # noqa: E402
from graphfit.callbacks import Callback  # noqa: E402

# (name, filters of the frozen conv layers); a 2x2 max pool after every second conv and the
# last, then Flatten: the head's Dense(64) reads 2048 to 4096 features.
BASES = (("1 conv x8", (8,)), ("2 conv x16", (16, 16)), ("4 conv x32", (32, 32, 32, 32)))


class _EpochTimes(Callback):
    def __init__(self):
        super().__init__()
        self.times: list[float] = []
        self._started = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self._started)


def _data(samples: int):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(samples, 32, 32, 3)).astype("float32")
    y = (x[:, :16, :16, 0].mean(axis=(1, 2)) > 0).astype("int64") * 5 + rng.integers(0, 5,
                                                                                     samples)
    return x, y


def _model(filters):
    base = []
    for i, count in enumerate(filters):
        base.append(layers.Conv2D(count, 3, padding="same", activation="relu",
                                  trainable=False))
        if i % 2 == 1 or i == len(filters) - 1:
            base.append(layers.MaxPooling2D(2, trainable=False))
    base.append(layers.Flatten())
    head = [layers.Dense(64, activation="relu"), layers.Dense(10)]
    return gf.Sequential([*base, *head], input_shape=(32, 32, 3)), len(base)


def _frozen_fraction(model, frozen_count: int, batch_size: int) -> float:
    counts = model.flops(batch_size=batch_size)
    frozen = model.layers[:frozen_count]
    part = sum(counts["per_layer"][l.name]["forward_train"] + counts["per_layer"][l.name]
               ["backward"] for l in frozen)
    return part / counts["training_step"]


def _train(filters, weights, x, y, args, cache: bool):
    model, _ = _model(filters)
    model.set_weights(weights)
    model.compile(optimizer="adam",
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = _EpochTimes()
    np.random.seed(0)
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, verbose=0,
              callbacks=[timer], cache_frozen=cache)
    return timer.times[0], statistics.median(timer.times[1:]), model.get_weights()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=4, help="epochs per fit (>= 2)")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    x, y = _data(args.samples)
    device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    print(f"frozen conv base + Dense head, {args.samples} images 32x32x3, batch "
          f"{args.batch_size}, median epoch over epochs 2..{args.epochs}, {device}")
    header = (f"{'frozen base':<12} {'FLOP share':>10} {'max speed-up':>12} {'epoch (s)':>10} "
              f"{'cached (s)':>10} {'speed-up':>9} {'1st extra':>10} {'max |dw|':>9}")
    print(header)
    print("-" * len(header))
    for name, filters in BASES:
        model, frozen_count = _model(filters)
        fraction = _frozen_fraction(model, frozen_count, args.batch_size)
        weights = model.get_weights()
        _, plain, plain_w = _train(filters, weights, x, y, args, cache=False)
        first, cached, cached_w = _train(filters, weights, x, y, args, cache=True)
        gap = max(float(np.abs(a - b).max()) for a, b in zip(plain_w, cached_w))
        print(f"{name:<12} {fraction:>10.3f} {1 / (1 - fraction):>11.1f}x {plain:>10.3f} "
              f"{cached:>10.3f} {plain / cached:>8.1f}x {first - cached:>10.3f} {gap:>9.1e}")


if __name__ == "__main__":
    main()

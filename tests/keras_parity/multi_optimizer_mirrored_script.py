"""A MultiOptimizer (Adam for dense_1, SGD with momentum for the rest) under MirroredStrategy
on 2 logical CPUs against one device (run by test_multi_optimizer.py in the two-CPU process:
logical devices must be configured before TensorFlow starts). Prints one `RESULT` line of
JSON."""

from __future__ import annotations

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # tests/
import numpy as np  # noqa: E402
import two_cpus  # noqa: E402  (sets up 2 logical CPUs before TensorFlow starts)

import graphfit as gf  # noqa: E402
from graphfit import layers, optimizers  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 4)).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5], [3.0]]) + 0.3).astype("float32")


def _model():
    model = gf.Sequential([
        layers.Dense(3, kernel_initializer="ones", activation="tanh", name="dense_1"),
        layers.Dense(1, kernel_initializer="ones", name="dense_2")], input_shape=(4,))
    model.compile(loss="mse", optimizer=optimizers.MultiOptimizer(optimizers.OptimizerMap(
        optimizers.SGD(0.05, momentum=0.9), {".*dense_1/.*": optimizers.Adam(0.01)})))
    return model


if __name__ == "__main__":
    single = _model()
    with two_cpus.STRATEGY.scope():
        mirrored = _model()
    expected = single.fit(X, Y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    history = mirrored.fit(X, Y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    print("RESULT " + json.dumps({
        "weights": max(float(np.max(np.abs(a - b)))
                       for a, b in zip(single.get_weights(), mirrored.get_weights())),
        "loss": float(np.max(np.abs(np.subtract(history.history["loss"],
                                                expected.history["loss"])))),
        "iterations": [int(o.iterations.numpy()) for o in mirrored.optimizer.optimizers]}))

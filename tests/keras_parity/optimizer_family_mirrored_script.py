"""Fits one small model with every first-order optimizer under MirroredStrategy on 2 logical
CPUs and on one device, and prints `RESULT {json}`: how far apart each pair ends (run by
test_optimizer_family_options.py in its own process: logical devices must be set before
TensorFlow starts)."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/
import two_cpus  # noqa: E402  (sets up 2 logical CPUs before TensorFlow starts)

import graphfit as gf  # noqa: E402
from graphfit import layers, optimizers  # noqa: E402
from graphfit.core.registry import OPTIMIZERS  # noqa: E402

RNG = np.random.RandomState(3)
X = RNG.normal(size=(16, 3)).astype("float32")
Y = RNG.normal(size=(16, 2)).astype("float32")


def _fit(name: str, strategy=None):
    def build():
        model = gf.Sequential([layers.Dense(2, kernel_initializer="ones")], input_shape=(3,))
        model.compile(optimizer=optimizers.get({"type": name, "learning_rate": 0.01}),
                      loss="mse", jit_compile=False)
        return model

    if strategy is None:
        model = build()
    else:
        with strategy.scope():
            model = build()
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    return model.get_weights() + model.optimizer.get_weights()


def main() -> None:
    differences = {}
    for name in OPTIMIZERS.names():
        cls = OPTIMIZERS.get(name)
        if not (isinstance(cls, type) and issubclass(cls, optimizers.Optimizer)):
            continue
        single, mirrored = _fit(name), _fit(name, two_cpus.STRATEGY)
        # relative to the value where it is above 1 (Ftrl's accumulators grow large)
        differences[name] = max(
            float(np.max(np.abs(np.asarray(a, "float64") - b) / np.maximum(1.0, np.abs(a))))
            for a, b in zip(single, mirrored) if np.size(a))
    print("RESULT " + json.dumps({"differences": differences}))


if __name__ == "__main__":
    main()

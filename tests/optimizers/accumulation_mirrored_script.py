"""Fits test_gradient_accumulation.py's model with gradient accumulation and EMA under
MirroredStrategy on 2 logical CPUs and on one device, and prints `RESULT {json}` of how far
they are apart (run by test_gradient_accumulation.py in its own process: logical devices
must be set before TensorFlow starts)."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/
import two_cpus  # noqa: E402  (sets up 2 logical CPUs before TensorFlow starts)

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import test_gradient_accumulation as cases  # noqa: E402

import graphfit as gf  # noqa: E402
from graphfit import layers, optimizers  # noqa: E402


def _optimizer():
    return optimizers.Adam(0.02, gradient_accumulation_steps=2, use_ema=True,
                           ema_overwrite_frequency=3)


def main() -> None:
    single, _ = cases._fit_ours(8, 2, optimizer=_optimizer())
    _, theirs = cases._models()
    with two_cpus.STRATEGY.scope():
        mirrored = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(2)],
                                 input_shape=(3,))
        mirrored.set_weights(theirs.get_weights())
        mirrored.compile(optimizer=_optimizer(), loss="mse", jit_compile=False)
    mirrored.fit(cases.X, cases.Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    pairs = [*zip(mirrored.get_weights(), single.get_weights()),
             *zip(mirrored.optimizer.get_weights(), single.optimizer.get_weights())]
    print("RESULT " + json.dumps({
        "difference": max(float(np.max(np.abs(np.asarray(a, "float64") - b))) for a, b in pairs),
        "iterations": [int(m.optimizer.iterations) for m in (mirrored, single)],
    }))


if __name__ == "__main__":
    main()

"""Regularized, constrained models under MirroredStrategy on 2 logical CPUs against one
device, with SGD and with Levenberg–Marquardt (run by test_regularizers_constraints.py in the
two-CPU process: logical devices must be configured before TensorFlow starts). Prints one
`RESULT` line of JSON."""

from __future__ import annotations

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # tests/
import keras  # noqa: E402
import numpy as np  # noqa: E402
import two_cpus  # noqa: E402  (sets up 2 logical CPUs before TensorFlow starts)

import graphfit as gf  # noqa: E402
from graphfit import callbacks, layers, optimizers  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 4))
Y = X @ np.array([[1.0], [-2.0], [0.5], [3.0]]) + 0.3


class Kernels(callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.smallest = np.inf

    def on_train_batch_end(self, batch, logs=None):
        self.smallest = min(self.smallest, float(self.model.get_weights()[0].min()))


def _model(optimizer, dtype):
    model = gf.Sequential([layers.Dense(1, kernel_initializer="ones",
                                        kernel_regularizer=keras.regularizers.L2(0.1),
                                        kernel_constraint="non_neg")],
                          input_shape=(4,), dtype=dtype)
    model.compile(optimizer=optimizer, loss="mse")
    return model


def case(make_optimizer, dtype, batch_size) -> dict:
    single = _model(make_optimizer(), dtype)
    with two_cpus.STRATEGY.scope():
        mirrored = _model(make_optimizer(), dtype)
    kernels = Kernels()
    x, y = X.astype(dtype), Y.astype(dtype)
    expected = single.fit(x, y, batch_size=batch_size, epochs=3, shuffle=False, verbose=0)
    history = mirrored.fit(x, y, batch_size=batch_size, epochs=3, shuffle=False, verbose=0,
                           callbacks=[kernels])
    return {"weights": max(float(np.max(np.abs(a - b)))
                           for a, b in zip(single.get_weights(), mirrored.get_weights())),
            "loss": float(np.max(np.abs(np.subtract(history.history["loss"],
                                                    expected.history["loss"])))),
            "regularization_loss": history.history["regularization_loss"][-1],
            "smallest_kernel_entry": kernels.smallest,
            "second_kernel_entry": float(mirrored.get_weights()[0][1, 0])}


if __name__ == "__main__":
    print("RESULT " + json.dumps({
        "sgd": case(lambda: optimizers.SGD(0.05), "float32", 16),
        "lm": case(lambda: optimizers.LevenbergMarquardt(), "float64", 32)}))

"""Trains small float64 models on one device and under MirroredStrategy on 2 logical CPUs, on
the same global batches, and prints JSON of what differs (run by test_mirrored_strategy.py in
its own process: logical devices must be configured before TensorFlow starts).

Each case builds the same model twice from the same seeds: once plainly, once inside
`strategy.scope()`, trains both with `fit(shuffle=False)` and reports the largest absolute
difference of the weights, optimizer slots and logged numbers.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

import keras  # noqa: E402

import graphfit as gf  # noqa: E402
from graphfit import layers, optimizers  # noqa: E402

STRATEGY = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
RNG = np.random.default_rng(0)
X = RNG.normal(size=(96, 5))
Y_BIN = (X[:, :1] + 0.5 * X[:, 1:2] ** 2 > 0.5).astype("float64")
Y_CLS = (np.argmax(X[:, :3], axis=1)).astype("int64")


def _mlp(head, with_bn=False):
    """Built now, from the same seed (inside the strategy's scope when one is open)."""
    keras.utils.set_random_seed(3)
    stack = [layers.Dense(8, activation="tanh")]
    if with_bn:
        stack.append(layers.BatchNormalization(momentum=0.8))
    model = gf.Sequential([*stack, layers.Dense(head)], dtype="float64")
    model.build_for(tf.TensorSpec([None, 5], tf.float64), "x")
    return model


def _compile(model, optimizer, loss, metrics):
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics, steps_per_execution=3)
    return model


def _pair(make_optimizer, head, loss, metrics, with_bn=False):
    """The same model compiled on one device and under the strategy."""
    single = _compile(_mlp(head, with_bn), make_optimizer(), loss, metrics)
    with STRATEGY.scope():
        mirrored = _compile(_mlp(head, with_bn), make_optimizer(), loss, metrics)
    return single, mirrored


def _max_diff(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) if np.size(u) else 0.0
               for u, v in zip(a, b))


def _fit_both(single, mirrored, y, **kwargs):
    logs = []
    for model in (single, mirrored):
        history = model.fit(X[:64], y[:64], batch_size=16, epochs=2, shuffle=False, verbose=0,
                            validation_data=(X[64:], y[64:]), **kwargs)
        logs.append(history.history)
    keys = sorted(logs[0])
    return {
        "weights": _max_diff(single.get_weights(), mirrored.get_weights()),
        "slots": _max_diff([v.numpy() for v in single.optimizer.variables],
                           [v.numpy() for v in mirrored.optimizer.variables]),
        "logs": _max_diff([logs[0][k] for k in keys], [logs[1][k] for k in keys]),
        "keys": keys,
    }


def sgd_momentum() -> dict:
    single, mirrored = _pair(lambda: optimizers.SGD(0.1, momentum=0.9), 3,
                             keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                             ["accuracy"])
    result = _fit_both(single, mirrored, Y_CLS)
    result["trained"] = _max_diff(single.get_weights(), [w * 0 for w in single.get_weights()])
    return result


def adam_clipnorm() -> dict:
    # A small global clip norm: clipped on every step, so the global gradient's norm matters.
    single, mirrored = _pair(lambda: optimizers.Adam(0.01, global_clipnorm=0.05), 1,
                             keras.losses.BinaryCrossentropy(from_logits=True),
                             ["accuracy", "auc"])
    result = _fit_both(single, mirrored, Y_BIN)
    # Evaluate and predict: uneven batches (13 rows: 6 and 7 per replica) included.
    result["evaluate"] = _max_diff(
        list(single.evaluate(X, Y_BIN, batch_size=13, verbose=0, return_dict=True).values()),
        list(mirrored.evaluate(X, Y_BIN, batch_size=13, verbose=0, return_dict=True).values()))
    predicted = mirrored.predict(X, batch_size=13, verbose=0)
    result["predict"] = _max_diff([single.predict(X, batch_size=13, verbose=0)], [predicted])
    result["predict_rows"] = int(predicted.shape[0])
    # A dataset (the last batch: 6 rows) and its labels, through the dataset loops.
    batches = tf.data.Dataset.from_tensor_slices((X, Y_BIN)).batch(10)
    inputs = batches.map(lambda x, y: x)
    result["predict_dataset"] = _max_diff([single.predict(inputs, verbose=0)],
                                          [mirrored.predict(inputs, verbose=0)])
    result["evaluate_dataset"] = _max_diff(
        list(single.evaluate(batches, verbose=0, return_dict=True).values()),
        list(mirrored.evaluate(batches, verbose=0, return_dict=True).values()))
    with tempfile.TemporaryDirectory() as folder:  # written under the strategy, read on one
        path = mirrored.save_weights(os.path.join(folder, "weights"))
        fresh = _compile(_mlp(1), optimizers.Adam(0.01), "mse", [])
        fresh.load_weights(path)
        result["checkpoint"] = _max_diff([fresh.predict(X, verbose=0)], [predicted])
    return result


def batch_norm() -> dict:
    """One step on a batch of 16 (8 rows per replica). Each replica normalizes with its own
    rows' statistics (not synchronized), so only the moving statistics of the first step are
    exactly comparable: the moving mean equals one device's (the mean of the halves' means
    is the batch mean); the moving variance is the mean of the halves' variances, which
    leaves out the spread between the halves' means that one device's variance includes."""
    single, mirrored = _pair(lambda: optimizers.SGD(0.05, momentum=0.9), 1, "mse", ["mae"],
                             with_bn=True)
    hidden = single.layers[0](tf.constant(X[:16])).numpy()  # the BN layer's inputs
    for model in (single, mirrored):
        model.fit(X[:16], Y_BIN[:16], batch_size=16, epochs=1, shuffle=False, verbose=0)
    bn_single, bn_mirrored = (m.layers[1] for m in (single, mirrored))
    halves = (hidden[:8].var(axis=0) + hidden[8:].var(axis=0)) / 2
    return {
        "moving_mean": _max_diff([bn_single.moving_mean], [bn_mirrored.moving_mean]),
        "variance_single": _max_diff([bn_single.moving_variance],
                                     [0.8 + 0.2 * hidden.var(axis=0)]),
        "variance_halves": _max_diff([bn_mirrored.moving_variance], [0.8 + 0.2 * halves]),
        "variance_gap": _max_diff([bn_single.moving_variance], [bn_mirrored.moving_variance]),
    }


def refusals() -> dict:
    from graphfit.optimizers import LevenbergMarquardt

    messages = {}
    with STRATEGY.scope():
        try:
            gf.Sequential([layers.Dense(1)]).compile(optimizer=LevenbergMarquardt(), loss="mse")
        except ValueError as error:
            messages["levenberg_marquardt"] = str(error)
        try:
            gf.Sequential([layers.Dense(1)]).compile(loss="mse", jit_compile=True)
        except ValueError as error:
            messages["jit_compile"] = str(error)
    outside = optimizers.SGD(0.1)
    with STRATEGY.scope():
        try:
            gf.Sequential([layers.Dense(1)]).compile(optimizer=outside, loss="mse")
        except ValueError as error:
            messages["optimizer_outside"] = str(error)
    return messages


if __name__ == "__main__":
    cases = sys.argv[1:] or ["sgd_momentum", "adam_clipnorm", "batch_norm", "refusals"]
    print("RESULT " + json.dumps({name: globals()[name]() for name in cases}))

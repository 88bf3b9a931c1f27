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
import pathlib
import sys
import tempfile

import numpy as np
import tensorflow as tf

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # tests/
import two_cpus  # noqa: E402  (sets up 2 logical CPUs before TensorFlow starts)

STRATEGY = two_cpus.STRATEGY

import keras  # noqa: E402

import graphfit as gf  # noqa: E402
from graphfit import layers, optimizers  # noqa: E402
from graphfit.saving import Checkpointer  # noqa: E402

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


def _relative_diff(a, b) -> float:
    """The largest difference of the arrays relative to each array's largest entry (LM drives
    some weights of saturated units to 1e5, where float64 rounding alone is 1e-11)."""
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v))
                            / max(1.0, float(np.max(np.abs(u)))))) for u, v in zip(a, b))


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
        # A training checkpoint restored outside the scope into a model made inside it: the
        # restore builds Adam's slots mirrored, as the model's variables are.
        Checkpointer(os.path.join(folder, "run"), mirrored).save_latest(2)
        with STRATEGY.scope():
            again = _compile(_mlp(1), optimizers.Adam(0.01), "mse", [])
        gf.checkpoints.restore_latest(again, os.path.join(folder, "run"))
        result["restored_slot_kinds"] = sorted({type(v).__name__
                                                for v in again.optimizer.variables})
        result["restored_slots"] = _max_diff([v.numpy() for v in again.optimizer.variables],
                                             [v.numpy() for v in mirrored.optimizer.variables])
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


class _DampingLog(gf.callbacks.Callback):
    """λ and ν after every step (steps_per_execution=1)."""

    def __init__(self):
        super().__init__()
        self.steps = []

    def on_train_batch_end(self, batch, logs=None):
        optimizer = self.model.optimizer
        self.steps.append((float(optimizer.damping_value.numpy()),
                           float(optimizer._growth.numpy()), float(logs["loss"])))


def levenberg_marquardt() -> dict:
    """LM on a smooth 1-D fit, batches of 25 rows (12 and 13 per replica, the last 10 and
    11): the same weights, and after every step the same λ, ν and loss (so the same trials
    were accepted and rejected)."""
    x = np.random.default_rng(1).uniform(-1.5, 1.5, size=(96, 1))
    y = np.sin(2 * x) + 0.3 * x**2 + 0.01 * RNG.normal(size=x.shape)
    runs = []
    # One device and the strategy step by step (a log after every step), then the strategy
    # with 4 steps per call: the loop's chunks do not change LM's steps.
    for scope, per_call in ((None, 1), (STRATEGY, 1), (STRATEGY, 4)):
        keras.utils.set_random_seed(5)
        with scope.scope() if scope else tempfile.TemporaryDirectory():
            model = gf.Sequential([layers.Dense(8, activation="tanh"), layers.Dense(1)],
                                  dtype="float64")
            model.build_for(tf.TensorSpec([None, 1], tf.float64), "x")
            # Plain steps on both: geodesic acceleration, which "auto" adds to a float64 fit
            # on one device, does not run under a strategy.
            model.compile(optimizer=optimizers.LevenbergMarquardt(geodesic_acceleration=False),
                          loss="mse", metrics=["mae"], steps_per_execution=per_call)
        log = _DampingLog()
        before = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
        history = model.fit(x, y, batch_size=25, epochs=2, shuffle=False, verbose=0,
                            callbacks=[log])
        history.history["drop"] = before / model.evaluate(x, y, verbose=0,
                                                          return_dict=True)["loss"]
        runs.append((model, log.steps, history.history))
    chunked = runs.pop()[0]
    chunked_weights = chunked.get_weights()
    # 26 rows in batches of 25: the last batch has 1 row, and one replica none.
    tail = chunked.fit(x[:26], y[:26], batch_size=25, epochs=1, shuffle=False, verbose=0)
    (single, steps_1, hist_1), (mirrored, steps_2, hist_2) = runs
    return {
        "weights": _relative_diff(single.get_weights(), mirrored.get_weights()),
        "damping": _max_diff([np.log([s[0] for s in steps_1])],
                             [np.log([s[0] for s in steps_2])]),
        "growth": _max_diff([[s[1] for s in steps_1]], [[s[1] for s in steps_2]]),
        "losses": _max_diff([[s[2] for s in steps_1]], [[s[2] for s in steps_2]]),
        "mae": _max_diff([hist_1["mae"]], [hist_2["mae"]]),
        "steps": len(steps_2),
        "damping_rises": sum(b[0] > a[0] for a, b in zip(steps_1, steps_1[1:])),
        "loss_drop": hist_1["drop"],
        "chunked_weights": _relative_diff(single.get_weights(), chunked_weights),
        "empty_slice_loss": tail.history["loss"][-1],
    }


def keras_seed_state() -> dict:
    """A Keras Dropout's seed generator (an int64 [seed, counter] state) under the strategy:
    the counter moves once per step, as on one device."""
    with STRATEGY.scope():
        model = gf.Sequential([layers.Dense(4), layers.KerasLayer(
            keras.layers.Dropout(0.3, seed=3), name="drop"), layers.Dense(1)])
        model.compile(optimizer=optimizers.SGD(0.05), loss="mse")
    history = model.fit(X[:40], Y_BIN[:40], batch_size=20, epochs=2, verbose=0)
    state = [v.numpy().tolist() for v in model.get_layer("drop").non_trainable_variables]
    return {"state": state, "loss": history.history["loss"][-1]}


def refusals() -> dict:
    messages = {}
    with STRATEGY.scope():
        try:
            gf.Sequential([layers.Dense(1)]).compile(loss="mse", jit_compile=True)
        except ValueError as error:
            messages["jit_compile"] = str(error)
    with STRATEGY.scope():
        synced = gf.Sequential([layers.Dense(4), layers.BatchNormalization(synchronized=True),
                                layers.Dense(1)], dtype="float64")
        synced.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    try:
        synced.fit(X[:16], Y_BIN[:16], batch_size=16, epochs=1, verbose=0)
    except ValueError as error:
        messages["lm_synchronized"] = str(error)
    outside = optimizers.SGD(0.1)
    with STRATEGY.scope():
        try:
            gf.Sequential([layers.Dense(1)]).compile(optimizer=outside, loss="mse")
        except ValueError as error:
            messages["optimizer_outside"] = str(error)
    return messages


if __name__ == "__main__":
    cases = sys.argv[1:] or ["sgd_momentum", "adam_clipnorm", "batch_norm",
                             "levenberg_marquardt", "keras_seed_state", "refusals"]
    print("RESULT " + json.dumps({name: globals()[name]() for name in cases}))

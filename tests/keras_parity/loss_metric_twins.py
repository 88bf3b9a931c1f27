"""The same small model in graphfit and in Keras (same initial weights), and data of each kind
of labels, for comparing losses and metrics through `compile`, `evaluate` and `fit`."""

from __future__ import annotations

import keras
import numpy as np

import graphfit as gf
from graphfit import layers, optimizers

FEATURES, TRAIN, VAL, BATCH = 5, 48, 24, 16

# kind of labels: (output units, output activation)
OUTPUTS = {
    "regression": (3, None),
    "positive": (3, "softplus"),
    "binary": (1, "sigmoid"),
    "logits": (1, None),
    "multilabel": (3, "sigmoid"),
    "categorical": (4, "softmax"),
    "sparse": (4, "softmax"),
    "sparse_logits": (4, None),
}


def labels(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    units = OUTPUTS[kind][0]
    if kind == "regression":
        return rng.normal(size=(n, units)).astype("float32")
    if kind == "positive":
        return rng.uniform(0.1, 2.0, size=(n, units)).astype("float32")
    if kind in ("binary", "logits", "multilabel"):
        return rng.integers(0, 2, size=(n, units)).astype("float32")
    ids = rng.integers(0, units, size=n)
    if kind == "categorical":
        return np.eye(units, dtype="float32")[ids]
    return ids.astype("int64")


def data(kind: str, seed: int = 0):
    """((x, y), (x_val, y_val)) for a kind of labels."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(TRAIN + VAL, FEATURES)).astype("float32")
    y = labels(kind, TRAIN + VAL, rng)
    return (x[:TRAIN], y[:TRAIN]), (x[TRAIN:], y[TRAIN:])


def twins(kind: str, seed: int = 0):
    """(graphfit model, Keras model): one Dense layer, the same weights."""
    units, activation = OUTPUTS[kind]
    ours = gf.Sequential([layers.Dense(units, activation=activation)],
                         input_shape=(FEATURES,))
    theirs = keras.Sequential([keras.Input((FEATURES,)),
                               keras.layers.Dense(units, activation=activation)])
    rng = np.random.default_rng(seed + 100)
    weights = [rng.normal(scale=0.5, size=w.shape).astype("float32")
               for w in ours.get_weights()]
    ours.set_weights(weights)
    theirs.set_weights(weights)
    return ours, theirs


def identity_twins(units: int, input_shape=None):
    """Models whose output is their input (a Dense layer with an identity kernel): the
    predictions of a Keras unit test's golden case go in as x."""
    input_shape = input_shape or (units,)
    ours = gf.Sequential([layers.Dense(units, use_bias=False)], input_shape=input_shape)
    theirs = keras.Sequential([keras.Input(input_shape),
                               keras.layers.Dense(units, use_bias=False)])
    ours.set_weights([np.eye(units, dtype="float32")])
    theirs.set_weights([np.eye(units, dtype="float32")])
    return ours, theirs


def compile_both(ours, theirs, learning_rate=0.05, jit_compile=False, **compile_arguments):
    """Compiles both with SGD; graphfit's steps traced (without XLA unless asked: each XLA
    compile costs a second), Keras's run eagerly (the reference numbers, without the time of
    tracing dozens of metrics twice)."""
    ours.compile(optimizer=optimizers.SGD(learning_rate), jit_compile=jit_compile,
                 **_fresh(compile_arguments))
    theirs.compile(optimizer=keras.optimizers.SGD(learning_rate), run_eagerly=True,
                   **_fresh(compile_arguments))


def _fresh(arguments: dict) -> dict:
    """Keras's compile keeps the metric objects it is given: each model gets its own copy."""
    def copy(item):
        if isinstance(item, keras.metrics.Metric):
            return type(item).from_config(item.get_config())
        if isinstance(item, (list, tuple)):
            return [copy(i) for i in item]
        if isinstance(item, dict):
            return {k: copy(v) for k, v in item.items()}
        return item
    return {key: copy(value) for key, value in arguments.items()}


def evaluate_both(ours, theirs, x, y, **kwargs) -> tuple[dict, dict]:
    kwargs = {"batch_size": BATCH, "verbose": 0, "return_dict": True, **kwargs}
    return ours.evaluate(x, y, **kwargs), theirs.evaluate(x, y, **kwargs)


def fit_both(ours, theirs, train, val, **kwargs) -> tuple[dict, dict]:
    """One epoch, batches in order, with validation: both histories."""
    kwargs = {"batch_size": BATCH, "epochs": 1, "shuffle": False, "verbose": 0,
              "validation_data": val, **kwargs}
    return ours.fit(*train, **kwargs).history, theirs.fit(*train, **kwargs).history


def assert_same_logs(ours: dict, theirs: dict, keys=None, rtol=1e-5, atol=1e-6) -> None:
    """Every key Keras logs (or `keys`) is in graphfit's logs with Keras's value; an array
    where Keras has one (thresholds lists, one value per class)."""
    keys = [k for k in theirs if k != "learning_rate"] if keys is None else keys
    missing = [k for k in keys if k not in ours]
    assert not missing, f"graphfit does not log {missing}; it logs {sorted(ours)}"
    for key in keys:
        a, b = ours[key], theirs[key]
        if isinstance(b, list):  # a history: one entry per epoch
            assert len(a) == len(b), key
            for x, y in zip(a, b):
                _assert_close(key, x, y, rtol, atol)
        else:
            _assert_close(key, a, b, rtol, atol)


def _assert_close(key, ours, theirs, rtol, atol):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape, (key, ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, err_msg=key)

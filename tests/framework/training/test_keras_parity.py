"""Differential tests: graphfit's fit reproduces Keras 3's fit step for step.

Identical initial weights (copied from the graphfit model into its Keras twin with
set_weights, in Keras order), identical batches (no shuffling), 20 steps; the weights, including
batch-norm moving statistics, must agree to 1e-5.
"""

import keras
import numpy as np
import pytest

import graphfit as gf
from graphfit import layers, optimizers

STEPS, BATCH = 20, 32


@pytest.fixture(scope="module")
def digits():
    x, y = gf.datasets.load_digits()
    return x[: STEPS * BATCH], y[: STEPS * BATCH]


def _twins():
    # No bias before batch norm: its gradient is pure round-off there, which Adam would amplify
    # to full-size steps in random directions (a property of Adam, not of either framework).
    ours = gf.Sequential(
        [layers.Dense(32, activation="relu", use_bias=False),
         layers.BatchNormalization(momentum=0.9),
         layers.Dense(10)],
        input_shape=(64,),
    )
    theirs = keras.Sequential(
        [keras.Input((64,)), keras.layers.Dense(32, activation="relu", use_bias=False),
         keras.layers.BatchNormalization(momentum=0.9), keras.layers.Dense(10)]
    )
    theirs.set_weights(ours.get_weights())
    return ours, theirs


def _train_both(digits, ours_optimizer, keras_optimizer, jit_compile):
    x, y = digits
    ours, theirs = _twins()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    ours.compile(optimizer=ours_optimizer, loss=loss, jit_compile=jit_compile)
    theirs.compile(optimizer=keras_optimizer, loss=loss)
    ours_history = ours.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    theirs_history = theirs.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return ours, theirs, ours_history, theirs_history


def _assert_same_weights(ours, theirs, atol=1e-5):
    names = [v.name for v in ours.variables]
    for name, a, b in zip(names, ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, atol=atol, rtol=0, err_msg=name)


OPTIMIZER_CASES = {
    "sgd_nesterov": (dict(learning_rate=0.05, momentum=0.9, nesterov=True), "SGD"),
    "sgd_momentum": (dict(learning_rate=0.05, momentum=0.9), "SGD"),
    "adam": (dict(learning_rate=0.01), "Adam"),
    "sgd_clipnorm": (dict(learning_rate=0.05, momentum=0.9, clipnorm=0.1), "SGD"),
    "sgd_global_clipnorm": (dict(learning_rate=0.05, momentum=0.9, global_clipnorm=0.5), "SGD"),
    "adam_clipvalue": (dict(learning_rate=0.01, clipvalue=0.01), "Adam"),
    "adam_weight_decay": (dict(learning_rate=0.01, weight_decay=0.05), "Adam"),
}


@pytest.mark.parametrize("case", sorted(OPTIMIZER_CASES))
def test_twenty_steps_match_keras(digits, case):
    kwargs, name = OPTIMIZER_CASES[case]
    ours_opt = getattr(optimizers, name)(**kwargs)
    keras_opt = getattr(keras.optimizers, name)(**kwargs)
    ours, theirs, h_ours, h_theirs = _train_both(digits, ours_opt, keras_opt, jit_compile=False)
    _assert_same_weights(ours, theirs)
    # The moving statistics moved (the comparison above is not between untouched zeros/ones).
    bn = ours.layers[1]
    assert np.abs(bn.moving_mean.numpy()).max() > 1e-2
    assert int(ours.optimizer.iterations) == STEPS
    np.testing.assert_allclose(h_ours.history["loss"], h_theirs.history["loss"], rtol=1e-5)


def test_xla_compiled_steps_match_keras_too(digits):
    kwargs = dict(learning_rate=0.05, momentum=0.9, nesterov=True)
    ours, theirs, _, _ = _train_both(
        digits, optimizers.SGD(**kwargs), keras.optimizers.SGD(**kwargs), jit_compile=True
    )
    assert ours.compile_state.jit_compile is True
    _assert_same_weights(ours, theirs)


def test_batch_renorm_training_matches_keras(digits):
    x, y = digits
    ours = gf.Sequential(
        [layers.Dense(16, use_bias=False),
         layers.BatchNormalization(renorm=True, renorm_momentum=0.9,
                                                     renorm_clipping={"rmax": 2.0, "dmax": 1.0}),
         layers.Dense(10)],
        input_shape=(64,),
    )
    theirs = keras.Sequential(
        [keras.Input((64,)), keras.layers.Dense(16, use_bias=False),
         keras.layers.BatchNormalization(renorm=True, renorm_momentum=0.9,
                                         renorm_clipping={"rmax": 2.0, "dmax": 1.0}),
         keras.layers.Dense(10)]
    )
    theirs.set_weights(ours.get_weights())
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    ours.compile(optimizer=optimizers.SGD(0.05, momentum=0.9), loss=loss, jit_compile=False)
    theirs.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss=loss)
    ours.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0)
    theirs.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0)
    _assert_same_weights(ours, theirs)

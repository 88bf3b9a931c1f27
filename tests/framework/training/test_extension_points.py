"""A user layer with its own batch check and a user gradient transform, each written only
against the public API (user_extensions.py), under XLA, `steps_per_execution` and
MirroredStrategy on two logical CPUs (extension_points_script.py, in the two-CPU process).

The transform halves the gradients, so a fit with it must take the same steps as SGD at half
the learning rate; the batch check must stop `fit`, `evaluate` and `predict` before a batch
with a negative feature reaches any variable.
"""

from __future__ import annotations

import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf

from . import user_extensions as user
from .script_results import script_results

TWO_CPU_SCRIPT = pathlib.Path(__file__).with_name("extension_points_script.py")
EPOCHS, BATCH = 2, 8
STEPS = EPOCHS * len(user.X) // BATCH


def _fit(model, x, **kwargs):
    return model.fit(x, user.Y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0,
                     **kwargs)


@pytest.mark.parametrize("jit_compile, steps_per_execution", [(True, 4), (False, 3)])
def test_user_transform_takes_the_reference_steps(jit_compile, steps_per_execution):
    transform = user.HalveAndCount()
    model = user.compiled(transform, jit_compile=jit_compile,
                          steps_per_execution=steps_per_execution)
    reference = user.compiled(None, jit_compile=jit_compile,
                              steps_per_execution=steps_per_execution)
    initial = model.get_weights()
    _fit(model, user.X)
    _fit(reference, user.X)
    assert model.jit_compile is jit_compile  # XLA really ran (or really did not)
    assert user.max_difference(initial, model.get_weights()) > 1e-3  # it trained
    assert user.max_difference(reference.get_weights(), model.get_weights()) < 1e-12
    assert int(transform.steps.numpy()) == STEPS  # its state, updated once per step
    assert any(v is transform.steps for v in model.optimizer.variables)  # checkpointed


@pytest.fixture(scope="module")
def xla_model():
    """Compiled with XLA and 4 steps per execution; the tests reset its weights."""
    return user.compiled(user.HalveAndCount(), jit_compile=True, steps_per_execution=4)


def test_batch_check_refuses_arrays_before_the_first_step(xla_model):
    initial = xla_model.get_weights()
    with pytest.raises(gf.DataCheckError) as caught:
        _fit(xla_model, user.with_negative_row(37))
    # The batch, then the row that fails on its own (found by halving the batch) and its values.
    assert re.fullmatch(
        r"SquareRoot 'root': inputs must be >= 0; take the absolute value or shift the "
        r"features \(rows 32 to 39 of x; row 37 fails it alone: x\[37\] = \[[-0-9.e]+, -1, "
        r"[-0-9.e, ]+\]\)\.", str(caught.value)), str(caught.value)
    assert caught.value.layer is xla_model.get_layer("root")
    assert user.max_difference(initial, xla_model.get_weights()) == 0.0


def test_batch_check_stops_a_dataset_at_the_bad_batch(xla_model):
    """The two batches before the bad one train; nothing of the bad one does."""
    start = xla_model.get_weights()
    x = user.with_negative_row(21)  # rows 16 to 23: batch 2, counted from 0 as in callbacks
    data = tf.data.Dataset.from_tensor_slices((x, user.Y)).batch(BATCH)
    with pytest.raises(gf.DataCheckError, match=r"inputs must be >= 0.*\(batch 2\)"):
        xla_model.fit(data, epochs=1, verbose=0)
    trained = xla_model.get_weights()
    xla_model.set_weights(start)
    xla_model.fit(data.take(2), epochs=1, verbose=0)
    assert user.max_difference(trained, xla_model.get_weights()) < 1e-12
    assert user.max_difference(start, trained) > 1e-4


def test_batch_check_guards_evaluate_and_predict(xla_model):
    bad = user.with_negative_row(3)
    with pytest.raises(gf.DataCheckError, match="rows 0 to 7 of x"):
        xla_model.evaluate(bad, user.Y, batch_size=BATCH, verbose=0)
    with pytest.raises(gf.DataCheckError, match="SquareRoot 'root'"):
        xla_model.predict(bad, batch_size=BATCH, verbose=0)
    assert np.all(np.isfinite(xla_model.predict(user.X, batch_size=BATCH, verbose=0)))


def test_batch_check_asserts_on_a_direct_call():
    layer = user.SquareRoot(name="direct")
    assert float(layer(tf.constant([[4.0]]))[0, 0]) == 2.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="inputs must be >= 0"):
        layer(tf.constant([[-1.0]]))


@pytest.fixture(scope="module")
def mirrored(two_cpu_results) -> dict:
    return script_results(TWO_CPU_SCRIPT, two_cpu_results)


def test_user_transform_under_mirrored_strategy(mirrored):
    case = mirrored["transform"]
    assert case["trained"] > 1e-3
    assert case["weights"] < 1e-10 and case["reference"] < 1e-10
    # 64 rows in batches of 16, two epochs: 8 steps, the state counted once per step.
    assert case["steps"] == [8, 8]


def test_user_batch_check_under_mirrored_strategy(mirrored):
    case = mirrored["batch_check"]
    assert case["error"] is not None and "SquareRoot 'root': inputs must be >= 0" in case["error"]
    assert "rows 32 to 47 of x" in case["error"] and case["layer"] == "root"
    assert case["unchanged"] == 0.0


def test_user_after_update_hook_averages_every_step():
    """A weight average as an after-update hook: the average of the weights after each step,
    as NumPy computes it from the weights a callback read after each batch."""
    average = user.WeightAverage(decay=0.75)
    model = user.compiled(None, jit_compile=True)
    model.optimizer.after_update.append(average)
    after_each_step = []

    class KeepWeights(gf.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            after_each_step.append(self.model.get_weights())

    keep = KeepWeights()
    expected = model.get_weights()
    _fit(model, user.X, callbacks=[keep])
    assert len(after_each_step) == STEPS and model.jit_compile is True
    for weights in after_each_step:
        expected = [0.75 * e + 0.25 * w for e, w in zip(expected, weights)]
    averages = [average.averages[v.ref()].numpy() for v in model.trainable_variables]
    assert user.max_difference(expected, averages) < 1e-12
    assert user.max_difference(averages, model.get_weights()) > 1e-3  # it lags the weights
    assert all(any(a is v for v in model.optimizer.variables)
               for a in average.averages.values())  # checkpointed with the optimizer


def test_user_loss_registered_by_name():
    @gf.registry.LOSSES.register
    class HalfSquaredError(keras.losses.Loss):
        def call(self, y_true, y_pred):
            return 0.5 * tf.reduce_mean(tf.square(y_true - y_pred), axis=-1)

    model = user.model()
    model.compile(optimizer=gf.optimizers.SGD(0.1), loss="half_squared_error")
    half = model.evaluate(user.X, user.Y, batch_size=64, verbose=0)
    model.compile(optimizer=gf.optimizers.SGD(0.1), loss="mse")
    assert half == pytest.approx(0.5 * model.evaluate(user.X, user.Y, batch_size=64, verbose=0))

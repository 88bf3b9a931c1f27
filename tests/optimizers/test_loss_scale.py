"""LossScaleOptimizer: Keras's dynamics number for number, skipped steps that move nothing
(variables, slots, iterations, batch-norm statistics), XLA and steps_per_execution, LM under
the wrapper, config and checkpoints with and without loss scaling."""

from __future__ import annotations

import contextlib
import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import callbacks, layers, optimizers
from graphfit.saving import checkpoints

MARK = 1000.0  # x[:, 0] of every row of the batch whose gradient overflows


class Overflow(gf.Layer):
    """`inputs * gain`; the gain's gradient is inf for a batch whose x[:, 0] holds MARK."""

    def build(self, input_shape):
        self.gain = self.add_weight("gain", (), initializer="ones")

    def call(self, inputs, training=False):
        marked = tf.reduce_any(inputs[:, 0] >= MARK)

        @tf.custom_gradient
        def gain(g):
            def grad(dy):
                return tf.where(marked, tf.constant(np.inf, dy.dtype), dy)
            return tf.identity(g), grad

        return inputs * gain(tf.convert_to_tensor(self.gain))


def _data(with_bad: bool):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]])).astype("float32")
    if not with_bad:
        return x, y
    bad = rng.normal(size=(8, 3)).astype("float32")
    bad[:, 0] = MARK  # inserted as the third of five batches of 8
    return np.concatenate([x[:16], bad, x[16:]]), np.concatenate([y[:16], y[:8], y[16:]])


def fitted(with_bad: bool, strategy=None, **compile_args):
    """An epoch of batches of 8 (the overflow third when `with_bad`), scale 2**10, growth 2."""
    keras.utils.set_random_seed(1)
    with contextlib.nullcontext() if strategy is None else strategy.scope():
        model = gf.Sequential([Overflow(), layers.Dense(4), layers.BatchNormalization(),
                               layers.Dense(1)], input_shape=(3,))
        optimizer = optimizers.LossScaleOptimizer(optimizers.SGD(0.05, momentum=0.9),
                                                  initial_scale=2.0**10, dynamic_growth_steps=2)
        model.compile(optimizer=optimizer, loss="mse", **compile_args)
    model.fit(*_data(with_bad), batch_size=8, epochs=1, shuffle=False, verbose=0)
    return model


def _state(model):
    return [v.numpy() for v in model.variables] + [
        v.numpy() for v in model.optimizer.inner_optimizer.variables]


@pytest.fixture(scope="module", params=[{}, {"jit_compile": True, "steps_per_execution": 2}],
                ids=["graph", "xla_spe2"])
def pair(request):
    return fitted(True, **request.param), fitted(False, **request.param)


def test_skipped_step_moves_nothing(pair):
    with_bad, without = pair
    assert int(with_bad.optimizer.iterations) == int(without.optimizer.iterations) == 4
    # weights, batch-norm moving statistics, momentum slots, iterations, learning rate
    for got, want in zip(_state(with_bad), _state(without), strict=True):
        np.testing.assert_array_equal(got, want)
    moving = with_bad.layers[2].moving_mean.numpy()
    assert np.all(moving != 0)  # the good steps did move the statistics: not vacuous


def test_scale_halves_on_overflow_and_doubles_after_growth_steps(pair):
    with_bad, without = pair
    # growth 2: 2 finite steps double 2**10, the overflow halves it back, 2 more double it
    assert float(with_bad.optimizer.loss_scale) == 2.0**11
    assert int(with_bad.optimizer.step_counter) == 0
    # without the overflow: doubled after steps 2 and 4
    assert float(without.optimizer.loss_scale) == 2.0**12
    assert int(without.optimizer.step_counter) == 0


# Run in a fresh process with two logical CPUs (the one tests/conftest.py's two_cpu_results
# shares with the other scripts that need them).
TWO_CPU_SCRIPT = pathlib.Path(__file__).with_name("loss_scale_mirrored_script.py")


def test_skipped_step_under_mirrored_strategy(two_cpu_results):
    """Two replicas: the step is skipped by selects (a cond cannot hold the replicas' sync)."""
    result = two_cpu_results[str(TWO_CPU_SCRIPT)]
    assert isinstance(result, dict), result
    assert result["state"] == 0.0 and result["moved"] > 0
    assert result["iterations"] == [4, 4] and result["scales"] == [2.0**11, 2.0**12]


def test_skipped_step_under_a_one_replica_strategy():
    """MirroredStrategy on one device (a CPU-only or one-GPU machine): its variables assign
    through merge_call, which a cond cannot hold, so the skip is the select here too."""
    with_bad = fitted(True)
    mirrored = fitted(True, strategy=tf.distribute.MirroredStrategy(["/cpu:0"]))
    assert mirrored.optimizer.iterations.numpy() == 4
    assert mirrored.optimizer.loss_scale.numpy() == 2.0**11
    for got, want in zip(_state(mirrored), _state(with_bad), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_matches_keras_step_by_step():
    coefficients = [1.0, 2.0, np.inf, 0.5, 3.0, np.nan, 1.5, 2.5]
    start = np.array([1.0, -2.0, 0.5], dtype="float32")
    w, kw = tf.Variable(start), keras.Variable(start)
    ours = optimizers.LossScaleOptimizer(optimizers.SGD(0.1, momentum=0.9),
                                         initial_scale=8.0, dynamic_growth_steps=2)
    theirs = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1, momentum=0.9),
                                                 initial_scale=8.0, dynamic_growth_steps=2)

    def loss(v, c):
        return 0.5 * tf.reduce_sum(v * v) * c + tf.reduce_sum(v) * 0.25

    for c in coefficients:
        ours.minimize(lambda c=c: (loss(w, c), None), [w])
        with tf.GradientTape() as tape:
            scaled = theirs.scale_loss(loss(kw.value, c))
        theirs.apply(tape.gradient(scaled, [kw.value]), [kw])
        np.testing.assert_array_equal(w.numpy(), kw.numpy())
        assert float(ours.loss_scale) == float(theirs.dynamic_scale.numpy())
        assert int(ours.iterations) == int(theirs.iterations.numpy())
        np.testing.assert_array_equal(ours.get_slot(w, "momentum").numpy(),
                                      theirs.inner_optimizer.momentums[0].numpy())
    assert int(ours.iterations) == 6 and float(ours.loss_scale) == 16.0  # 2 skipped, 3 grown


class _Lm:
    """LevenbergMarquardt under the wrapper on y = 2x + 1, one batch overflowing."""

    @staticmethod
    def fit(with_bad: bool):
        x = np.linspace(-1, 1, 16, dtype="float32")[:, None]
        y = 2 * x + 1
        if with_bad:  # the middle batch of three: labels whose squared residuals overflow
            x = np.concatenate([x[:8], x[:8], x[8:]])
            y = np.concatenate([y[:8], np.full((8, 1), 1e30, "float32"), y[8:]])
        keras.utils.set_random_seed(2)
        model = gf.Sequential([layers.Dense(3, activation="tanh"), layers.Dense(1)],
                              input_shape=(1,))
        lm = optimizers.LevenbergMarquardt()
        model.compile(optimizer=optimizers.LossScaleOptimizer(lm), loss="mse")
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        return model, lm


@pytest.fixture(scope="module")
def lm_pair():
    return _Lm.fit(True), _Lm.fit(False)


def test_levenberg_marquardt_skips_a_non_finite_step(lm_pair):
    (with_bad, lm_bad), (without, lm) = lm_pair
    assert int(lm_bad.iterations) == int(lm.iterations) == 2
    for got, want in zip(with_bad.get_weights(), without.get_weights(), strict=True):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(lm_bad.variables, lm.variables, strict=True):  # λ, ν, scale, flags
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert float(lm.damping_value) > 0  # the finite steps ran: not vacuous
    assert float(with_bad.optimizer.loss_scale) == 2.0**15  # LM's loss is never scaled


def test_config_round_trip_and_registry():
    optimizer = optimizers.LossScaleOptimizer(optimizers.Adam(0.01, clipnorm=1.0),
                                              initial_scale=128.0, dynamic_growth_steps=7)
    config = optimizer.get_config()
    assert config["inner_optimizer"]["type"] == "Adam"
    clone = optimizers.get({"type": "LossScaleOptimizer", **json.loads(json.dumps(config))})
    assert isinstance(clone.inner_optimizer, optimizers.Adam)
    assert clone.get_config() == config and float(clone.loss_scale) == 128.0
    assert optimizers.serialize(clone)["type"] == "LossScaleOptimizer"


def test_learning_rate_and_iterations_are_the_inner_optimizers():
    inner = optimizers.SGD(0.1)
    optimizer = optimizers.LossScaleOptimizer(inner)
    optimizer.learning_rate = 0.025
    assert float(inner.learning_rate) == 0.025 and optimizer.iterations is inner.iterations
    assert optimizer.variables[-2:] == [optimizer.loss_scale, optimizer.step_counter]


@pytest.mark.parametrize("arguments, message", [
    ({"initial_scale": 0.0}, "initial_scale must be a positive float. Received: initial_sc"),
    ({"initial_scale": -2.0}, "initial_scale=-2.0"),
    ({"dynamic_growth_steps": 0}, "dynamic_growth_steps must be a positive integer"),
])
def test_bad_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        optimizers.LossScaleOptimizer(optimizers.SGD(), **arguments)


def test_bad_inner_optimizers():
    with pytest.raises(ValueError, match="must be a graphfit optimizer"):
        optimizers.LossScaleOptimizer(keras.optimizers.SGD())
    with pytest.raises(ValueError, match="already a LossScaleOptimizer"):
        optimizers.LossScaleOptimizer(optimizers.LossScaleOptimizer(optimizers.SGD()))
    clipped = optimizers.SGD(gradient_transforms=[optimizers.PerExampleClipping(1.0)])
    with pytest.raises(ValueError, match="PerExampleClipping"):
        optimizers.LossScaleOptimizer(clipped)


def _checkpoint_model(scaled: bool, growth: int = 2):
    keras.utils.set_random_seed(4)
    model = gf.Sequential([layers.Dense(2), layers.Dense(1)], input_shape=(3,))
    inner = optimizers.SGD(0.05, momentum=0.9)
    model.compile(optimizer=optimizers.LossScaleOptimizer(
        inner, initial_scale=64.0, dynamic_growth_steps=growth) if scaled else inner, loss="mse")
    return model, inner


@pytest.mark.parametrize("saved_scaled", [False, True], ids=["float32_to_scaled",
                                                             "scaled_to_float32"])
def test_checkpoints_restore_with_and_without_loss_scaling(tmp_path, saved_scaled):
    x, y = _data(False)
    saved, saved_inner = _checkpoint_model(saved_scaled)
    saved.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    checkpoints.Checkpointer(tmp_path, saved).save_latest(1)
    restored, inner = _checkpoint_model(not saved_scaled)
    restored.fit(x[:8], y[:8], batch_size=8, epochs=1, verbose=0)  # built, other values
    assert checkpoints.restore_latest(restored, tmp_path)["epoch"] == 1
    assert int(inner.iterations) == 4
    for got, want in zip([*restored.variables, *inner.variables],
                         [*saved.variables, *saved_inner.variables], strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_learning_rate_callbacks_set_the_inner_rate():
    model, inner = _checkpoint_model(True)
    scheduler = callbacks.LearningRateScheduler(lambda epoch, rate: rate / 4)
    history = model.fit(*_data(False), batch_size=16, epochs=2, verbose=0,
                        callbacks=[scheduler])
    assert history.history["learning_rate"] == pytest.approx([0.0125, 0.003125])
    assert float(inner.learning_rate) == pytest.approx(0.003125)


def test_checkpoint_restores_the_scale(tmp_path):
    x, y = _data(False)
    saved, _ = _checkpoint_model(True, growth=1)
    saved.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert float(saved.optimizer.loss_scale) == 64.0 * 2**4
    checkpoints.Checkpointer(tmp_path, saved).save_latest(1)
    restored, _ = _checkpoint_model(True)
    restored.fit(x[:8], y[:8], batch_size=8, epochs=1, verbose=0)
    checkpoints.restore_latest(restored, tmp_path)
    assert float(restored.optimizer.loss_scale) == 64.0 * 2**4

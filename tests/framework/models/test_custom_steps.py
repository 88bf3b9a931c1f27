"""Overridden train_step / test_step / predict_step, as Keras users write them."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import callbacks, layers, optimizers
from graphfit.core.step_types import StepResult, unpack_data
from graphfit.examples import custom_loss_step, gan_2d
from graphfit.saving import Checkpointer, restore_latest

RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 3)).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3).astype("float32")


class Counter(gf.Layer):
    """Counts its training calls through an update hook (UPDATE_OPS)."""

    def build(self, input_shape):
        self.count = self.add_weight("count", shape=(), initializer="zeros", trainable=False)

    def call(self, x, training=False):
        if training:
            self.add_update(self.count, self.count + 1.0)
        return x


class HandWritten(gf.Sequential):
    """The default step written out by hand: must train exactly like the default."""

    def train_step(self, data):
        x, y, sample_weight = unpack_data(data)
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = tf.reduce_mean(tf.square(y_pred - y))
        variables = self.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return StepResult(loss, y_pred)


def _stack(cls, seed=1):
    tf.keras.utils.set_random_seed(seed)
    return cls([layers.Dense(4, activation="tanh"), Counter(), layers.Dense(1)])


@pytest.mark.parametrize("jit_compile, steps_per_execution", [(False, 1), (True, 4)])
def test_hand_written_step_trains_like_the_default(jit_compile, steps_per_execution):
    runs = {}
    for cls in (gf.Sequential, HandWritten):
        model = _stack(cls)
        model.compile(optimizer=optimizers.SGD(0.1, momentum=0.9), loss="mse", metrics=["mae"],
                      jit_compile=jit_compile, steps_per_execution=steps_per_execution)
        history = model.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                            validation_data=(X[:16], Y[:16]))
        runs[cls] = (history.history, [v.numpy() for v in model.variables])
    (default_history, default_vars), (own_history, own_vars) = runs.values()
    assert sorted(own_history) == ["loss", "mae", "val_loss", "val_mae"]
    for key in own_history:
        np.testing.assert_allclose(own_history[key], default_history[key], rtol=1e-5)
    for own, default in zip(own_vars, default_vars):
        np.testing.assert_allclose(own, default, rtol=1e-5, atol=1e-6)
    # The update hook ran once per step (8 batches x 3 epochs), after the overridden step.
    counter = own_vars[2]
    assert counter.shape == () and float(counter) == 24.0


def test_custom_loss_needing_the_inputs_reports_its_parts():
    gf.set_seed(0)
    x, y = custom_loss_step.make_data(256, 0)
    model = custom_loss_step.build_model(slope_weight=1.0)
    model.compile(optimizer=optimizers.Adam(0.01))  # no loss: the step computes it
    history = model.fit(x, y, batch_size=64, epochs=30, verbose=0, validation_data=(x, y))
    h = history.history
    # Every log is a batch-size-weighted mean, so the parts add up epoch by epoch.
    np.testing.assert_allclose(h["loss"], np.add(h["value_loss"], h["slope_loss"]), rtol=1e-5)
    np.testing.assert_allclose(h["val_loss"], np.add(h["val_value_loss"], h["val_slope_loss"]),
                               rtol=1e-5)
    assert h["loss"][-1] < 0.1 * h["loss"][0]
    # evaluate runs the overridden test_step; predict the default predict_step.
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    value_loss = float(np.mean((model.predict(x, verbose=0) - y[:, :1]) ** 2))
    np.testing.assert_allclose(logs["value_loss"], value_loss, rtol=1e-4)


@pytest.fixture(scope="module")
def trained_gan():
    gf.set_seed(0)
    gan = gan_2d.build_gan(seed=0)
    gan.compile()
    data = gan_2d.sample_target(2048, 0)
    history = gan.fit(data, batch_size=128, epochs=100, verbose=0)
    return gan, history


def test_gan_with_two_optimizers_learns_the_target_mean(trained_gan):
    gan, history = trained_gan
    assert {"loss", "d_loss"} <= set(history.history)
    steps = 100 * 2048 // 128
    assert int(gan.d_optimizer.iterations.numpy()) == steps
    assert int(gan.g_optimizer.iterations.numpy()) == steps
    samples = gan.predict(np.random.default_rng(1).normal(size=(1000, 2)), verbose=0)
    np.testing.assert_allclose(samples.mean(axis=0), gan_2d.TARGET_MEAN, atol=0.75)
    # At the equilibrium the discriminator cannot tell: its loss is 2 ln 2.
    assert abs(history.history["d_loss"][-1] - 2 * np.log(2)) < 0.3


def test_checkpoints_keep_the_optimizers_an_overridden_step_holds(trained_gan, tmp_path):
    gan, _ = trained_gan
    Checkpointer(str(tmp_path), gan).save_latest(100)
    fresh = gan_2d.build_gan(seed=5)
    fresh.compile()
    fresh.build((None, 2))
    assert restore_latest(fresh, str(tmp_path))["epoch"] == 100
    fresh.d_optimizer.build(fresh.discriminator.trainable_variables)  # deferred restore
    for restored, saved in zip(fresh.d_optimizer.variables, gan.d_optimizer.variables):
        np.testing.assert_array_equal(restored.numpy(), saved.numpy())
    for restored, saved in zip(fresh.variables, gan.variables):
        np.testing.assert_array_equal(restored.numpy(), saved.numpy())


def test_a_step_must_return_a_step_result_or_a_dict():
    class ReturnsLoss(gf.Sequential):
        def train_step(self, data):
            return tf.constant(0.0)

    model = ReturnsLoss([layers.Dense(1)])
    model.compile(loss="mse")
    with pytest.raises(TypeError, match=r"must return a graphfit.core.step_types.StepResult.*"
                                        r"or as in Keras a dict"):
        model.fit(X, Y, epochs=1, verbose=0)


def test_gradient_taps_need_the_default_step(tmp_path):
    model = _stack(HandWritten)
    model.compile(optimizer="sgd", loss="mse")
    board = callbacks.TensorBoard(str(tmp_path), gradient_taps=["loss"])
    with pytest.raises(ValueError, match="overrides train_step"):
        model.fit(X, Y, epochs=1, verbose=0, callbacks=[board])


def test_the_default_step_still_needs_a_loss():
    # Compiled without a loss, the default step trains on the losses layers add; none here.
    model = gf.Sequential([layers.Dense(1)])
    model.compile(optimizer="sgd")
    with pytest.raises(ValueError, match="has no loss to compute"):
        model.fit(X, Y, epochs=1, verbose=0)

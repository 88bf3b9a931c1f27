"""Residual rows whose shape is not the model outputs': labels that broadcast against them, a
residual function with several rows per output, and labels one axis short of the outputs.
Each used to crash the closed-form Jacobian or fit the wrong problem (a review)."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers

X = np.random.default_rng(0).normal(size=(60, 3))
W = np.array([[1.0], [2.0], [3.0]])
Y = X @ W + 0.5


def _linear_model():
    return gf.Sequential([layers.Dense(1)], input_shape=(3,), dtype="float64")


@pytest.mark.parametrize("mode", ["auto", "reverse"])
def test_a_residual_function_with_two_rows_per_output_fits_exactly(mode):
    model = _linear_model()
    loss = optimizers.ResidualLoss(lambda t, p: tf.concat([p - t, 0.1 * (p - t) ** 2], 1))
    model.compile(optimizer=optimizers.LevenbergMarquardt(jacobian_mode=mode), loss=loss)
    history = model.fit(X, Y, batch_size=None, epochs=10, verbose=0)
    np.testing.assert_allclose(model.get_weights()[0], W, atol=1e-8)
    np.testing.assert_allclose(model.get_weights()[1], [0.5], atol=1e-8)
    assert history.history["loss"][-1] < 1e-20


def test_labels_that_broadcast_against_the_output_fit_the_keras_loss():
    # Three label columns for one output: Keras's mean squared error averages the three
    # squared differences, whose least-squares solution is the columns' mean (intercept 0.5).
    labels = np.hstack([Y, Y + 1.0, Y - 1.0])
    model = _linear_model()
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    history = model.fit(X, labels, batch_size=None, epochs=10, verbose=0)
    kernel, bias = model.get_weights()
    np.testing.assert_allclose(kernel, W, atol=1e-8)
    np.testing.assert_allclose(bias, [0.5], atol=1e-8)
    keras_mse = float(tf.keras.losses.MeanSquaredError(dtype="float64")(labels,
                                                                          X @ kernel + bias))
    assert history.history["loss"][-1] == pytest.approx(keras_mse, rel=1e-10)
    assert keras_mse == pytest.approx(2.0 / 3.0, rel=1e-10)


def test_one_dimensional_labels_meet_a_residual_function_as_a_column():
    x = np.linspace(0.0, 1.0, 50)
    y = 2.0 * np.exp(-1.3 * x)  # 1-D, against outputs of shape (50, 1)
    model = gf.Sequential([layers.Formula("a*exp(-b*x)", params={"a": 1.0, "b": 1.0})],
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(),
                  loss=optimizers.ResidualLoss(lambda t, p: p - t))
    model.fit(x, y, batch_size=None, epochs=30, verbose=0)
    np.testing.assert_allclose([float(v) for v in model.get_weights()], [2.0, 1.3], rtol=1e-8)

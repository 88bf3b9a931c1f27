"""Issue 13: per-example Jacobians with batch normalization in training (20); repeated
jacobian calls do not retrace (21)."""

import logging
import warnings

import keras
import numpy as np
import pytest

import graphfit as gf
from graphfit import autodiff, layers


def _bn_model():
    return gf.Sequential([layers.Dense(3, name="d"), layers.BatchNormalization(name="bn"),
                          layers.Dense(2, name="head")], input_shape=(4,))


def test_default_per_example_jacobian_is_exact_with_batch_norm_in_training():
    model = _bn_model()
    x = np.random.default_rng(0).random((6, 4)).astype("float32")
    full = autodiff.jacobian(model, x, wrt="inputs", training=True, per_example=False).numpy()
    exact = np.stack([full[b, :, b, :] for b in range(6)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        blocks = autodiff.jacobian(model, x, wrt="inputs", training=True).numpy()
    np.testing.assert_allclose(blocks, exact, atol=1e-5)


def test_explicit_per_example_on_a_mixing_model_warns():
    model = _bn_model()
    x = np.ones((4, 4), "float32")
    with pytest.warns(UserWarning, match="'bn'.*mix the examples"):
        autodiff.jacobian(model, x, wrt="inputs", training=True, per_example=True)
    with pytest.warns(UserWarning, match="'bn'"):
        autodiff.per_example_gradients(model, x, np.zeros((4, 2)), loss="mse", training=True)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_repeated_jacobians_do_not_trigger_the_retracing_warning():
    import tensorflow as tf

    handler = _Records()
    tf.get_logger().addHandler(handler)
    try:
        names = [f"d{i}" for i in range(6)]
        model = gf.Sequential([layers.Dense(3, name=n) for n in names], input_shape=(4,))
        x = np.ones((5, 4), "float32")
        for _ in range(3):
            for name in names:
                autodiff.jacobian(model, x, of=name, wrt="inputs")
        for _ in range(6):
            autodiff.per_example_gradients(model, x, np.zeros((5, 3)),
                                           loss=keras.losses.MeanSquaredError())
    finally:
        tf.get_logger().removeHandler(handler)
    assert not [m for m in handler.messages if "retracing" in m]

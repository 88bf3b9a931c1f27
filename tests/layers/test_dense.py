"""Dense: the layer contract, numbers and gradients against keras.layers.Dense, errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from graphfit.core import Layer, register_layer
from graphfit.testing import assert_gradients_match_keras, run_layer_test


def _data(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def test_dense_rank2_variables_and_gradients_match_keras():
    # The contract on this layer, outputs against Keras included, runs in test_conformance.
    x = _data(4, 3)
    layer = layers.Dense(5, activation="tanh", bias_initializer="random_normal")
    layer(x)
    assert [v.name.split("/")[-1] for v in layer.variables] == ["kernel:0", "bias:0"]
    assert_gradients_match_keras(layer, keras.layers.Dense(5, activation="tanh"), x)


def test_dense_rank3_acts_on_the_last_axis():
    x = _data(2, 3, 4)
    layer = run_layer_test(
        layers.Dense,
        {"units": 2, "use_bias": False},
        x,
        expected_output_shape=(2, 3, 2),
        expected_trainable=1,
        expected_non_trainable=0,
        reference=keras.layers.Dense(2, use_bias=False),
    )
    # Hand-computed: every position of the middle axis goes through the same kernel.
    np.testing.assert_allclose(layer(x).numpy(), x @ layer.kernel.numpy(), rtol=1e-5, atol=1e-6)


def test_dense_float64_and_initializer_objects_round_trip():
    layer = layers.Dense(
        3,
        activation=keras.activations.relu,
        kernel_initializer=keras.initializers.HeNormal(seed=3),
        dtype="float64",
    )
    out = layer(np.ones((2, 4)))
    assert out.dtype == tf.float64 and all(v.dtype == tf.float64 for v in layer.variables)
    config = layer.get_config()
    assert config["activation"] == "relu" and config["dtype"] == "float64"
    assert config["kernel_initializer"]["class_name"] == "HeNormal"
    assert layers.Dense.from_config(config).get_config() == config


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"units": 0}, "units=0"),
        ({"units": -1}, "units=-1"),
        ({"units": 2.5}, "units=2.5"),
        ({"units": True}, "units=True"),
        ({"units": 2, "activation": "nope"}, "activation='nope'"),
        ({"units": 2, "kernel_initializer": "nope"}, "kernel_initializer='nope'"),
        ({"units": 2, "bias_initializer": None}, "bias_initializer=None"),
    ],
)
def test_dense_rejects_bad_arguments(kwargs, argument):
    with pytest.raises(ValueError, match=argument.replace("(", r"\(")):
        layers.Dense(**kwargs)


def test_dense_rank1_input_says_how_to_fix_it():
    with pytest.raises(ValueError, match=r"rank 2 or more.*Reshape\(\(1,\)\)"):
        layers.Dense(2)(tf.ones((4,)))


def test_the_contract_refuses_a_layer_that_claims_to_keep_the_example_axis_but_rolls_it():
    @register_layer
    class RolledExamples(Layer):
        """Output i is input i - 1: not the example axis LevenbergMarquardt relies on."""

        keeps_example_axis = True

        def call(self, x, training=False):
            return tf.roll(x, 1, axis=0)

    with pytest.raises(AssertionError, match="keeps_example_axis is True"):
        run_layer_test(RolledExamples, {}, np.arange(6.0, dtype="float32")
                                  .reshape(3, 2), expected_output_shape=(3, 2),
                                  expected_trainable=0, expected_non_trainable=0)

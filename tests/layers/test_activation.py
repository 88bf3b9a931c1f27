"""Activation: the layer contract and numbers against keras.layers.Activation."""

import keras
import numpy as np
import pytest

from graphfit import layers
from tests.layer_testing import run_layer_test


def test_activation_softmax_matches_keras():
    x = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    layer = run_layer_test(
        layers.Activation,
        {"activation": "softmax"},
        x,
        expected_output_shape=(3, 4),
        expected_trainable=0,
        expected_non_trainable=0,
        reference=keras.layers.Activation("softmax"),
    )
    assert layer.get_config()["activation"] == "softmax"


def test_activation_relu_hand_computed():
    out = layers.Activation("relu")(np.array([[-1.0, 0.5, 2.0]], "float32"))
    np.testing.assert_array_equal(out.numpy(), [[0.0, 0.5, 2.0]])


def test_activation_rejects_unknown_names():
    with pytest.raises(ValueError, match="activation='swishy'"):
        layers.Activation("swishy")

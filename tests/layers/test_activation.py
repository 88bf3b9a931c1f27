"""Activation: hand-computed values and errors. The layer contract, with softmax checked
against keras.layers.Activation, runs from graphfit.testing's examples (test_conformance)."""

import numpy as np
import pytest

from graphfit import layers


def test_activation_config_keeps_the_name():
    assert layers.Activation("softmax").get_config()["activation"] == "softmax"


def test_activation_relu_hand_computed():
    out = layers.Activation("relu")(np.array([[-1.0, 0.5, 2.0]], "float32"))
    np.testing.assert_array_equal(out.numpy(), [[0.0, 0.5, 2.0]])


def test_activation_rejects_unknown_names():
    with pytest.raises(ValueError, match="activation='swishy'"):
        layers.Activation("swishy")

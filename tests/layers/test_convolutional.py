"""Conv2D: the layer contract and numbers against keras.layers.Conv2D; input errors. The other
convolutions (and channels_first) are in test_convolutions_nd.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from graphfit.testing import assert_gradients_match_keras, run_layer_test


def _images(*shape):
    return np.random.default_rng(0).normal(size=shape).astype("float32")


@pytest.mark.parametrize(
    "kwargs, input_shape, output_shape",
    [
        # The plain valid case ({"kernel_size": 3}) runs in test_conformance.
        ({"kernel_size": (3, 2), "padding": "same", "strides": 2}, (2, 6, 5, 2), (2, 3, 3, 3)),
        ({"kernel_size": 2, "dilation_rate": 2, "activation": "relu"}, (2, 7, 7, 2), (2, 5, 5, 3)),
    ],
    ids=["same-strided", "dilated"],
)
def test_conv2d_matches_keras(kwargs, input_shape, output_shape):
    kwargs = {"filters": 3, "bias_initializer": "random_normal", **kwargs}
    layer = run_layer_test(
        layers.Conv2D,
        kwargs,
        _images(*input_shape),
        output_shape,
        expected_trainable=2,
        expected_non_trainable=0,
        reference=keras.layers.Conv2D(**kwargs),
        atol=1e-5,
        rtol=1e-5,
    )
    assert layers.Conv2D.xla_friendly_on_cpu is False
    assert tuple(layer.kernel.shape) == (*layer.kernel_size, input_shape[-1], 3)


def test_conv2d_gradients_match_keras():
    assert_gradients_match_keras(layers.Conv2D(2, 3, padding="same"),
                                 keras.layers.Conv2D(2, 3, padding="same"),
                                 _images(2, 5, 5, 2), rtol=1e-5, atol=1e-5)


def test_conv2d_rank_errors_name_the_reshape_that_fixes_them():
    with pytest.raises(ValueError, match=r"Add layers.Reshape\(\(8, 8, 1\)\) before it"):
        layers.Conv2D(2, 3)(tf.ones((4, 64)))
    with pytest.raises(ValueError, match=r"Add layers.Reshape\(\(5, 6, 1\)\) before it"):
        layers.Conv2D(2, 3)(tf.ones((4, 5, 6)))


def test_conv2d_too_small_input():
    with pytest.raises(ValueError, match="too small"):
        layers.Conv2D(2, 5)(tf.ones((1, 3, 3, 1)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"filters": 0, "kernel_size": 3}, "filters=0"),
        ({"filters": 2, "kernel_size": (0, 3)}, r"kernel_size=\(0, 3\)"),
        ({"filters": 2, "kernel_size": (3, 3, 3)}, "kernel_size="),
        ({"filters": 2, "kernel_size": 3, "strides": -1}, "strides=-1"),
        ({"filters": 2, "kernel_size": 3, "padding": "causal"}, "padding='causal'"),
        ({"filters": 2, "kernel_size": 3, "strides": 2, "dilation_rate": 2}, "dilation_rate="),
        ({"filters": 2, "kernel_size": 3, "data_format": "nhwc"}, "data_format='nhwc'"),
        ({"filters": 2, "kernel_size": 3, "activation": "nope"}, "activation='nope'"),
    ],
)
def test_conv2d_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layers.Conv2D(**kwargs)

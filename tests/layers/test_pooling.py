"""Pooling layers: the layer contract and numbers against their Keras twins; errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from graphfit.testing import run_layer_test

X = np.random.default_rng(0).normal(size=(2, 5, 6, 3)).astype("float32")


@pytest.mark.parametrize(
    "name, kwargs, output_shape",
    [
        # MaxPooling2D() and AveragePooling2D((2, 3)) run in test_conformance.
        ("MaxPooling2D", {"pool_size": 3, "strides": 1, "padding": "same"}, (2, 5, 6, 3)),
        ("AveragePooling2D", {"pool_size": 3, "strides": 2, "padding": "same"}, (2, 3, 3, 3)),
    ],
)
def test_windowed_pooling_matches_keras(name, kwargs, output_shape):
    run_layer_test(
        getattr(layers, name),
        kwargs,
        X,
        output_shape,
        0,
        0,
        reference=getattr(keras.layers, name)(**kwargs),
    )


def test_global_average_pooling_keepdims_matches_keras():
    # keepdims=False runs in test_conformance.
    run_layer_test(
        layers.GlobalAveragePooling2D,
        {"keepdims": True},
        X,
        (2, 1, 1, 3),
        0,
        0,
        reference=keras.layers.GlobalAveragePooling2D(keepdims=True),
    )


def test_max_pooling_hand_computed():
    x = np.arange(16, dtype="float32").reshape(1, 4, 4, 1)
    out = layers.MaxPooling2D()(x).numpy()[0, :, :, 0]
    np.testing.assert_array_equal(out, [[5, 7], [13, 15]])
    assert not layers.MaxPooling2D.xla_friendly_on_cpu


@pytest.mark.parametrize("cls", [layers.MaxPooling2D, layers.GlobalAveragePooling2D])
def test_pooling_errors(cls):
    with pytest.raises(ValueError, match="NHWC"):
        cls(data_format="channels_first")
    with pytest.raises(ValueError, match=r"Reshape\(\(4, 4, 1\)\)"):
        cls()(tf.ones((2, 16)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"pool_size": 0}, "pool_size=0"),
        ({"strides": (1, 0)}, r"strides=\(1, 0\)"),
        ({"padding": "full"}, "padding='full'"),
    ],
)
def test_windowed_pooling_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layers.AveragePooling2D(**kwargs)


def test_pooling_window_larger_than_input():
    with pytest.raises(ValueError, match="smaller than pool_size"):
        layers.MaxPooling2D(4)(tf.ones((1, 3, 3, 1)))

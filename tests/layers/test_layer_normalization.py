"""LayerNormalization: the layer contract and outputs/gradients against Keras 3; errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from graphfit.testing import assert_gradients_match_keras, run_layer_test

X = (np.random.default_rng(0).normal(size=(2, 3, 4)) * 3 + 1).astype("float32")
RANDOM = {"gamma_initializer": "random_normal", "beta_initializer": "random_normal"}


@pytest.mark.parametrize(
    "kwargs, trainable",
    # The last-axis case runs from graphfit.testing's examples (test_conformance).
    [({"axis": [1, 2]}, 2), ({"axis": 1}, 2), ({"center": False, "scale": False}, 0)],
    ids=["two-axes", "middle", "plain"],
)
def test_layer_normalization_matches_keras(kwargs, trainable):
    run_layer_test(
        layers.LayerNormalization,
        {**RANDOM, **kwargs},
        X,
        X.shape,
        trainable,
        0,
        reference=keras.layers.LayerNormalization(**kwargs),
    )


def test_layer_normalization_hand_computed_and_gradients_match_keras():
    x = tf.constant([[1.0, 3.0]])  # mean 2, variance 1, epsilon 1e-3
    expected = [[-1 / np.sqrt(1.001), 1 / np.sqrt(1.001)]]
    np.testing.assert_allclose(layers.LayerNormalization()(x).numpy(), expected, rtol=1e-6)
    assert_gradients_match_keras(layers.LayerNormalization(**RANDOM),
                                 keras.layers.LayerNormalization(), X, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"axis": "x"}, "axis='x'"),
        ({"axis": []}, r"axis=\[\]"),
        ({"epsilon": 0}, "epsilon=0"),
        ({"center": 1}, "center=1"),
        ({"gamma_initializer": "nope"}, "gamma_initializer='nope'"),
    ],
)
def test_layer_normalization_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layers.LayerNormalization(**kwargs)


def test_layer_normalization_axis_must_be_a_feature_axis():
    with pytest.raises(ValueError, match="batch axis"):
        layers.LayerNormalization(axis=0)(X)
    with pytest.raises(ValueError, match="axis=3"):
        layers.LayerNormalization(axis=3)(X)

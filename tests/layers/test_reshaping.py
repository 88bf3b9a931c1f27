"""Flatten and Reshape: the layer contract, numbers against Keras, unknown sizes, errors.
Flatten's contract and Reshape((4, 3))'s run from graphfit.testing's examples."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from graphfit.testing import run_layer_test

X = np.arange(24, dtype="float32").reshape(2, 3, 4)


def test_flatten_rank1_gives_one_feature_and_unknown_sizes_work():
    assert layers.Flatten()(tf.ones((5,))).shape == (5, 1)
    flatten = layers.Flatten()
    traced = tf.function(flatten, input_signature=[tf.TensorSpec((None, None, 4))])
    np.testing.assert_array_equal(traced(X).numpy(), X.reshape(2, 12))


def test_reshape_with_an_inferred_size_matches_keras():
    run_layer_test(
        layers.Reshape, {"target_shape": (-1, 2)}, X, (2, 6, 2), 0, 0,
        reference=keras.layers.Reshape((-1, 2)),
    )


def test_reshape_with_unknown_sizes_and_flat_images():
    reshape = layers.Reshape((-1, 2))
    traced = tf.function(reshape, input_signature=[tf.TensorSpec((None, None, 4))])
    np.testing.assert_array_equal(traced(X).numpy(), X.reshape(2, 6, 2))
    assert layers.Reshape((8, 8, 1))(tf.ones((3, 64))).shape == (3, 8, 8, 1)


@pytest.mark.parametrize("target_shape", [(), (0, 2), (-1, -1), (2, "a"), 5])
def test_reshape_rejects_bad_target_shapes(target_shape):
    with pytest.raises(ValueError, match="target_shape="):
        layers.Reshape(target_shape)


def test_reshape_says_when_the_sizes_do_not_fit():
    with pytest.raises(ValueError, match=r"12 values per example.*target_shape=\(5, -1\)"):
        layers.Reshape((5, -1))(X)


def test_flatten_refuses_channels_first():
    with pytest.raises(ValueError, match="NHWC"):
        layers.Flatten(data_format="channels_first")

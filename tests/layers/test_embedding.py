"""Embedding: integer inputs, lookups, initializer, errors. The layer contract, with
numbers against keras.layers.Embedding, runs from graphfit.testing's examples."""

import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers

INDICES = np.array([[0, 3, 9, 3], [1, 2, 8, 7], [5, 5, 4, 6]], dtype="int32")


def test_embedding_looks_up_rows():
    # The contract, outputs against keras.layers.Embedding included, runs in test_conformance.
    layer = layers.Embedding(10, 5)
    # Hand-computed: row i of the table for index i.
    np.testing.assert_array_equal(layer(INDICES).numpy(), layer.embeddings.numpy()[INDICES])


def test_embedding_default_initializer_is_keras_uniform():
    layer = layers.Embedding(50, 8)
    layer(INDICES)
    assert layer.get_config()["embeddings_initializer"]["class_name"] == "RandomUniform"
    values = layer.embeddings.numpy()
    assert values.min() >= -0.05 and values.max() <= 0.05 and values.std() > 0.02


def test_embedding_accepts_int64_and_whole_float_indices_and_gradients_reach_rows():
    layer = layers.Embedding(10, 2)
    expected = layer(INDICES).numpy()
    np.testing.assert_array_equal(layer(INDICES.astype("int64")).numpy(), expected)
    np.testing.assert_array_equal(layer(INDICES.astype("float32")).numpy(), expected)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(tf.constant([[3, 3, 1]])))
    gradient = tf.convert_to_tensor(tape.gradient(loss, layer.embeddings)).numpy()
    np.testing.assert_array_equal(gradient[:, 0], [0, 1, 0, 2, 0, 0, 0, 0, 0, 0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"input_dim": 0, "output_dim": 2}, "input_dim=0"),
        ({"input_dim": 3, "output_dim": -1}, "output_dim=-1"),
        ({"input_dim": True, "output_dim": 2}, "input_dim=True"),
        ({"input_dim": 3, "output_dim": 2, "embeddings_initializer": "x"}, "initializer='x'"),
    ],
)
def test_embedding_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layers.Embedding(**kwargs)


def test_mask_zero_true_is_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"mask_zero=True\) is not supported: graphfit layers "
                                         r"pass no masks"):
        layers.Embedding(10, 4, mask_zero=True)
    assert layers.Embedding(10, 4, mask_zero=False).output_dim == 4

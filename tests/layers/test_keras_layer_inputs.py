"""`layers.KerasLayer` with a Keras layer whose call takes several tensors (query, value), and
built from Keras's serialized form."""

import keras
import numpy as np
import tensorflow as tf

from graphfit import layers


def test_multi_head_attention_from_its_serialized_form_matches_keras():
    query = tf.random.stateless_normal((2, 5, 6), seed=(3, 4))
    value = tf.random.stateless_normal((2, 7, 6), seed=(5, 6))
    config = {"class_name": "MultiHeadAttention", "config": {"num_heads": 2, "key_dim": 3}}
    adapter = layers.KerasLayer(config)
    plain = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)
    adapter.build([query.shape, value.shape])
    plain.build(query.shape, value.shape)
    plain.set_weights([v.numpy() for v in adapter.trainable_variables])
    np.testing.assert_allclose(adapter([query, value]).numpy(), plain(query, value).numpy(),
                               rtol=1e-6, atol=1e-6)
    # One input fills both places: self-attention.
    np.testing.assert_allclose(adapter(query).numpy(), plain(query, query).numpy(),
                               rtol=1e-6, atol=1e-6)
    assert len(adapter.trainable_variables) == 8


def test_too_few_inputs_for_a_multi_tensor_layer_is_a_clear_error():
    adapter = layers.KerasLayer(keras.layers.MultiHeadAttention(num_heads=1, key_dim=2))
    adapter(tf.ones((1, 3, 4)))
    try:
        adapter([tf.ones((1, 3, 4))])
    except ValueError as error:
        assert "takes 2 input tensors" in str(error)
    else:
        raise AssertionError("one tensor in a list should be refused")

"""`MultiHeadAttention`: Keras's attention layer as a graphfit layer (`KerasBacked`)."""

from __future__ import annotations

import keras

from graphfit.core.registry import register_layer
from graphfit.layers.keras_backed import KerasBacked

__all__ = ["MultiHeadAttention"]


@register_layer
class MultiHeadAttention(KerasBacked):
    """Multi-head attention, Keras's `keras.layers.MultiHeadAttention` as a graphfit layer.

    Called on one tensor `(batch, steps, features)` it is self-attention (query = value =
    key); on a list `[query, value]` or `[query, value, key]` it attends from the query to
    the value, in Keras's order (in a graph model: `inputs: [query_node, value_node]`).
    The output has the query's shape (the last axis `output_shape` when given). Attention
    masks, `return_attention_scores` and `use_causal_mask` are Keras call arguments that
    graphfit's layer call does not pass.

    Args:
        num_heads: the number of heads. key_dim: the size of each head for query and key.
        value_dim: as in Keras; so are dropout, use_bias, output_shape, attention_axes,
            flash_attention, the initializers, regularizers and constraints, and seed.
        name: the layer's name (also the Keras layer's). dtype: the adapter's floating dtype.
        trainable: False freezes the layer.

    Raises:
        ValueError: naming the layer, for arguments Keras refuses or does not take, or a
            list of fewer than two inputs.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> attention = layers.MultiHeadAttention(num_heads=2, key_dim=4)
        >>> attention(tf.ones((2, 5, 3))).shape                   # self-attention
        TensorShape([2, 5, 3])
        >>> attention([tf.ones((2, 5, 3)), tf.ones((2, 7, 3))]).shape   # query, value
        TensorShape([2, 5, 3])
    """

    keras_class = keras.layers.MultiHeadAttention

"""`Embedding`: turns integer indices into dense vectors."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments

__all__ = ["Embedding"]


@register_layer
class Embedding(Layer):
    """Looks up one trainable vector per integer index: `outputs = embeddings[inputs]`.

    Inputs are integer indices in `[0, input_dim)` of any shape `(batch, ...)` (floating
    inputs holding whole numbers are accepted and cast to int32); outputs have shape
    `(batch, ..., output_dim)`. The single weight is `embeddings`, shape
    `(input_dim, output_dim)`.

    Args:
        input_dim: the number of distinct indices (vocabulary size); a positive integer.
        output_dim: the size of each vector; a positive integer.
        embeddings_initializer: initializer of `embeddings`; 'uniform' (in [-0.05, 0.05]) as
            in Keras.
        name: the layer's name. dtype: the floating dtype of the vectors (None inherits the
            model's).
        trainable: False freezes the vectors.

    Raises:
        ValueError: if an argument is invalid.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> embedding = layers.Embedding(input_dim=10, output_dim=4)
        >>> embedding(tf.constant([[1, 2, 3]])).shape
        TensorShape([1, 3, 4])
    """

    xla_friendly_on_cpu = True
    _autocast_inputs = False  # indices stay integers; casting them to float would lose them

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        embeddings_initializer="uniform",
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.input_dim = validation.positive_int("input_dim", input_dim)
        self.output_dim = validation.positive_int("output_dim", output_dim)
        self.embeddings_initializer = arguments.get_initializer(
            embeddings_initializer, "embeddings_initializer"
        )

    def build(self, input_shape) -> None:
        self.embeddings = self.add_weight(
            "embeddings",
            (self.input_dim, self.output_dim),
            initializer=self.embeddings_initializer,
        )

    def call(self, inputs, training: bool = False):
        if inputs.dtype not in (tf.int32, tf.int64):
            inputs = tf.cast(inputs, tf.int32)
        return tf.gather(self.embeddings, inputs)

    def get_config(self) -> dict[str, Any]:
        return {
            **self._base_config(),
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        }

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
    inputs holding whole numbers are accepted; other floats, and ids outside the range, fail
    with an error naming the layer); outputs have shape
    `(batch, ..., output_dim)`. The single weight is `embeddings`, shape
    `(input_dim, output_dim)`.

    Args:
        input_dim: the number of distinct indices (vocabulary size); a positive integer.
        output_dim: the size of each vector; a positive integer.
        embeddings_initializer: initializer of `embeddings`; 'uniform' (in [-0.05, 0.05]) as
            in Keras.
        embeddings_regularizer, embeddings_constraint: a Keras regularizer and constraint
            of `embeddings`. activity_regularizer: a Keras regularizer of the outputs.
        mask_zero: False only (Keras's argument, kept so its scripts read; True is refused:
            graphfit layers pass no masks).
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

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_floating_inputs = False  # float ids stay exact: bfloat16 would round 257 to 256

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        embeddings_initializer="uniform",
        embeddings_regularizer=None,
        embeddings_constraint=None,
        mask_zero: bool = False,
        activity_regularizer=None,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        if mask_zero is not False:
            raise ValueError(
                "Embedding(mask_zero=True) is not supported: graphfit layers pass no masks, so "
                "no later layer could skip the padded steps. Keep id 0 as an ordinary token "
                "(the model learns to ignore padding), or train that model in Keras. "
                f"Received: mask_zero={mask_zero!r}")
        super().__init__(name=name, dtype=dtype, trainable=trainable,
                         activity_regularizer=activity_regularizer)
        self._weight_options = arguments.set_weight_options(
            self, embeddings_regularizer=embeddings_regularizer,
            embeddings_constraint=embeddings_constraint)
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
            regularizer=self.embeddings_regularizer,
            constraint=self.embeddings_constraint,
        )

    def call(self, inputs, training: bool = False):
        return self.compute_value(tf.gather(self.embeddings, self._as_ids(inputs)))

    def batch_checks(self, inputs, training: bool) -> list:
        """The ids lie in [0, input_dim), and floating ids are whole numbers (a float fed by
        mistake would be truncated to an id; an id out of range would gather garbage, or a
        clamped row under XLA, instead of failing)."""
        del training
        checks = []
        if inputs.dtype.is_floating:
            checks.append((tf.equal(inputs, tf.round(inputs)), (
                f"Embedding {self.name!r} looks up integer ids, but received floating values "
                f"that are not whole numbers (they would be truncated to ids). Feed integer "
                f"ids (or floats holding whole numbers); for continuous features use Dense "
                f"instead of Embedding.")))
        ids = self._as_ids(inputs)
        checks.append(((ids >= 0) & (ids < tf.cast(self.input_dim, ids.dtype)), (
            f"Embedding {self.name!r} has input_dim={self.input_dim}, so its ids must be in "
            f"[0, {self.input_dim}); received an id outside that range. Raise input_dim to "
            f"the vocabulary size, or remap the ids.")))
        return checks

    def _as_ids(self, inputs) -> tf.Tensor:
        if inputs.dtype in (tf.int32, tf.int64):
            return inputs
        if inputs.dtype.is_floating:
            return tf.cast(inputs, tf.int64)
        return tf.cast(inputs, tf.int32)  # bool, int8, uint8, ...

    def get_config(self) -> dict[str, Any]:
        return {
            **self._base_config(),
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            **arguments.weight_options_config(self, self._weight_options),
        }

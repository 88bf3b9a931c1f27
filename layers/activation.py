"""`Activation`: applies a Keras activation function element-wise."""

from __future__ import annotations

from typing import Any

import keras

from graphfit.core import autograph_scope
from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments

__all__ = ["Activation"]


@register_layer
class Activation(Layer):
    """Applies an activation function to its inputs: `outputs = activation(inputs)`.

    Args:
        activation: a Keras activation name ('relu', 'tanh', 'softmax', ...) or a callable;
            None is the identity ('linear'), as in Keras.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if `activation` is not a known activation.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Activation("relu")(tf.constant([[-1.0, 2.0]])).numpy()
        array([[0., 2.]], dtype=float32)
    """

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(self, activation, name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.activation = arguments.get_activation(activation)

    def call(self, inputs, training: bool = False):
        return autograph_scope.convert_user_code(self.activation)(inputs)

    def get_config(self) -> dict[str, Any]:
        return {
            **self._base_config(),
            "activation": keras.activations.serialize(self.activation),
        }

"""`Activation`: applies a Keras activation function element-wise."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from graphfit.core import autograph_scope
from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments

__all__ = ["Activation", "activate"]

# Activations whose outputs are probabilities: under a mixed policy they run in float32, as
# Keras's mixed-precision guide asks of a model's softmax output (bfloat16 keeps ~3 digits,
# too few for probabilities near 0 and 1 that a cross-entropy then takes the log of).
_FLOAT32_ACTIVATIONS = {keras.activations.softmax, keras.activations.log_softmax}


def activate(layer: Layer, activation, outputs):
    """`activation(outputs)` for `layer`: in float32 for softmax and log_softmax under a
    mixed policy, else in the layer's compute dtype."""
    if layer.dtype_policy.is_mixed and activation in _FLOAT32_ACTIVATIONS:
        outputs = tf.cast(outputs, layer.variable_dtype)
    return autograph_scope.convert_user_code(activation)(outputs)


@register_layer
class Activation(Layer):
    """Applies an activation function to its inputs: `outputs = activation(inputs)`.

    Args:
        activation: a Keras activation name ('relu', 'tanh', 'softmax', ...) or a callable;
            None is the identity ('linear'), as in Keras.
        name: the layer's name. dtype: its dtype policy (None inherits the model's); under a
            mixed policy softmax and log_softmax compute in float32.
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if `activation` is not a known activation.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Activation("relu")(tf.constant([[-1.0, 2.0]])).numpy()
        array([[0., 2.]], dtype=float32)
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(self, activation, name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.activation = arguments.get_activation(activation)

    def call(self, inputs, training: bool = False):
        return activate(self, self.activation, inputs)

    def get_config(self) -> dict[str, Any]:
        return {
            **self._base_config(),
            "activation": keras.activations.serialize(self.activation),
        }

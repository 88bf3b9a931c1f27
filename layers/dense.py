"""`Dense`: the densely connected layer, `activation(inputs @ kernel + bias)`."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments
from graphfit.layers.activation import activate

__all__ = ["Dense"]


@register_layer
class Dense(Layer):
    """A densely connected layer: `outputs = activation(inputs @ kernel + bias)`.

    It acts on the last axis, so inputs of shape `(batch, ..., features)` give outputs of
    shape `(batch, ..., units)`, as in Keras. Weights, in Keras order: `kernel` of shape
    `(features, units)`, then `bias` of shape `(units,)` when `use_bias`.

    Args:
        units: the size of the last axis of the outputs; a positive integer.
        activation: a Keras activation name or callable; None is the identity.
        use_bias: whether to add the `bias` vector.
        kernel_initializer: initializer of `kernel` (a Keras initializer, name or config).
        bias_initializer: initializer of `bias`.
        kernel_regularizer, bias_regularizer: Keras regularizers of `kernel` and `bias`
            (objects, names such as "l2", configs); their penalties join the training loss.
        activity_regularizer: a Keras regularizer of the outputs (per example).
        kernel_constraint, bias_constraint: Keras constraints (or callables) applied to the
            weights after each optimizer update.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: False freezes the layer.

    Raises:
        ValueError: if an argument is invalid, or (on call) if the inputs have rank < 2 or
            a feature size other than the one the layer was built for.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> dense = layers.Dense(4, activation="relu")
        >>> dense(tf.ones((2, 3))).shape
        TensorShape([2, 4])
        >>> [tuple(v.shape) for v in dense.trainable_variables]
        [(3, 4), (4,)]
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(
        self,
        units: int,
        activation=None,
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable,
                         activity_regularizer=activity_regularizer)
        self._weight_options = arguments.set_weight_options(
            self, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        self.units = validation.positive_int("units", units)
        self.activation = arguments.get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = arguments.get_initializer(
            kernel_initializer, "kernel_initializer"
        )
        self.bias_initializer = arguments.get_initializer(bias_initializer, "bias_initializer")
        self.input_spec = InputSpec(
            min_ndim=2,
            hint="Dense needs a feature axis: for one value per example, add "
            "layers.Reshape((1,)) before it; for images, add layers.Flatten() before it.",
        )

    def build(self, input_shape) -> None:
        in_features = input_shape[-1]
        if in_features is None:
            raise ValueError(
                f"Dense {self.name!r} needs a known size of the last input axis to create its "
                f"kernel. Received input shape {tuple(input_shape.as_list())}."
            )
        self.kernel = self.add_weight(
            "kernel", (in_features, self.units), initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint,
        )
        self.bias = (
            self.add_weight("bias", (self.units,), initializer=self.bias_initializer,
                            regularizer=self.bias_regularizer, constraint=self.bias_constraint)
            if self.use_bias
            else None
        )
        self.input_spec = InputSpec(min_ndim=2, axes={-1: int(in_features)})

    def call(self, inputs, training: bool = False):
        return activate(self, self.activation, self.pre_activation(inputs))

    def pre_activation(self, inputs):
        """`inputs @ kernel + bias`, contracted on the last axis of `inputs`: the output
        before the activation."""
        kernel = self.compute_value(self.kernel)
        if inputs.shape.rank == 2:
            outputs = tf.matmul(inputs, kernel)
        else:
            outputs = tf.tensordot(inputs, kernel, [[inputs.shape.rank - 1], [0]])
        if self.bias is not None:
            outputs = outputs + self.compute_value(self.bias)
        return outputs

    def get_config(self) -> dict[str, Any]:
        return {
            **self._base_config(),
            "units": self.units,
            "activation": keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            **arguments.weight_options_config(self, self._weight_options),
        }

"""`LayerNormalization`: normalizes each example over its feature axes (Keras 3 semantics)."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments

__all__ = ["LayerNormalization"]


@register_layer
class LayerNormalization(Layer):
    """Normalizes each example over `axis`: `gamma * (x - mean) / sqrt(var + epsilon) + beta`.

    Unlike batch normalization, the statistics are computed per example, so training and
    inference compute the same thing and there are no moving statistics or update hooks.
    The outputs equal `keras.layers.LayerNormalization` (same formula and operation order).
    Weights, in Keras order: `gamma` then `beta`, shaped like the normalized axes.

    Args:
        axis: an int or a list of ints, the axes normalized together (-1: the features).
            The batch axis 0 cannot be one of them.
        epsilon: a small positive float added to the variance.
        center: whether to add the learned offset `beta`.
        scale: whether to multiply by the learned scale `gamma`.
        beta_initializer: initializer of `beta`.
        gamma_initializer: initializer of `gamma`.
        beta_regularizer, gamma_regularizer, beta_constraint, gamma_constraint: Keras
            regularizers and constraints of `beta` and `gamma` (as Keras).
        name: the layer's name. dtype: its dtype policy (None inherits the model's); under a
            mixed policy the statistics and the normalization run in float32 (as in Keras) and
            the output is in the compute dtype.
        trainable: False freezes the layer.

    Raises:
        ValueError: for invalid arguments; on call, for an axis out of range or a feature
            size other than the one the layer was built for.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> norm = layers.LayerNormalization()
        >>> norm(tf.constant([[1.0, 3.0]])).numpy().round(4)
        array([[-0.9995,  0.9995]], dtype=float32)
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(
        self,
        axis=-1,
        epsilon: float = 1e-3,
        center: bool = True,
        scale: bool = True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
        activity_regularizer=None,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable,
                         activity_regularizer=activity_regularizer)
        self._weight_options = arguments.set_weight_options(
            self, beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
            beta_constraint=beta_constraint, gamma_constraint=gamma_constraint)
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        if not axes or any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
            raise ValueError(
                f"axis must be an integer or a non-empty list of integers. Received: axis={axis!r}"
            )
        self.axis = list(axis) if isinstance(axis, (list, tuple)) else axis
        self.epsilon = validation.positive_float("epsilon", epsilon)
        for value, argument in ((center, "center"), (scale, "scale")):
            if not isinstance(value, bool):
                raise ValueError(
                    f"{argument} must be True or False. Received: {argument}={value!r}"
                )
        self.center, self.scale = center, scale
        self.beta_initializer = arguments.get_initializer(beta_initializer, "beta_initializer")
        self.gamma_initializer = arguments.get_initializer(gamma_initializer, "gamma_initializer")

    def build(self, input_shape) -> None:
        rank = input_shape.rank
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        if any(not -rank <= a < rank or a % rank == 0 for a in axes):
            raise ValueError(
                f"LayerNormalization {self.name!r}: axis={self.axis} must name feature axes of "
                f"the inputs (not the batch axis 0); the inputs have shape "
                f"{tuple(input_shape.as_list())}."
            )
        self._axes = sorted({a % rank for a in axes})
        shape = tuple(input_shape[a] for a in self._axes)
        if None in shape:
            raise ValueError(
                f"LayerNormalization {self.name!r} needs known sizes of axis={self.axis}. "
                f"Received input shape {tuple(input_shape.as_list())}."
            )
        self.gamma, self.beta = arguments.scale_and_offset(self, shape)
        self.input_spec = InputSpec(ndim=rank, axes={a: int(input_shape[a]) for a in self._axes})

    def call(self, inputs, training: bool = False):
        # Under a mixed policy the moments and the normalization run in float32 (as Keras).
        outputs = self._normalize(tf.cast(inputs, self.variable_dtype))
        return tf.cast(outputs, self.compute_dtype)

    def _normalize(self, inputs):
        rank = inputs.shape.rank
        mean, variance = tf.nn.moments(inputs, axes=self._axes, keepdims=True)
        gamma, beta = self.gamma, self.beta
        if self._axes != [rank - 1]:
            # Broadcast the weights over the axes that are not normalized.
            broadcast = [1] * rank
            for a in self._axes:
                broadcast[a] = inputs.shape[a]
            gamma = None if gamma is None else tf.reshape(gamma, broadcast)
            beta = None if beta is None else tf.reshape(beta, broadcast)
        # Keras's expression, in its order, so the outputs agree to the last bit.
        inv = tf.math.rsqrt(variance + self.epsilon)
        if gamma is not None:
            inv = inv * gamma
        shift = -mean * inv
        if beta is not None:
            shift = shift + beta
        return inputs * inv + shift

    def get_config(self) -> dict[str, Any]:
        return {
            **self._base_config(),
            "axis": self.axis,
            "epsilon": self.epsilon,
            "center": self.center,
            "scale": self.scale,
            "beta_initializer": keras.initializers.serialize(self.beta_initializer),
            "gamma_initializer": keras.initializers.serialize(self.gamma_initializer),
            **arguments.weight_options_config(self, self._weight_options),
        }

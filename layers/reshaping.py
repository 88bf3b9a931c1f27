"""`Flatten` and `Reshape`: change the shape of each example, never the batch axis."""

from __future__ import annotations

import math

import tensorflow as tf

from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments

__all__ = ["Flatten", "Reshape"]


@register_layer
class Flatten(Layer):
    """Flattens each example to one axis: `(batch, d1, ..., dn)` becomes `(batch, d1*...*dn)`.

    Inputs of shape `(batch,)` become `(batch, 1)`, as in Keras.

    Args:
        data_format: None or 'channels_last' (graphfit's image layers are channels-last only,
            so the flattening order is always the channels-last one).
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for data_format='channels_first'.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Flatten()(tf.ones((2, 4, 4, 3))).shape
        TensorShape([2, 48])
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True

    def __init__(self, data_format=None, name: str | None = None, dtype=None, trainable=True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        arguments.channels_last(data_format, "Flatten")
        self.data_format = data_format
        self.input_spec = InputSpec(min_ndim=1)

    def call(self, inputs, training: bool = False):
        feature_dims = inputs.shape.as_list()[1:]
        if None not in feature_dims:
            return tf.reshape(inputs, (-1, math.prod(feature_dims)))
        return tf.reshape(inputs, tf.stack([tf.shape(inputs)[0], -1]))


@register_layer
class Reshape(Layer):
    """Reshapes each example to `target_shape` (the batch axis is kept and not listed).

    Args:
        target_shape: the new shape of one example, e.g. `(8, 8, 1)`; one entry may be -1,
            which takes whatever size is left.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if `target_shape` is not a tuple of positive integers with at most one
            -1, or (on call) if the inputs' size does not fit it.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Reshape((8, 8, 1))(tf.ones((2, 64))).shape
        TensorShape([2, 8, 8, 1])
        >>> layers.Reshape((-1, 2))(tf.ones((2, 6))).shape
        TensorShape([2, 3, 2])
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True

    def __init__(self, target_shape, name: str | None = None, dtype=None, trainable=True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        try:
            shape = tuple(target_shape)
        except TypeError:
            shape = None
        valid = shape and all(
            isinstance(d, int) and not isinstance(d, bool) and (d > 0 or d == -1) for d in shape
        )
        if not valid or shape.count(-1) > 1:
            raise ValueError(
                "target_shape must be a non-empty tuple of positive integers with at most one "
                "-1, the shape of one example without the batch axis. Received: "
                f"target_shape={target_shape!r}"
            )
        self.target_shape = shape

    def call(self, inputs, training: bool = False):
        feature_dims = inputs.shape.as_list()[1:]
        if None in feature_dims:
            return tf.reshape(inputs, tf.concat([tf.shape(inputs)[:1], self.target_shape], 0))
        return tf.reshape(inputs, (-1, *self._resolve(math.prod(feature_dims), inputs.shape)))

    def _resolve(self, size: int, input_shape) -> tuple[int, ...]:
        known = math.prod(d for d in self.target_shape if d != -1)
        fits = size % known == 0 if -1 in self.target_shape else size == known
        if not fits:
            raise ValueError(
                f"Reshape {self.name!r} cannot reshape inputs of shape "
                f"{tuple(input_shape.as_list())} ({size} values per example) to "
                f"target_shape={self.target_shape}."
            )
        return tuple(size // known if d == -1 else d for d in self.target_shape)

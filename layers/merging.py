"""`Concatenate` and `Add`: join the branches of a graph model (they take a list of tensors)."""

from __future__ import annotations

import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer

__all__ = ["Concatenate", "Add"]


def _check_list(layer: Layer, inputs) -> list:
    if not isinstance(inputs, (list, tuple)) or len(inputs) < 1:
        raise ValueError(
            f"{type(layer).__name__} {layer.name!r} must be called on a list of tensors, e.g. "
            f"layer([a, b]). Received: {type(inputs).__name__}"
        )
    ranks = {t.shape.rank for t in inputs}
    if len(ranks) != 1:
        raise ValueError(
            f"{type(layer).__name__} {layer.name!r} needs inputs of one rank. Received shapes "
            f"{[tuple(t.shape.as_list()) for t in inputs]}."
        )
    return list(inputs)


@register_layer
class Concatenate(Layer):
    """Concatenates a list of tensors along `axis`; all other axes must match.

    Args:
        axis: the axis to concatenate along (-1, the features, by default).
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if `axis` is not an int, or (on call) if the inputs are not a list of
            tensors of one rank whose other axes match.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Concatenate()([tf.ones((2, 3)), tf.zeros((2, 1))]).shape
        TensorShape([2, 4])
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(self, axis: int = -1, name: str | None = None, dtype=None, trainable=True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise ValueError(f"axis must be an integer. Received: axis={axis!r}")
        self.axis = axis

    def call(self, inputs, training: bool = False):
        inputs = _check_list(self, inputs)
        rank = inputs[0].shape.rank
        if not -rank <= self.axis < rank:
            raise ValueError(
                f"Concatenate {self.name!r}: axis={self.axis} is out of range for inputs of "
                f"rank {rank}."
            )
        axis = self.axis % rank
        shapes = [t.shape.as_list() for t in inputs]
        for i in range(rank):
            sizes = {s[i] for s in shapes if s[i] is not None}
            if i != axis and len(sizes) > 1:
                raise ValueError(
                    f"Concatenate {self.name!r} joins along axis {self.axis}; every other axis "
                    f"must match, but axis {i} differs. Received shapes "
                    f"{[tuple(s) for s in shapes]}."
                )
        return tf.concat(inputs, axis=axis)


@register_layer
class Add(Layer):
    """Adds a list of tensors element-wise (with broadcasting, as Keras `Add`).

    Args:
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: on call, if the inputs are not a list of tensors of one rank with
            compatible shapes.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Add()([tf.ones((2, 3)), tf.ones((2, 3))]).numpy()[0]
        array([2., 2., 2.], dtype=float32)
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def call(self, inputs, training: bool = False):
        inputs = _check_list(self, inputs)
        try:
            shape = inputs[0].shape
            for t in inputs[1:]:
                shape = tf.broadcast_static_shape(shape, t.shape)
        except ValueError:
            raise ValueError(
                f"Add {self.name!r} needs inputs of the same (or broadcastable) shape. "
                f"Received shapes {[tuple(t.shape.as_list()) for t in inputs]}."
            ) from None
        outputs = inputs[0]
        for t in inputs[1:]:
            outputs = outputs + t
        return outputs

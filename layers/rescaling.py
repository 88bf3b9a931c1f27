"""`Rescaling`: `inputs * scale + offset`, Keras's preprocessing layer."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer

__all__ = ["Rescaling"]


def _numbers(value, argument: str):
    """A float, or a list of floats (per channel, broadcast against the last axis)."""
    array = np.asarray(value, dtype=object)
    flat = array.ravel().tolist()
    if not flat or any(isinstance(v, bool) or not isinstance(v, (int, float, np.number))
                       for v in flat):
        raise ValueError(f"Rescaling: {argument} must be a number or a list of numbers (one "
                         f"per channel). Received: {argument}={value!r}")
    if array.ndim == 0:
        return float(value)
    return np.asarray(value, dtype="float64").tolist()


def _check_broadcast(layer: str, argument: str, value, shape: tf.TensorShape) -> None:
    """Raises a ValueError when a per-channel `value` does not broadcast against inputs of
    `shape` (its last axis: the channels)."""
    value_shape = np.shape(value)
    if not value_shape or shape.rank is None:
        return
    inputs = shape.as_list()
    fits = len(value_shape) <= len(inputs) and all(
        v == 1 or d is None or v == d
        for v, d in zip(reversed(value_shape), reversed(inputs)))
    if not fits:
        length = value_shape[-1] if len(value_shape) == 1 else value_shape
        raise ValueError(
            f"Rescaling {layer!r}: {argument} has {length} values (one per channel), but "
            f"its inputs of shape {tuple(inputs)} have {inputs[-1]} channels (the last axis). "
            f"Give {argument} one value per channel ({inputs[-1]}), or a single number.")


@register_layer
class Rescaling(Layer):
    """Multiplies its inputs by `scale` and adds `offset` (Keras's Rescaling).

    E.g. pixels in [0, 255] to [0, 1] with `scale=1/255`, or to [-1, 1] with
    `scale=1/127.5, offset=-1`.

    Integer inputs are cast to the layer's floating dtype first, as in Keras.

    Args:
        scale: a number, or a list of numbers broadcast against the inputs' last axis (one
            per channel, channels-last).
        offset: the same kinds; default 0.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if `scale` or `offset` is not a number or a list of numbers, or (at
            build) a list whose length is neither 1 nor the inputs' number of channels.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Rescaling(1 / 127.5, offset=-1.0)(tf.constant([[0, 255]])).numpy()
        array([[-1.,  1.]], dtype=float32)
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(self, scale, offset=0.0, name: str | None = None, dtype=None,
                 trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.scale = _numbers(scale, "scale")
        self.offset = _numbers(offset, "offset")

    def build(self, input_shape) -> None:
        shape = tf.TensorShape(input_shape)
        for argument in ("scale", "offset"):
            _check_broadcast(self.name, argument, getattr(self, argument), shape)

    def call(self, inputs, training: bool = False):
        dtype = self.compute_dtype
        scale = tf.constant(self.scale, dtype)
        offset = tf.constant(self.offset, dtype)
        return tf.cast(inputs, dtype) * scale + offset

    def get_config(self):
        return {**self._base_config(), "scale": self.scale, "offset": self.offset}

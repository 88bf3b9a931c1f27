"""Pooling over channels-last sequences, images and volumes: windowed max and average
(`MaxPooling1D/2D/3D`, `AveragePooling1D/2D/3D`) and global max and average over every spatial
axis (`GlobalMaxPooling1D/2D/3D`, `GlobalAveragePooling1D/2D/3D`).

One class per concept carries the logic with the rank (the number of spatial axes) as a class
attribute; the public classes only name the rank and the reduction, as Keras's do.
"""

from __future__ import annotations

import math

import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.layers import arguments
from graphfit.layers.convolutional import spatial_output_size
from graphfit.layers.spatial_arguments import (
    boolean,
    channels_last_only,
    public_class,
    spatial_input_spec,
)

__all__ = [
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D",
    "AveragePooling1D", "AveragePooling2D", "AveragePooling3D",
    "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D",
]


class _Pooling(Layer):
    """Windowed pooling over `rank` spatial axes (TensorFlow's MaxPool/AvgPool kernels, 1-D
    through the 2-D kernel as Keras's TensorFlow backend does; 3-D see `_separable`)."""

    keeps_example_axis = True

    # XLA on a CPU does not speed up pooling (docs/benchmarks/performance.md)
    xla_friendly_on_cpu = False
    casts_integer_inputs = True  # computes on floats: integer features are cast
    rank = 2
    pooling_type = "MAX"

    def __init__(
        self,
        pool_size=2,
        strides=None,
        padding: str = "valid",
        data_format=None,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        layer, rank = type(self).__name__, self.rank
        self.pool_size = arguments.normalize_tuple(pool_size, rank, "pool_size")
        # As in Keras, strides default to the pool size (non-overlapping windows).
        self.strides = (
            self.pool_size if strides is None
            else arguments.normalize_tuple(strides, rank, "strides")
        )
        self.padding = arguments.padding_mode(padding)
        self.data_format = channels_last_only(data_format, layer, rank)
        self.input_spec = spatial_input_spec(rank)

    def build(self, input_shape) -> None:
        for axis in range(1, self.rank + 1):
            out = spatial_output_size(input_shape[axis], self.pool_size[axis - 1],
                                      self.strides[axis - 1], 1, self.padding)
            if out is not None and out <= 0:
                raise ValueError(
                    f"{type(self).__name__} {self.name!r}: inputs of shape "
                    f"{tuple(input_shape.as_list())} are smaller than pool_size="
                    f"{self.pool_size} with padding='valid'. Use padding='same' or a smaller "
                    f"pool_size."
                )

    def call(self, inputs, training: bool = False):
        if self.rank < 3:
            return self._pool(inputs, self.pool_size, self.strides)
        return self._separable(inputs)

    def _pool(self, inputs, window, strides):
        pool = tf.nn.max_pool if self.pooling_type == "MAX" else tf.nn.avg_pool
        return pool(inputs, ksize=window, strides=strides, padding=self.padding.upper())

    def _separable(self, inputs):
        """3-D pooling as 2-D pooling over (height, width), then over depth: max and mean
        (padding left out of the mean) factor over the axes, so this is exact, and it runs
        in every dtype (TensorFlow's CPU MaxPool3D/AvgPool3D kernels have no float64)."""
        batch, depth, _, _, channels = _dims(inputs)
        planes = self._pool(tf.reshape(inputs, [-1, *_dims(inputs)[2:]]),
                            self.pool_size[1:], self.strides[1:])
        _, height, width, _ = _dims(planes)
        lines = tf.reshape(planes, [batch, depth, height * width, channels])
        lines = self._pool(lines, (self.pool_size[0], 1), (self.strides[0], 1))
        return tf.reshape(lines, [batch, _dims(lines)[1], height, width, channels])

    def get_config(self):
        return {
            **self._base_config(),
            "pool_size": self.pool_size,
            "strides": self.strides,
            "padding": self.padding,
            "data_format": self.data_format,
        }


def _dims(tensor) -> list:
    """Each axis's static size where known, else its dynamic size (a scalar tensor)."""
    dynamic = tf.shape(tensor)
    return [d if d is not None else dynamic[i] for i, d in enumerate(tensor.shape.as_list())]


class _GlobalPooling(Layer):
    """The max or mean over every spatial axis of each channel."""

    keeps_example_axis = True

    xla_friendly_on_cpu = False
    casts_integer_inputs = True  # computes on floats: integer features are cast
    rank = 2
    _reduce = staticmethod(tf.reduce_mean)

    def __init__(
        self,
        data_format=None,
        keepdims: bool = False,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        layer = type(self).__name__
        self.data_format = channels_last_only(data_format, layer, self.rank)
        self.keepdims = boolean(keepdims, "keepdims", layer)
        self.input_spec = spatial_input_spec(self.rank)

    def call(self, inputs, training: bool = False):
        return self._reduce(inputs, axis=list(range(1, self.rank + 1)), keepdims=self.keepdims)

    def get_config(self):
        return {**self._base_config(), "data_format": self.data_format,
                "keepdims": self.keepdims}


_WINDOW_ARGS = """
    Args:
        pool_size: an int or a tuple of {rank} ints, the window.
        strides: an int or a tuple of {rank} ints; None means `pool_size`.
        padding: 'valid' or 'same'.
        data_format: None or 'channels_last' (channels_first is refused, with the transpose
            that converts the inputs: graphfit's spatial layers are channels-last).
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for invalid arguments; on call, for inputs that are not rank {ndim} or are
            smaller than the window.
"""

_GLOBAL_ARGS = """
    Args:
        data_format: None or 'channels_last' (channels_first is refused).
        keepdims: True keeps the spatial axes with size 1.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for invalid arguments; on call, for inputs that are not rank {ndim}.
"""


_EXAMPLE = """
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> x = tf.reshape(tf.range({size}.0), {shape})
        >>> layers.{name}({args})(x).numpy().ravel()
        array({result}, dtype=float32)
"""
# Per rank: the spatial axes in words, the inputs' shape, and the example's input shape.
_RANKS = {1: ("steps", "(batch, steps, channels)", (1, 4, 1)),
          2: ("height and width", "(batch, height, width, channels)", (1, 2, 4, 1)),
          3: ("depth, height and width", "(batch, depth, height, width, channels)",
              (1, 2, 2, 2, 1))}
# The examples' outputs (tf.range inputs of the shapes above), checked as doctests.
_RESULTS = {("Max", 1): "[1., 3.]", ("Max", 2): "[5., 7.]", ("Max", 3): "[7.]",
            ("Average", 1): "[0.5, 2.5]", ("Average", 2): "[2.5, 4.5]",
            ("Average", 3): "[3.5]", ("GlobalMax", 1): "[3.]", ("GlobalMax", 2): "[7.]",
            ("GlobalMax", 3): "[7.]", ("GlobalAverage", 1): "[1.5]",
            ("GlobalAverage", 2): "[3.5]", ("GlobalAverage", 3): "[3.5]"}
_MEAN_NOTE = ("\n\n    With padding='same' the padded positions are left out of the mean, as "
              "in Keras and TensorFlow.")


def _pooling_class(kind: str, rank: int) -> type:
    """The registered public class `{kind}Pooling{rank}D` ("Max", "Average", "GlobalMax" or
    "GlobalAverage"), with its own docstring."""
    axes, shape, example_shape = _RANKS[rank]
    name, reduction = f"{kind}Pooling{rank}D", "max" if kind.endswith("Max") else "mean"
    if kind.startswith("Global"):
        base, attributes = _GlobalPooling, {
            "_reduce": staticmethod(tf.reduce_max if reduction == "max" else tf.reduce_mean)}
        summary = (f"The {reduction} over {axes} of each channel: `{shape}` -> "
                   f"`(batch, channels)`.")
        args = _GLOBAL_ARGS
    else:
        base, attributes = _Pooling, {"pooling_type": "MAX" if kind == "Max" else "AVG"}
        summary = (f"{kind} pooling over {axes}: the {reduction} of each `pool_size` window "
                   f"of `{shape}`, per channel." + (_MEAN_NOTE if kind == "Average" else ""))
        args = _WINDOW_ARGS
    example = _EXAMPLE.format(size=math.prod(example_shape), shape=example_shape, name=name,
                              args="" if base is _GlobalPooling else "2",
                              result=_RESULTS[(kind, rank)])
    doc = summary + "\n" + args.format(rank=rank, ndim=rank + 2) + example
    return public_class(base, name, rank, __name__, doc, **attributes)


MaxPooling1D, MaxPooling2D, MaxPooling3D = (_pooling_class("Max", r) for r in (1, 2, 3))
AveragePooling1D, AveragePooling2D, AveragePooling3D = (
    _pooling_class("Average", r) for r in (1, 2, 3))
GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D = (
    _pooling_class("GlobalMax", r) for r in (1, 2, 3))
GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAveragePooling3D = (
    _pooling_class("GlobalAverage", r) for r in (1, 2, 3))

"""Pooling over channels-last sequences, images and volumes: windowed max and average
(`MaxPooling1D/2D/3D`, `AveragePooling1D/2D/3D`) and global max and average over every spatial
axis (`GlobalMaxPooling1D/2D/3D`, `GlobalAveragePooling1D/2D/3D`).

One class per concept carries the logic with the rank (the number of spatial axes) as a class
attribute; the public classes only name the rank and the reduction, as Keras's do.
"""

from __future__ import annotations

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

    xla_friendly_on_cpu = False  # XLA on a CPU does not speed up pooling (docs/performance.md)
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


def _pooling_class(name: str, base: type, rank: int, summary: str, example: str,
                   **attributes) -> type:
    """A registered public pooling class: `base` at `rank`, with its own docstring."""
    text = (_WINDOW_ARGS if base is _Pooling else _GLOBAL_ARGS).format(rank=rank,
                                                                       ndim=rank + 2)
    doc = f"{summary}\n{text}\n    Example:\n\n{example}"
    return public_class(base, name, rank, __name__, doc, **attributes)


_EXAMPLE = """        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.{name}({args})(tf.reshape(tf.range({size}.0), {shape})).numpy().ravel()
        {result}
"""


def _example(name, args, shape, result):
    size = 1
    for d in shape:
        size *= d
    return _EXAMPLE.format(name=name, args=args, size=size, shape=shape, result=result)


MaxPooling1D = _pooling_class(
    "MaxPooling1D", _Pooling, 1,
    "Max pooling over steps: `(batch, steps, channels)` -> `(batch, new_steps, channels)`.",
    _example("MaxPooling1D", "2", (1, 4, 1), "array([1., 3.], dtype=float32)"),
    pooling_type="MAX")
MaxPooling2D = _pooling_class(
    "MaxPooling2D", _Pooling, 2,
    "Max pooling: the largest value of each `pool_size` window, per channel.\n\n"
    "    Inputs `(batch, height, width, channels)` give "
    "`(batch, new_height, new_width, channels)`.",
    _example("MaxPooling2D", "2", (1, 2, 4, 1), "array([5., 7.], dtype=float32)"),
    pooling_type="MAX")
MaxPooling3D = _pooling_class(
    "MaxPooling3D", _Pooling, 3,
    "Max pooling over volumes: `(batch, depth, height, width, channels)`.",
    _example("MaxPooling3D", "2", (1, 2, 2, 2, 1), "array([7.], dtype=float32)"),
    pooling_type="MAX")
AveragePooling1D = _pooling_class(
    "AveragePooling1D", _Pooling, 1,
    "Average pooling over steps: `(batch, steps, channels)` -> `(batch, new_steps, channels)`."
    "\n\n    With padding='same' the padded positions are left out of the mean, as in Keras.",
    _example("AveragePooling1D", "2", (1, 4, 1), "array([0.5, 2.5], dtype=float32)"),
    pooling_type="AVG")
AveragePooling2D = _pooling_class(
    "AveragePooling2D", _Pooling, 2,
    "Average pooling: the mean of each `pool_size` window, per channel.\n\n"
    "    With padding='same' the padded positions are left out of the mean, as in Keras and\n"
    "    TensorFlow.",
    _example("AveragePooling2D", "2", (1, 2, 2, 1), "array([1.5], dtype=float32)"),
    pooling_type="AVG")
AveragePooling3D = _pooling_class(
    "AveragePooling3D", _Pooling, 3,
    "Average pooling over volumes: `(batch, depth, height, width, channels)`.\n\n"
    "    With padding='same' the padded positions are left out of the mean, as in Keras.",
    _example("AveragePooling3D", "2", (1, 2, 2, 2, 1), "array([3.5], dtype=float32)"),
    pooling_type="AVG")
GlobalMaxPooling1D = _pooling_class(
    "GlobalMaxPooling1D", _GlobalPooling, 1,
    "The max over steps of each channel: `(batch, steps, c)` -> `(batch, c)`.",
    _example("GlobalMaxPooling1D", "", (1, 3, 2), "array([4., 5.], dtype=float32)"),
    _reduce=staticmethod(tf.reduce_max))
GlobalMaxPooling2D = _pooling_class(
    "GlobalMaxPooling2D", _GlobalPooling, 2,
    "The max over height and width of each channel: `(batch, h, w, c)` -> `(batch, c)`.",
    _example("GlobalMaxPooling2D", "", (1, 2, 2, 1), "array([3.], dtype=float32)"),
    _reduce=staticmethod(tf.reduce_max))
GlobalMaxPooling3D = _pooling_class(
    "GlobalMaxPooling3D", _GlobalPooling, 3,
    "The max over depth, height and width of each channel: `(batch, d, h, w, c)` -> "
    "`(batch, c)`.",
    _example("GlobalMaxPooling3D", "", (1, 2, 2, 2, 1), "array([7.], dtype=float32)"),
    _reduce=staticmethod(tf.reduce_max))
GlobalAveragePooling1D = _pooling_class(
    "GlobalAveragePooling1D", _GlobalPooling, 1,
    "The mean over steps of each channel: `(batch, steps, c)` -> `(batch, c)`.",
    _example("GlobalAveragePooling1D", "", (1, 3, 2), "array([2., 3.], dtype=float32)"),
    _reduce=staticmethod(tf.reduce_mean))
GlobalAveragePooling2D = _pooling_class(
    "GlobalAveragePooling2D", _GlobalPooling, 2,
    "The mean over height and width of each channel: `(batch, h, w, c)` -> `(batch, c)`.",
    _example("GlobalAveragePooling2D", "", (1, 2, 2, 1), "array([1.5], dtype=float32)"),
    _reduce=staticmethod(tf.reduce_mean))
GlobalAveragePooling3D = _pooling_class(
    "GlobalAveragePooling3D", _GlobalPooling, 3,
    "The mean over depth, height and width of each channel: `(batch, d, h, w, c)` -> "
    "`(batch, c)`.",
    _example("GlobalAveragePooling3D", "", (1, 2, 2, 2, 1), "array([3.5], dtype=float32)"),
    _reduce=staticmethod(tf.reduce_mean))

"""`Conv2D`: 2-D convolution over channels-last images."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments
from graphfit.layers.activation import activate

__all__ = ["Conv2D", "ImageInputSpec", "spatial_output_size"]


@dataclasses.dataclass
class ImageInputSpec(InputSpec):
    """An `InputSpec` for rank-4 image inputs whose rank error says which Reshape fixes it.

    Flat inputs of 64 values get "Add layers.Reshape((8, 8, 1)) before it"; inputs of shape
    `(batch, height, width)` get "Add layers.Reshape((height, width, 1)) before it".
    """

    ndim: int | None = 4

    def check(self, layer: Layer, shape: tf.TensorShape) -> None:
        hint = self.hint
        if shape.rank is not None and shape.rank != 4:
            hint = _reshape_hint(shape)
        InputSpec(ndim=self.ndim, min_ndim=self.min_ndim, axes=self.axes, hint=hint).check(
            layer, shape
        )


def _reshape_hint(shape: tf.TensorShape) -> str:
    dims = shape.as_list()[1:]
    generic = (
        "It needs images shaped (batch, height, width, channels): add "
        "layers.Reshape((height, width, channels)) before it."
    )
    if len(dims) == 1 and dims[0]:
        side = math.isqrt(dims[0])
        if side * side == dims[0]:
            return (
                f"It needs images shaped (batch, height, width, channels). Add "
                f"layers.Reshape(({side}, {side}, 1)) before it."
            )
    if len(dims) == 2 and None not in dims:
        return (
            f"It needs images shaped (batch, height, width, channels). Add "
            f"layers.Reshape(({dims[0]}, {dims[1]}, 1)) before it."
        )
    return generic


def spatial_output_size(size, window: int, stride: int, dilation: int, padding: str):
    """The output length of one spatial axis (None when `size` is unknown), as TensorFlow."""
    if size is None:
        return None
    if padding == "same":
        return -(-size // stride)
    return -(-(size - (window - 1) * dilation) // stride)


@register_layer
class Conv2D(Layer):
    """2-D convolution: `outputs = activation(conv2d(inputs, kernel) + bias)`.

    Images are channels-last, `(batch, height, width, channels)`; outputs are
    `(batch, new_height, new_width, filters)`. Weights, in Keras order: `kernel` of shape
    `(kernel_height, kernel_width, channels, filters)`, then `bias` of shape `(filters,)`.
    XLA on CPU makes small convolution nets slower, so `xla_friendly_on_cpu` is False.

    Args:
        filters: the number of output channels; a positive integer.
        kernel_size: an int or a pair (height, width) of the window.
        strides: an int or a pair, the step of the window.
        padding: 'valid' (no padding) or 'same' (pad so that output size = ceil(size/stride)).
        data_format: None or 'channels_last'; 'channels_first' is refused because
            TensorFlow's CPU kernels need NHWC.
        dilation_rate: an int or a pair; strides > 1 together with dilation_rate > 1 is not
            supported (as in Keras).
        activation: a Keras activation name or callable; None is the identity.
        use_bias: whether to add the `bias` vector.
        kernel_initializer: initializer of `kernel`.
        bias_initializer: initializer of `bias`.
        kernel_regularizer, bias_regularizer, activity_regularizer: Keras regularizers of
            `kernel`, `bias` and the outputs (as `Dense`).
        kernel_constraint, bias_constraint: Keras constraints applied after each update.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: False freezes the layer.

    Raises:
        ValueError: for invalid arguments; on call, for inputs that are not rank 4 (the
            message names the Reshape that fixes it), have another channel count than at
            build time, or are too small for the window.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> conv = layers.Conv2D(8, 3, padding="same", activation="relu")
        >>> conv(tf.ones((2, 16, 16, 3))).shape
        TensorShape([2, 16, 16, 8])
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = False  # oneDNN's CPU convolutions beat XLA's (docs/performance.md)
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(
        self,
        filters: int,
        kernel_size,
        strides=(1, 1),
        padding: str = "valid",
        data_format=None,
        dilation_rate=(1, 1),
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
        self.filters = validation.positive_int("filters", filters)
        self.kernel_size = arguments.normalize_tuple(kernel_size, 2, "kernel_size")
        self.strides = arguments.normalize_tuple(strides, 2, "strides")
        self.padding = arguments.padding_mode(padding)
        self.data_format = arguments.channels_last(data_format, "Conv2D")
        self.dilation_rate = arguments.normalize_tuple(dilation_rate, 2, "dilation_rate")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(
                "strides > 1 is not supported together with dilation_rate > 1 (TensorFlow's "
                f"convolution refuses it). Received: strides={self.strides} and "
                f"dilation_rate={self.dilation_rate}"
            )
        self.activation = arguments.get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = arguments.get_initializer(
            kernel_initializer, "kernel_initializer"
        )
        self.bias_initializer = arguments.get_initializer(bias_initializer, "bias_initializer")
        self.input_spec = ImageInputSpec()

    def build(self, input_shape) -> None:
        channels = input_shape[-1]
        if channels is None:
            raise ValueError(
                f"Conv2D {self.name!r} needs a known number of input channels (last axis). "
                f"Received input shape {tuple(input_shape.as_list())}."
            )
        for axis in (1, 2):
            out = spatial_output_size(
                input_shape[axis],
                self.kernel_size[axis - 1],
                self.strides[axis - 1],
                self.dilation_rate[axis - 1],
                self.padding,
            )
            if out is not None and out <= 0:
                raise ValueError(
                    f"Conv2D {self.name!r}: inputs of shape {tuple(input_shape.as_list())} are "
                    f"too small for kernel_size={self.kernel_size} with "
                    f"dilation_rate={self.dilation_rate} and padding='valid'. Use "
                    f"padding='same', a smaller kernel, or larger images."
                )
        self.kernel = self.add_weight(
            "kernel",
            (*self.kernel_size, channels, self.filters),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = (
            self.add_weight("bias", (self.filters,), initializer=self.bias_initializer,
                            regularizer=self.bias_regularizer, constraint=self.bias_constraint)
            if self.use_bias
            else None
        )
        self.input_spec = ImageInputSpec(axes={-1: int(channels)})

    def call(self, inputs, training: bool = False):
        outputs = tf.nn.convolution(
            inputs,
            self.compute_value(self.kernel),
            strides=self.strides,
            padding=self.padding.upper(),
            dilations=self.dilation_rate,
        )
        if self.bias is not None:
            outputs = outputs + self.compute_value(self.bias)
        return activate(self, self.activation, outputs)

    def get_config(self) -> dict[str, Any]:
        return {
            **self._base_config(),
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "strides": self.strides,
            "padding": self.padding,
            "data_format": self.data_format,
            "dilation_rate": self.dilation_rate,
            "activation": keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            **arguments.weight_options_config(self, self._weight_options),
        }

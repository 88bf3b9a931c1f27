"""Depthwise and separable convolutions: `DepthwiseConv1D`, `DepthwiseConv2D`,
`SeparableConv1D`, `SeparableConv2D`.

A depthwise convolution convolves each input channel with its own `depth_multiplier` filters
(no mixing of channels); a separable one follows it with a 1x1 ("pointwise") convolution that
mixes them into `filters` channels. As in Keras's TensorFlow backend, both run on
`tf.nn.depthwise_conv2d` / `tf.nn.separable_conv2d`, the 1-D layers on inputs with a height
axis of 1 added.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import register_layer
from graphfit.layers import arguments
from graphfit.layers.convolutional import BaseConv, document_arguments, expand_signature

__all__ = ["DepthwiseConv", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv",
           "SeparableConv1D", "SeparableConv2D"]


class DepthwiseConv(BaseConv):
    """A depthwise convolution of `rank` (1 or 2) spatial axes; the base of
    `DepthwiseConv1D` and `DepthwiseConv2D` (see `DepthwiseConv2D`). Not registered.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.DepthwiseConv1D(3, depth_multiplier=2)(tf.ones((2, 9, 4))).shape
        TensorShape([2, 7, 8])
    """

    def __init__(self, kernel_size, strides=1, padding: str = "valid",
                 depth_multiplier: int = 1, data_format=None, dilation_rate=1,
                 activation=None, use_bias: bool = True,
                 depthwise_initializer="glorot_uniform", depthwise_regularizer=None,
                 depthwise_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation,
                         use_bias, depthwise_regularizer=depthwise_regularizer,
                         depthwise_constraint=depthwise_constraint, **kwargs)
        self.depth_multiplier = validation.positive_int("depth_multiplier", depth_multiplier)
        self.depthwise_initializer = arguments.get_initializer(
            depthwise_initializer, "depthwise_initializer")
        if len(set(self.strides)) > 1:
            raise ValueError(
                f"{type(self).__name__}: strides must be equal on both spatial axes "
                f"(TensorFlow's depthwise convolution supports no other). Received: "
                f"strides={self.strides}"
            )

    def add_kernels(self, channels: int) -> int:
        self.kernel = self.add_weight(
            "kernel", (*self.kernel_size, channels, self.depth_multiplier),
            initializer=self.depthwise_initializer, regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint)
        return channels * self.depth_multiplier

    def as_2d(self, inputs, *kernels):
        """(inputs, kernels, strides, dilations) for TensorFlow's 2-D ops: a 1-D layer's
        get a height axis of 1 (strides repeated, as Keras does)."""
        kernels = [self.compute_value(k) for k in kernels]
        stride = self.strides[0]
        if self.rank == 2:
            return inputs, kernels, (1, stride, stride, 1), self.dilation_rate
        return (tf.expand_dims(inputs, 1), [tf.expand_dims(k, 0) for k in kernels],
                (1, stride, stride, 1), (1, *self.dilation_rate))

    def from_2d(self, outputs):
        return outputs if self.rank == 2 else tf.squeeze(outputs, [1])

    def convolve(self, inputs):
        x, (kernel,), strides, dilations = self.as_2d(inputs, self.kernel)
        return self.from_2d(tf.nn.depthwise_conv2d(x, kernel, strides, self.padding.upper(),
                                                   dilations=dilations))

    def get_config(self) -> dict[str, Any]:
        return {**self.window_config(), "depth_multiplier": self.depth_multiplier,
                "depthwise_initializer": keras.initializers.serialize(
                    self.depthwise_initializer)}


class SeparableConv(DepthwiseConv):
    """A separable convolution (depthwise, then pointwise) of `rank` (1 or 2) spatial axes;
    the base of `SeparableConv1D` and `SeparableConv2D` (see `SeparableConv2D`). Not
    registered.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.SeparableConv1D(5, 3, padding="same")(tf.ones((2, 9, 4))).shape
        TensorShape([2, 9, 5])
    """

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid",
                 data_format=None, dilation_rate=1, depth_multiplier: int = 1,
                 activation=None, use_bias: bool = True,
                 pointwise_initializer="glorot_uniform", pointwise_regularizer=None,
                 pointwise_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format,
                         dilation_rate, activation, use_bias,
                         pointwise_regularizer=pointwise_regularizer,
                         pointwise_constraint=pointwise_constraint, **kwargs)
        self.filters = validation.positive_int("filters", filters)
        self.pointwise_initializer = arguments.get_initializer(
            pointwise_initializer, "pointwise_initializer")

    def add_kernels(self, channels: int) -> int:
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", (*self.kernel_size, channels, self.depth_multiplier),
            initializer=self.depthwise_initializer, regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint)
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", (*(1,) * self.rank, channels * self.depth_multiplier,
                                 self.filters),
            initializer=self.pointwise_initializer, regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint)
        return self.filters

    def convolve(self, inputs):
        x, (depthwise, pointwise), strides, dilations = self.as_2d(
            inputs, self.depthwise_kernel, self.pointwise_kernel)
        return self.from_2d(tf.nn.separable_conv2d(
            x, depthwise, pointwise, strides, self.padding.upper(), dilations=dilations))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "filters": self.filters,
                "pointwise_initializer": keras.initializers.serialize(
                    self.pointwise_initializer)}


_DEPTHWISE_ARGS = """
    Args:{filters}
        kernel_size: an int or a tuple of {rank} ints, the window.
        strides: an int or a tuple of {rank} equal ints, the step of the window.
        padding: 'valid' (no padding) or 'same' (output size = ceil(size / stride)).
        depth_multiplier: the number of outputs per input channel of the depthwise step.
        data_format: 'channels_last' (None: inputs `{last}`) or 'channels_first' (inputs
            `{first}`, computed by transposing to channels-last and back).
        dilation_rate: an int or a tuple of {rank} ints; strides > 1 together with
            dilation_rate > 1 is refused (Keras 3.15 decomposes that case; graphfit does not).
        activation: a Keras activation name or callable; None is the identity.
        use_bias: whether to add the `bias` vector.
        depthwise_initializer{pointwise}, bias_initializer: initializers of the weights.
        depthwise_regularizer, depthwise_constraint{pointwise}, bias_regularizer,
            bias_constraint, activity_regularizer: Keras regularizers and constraints of the
            weights and outputs (as `Dense`), by keyword.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: False freezes the layer.

    Raises:
        ValueError: for invalid arguments; on call, for inputs of another rank than {ndim},
            another channel count than at build time, or too small for the window with
            padding='valid'.
"""
_FILTERS = "\n        filters: the number of output channels of the pointwise step."
_POINTWISE = " (pointwise_*: of the pointwise kernel)"


@register_layer
class DepthwiseConv1D(DepthwiseConv):
    """1-D depthwise convolution: each channel of a sequence convolved with its own filters.

    Inputs `(batch, steps, channels)`, outputs `(batch, new_steps, channels *
    depth_multiplier)`. Weights, in Keras order: `kernel` of shape `(kernel_size, channels,
    depth_multiplier)`, then `bias` of shape `(channels * depth_multiplier,)`.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.DepthwiseConv1D(3, padding="same")(tf.ones((2, 10, 4))).shape
        TensorShape([2, 10, 4])
    """

    rank = 1


@register_layer
class DepthwiseConv2D(DepthwiseConv):
    """2-D depthwise convolution: each channel of an image convolved with its own filters.

    Inputs `(batch, height, width, channels)`, outputs `(batch, new_height, new_width,
    channels * depth_multiplier)`. Weights, in Keras order: `kernel` of shape
    `(kernel_height, kernel_width, channels, depth_multiplier)`, then `bias` of shape
    `(channels * depth_multiplier,)`.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> conv = layers.DepthwiseConv2D(3, depth_multiplier=2, activation="relu")
        >>> conv(tf.ones((2, 8, 8, 3))).shape
        TensorShape([2, 6, 6, 6])
    """

    rank = 2


@register_layer
class SeparableConv1D(SeparableConv):
    """1-D separable convolution: a depthwise convolution, then a pointwise (1x1) one.

    Inputs `(batch, steps, channels)`, outputs `(batch, new_steps, filters)`. Weights, in
    Keras order: `depthwise_kernel` `(kernel_size, channels, depth_multiplier)`,
    `pointwise_kernel` `(1, channels * depth_multiplier, filters)`, `bias` `(filters,)`.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.SeparableConv1D(8, 3, activation="relu")(tf.ones((2, 10, 4))).shape
        TensorShape([2, 8, 8])
    """

    rank = 1


@register_layer
class SeparableConv2D(SeparableConv):
    """2-D separable convolution: a depthwise convolution, then a pointwise (1x1) one.

    Inputs `(batch, height, width, channels)`, outputs `(batch, new_height, new_width,
    filters)`. Weights, in Keras order: `depthwise_kernel` `(kh, kw, channels,
    depth_multiplier)`, `pointwise_kernel` `(1, 1, channels * depth_multiplier, filters)`,
    `bias` `(filters,)`.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> conv = layers.SeparableConv2D(16, 3, padding="same", depth_multiplier=2)
        >>> conv(tf.ones((2, 8, 8, 3))).shape
        TensorShape([2, 8, 8, 16])
    """

    rank = 2


expand_signature(DepthwiseConv)
expand_signature(SeparableConv)
for _cls in (DepthwiseConv1D, DepthwiseConv2D):
    document_arguments(_cls, _DEPTHWISE_ARGS, filters="", pointwise="")
for _cls in (SeparableConv1D, SeparableConv2D):
    document_arguments(_cls, _DEPTHWISE_ARGS, filters=_FILTERS, pointwise=_POINTWISE)

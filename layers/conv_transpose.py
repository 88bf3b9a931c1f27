"""Transposed convolutions: `Conv1DTranspose`, `Conv2DTranspose`, `Conv3DTranspose`.

The gradient of a convolution with respect to its inputs, used to upsample: each input
position scatters `kernel`-weighted copies of its channels onto a window of the output. The
output sizes are Keras's (`keras.src.backend.common.backend_utils.
compute_conv_transpose_output_shape`), and the op is TensorFlow's `tf.nn.conv_transpose`, as in
Keras's TensorFlow backend.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core.registry import register_layer
from graphfit.core.validation import is_integer
from graphfit.layers.convolutional import Conv, document_arguments, expand_signature

__all__ = ["ConvTranspose", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
           "transpose_output_size"]


def transpose_output_size(size, window: int, stride: int, dilation: int, padding: str,
                          output_padding: int | None):
    """The output length of one spatial axis of a transposed convolution, as Keras computes
    it (`size` may be a scalar tensor; None stays None)."""
    if size is None:
        return None
    window = (window - 1) * dilation + 1
    if padding == "valid":
        extra = max(window, stride) - window if output_padding is None else output_padding
        return (size - 1) * stride + window + extra
    if output_padding is None:
        return size * stride
    return (size - 1) * stride + window % 2 + output_padding


def _output_padding(value, rank: int, strides: tuple[int, ...]):
    if value is None:
        return None
    values = (value,) * rank if is_integer(value) else tuple(value) if isinstance(
        value, (list, tuple)) else ()
    if len(values) != rank or any(not is_integer(v) or v < 0 for v in values):
        raise ValueError(
            f"output_padding must be None, a non-negative integer or a tuple of {rank} of "
            f"them. Received: output_padding={value!r}"
        )
    if any(v >= s for v, s in zip(values, strides)):
        raise ValueError(
            f"output_padding must be less than strides on every axis (it picks one of the "
            f"`strides` output sizes that give the same input size). Received: "
            f"output_padding={tuple(values)}, strides={strides}"
        )
    return tuple(int(v) for v in values)


class ConvTranspose(Conv):
    """A transposed convolution of `rank` spatial axes; the base of `Conv1DTranspose`,
    `Conv2DTranspose` and `Conv3DTranspose` (see `Conv2DTranspose`). Not registered.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> up = layers.Conv1DTranspose(2, 3, strides=2)
        >>> up(tf.ones((1, 5, 4))).shape  # (5 - 1) * 2 + 3 steps
        TensorShape([1, 11, 2])
        >>> tuple(up.kernel.shape)  # (kernel_size, filters, input channels)
        (3, 2, 4)
    """

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid",
                 output_padding=None, data_format=None, dilation_rate=1, **kwargs):
        if "groups" in kwargs:
            raise TypeError(f"{type(self).__name__}() takes no groups argument (as in Keras)")
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         **kwargs)
        self.output_padding = _output_padding(output_padding, self.rank, self.strides)

    def output_sizes(self, sizes) -> list:
        paddings = self.output_padding or (None,) * self.rank
        return [transpose_output_size(size, *window, self.padding, extra)
                for size, window, extra in zip(sizes, zip(self.kernel_size, self.strides,
                                                          self.dilation_rate), paddings)]

    def add_kernels(self, channels: int) -> int:
        self.kernel = self.add_weight(
            "kernel", (*self.kernel_size, self.filters, channels),
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        return self.filters

    def convolve(self, inputs):
        dynamic = tf.shape(inputs)
        sizes = [size if size is not None else dynamic[axis + 1]
                 for axis, size in enumerate(inputs.shape[1:-1])]
        batch = inputs.shape[0] if inputs.shape[0] is not None else dynamic[0]
        output_shape = [batch, *self.output_sizes(sizes), self.filters]
        return tf.nn.conv_transpose(inputs, self.compute_value(self.kernel), output_shape,
                                    strides=self.strides, padding=self.padding.upper(),
                                    data_format=self.tf_data_format,
                                    dilations=self.dilation_rate)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        del config["groups"]
        return {**config, "output_padding": self.output_padding}


_TRANSPOSE_ARGS = """
    Args:
        filters: the number of output channels; a positive integer.
        kernel_size: an int or a tuple of {rank} ints, the window.
        strides: an int or a tuple of {rank} ints: the upsampling factor.
        padding: 'valid' (output size (size - 1) * stride + max(kernel, stride)) or 'same'
            (output size size * stride), as Keras.
        output_padding: None, an int or a tuple of {rank} ints less than `strides`: the amount
            added to the end of each spatial axis of the output (a fixed output size, as
            Keras).
        data_format: 'channels_last' (None: inputs `{last}`) or 'channels_first' (inputs
            `{first}`, computed by transposing to channels-last and back).
        dilation_rate: an int or a tuple of {rank} ints; not together with strides > 1.
        activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
            bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint, name,
            dtype, trainable: as `Conv2D` (by keyword). There is no `groups` (as in Keras).

    Raises:
        ValueError: for invalid arguments (output_padding >= strides among them); on call,
            for inputs of another rank than {ndim} or another channel count than at build.
"""


@register_layer
class Conv1DTranspose(ConvTranspose):
    """1-D transposed convolution (upsampling a sequence): the input gradient of `Conv1D`.

    Inputs `(batch, steps, channels)`, outputs `(batch, new_steps, filters)`. Weights, in
    Keras order: `kernel` of shape `(kernel_size, filters, channels)` (output channels before
    input channels, as Keras), then `bias` of shape `(filters,)`.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Conv1DTranspose(3, 4, strides=2, padding="same")(tf.ones((2, 5, 8))).shape
        TensorShape([2, 10, 3])
    """

    rank = 1


@register_layer
class Conv2DTranspose(ConvTranspose):
    """2-D transposed convolution (upsampling images): the input gradient of `Conv2D`.

    Inputs `(batch, height, width, channels)`, outputs `(batch, new_height, new_width,
    filters)`. Weights, in Keras order: `kernel` of shape `(kernel_height, kernel_width,
    filters, channels)`, then `bias` of shape `(filters,)`.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> up = layers.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")
        >>> up(tf.ones((2, 7, 7, 16))).shape
        TensorShape([2, 14, 14, 8])
    """

    rank = 2


@register_layer
class Conv3DTranspose(ConvTranspose):
    """3-D transposed convolution (upsampling volumes): the input gradient of `Conv3D`.

    Inputs `(batch, depth, height, width, channels)`, outputs `(batch, new_depth, new_height,
    new_width, filters)`. Weights: `kernel` of shape `(*kernel_size, filters, channels)`,
    then `bias` of shape `(filters,)`. As in Keras, `data_format` comes before
    `output_padding` among the positional arguments here.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Conv3DTranspose(2, 2, strides=2)(tf.ones((1, 3, 3, 3, 4))).shape
        TensorShape([1, 6, 6, 6, 2])
    """

    rank = 3

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid",
                 data_format=None, output_padding=None, dilation_rate=1, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, output_padding, data_format,
                         dilation_rate, **kwargs)


expand_signature(ConvTranspose, exclude=("groups",))
expand_signature(Conv3DTranspose, exclude=("groups",))
for _cls in (Conv1DTranspose, Conv2DTranspose, Conv3DTranspose):
    document_arguments(_cls, _TRANSPOSE_ARGS)

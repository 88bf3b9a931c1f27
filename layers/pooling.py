"""2-D pooling over channels-last images: max, average, and global average."""

from __future__ import annotations

import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments
from graphfit.layers.convolutional import ImageInputSpec, spatial_output_size

__all__ = ["MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D"]


class _Pooling2D(Layer):
    """Shared argument handling of the windowed pooling layers."""

    keeps_example_axis = True

    xla_friendly_on_cpu = False  # XLA on a CPU does not speed up pooling (docs/performance.md)
    casts_integer_inputs = True  # computes on floats: integer features are cast
    _pool = staticmethod(tf.nn.max_pool2d)

    def __init__(
        self,
        pool_size=(2, 2),
        strides=None,
        padding: str = "valid",
        data_format=None,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.pool_size = arguments.normalize_tuple(pool_size, 2, "pool_size")
        # As in Keras, strides default to the pool size (non-overlapping windows).
        self.strides = (
            self.pool_size if strides is None else arguments.normalize_tuple(strides, 2, "strides")
        )
        self.padding = arguments.padding_mode(padding)
        self.data_format = arguments.channels_last(data_format, type(self).__name__)
        self.input_spec = ImageInputSpec()

    def build(self, input_shape) -> None:
        for axis in (1, 2):
            out = spatial_output_size(
                input_shape[axis], self.pool_size[axis - 1], self.strides[axis - 1], 1, self.padding
            )
            if out is not None and out <= 0:
                raise ValueError(
                    f"{type(self).__name__} {self.name!r}: inputs of shape "
                    f"{tuple(input_shape.as_list())} are smaller than pool_size="
                    f"{self.pool_size} with padding='valid'. Use padding='same' or a smaller "
                    f"pool_size."
                )

    def call(self, inputs, training: bool = False):
        return self._pool(
            inputs, ksize=self.pool_size, strides=self.strides, padding=self.padding.upper()
        )

    def get_config(self):
        return {
            **self._base_config(),
            "pool_size": self.pool_size,
            "strides": self.strides,
            "padding": self.padding,
            "data_format": self.data_format,
        }


@register_layer
class MaxPooling2D(_Pooling2D):
    """Max pooling: the largest value of each `pool_size` window, per channel.

    Inputs `(batch, height, width, channels)` (channels-last only; TensorFlow's CPU kernels
    need NHWC) give `(batch, new_height, new_width, channels)`.

    Args:
        pool_size: an int or a pair (height, width) of the window.
        strides: an int or a pair; None means `pool_size`.
        padding: 'valid' or 'same'.
        data_format: None or 'channels_last'.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for invalid arguments; on call, for inputs that are not rank 4 (the
            message names the Reshape that fixes it) or are smaller than the window.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.MaxPooling2D(2)(tf.ones((1, 4, 6, 3))).shape
        TensorShape([1, 2, 3, 3])
    """

    _pool = staticmethod(tf.nn.max_pool2d)


@register_layer
class AveragePooling2D(_Pooling2D):
    """Average pooling: the mean of each `pool_size` window, per channel.

    With padding='same' the padded positions are left out of the mean, as in Keras and
    TensorFlow. Channels-last only (TensorFlow's CPU kernels need NHWC).

    Args:
        pool_size: an int or a pair (height, width) of the window.
        strides: an int or a pair; None means `pool_size`.
        padding: 'valid' or 'same'.
        data_format: None or 'channels_last'.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for invalid arguments; on call, for inputs that are not rank 4 or are
            smaller than the window.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.AveragePooling2D(2)(tf.reshape(tf.range(4.0), (1, 2, 2, 1))).numpy().ravel()
        array([1.5], dtype=float32)
    """

    _pool = staticmethod(tf.nn.avg_pool2d)


@register_layer
class GlobalAveragePooling2D(Layer):
    """The mean over height and width of each channel: `(batch, h, w, c)` -> `(batch, c)`.

    Args:
        data_format: None or 'channels_last' (TensorFlow's CPU kernels need NHWC).
        keepdims: True keeps the spatial axes with size 1: `(batch, 1, 1, c)`.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for data_format='channels_first'; on call, for inputs that are not rank 4.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.GlobalAveragePooling2D()(tf.ones((2, 5, 5, 3))).shape
        TensorShape([2, 3])
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = False
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(
        self,
        data_format=None,
        keepdims: bool = False,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.data_format = arguments.channels_last(data_format, "GlobalAveragePooling2D")
        if not isinstance(keepdims, bool):
            raise ValueError(f"keepdims must be True or False. Received: keepdims={keepdims!r}")
        self.keepdims = keepdims
        self.input_spec = ImageInputSpec()

    def call(self, inputs, training: bool = False):
        return tf.reduce_mean(inputs, axis=[1, 2], keepdims=self.keepdims)

    def get_config(self):
        return {
            **self._base_config(),
            "data_format": self.data_format,
            "keepdims": self.keepdims,
        }

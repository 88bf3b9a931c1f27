"""Layers that change the shape of each example, never the batch axis: `Flatten`, `Reshape`,
and the rank-generic spatial ones, `ZeroPadding1D/2D/3D`, `Cropping1D/2D/3D` and
`UpSampling1D/2D/3D` (one class per concept with the rank as a class attribute)."""

from __future__ import annotations

import math

import tensorflow as tf

from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments
from graphfit.layers.spatial_arguments import (
    channels_last_only,
    public_class,
    side_pairs,
    spatial_input_spec,
)

__all__ = ["Flatten", "Reshape", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D",
           "Cropping1D", "Cropping2D", "Cropping3D", "UpSampling1D", "UpSampling2D",
           "UpSampling3D"]


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


class _Spatial(Layer):
    """A shape layer over `rank` spatial axes of channels-last inputs."""

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    rank = 2

    def _spatial_setup(self, data_format) -> None:
        self.data_format = channels_last_only(data_format, type(self).__name__, self.rank)
        self.input_spec = spatial_input_spec(self.rank)

    def _config(self, **entries):
        if self.rank > 1:  # Keras's 1-D layers have no data_format
            entries["data_format"] = self.data_format
        return {**self._base_config(), **entries}


class _ZeroPadding(_Spatial):
    """Zeros added before and after each spatial axis (`tf.pad`)."""

    def __init__(self, padding=1, data_format=None, name: str | None = None, dtype=None,
                 trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        pairs = side_pairs(padding, self.rank, "padding", type(self).__name__)
        self.padding = pairs[0] if self.rank == 1 else pairs  # as Keras stores it
        self._pairs = pairs
        self._spatial_setup(data_format)

    def call(self, inputs, training: bool = False):
        return tf.pad(inputs, [(0, 0), *self._pairs, (0, 0)])

    def get_config(self):
        return self._config(padding=self.padding)


class _Cropping(_Spatial):
    """Entries cut off before and after each spatial axis."""

    default_cropping = 1  # Keras's default: 1 on each side (Cropping2D: 0)

    def __init__(self, cropping=None, data_format=None, name: str | None = None, dtype=None,
                 trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        cropping = self.default_cropping if cropping is None else cropping
        pairs = side_pairs(cropping, self.rank, "cropping", type(self).__name__)
        self.cropping = pairs[0] if self.rank == 1 else pairs  # as Keras stores it
        self._pairs = pairs
        self._spatial_setup(data_format)

    def build(self, input_shape) -> None:
        for axis, (before, after) in enumerate(self._pairs, start=1):
            size = input_shape[axis]
            if size is not None and before + after >= size:
                raise ValueError(
                    f"{type(self).__name__} {self.name!r}: cropping={self.cropping} leaves "
                    f"nothing of axis {axis} (size {size}) of inputs shaped "
                    f"{tuple(input_shape.as_list())}. Crop less than the axis holds."
                )

    def call(self, inputs, training: bool = False):
        dynamic = tf.shape(inputs)
        slices = [slice(None)]
        for axis, (before, after) in enumerate(self._pairs, start=1):
            size = inputs.shape[axis]
            slices.append(slice(before, (size if size is not None else dynamic[axis]) - after))
        return inputs[tuple(slices)]

    def get_config(self):
        return self._config(cropping=self.cropping)


_INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos3", "lanczos5", "area")


class _UpSampling(_Spatial):
    """Each entry repeated `size` times along each spatial axis (nearest neighbour); 2-D also
    resizes with the other `tf.image.resize` methods, as Keras's UpSampling2D does."""

    def __init__(self, size=2, data_format=None, interpolation: str = "nearest",
                 name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        layer = type(self).__name__
        self.size = arguments.normalize_tuple(size, self.rank, "size")
        if interpolation not in _INTERPOLATIONS or (self.rank != 2 and
                                                    interpolation != "nearest"):
            allowed = _INTERPOLATIONS if self.rank == 2 else ("nearest",)
            raise ValueError(f"{layer}: interpolation must be one of {allowed}. "
                             f"Received: interpolation={interpolation!r}")
        self.interpolation = interpolation
        # XLA has no kernels for most resize methods, and its CPU bilinear resize gives other
        # numbers than TensorFlow's when the two factors differ (TensorFlow 2.21).
        self.supports_jit = interpolation == "nearest"
        self._spatial_setup(data_format)

    def call(self, inputs, training: bool = False):
        if self.interpolation == "nearest":
            for axis, factor in enumerate(self.size, start=1):
                inputs = tf.repeat(inputs, factor, axis=axis)
            return inputs
        shape = tf.shape(inputs)
        new_size = tf.stack([shape[1] * self.size[0], shape[2] * self.size[1]])
        resized = tf.image.resize(inputs, new_size, method=self.interpolation)
        return tf.cast(resized, inputs.dtype)

    def get_config(self):
        if self.rank == 1:  # Keras's UpSampling1D stores one int
            return {**self._base_config(), "size": self.size[0]}
        extra = {"interpolation": self.interpolation} if self.rank == 2 else {}
        return self._config(size=self.size, **extra)


_SPATIAL = """
    Inputs are channels-last, `{shape}`.

    Args:
{args}
        data_format: None or 'channels_last' (channels_first is refused, with the transpose
            that converts the inputs: graphfit's spatial layers are channels-last).
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for invalid arguments (naming the layer); on call, for inputs that are
            not rank {ndim}{extra}.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.{name}({call_args})(tf.ones({in_shape})).shape
        TensorShape({out_shape})
"""
_AXES_TEXT = {1: "the steps axis", 2: "height and width", 3: "depth, height and width"}
_SIDES = {1: "an int, or a pair (before, after)",
          2: "an int, a pair (symmetric height, width) or ((top, bottom), (left, right))",
          3: "an int, 3 ints (symmetric per axis) or 3 pairs (before, after)"}


def _doc(summary, rank, args, call_args, in_shape, out_shape, extra=""):
    return summary + _SPATIAL.format(
        shape=AXES_SHAPE[rank], args=args, ndim=rank + 2, extra=extra, name="{name}",
        call_args=call_args, in_shape=in_shape, out_shape=list(out_shape))


AXES_SHAPE = {1: "(batch, steps, channels)", 2: "(batch, height, width, channels)",
              3: "(batch, depth, height, width, channels)"}

# Example shapes per rank: inputs, then the outputs of padding 1, cropping 1, size 2.
_SHAPES = {1: ((2, 5, 3), (2, 7, 3), (2, 3, 3), (2, 10, 3)),
           2: ((2, 5, 6, 3), (2, 7, 8, 3), (2, 3, 4, 3), (2, 10, 12, 3)),
           3: ((1, 4, 5, 6, 2), (1, 6, 7, 8, 2), (1, 2, 3, 4, 2), (1, 8, 10, 12, 2))}


def _padding_class(rank: int) -> type:
    name = f"ZeroPadding{rank}D"
    return public_class(_ZeroPadding, name, rank, __name__, _doc(
        f"Zeros added before and after {_AXES_TEXT[rank]} (Keras's {name}).",
        rank, f"        padding: {_SIDES[rank]}; default 1 on each side.", "1",
        _SHAPES[rank][0], _SHAPES[rank][1]))


def _cropping_class(rank: int) -> type:
    name, default = f"Cropping{rank}D", 0 if rank == 2 else 1
    return public_class(_Cropping, name, rank, __name__, _doc(
        f"Entries cut off before and after {_AXES_TEXT[rank]} (Keras's {name}).",
        rank, f"        cropping: {_SIDES[rank]}; None is Keras's default, {default} on each "
        f"side.", "1", _SHAPES[rank][0], _SHAPES[rank][2],
        extra=", or smaller than the cropping"), default_cropping=default)


def _up_sampling_class(rank: int) -> type:
    name = f"UpSampling{rank}D"
    interpolation = ("\n        interpolation: 'nearest' (repeats, the default), or a "
                     "`tf.image.resize`\n            method: 'bilinear', 'bicubic', 'lanczos3', "
                     "'lanczos5', 'area'." if rank == 2 else "")
    return public_class(_UpSampling, name, rank, __name__, _doc(
        f"Each entry repeated `size` times along {_AXES_TEXT[rank]} (Keras's {name}).", rank,
        f"        size: an int or a tuple of {rank} ints, the repeat factor per axis."
        f"{interpolation}", "2", _SHAPES[rank][0], _SHAPES[rank][3]))


ZeroPadding1D, ZeroPadding2D, ZeroPadding3D = (_padding_class(r) for r in (1, 2, 3))
Cropping1D, Cropping2D, Cropping3D = (_cropping_class(r) for r in (1, 2, 3))
UpSampling1D, UpSampling2D, UpSampling3D = (_up_sampling_class(r) for r in (1, 2, 3))

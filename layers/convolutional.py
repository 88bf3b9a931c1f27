"""Convolutions over sequences, images and volumes: `Conv1D`, `Conv2D`, `Conv3D`.

`BaseConv` holds what every convolution layer of graphfit shares, whatever its rank (1, 2 or
3 spatial axes) and kind (plain, transposed, depthwise, separable): the window arguments and
their checks, the input rank and channel checks, the output-size check, `channels_first` (by
transposing to channels-last around TensorFlow's op: its CPU kernels need channels-last),
the bias, the activation and the config. A kind adds its kernels (`add_kernels`) and its
TensorFlow op on channels-last inputs (`convolve`); a concrete layer sets only `rank`.
`conv_transpose.py` and `depthwise_conv.py` hold the other kinds.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments
from graphfit.layers.activation import activate

__all__ = ["BaseConv", "Conv", "Conv1D", "Conv2D", "Conv3D", "ImageInputSpec",
           "document_arguments", "expand_signature", "spatial_output_size"]

_AXES = {1: "steps", 2: "height, width", 3: "depth, height, width"}


def _layout(rank: int, channels_first: bool) -> str:
    """'(batch, height, width, channels)' for rank 2, channels-last."""
    axes = f"channels, {_AXES[rank]}" if channels_first else f"{_AXES[rank]}, channels"
    return f"(batch, {axes})"


@dataclasses.dataclass
class ImageInputSpec(InputSpec):
    """An `InputSpec` for the inputs of a convolution or pooling layer (rank 4 unless told),
    whose rank error says which Reshape fixes it.

    Flat inputs of 64 values to a rank-4 layer get "Add layers.Reshape((8, 8, 1)) before it";
    inputs of shape `(batch, height, width)` get "Add layers.Reshape((height, width, 1)) before
    it"; a rank-3 layer (Conv1D) fed `(batch, steps)` gets "Add layers.Reshape((steps, 1))".
    """

    ndim: int | None = 4
    channels_first: bool = False

    def check(self, layer: Layer, shape: tf.TensorShape) -> None:
        hint = self.hint
        if shape.rank is not None and shape.rank != self.ndim:
            hint = _reshape_hint(shape, self.ndim - 2, self.channels_first)
        InputSpec(ndim=self.ndim, min_ndim=self.min_ndim, axes=self.axes, hint=hint).check(
            layer, shape
        )


def _reshape_hint(shape: tf.TensorShape, rank: int, channels_first: bool) -> str:
    dims = shape.as_list()[1:]
    layout = _layout(rank, channels_first)
    generic = f"It needs inputs shaped {layout}: add layers.Reshape(({layout[8:]}) before it."
    if rank == 2 and not channels_first and len(dims) == 1 and dims[0]:
        side = math.isqrt(dims[0])
        if side * side == dims[0]:
            dims = [side, side]
    if len(dims) == rank and None not in dims:
        target = (1, *dims) if channels_first else (*dims, 1)
        return f"It needs inputs shaped {layout}. Add layers.Reshape({target}) before it."
    return generic


def spatial_output_size(size, window: int, stride: int, dilation: int, padding: str):
    """The output length of one spatial axis (None when `size` is unknown), as TensorFlow
    ('causal' pads the start so that it gives the length of 'same')."""
    if size is None:
        return None
    if padding in ("same", "causal"):
        return -(-size // stride)
    return -(-(size - (window - 1) * dilation) // stride)


def _data_format(value) -> str:
    if value is None or value in ("channels_last", "channels_first"):
        return value or "channels_last"
    raise validation.invalid("data_format", value, "'channels_last', 'channels_first' or None")


class BaseConv(Layer):
    """What every convolution layer shares; see the module docstring. Not registered.

    Subclasses set `rank` and implement `add_kernels(channels) -> output channels` (in
    `build`) and `convolve(inputs)` (channels-last inputs, without bias or activation).
    Keyword arguments ending in `_regularizer` or `_constraint` are the weight options of
    the subclass's kernels (`kernel_regularizer`, `depthwise_constraint`, ...).
    """

    rank = 2
    allows_causal = False  # padding='causal' (Conv1D only, as in Keras)
    keeps_example_axis = True
    # oneDNN's CPU convolutions beat XLA's (docs/benchmarks/performance.md)
    xla_friendly_on_cpu = False
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(self, kernel_size, strides, padding, data_format, dilation_rate, activation,
                 use_bias, *, bias_initializer="zeros", bias_regularizer=None,
                 bias_constraint=None, activity_regularizer=None, name: str | None = None,
                 dtype=None, trainable: bool = True, **weight_options):
        unknown = [k for k in weight_options if not k.endswith(("_regularizer", "_constraint"))]
        if unknown:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument "
                            f"{unknown[0]!r}")
        super().__init__(name=name, dtype=dtype, trainable=trainable,
                         activity_regularizer=activity_regularizer)
        self._weight_options = arguments.set_weight_options(
            self, **weight_options, bias_regularizer=bias_regularizer,
            bias_constraint=bias_constraint)
        rank = self.rank
        self.kernel_size = arguments.normalize_tuple(kernel_size, rank, "kernel_size")
        self.strides = arguments.normalize_tuple(strides, rank, "strides")
        self.padding = self._padding(padding)
        self.data_format = _data_format(data_format)
        self.dilation_rate = arguments.normalize_tuple(dilation_rate, rank, "dilation_rate")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(
                f"{type(self).__name__}: strides > 1 is not supported together with "
                f"dilation_rate > 1 (TensorFlow's convolution refuses it). Received: "
                f"strides={self.strides} and dilation_rate={self.dilation_rate}"
            )
        self.activation = arguments.get_activation(activation)
        self.use_bias = bool(use_bias)
        self.bias_initializer = arguments.get_initializer(bias_initializer, "bias_initializer")
        self.bias = None
        self.input_spec = self._spec()

    def _padding(self, padding) -> str:
        if isinstance(padding, str) and padding.lower() == "causal":
            if self.allows_causal:
                return "causal"
            raise ValueError(
                f"{type(self).__name__} takes padding 'valid' or 'same'; 'causal' is for "
                f"Conv1D only (as in Keras). Received: padding={padding!r}"
            )
        return arguments.padding_mode(padding)

    def _spec(self, channels: int | None = None) -> ImageInputSpec:
        first = self.data_format == "channels_first"
        axes = None if channels is None else {1 if first else -1: channels}
        return ImageInputSpec(ndim=self.rank + 2, axes=axes, channels_first=first)

    def spatial_shape(self, input_shape) -> list:
        """The sizes of the spatial axes of `input_shape` (None where unknown)."""
        dims = list(input_shape)
        return dims[2:] if self.data_format == "channels_first" else dims[1:-1]

    @property
    def tf_data_format(self) -> str:
        """TensorFlow's name of the channels-last layout of `convolve`'s inputs ('NHWC'). Given
        explicitly: an eager Conv3D op without it has no gradient in TensorFlow 2.21."""
        return ("NWC", "NHWC", "NDHWC")[self.rank - 1]

    def output_sizes(self, sizes) -> list:
        """The spatial output sizes for spatial input `sizes` (a transposed conv overrides)."""
        return [spatial_output_size(size, *window, self.padding)
                for size, window in zip(sizes, zip(self.kernel_size, self.strides,
                                                   self.dilation_rate))]

    def build(self, input_shape) -> None:
        kind, shape = type(self).__name__, tuple(tf.TensorShape(input_shape).as_list())
        self._spec().check(self, tf.TensorShape(input_shape))
        channels = shape[1] if self.data_format == "channels_first" else shape[-1]
        if channels is None:
            raise ValueError(
                f"{kind} {self.name!r} needs a known number of input channels. Received "
                f"input shape {shape} ({self.data_format})."
            )
        if any(out is not None and out <= 0 for out in self.output_sizes(
                self.spatial_shape(shape))):
            raise ValueError(
                f"{kind} {self.name!r}: inputs of shape {shape} are too small for "
                f"kernel_size={self.kernel_size} with dilation_rate={self.dilation_rate} and "
                f"padding='valid'. Use padding='same', a smaller kernel, or larger inputs."
            )
        outputs = self.add_kernels(int(channels))
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", (outputs,), initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint)
        self.input_spec = self._spec(int(channels))

    def add_kernels(self, channels: int) -> int:
        """Creates the kernel weights for inputs of `channels` channels; returns the number of
        output channels (the size of the bias)."""
        raise NotImplementedError

    def convolve(self, inputs):
        """The convolution of channels-last `inputs`, without bias and activation."""
        raise NotImplementedError

    def call(self, inputs, training: bool = False):
        first = self.data_format == "channels_first"
        if first:
            inputs = tf.transpose(inputs, (0, *range(2, self.rank + 2), 1))
        outputs = self.convolve(inputs)
        if self.bias is not None:
            outputs = outputs + self.compute_value(self.bias)
        if first:
            outputs = tf.transpose(outputs, (0, self.rank + 1, *range(1, self.rank + 1)))
        return activate(self, self.activation, outputs)

    def window_config(self) -> dict[str, Any]:
        """The config entries every convolution has (a subclass adds its own)."""
        return {
            **self._base_config(),
            "kernel_size": self.kernel_size,
            "strides": self.strides,
            "padding": self.padding,
            "data_format": self.data_format,
            "dilation_rate": self.dilation_rate,
            "activation": keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            **arguments.weight_options_config(self, self._weight_options),
        }


class Conv(BaseConv):
    """A convolution of `rank` spatial axes, `activation(conv(inputs, kernel) + bias)`; the
    base of `Conv1D`, `Conv2D` and `Conv3D` (see `Conv2D` for the arguments). Not registered.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Conv1D(4, 3, groups=2)(tf.ones((2, 10, 6))).shape
        TensorShape([2, 8, 4])
    """

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid",
                 data_format=None, dilation_rate=1, groups: int = 1, activation=None,
                 use_bias: bool = True, kernel_initializer="glorot_uniform",
                 kernel_regularizer=None, kernel_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation,
                         use_bias, kernel_regularizer=kernel_regularizer,
                         kernel_constraint=kernel_constraint, **kwargs)
        self.filters = validation.positive_int("filters", filters)
        self.groups = validation.positive_int("groups", groups)
        if self.filters % self.groups:
            raise ValueError(
                f"{type(self).__name__}: filters must be divisible by groups (each group of "
                f"input channels makes filters / groups outputs). Received: "
                f"filters={self.filters}, groups={self.groups}"
            )
        self.kernel_initializer = arguments.get_initializer(
            kernel_initializer, "kernel_initializer")

    def add_kernels(self, channels: int) -> int:
        if channels % self.groups:
            raise ValueError(
                f"{type(self).__name__} {self.name!r}: its inputs have {channels} channels, "
                f"which groups={self.groups} does not divide. Use a groups value that divides "
                f"the input channels."
            )
        self.kernel = self.add_weight(
            "kernel", (*self.kernel_size, channels // self.groups, self.filters),
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        return self.filters

    def convolve(self, inputs):
        padding = self.padding
        if padding == "causal":  # left-pad the steps, then a valid convolution (Keras)
            start = self.dilation_rate[0] * (self.kernel_size[0] - 1)
            inputs = tf.pad(inputs, [[0, 0], [start, 0], [0, 0]])
            padding = "valid"
        kernel = self.compute_value(self.kernel)
        if self.groups > 1 and self.rank == 3:
            # TensorFlow's CPU Conv3D has no grouped kernel (Conv1D/2D's have): one
            # convolution per group, concatenated (the same sums)
            return tf.concat([self._convolution(x, k, padding) for x, k in zip(
                tf.split(inputs, self.groups, -1), tf.split(kernel, self.groups, -1))], -1)
        return self._convolution(inputs, kernel, padding)

    def _convolution(self, inputs, kernel, padding: str):
        return tf.nn.convolution(inputs, kernel, strides=self.strides, padding=padding.upper(),
                                 data_format=self.tf_data_format, dilations=self.dilation_rate)

    def get_config(self) -> dict[str, Any]:
        return {**self.window_config(), "filters": self.filters, "groups": self.groups,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}


_CONV_ARGS = """
    Args:
        filters: the number of output channels; a positive integer divisible by `groups`.
        kernel_size: an int or a tuple of {rank} ints, the window.
        strides: an int or a tuple of {rank} ints, the step of the window.
        padding: 'valid' (no padding) or 'same' (output size = ceil(size / stride)){causal}.
        data_format: 'channels_last' (None: inputs `{last}`) or 'channels_first' (inputs
            `{first}`, computed by transposing to channels-last and back: TensorFlow's CPU
            kernels need channels-last).
        dilation_rate: an int or a tuple of {rank} ints; strides > 1 together with
            dilation_rate > 1 is refused (as in Keras).
        groups: split the input channels into `groups` groups, each convolved with its own
            filters / groups filters (Keras's grouped convolution).
        activation: a Keras activation name or callable; None is the identity.
        use_bias: whether to add the `bias` vector.
        kernel_initializer, bias_initializer: initializers of `kernel` and `bias`.
        kernel_regularizer, bias_regularizer, activity_regularizer: Keras regularizers of
            `kernel`, `bias` and the outputs (as `Dense`).
        kernel_constraint, bias_constraint: Keras constraints applied after each update.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: False freezes the layer.

    Arguments after `use_bias` go by keyword (as everyone passes them to Keras).

    Raises:
        ValueError: for invalid arguments; on call, for inputs of another rank than {ndim}
            (the message names the Reshape that fixes it), another channel count than at
            build time, channels that `groups` does not divide, or inputs too small for the
            window with padding='valid'.
"""


@register_layer
class Conv1D(Conv):
    """1-D convolution over sequences: `outputs = activation(conv1d(inputs, kernel) + bias)`.

    Inputs are `(batch, steps, channels)`; outputs `(batch, new_steps, filters)`. Weights, in
    Keras order: `kernel` of shape `(kernel_size, channels // groups, filters)`, then `bias`
    of shape `(filters,)`. padding='causal' pads the start of the sequence so that output
    step t sees input steps <= t only (Keras's causal convolution).
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> conv = layers.Conv1D(8, 3, padding="causal", dilation_rate=2, activation="relu")
        >>> conv(tf.ones((2, 20, 4))).shape
        TensorShape([2, 20, 8])
    """

    rank = 1
    allows_causal = True


@register_layer
class Conv2D(Conv):
    """2-D convolution: `outputs = activation(conv2d(inputs, kernel) + bias)`.

    Images are `(batch, height, width, channels)`; outputs are
    `(batch, new_height, new_width, filters)`. Weights, in Keras order: `kernel` of shape
    `(kernel_height, kernel_width, channels // groups, filters)`, then `bias` of shape
    `(filters,)`. XLA on CPU makes small convolution nets slower, so `xla_friendly_on_cpu`
    is False.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> conv = layers.Conv2D(8, 3, padding="same", activation="relu")
        >>> conv(tf.ones((2, 16, 16, 3))).shape
        TensorShape([2, 16, 16, 8])
    """

    rank = 2


@register_layer
class Conv3D(Conv):
    """3-D convolution over volumes: `outputs = activation(conv3d(inputs, kernel) + bias)`.

    Inputs are `(batch, depth, height, width, channels)`; outputs
    `(batch, new_depth, new_height, new_width, filters)`. Weights, in Keras order: `kernel` of
    shape `(*kernel_size, channels // groups, filters)`, then `bias` of shape `(filters,)`.
    {args}
    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.Conv3D(4, 3, strides=2, padding="same")(tf.ones((2, 8, 8, 8, 1))).shape
        TensorShape([2, 4, 4, 4, 4])
    """

    rank = 3


def expand_signature(cls, exclude: tuple[str, ...] = ()) -> None:
    """Gives `cls.__init__` the signature of every argument it takes, those it passes on to
    the `__init__`s above it in **kwargs included (keyword-only), `exclude` left out: what
    `help()` shows and recipes check arguments against."""
    names, merged = set(exclude), []
    for owner in cls.__mro__:
        init = vars(owner).get("__init__")
        if init is None:
            continue
        parameters = list(inspect.signature(init).parameters.values())[1:]
        for parameter in parameters:
            if parameter.kind is parameter.VAR_KEYWORD or parameter.name in names:
                continue
            names.add(parameter.name)
            if owner is not cls:
                parameter = parameter.replace(kind=parameter.KEYWORD_ONLY)
            merged.append(parameter)
        if owner is BaseConv or not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    self_parameter = next(iter(inspect.signature(cls.__init__).parameters.values()))
    cls.__init__.__signature__ = inspect.Signature([self_parameter, *merged])


def document_arguments(cls, template: str, **extra) -> None:
    """Fills the `{args}` of `cls`'s docstring from `template` (its `{rank}`, `{ndim}`,
    `{last}`, `{first}`, `{causal}` and `extra`), for the rank of `cls`."""
    rank = cls.rank
    cls.__doc__ = cls.__doc__.replace("{args}", template.format(
        rank=rank, ndim=rank + 2, last=_layout(rank, False), first=_layout(rank, True),
        causal=", or 'causal' (Conv1D)" if cls.allows_causal else "", **extra))


expand_signature(Conv)
for _cls in (Conv1D, Conv2D, Conv3D):
    document_arguments(_cls, _CONV_ARGS)

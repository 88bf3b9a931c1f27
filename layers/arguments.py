"""Shared constructor-argument checks of the layer library.

Every layer validates its arguments in `__init__` and raises `ValueError` naming the argument
and the value received, Keras style ("units must be a positive integer. Received: units=-1").
The layer-specific checks used by several layers live here so that their wording is the same
everywhere; the general ones (`positive_int`, ...) are in `graphfit.core.validation`.
"""

from __future__ import annotations

from typing import Callable

import keras

from graphfit.core.layer_losses import get_constraint, get_regularizer, serialize
from graphfit.core.validation import invalid, is_integer

__all__ = [
    "scale_and_offset",
    "get_initializer",
    "get_activation",
    "normalize_tuple",
    "channels_last",
    "padding_mode",
    "set_weight_options",
    "weight_options_config",
]


def scale_and_offset(layer, shape):
    """The `gamma` and `beta` weights of a normalization layer (None where it has
    `scale=False` or `center=False`), created in that order as Keras does."""
    gamma = (layer.add_weight("gamma", shape, initializer=layer.gamma_initializer,
                              regularizer=getattr(layer, "gamma_regularizer", None),
                              constraint=getattr(layer, "gamma_constraint", None))
             if layer.scale else None)
    beta = (layer.add_weight("beta", shape, initializer=layer.beta_initializer,
                             regularizer=getattr(layer, "beta_regularizer", None),
                             constraint=getattr(layer, "beta_constraint", None))
            if layer.center else None)
    return gamma, beta


def get_initializer(value, argument: str):
    """`keras.initializers.get(value)`, with an error that names the argument."""
    try:
        initializer = keras.initializers.get(value)
    except (ValueError, TypeError) as error:
        initializer, reason = None, f" ({error})"
    else:
        reason = ""
    if initializer is None or not callable(initializer):
        raise ValueError(
            f"{argument} must be a Keras initializer, its name (e.g. 'glorot_uniform', "
            f"'zeros') or its config dict{reason}. Received: {argument}={value!r}"
        )
    return initializer


def get_activation(value, argument: str = "activation") -> Callable:
    """`keras.activations.get(value)` (None is 'linear'), with an error naming the argument."""
    try:
        activation = keras.activations.get(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"{argument} must be the name of a Keras activation (e.g. 'relu', 'tanh', "
            f"'softmax'), a callable, or None ({error}). Received: {argument}={value!r}"
        ) from None
    return activation


def normalize_tuple(value, n: int, argument: str) -> tuple[int, ...]:
    """An int or a sequence of `n` positive ints as an `n`-tuple (Keras `standardize_tuple`)."""
    if is_integer(value):
        values = (value,) * n
    else:
        try:
            values = tuple(value)
        except TypeError:
            values = ()
    if len(values) != n or any(not is_integer(v) or v <= 0 for v in values):
        raise ValueError(
            f"{argument} must be a positive integer or a tuple of {n} positive integers. "
            f"Received: {argument}={value!r}"
        )
    return tuple(int(v) for v in values)


def channels_last(data_format, layer_name: str) -> str:
    """Accepts None or 'channels_last'; explains why 'channels_first' is refused."""
    if data_format is None or data_format == "channels_last":
        return "channels_last"
    if data_format == "channels_first":
        raise ValueError(
            f"{layer_name} supports only data_format='channels_last' (images shaped "
            f"(batch, height, width, channels)), because TensorFlow's CPU kernels for "
            f"convolution and pooling need NHWC. Transpose your images with "
            f"tf.transpose(x, (0, 2, 3, 1)) and pass data_format='channels_last' or None. "
            f"Received: data_format='channels_first'"
        )
    raise ValueError(
        f"data_format must be 'channels_last' or None. Received: data_format={data_format!r}"
    )


def padding_mode(padding) -> str:
    """'valid' or 'same' (any case), lower-cased as Keras stores it."""
    mode = padding.lower() if isinstance(padding, str) else None
    if mode not in ("valid", "same"):
        raise invalid("padding", padding, "'valid' or 'same'")
    return mode



def set_weight_options(layer, **options) -> tuple[str, ...]:
    """Sets each `<weight>_regularizer` and `<weight>_constraint` argument on `layer` as
    Keras's getters resolve it (an object, a name, a config dict, a callable or None), with an
    error naming the argument; returns their names, for `weight_options_config`."""
    for argument, value in options.items():
        getter = get_regularizer if argument.endswith("_regularizer") else get_constraint
        setattr(layer, argument, getter(value, argument))
    return tuple(options)


def weight_options_config(layer, names) -> dict:
    """The serialized regularizers and constraints `names` of `layer`, for `get_config`."""
    return {**{name: serialize(getattr(layer, name)) for name in names},
            "activity_regularizer": serialize(layer.activity_regularizer)}

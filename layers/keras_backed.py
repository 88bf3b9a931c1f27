"""`KerasBacked`: a graphfit layer class that IS a Keras layer class, run by the adapter.

`class LSTM(KerasBacked): keras_class = keras.layers.LSTM` gives a registered graphfit layer
that takes Keras's own arguments (its constructor signature is Keras's, so recipes check
`{type: LSTM, units: 8}` argument by argument), builds the Keras layer and runs it through
`KerasLayer` (weights in graphfit's collections, Keras's state changes as update hooks). Its
config is flat, Keras's arguments next to graphfit's name/dtype/trainable, so a saved model
or a printed recipe reads like the Keras layer's.
"""

from __future__ import annotations

import inspect
from typing import Any

import keras

from graphfit.core.layer import Layer
from graphfit.core.naming import snake_case, unique_name
from graphfit.layers.keras_layer import KerasLayer

__all__ = ["KerasBacked"]

_PLAIN = (type(None), bool, int, float, str)
_OWN = ("name", "dtype", "trainable")


def _plain(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return isinstance(value, _PLAIN)


class KerasBacked(KerasLayer):
    """Base of graphfit layers that are a Keras layer class run through `KerasLayer`.

    Subclasses set `keras_class` (and may override `graphfit_defaults`, arguments whose
    default graphfit changes, and `_keras_arguments`). The constructor takes Keras's arguments
    (positional ones too) plus graphfit's `name`, `dtype` and `trainable`.

    Example:

        >>> import keras
        >>> class Softmax(KerasBacked):
        ...     keras_class = keras.layers.Softmax
        >>> layer = Softmax(axis=-1, name="probabilities")
        >>> layer.get_config()["axis"], type(layer.keras_layer).__name__
        (-1, 'Softmax')
    """

    keras_class: type | None = None
    graphfit_defaults: dict[str, Any] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.keras_class is not None:
            cls.__init__ = _constructor(cls)

    def __init__(self, *args, name: str | None = None, dtype=None, trainable: bool = True,
                 **arguments):
        label = type(self).__name__
        try:
            bound = inspect.signature(type(self).__init__).bind(self, *args, name=name,
                                                                 dtype=dtype,
                                                                 trainable=trainable,
                                                                 **arguments)
        except TypeError as error:
            raise ValueError(f"{label}: {error}. Its arguments are Keras's "
                             f"keras.layers.{self.keras_class.__name__}'s: "
                             f"{', '.join(_keras_parameters(self.keras_class))}") from None
        given = {k: v for k, v in bound.arguments.items() if k not in ("self", *_OWN)}
        self._given = given
        name = name or unique_name(snake_case(label))
        try:
            keras_layer = self.keras_class(**self._keras_arguments(dict(given)), name=name,
                                           trainable=trainable)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{label}: {error}") from None
        super().__init__(keras_layer, name=name, dtype=dtype, trainable=trainable)

    def _keras_arguments(self, given: dict) -> dict:
        """The arguments the Keras constructor gets (default: those given)."""
        return given

    def get_config(self) -> dict[str, Any]:
        config = {}
        for key, value in self._given.items():
            config[key] = value if _plain(value) else keras.saving.serialize_keras_object(value)
        return {**self._base_config(), **config}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "KerasBacked":
        return Layer.from_config.__func__(cls, config)


def _keras_parameters(keras_class: type) -> dict[str, inspect.Parameter]:
    parameters = list(inspect.signature(keras_class.__init__).parameters.values())[1:]
    return {p.name: p for p in parameters
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in _OWN}


def _constructor(cls: type):
    """`cls.__init__` with the signature Keras's constructor has (graphfit's defaults where
    `graphfit_defaults` sets them), then name, dtype and trainable."""
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for key, parameter in _keras_parameters(cls.keras_class).items():
        if key in cls.graphfit_defaults:
            parameter = parameter.replace(default=cls.graphfit_defaults[key])
        parameters.append(parameter.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD))
    base = inspect.signature(Layer.__init__).parameters
    parameters += [base[key].replace(kind=inspect.Parameter.KEYWORD_ONLY) for key in _OWN]

    def __init__(self, *args, **kwargs):
        KerasBacked.__init__(self, *args, **kwargs)

    __init__.__signature__ = inspect.Signature(parameters)
    __init__.__doc__ = f"Takes keras.layers.{cls.keras_class.__name__}'s arguments."
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__

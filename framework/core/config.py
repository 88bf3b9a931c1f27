"""The default `Layer.get_config`: the plain-data arguments the constructor received."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["capture", "plain_arguments"]

_PLAIN_TYPES = (type(None), bool, int, float, str)
_BASE_ARGUMENTS = ("name", "dtype", "trainable")


def capture(cls: type, args: tuple, kwargs: dict) -> inspect.BoundArguments | None:
    """The constructor's arguments bound to its signature, defaults filled in."""
    try:
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
    except TypeError:
        return None  # __init__ itself will raise the real error
    bound.apply_defaults()
    return bound


def _is_plain(value) -> bool:
    if isinstance(value, _PLAIN_TYPES):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def plain_arguments(layer) -> dict[str, Any]:
    """The captured arguments other than name, dtype and trainable.

    Raises:
        NotImplementedError: when an argument is not plain data (numbers, strings, lists,
            dicts), saying that the layer must override get_config.
    """
    bound = layer.constructor_arguments
    if bound is None:
        return {}
    config: dict[str, Any] = {}
    for key, value in list(bound.arguments.items())[1:]:
        kind = bound.signature.parameters[key].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            if value:
                raise NotImplementedError(
                    f"{type(layer).__name__} takes *{key}; override get_config() to describe "
                    f"its constructor arguments."
                )
            continue
        items = value.items() if kind is inspect.Parameter.VAR_KEYWORD else [(key, value)]
        for item_key, item in items:
            if item_key in _BASE_ARGUMENTS:
                continue
            if not _is_plain(item):
                raise NotImplementedError(
                    f"{type(layer).__name__} received {item_key}={item!r}, which is not plain "
                    f"data; override get_config() to return a serializable form."
                )
            config[item_key] = item
    return config

"""`compile`'s arguments as plain data, and back: the compile part of a `.graphfit` file.

The optimizer is written as `{"type": registered name, **get_config()}` (its current learning
rate included) and read back through the optimizer registry; losses and metrics given as names
stay names, and Keras objects and functions are written with Keras's own serializer and read
back with `keras.saving.deserialize_keras_object(..., safe_mode=...)`, which imports no code:
a function of your own must be registered with `keras.saving.register_keras_serializable()`.
Everything is read back once while saving, so a file that could not be loaded is never written.

Example:

    >>> import graphfit as gf
    >>> from graphfit import layers
    >>> model = gf.Sequential([layers.Dense(1)], input_shape=(2,))
    >>> model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    >>> config = compile_config(model)
    >>> config["optimizer"]["type"], config["loss"], config["metrics"]
    ('SGD', 'mse', ['mae'])
"""

from __future__ import annotations

import json
from typing import Any

import keras

from graphfit.core.registry import OPTIMIZERS

__all__ = ["compile_config", "compile_arguments"]

_KERAS_KEY = "keras_object"  # marks a serialized Keras object among plain names and numbers
_PLAIN = (type(None), bool, int, float, str)


def _encode(value, argument: str):
    """Names and numbers as they are; Keras losses, metrics and functions by Keras."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):
        return [_encode(item, argument) for item in value]
    if isinstance(value, dict):
        return {str(key): _encode(item, argument) for key, item in value.items()}
    if getattr(value, "__name__", None) == "<lambda>":
        raise ValueError(
            f"compile({argument}=...) holds a lambda, which a .graphfit file cannot hold "
            f"(it would be code). Use a named function registered with "
            f"@keras.saving.register_keras_serializable(), a Keras name or a Keras object.")
    try:
        return {_KERAS_KEY: keras.saving.serialize_keras_object(value)}
    except Exception as error:  # Keras raises many kinds for what it cannot serialize
        raise ValueError(
            f"compile({argument}=...) holds {value!r}, which Keras cannot serialize: {error}"
        ) from None


def _decode(value, argument: str, safe_mode: bool):
    if isinstance(value, list):
        return [_decode(item, argument, safe_mode) for item in value]
    if isinstance(value, dict) and set(value) == {_KERAS_KEY}:
        config = value[_KERAS_KEY]
        try:
            return keras.saving.deserialize_keras_object(config, safe_mode=safe_mode)
        except Exception as error:
            name = ((config.get("registered_name") or config.get("class_name"))
                    if isinstance(config, dict) else config)
            raise ValueError(
                f"compile({argument}=...) names {name!r}, which Keras cannot rebuild here: "
                f"{error} A function or class of your own must be registered with "
                f"@keras.saving.register_keras_serializable() (its module imported) before "
                f"the model is loaded.") from None
    if isinstance(value, dict):
        return {key: _decode(item, argument, safe_mode) for key, item in value.items()}
    return value


def _optimizer_config(optimizer) -> dict | None:
    if optimizer is None:
        return None
    name = type(optimizer).__name__
    if name not in OPTIMIZERS or OPTIMIZERS.get(name) is not type(optimizer):
        raise ValueError(
            f"The optimizer {name} is not registered, so a .graphfit file cannot name it. "
            f"Register its class with graphfit.core.registry.OPTIMIZERS.register.")
    return {"type": name, **optimizer.get_config()}


def compile_config(model) -> dict[str, Any] | None:
    """What `model.compile` received, as JSON-ready data (None before `compile`).

    Raises:
        ValueError: for an argument a file cannot hold (a lambda, an unregistered optimizer
            class or function), naming it.
    """
    state = model.compile_state
    if state is None:
        return None
    arguments = dict(state.arguments)
    config = {"optimizer": _optimizer_config(state.optimizer)}
    for key, value in arguments.items():
        config[key] = _encode(value, key)
    config = json.loads(json.dumps(config))  # the file's form: what a load will read
    compile_arguments(config, safe_mode=True)  # refuse now what could not be loaded
    return config


def compile_arguments(config: dict[str, Any], safe_mode: bool = True) -> dict[str, Any]:
    """The keyword arguments of `model.compile` that `config` (from `compile_config`) holds.

    Args:
        config: the compile config.
        safe_mode: passed on to Keras's deserializer (True: no Python lambdas).

    Raises:
        ValueError: for a class or function that cannot be found without importing code.
    """
    config = dict(config)
    optimizer = config.pop("optimizer", None)
    arguments = {key: _decode(value, key, safe_mode) for key, value in config.items()}
    from graphfit import optimizers  # the optimizers package imports the training engine

    arguments["optimizer"] = None if optimizer is None else optimizers.get(optimizer)
    return arguments

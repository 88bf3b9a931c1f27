"""What to use instead of a Keras object passed where graphfit needs one of its own.

graphfit follows Keras's names, so a ported script often hands graphfit a `keras.Input`, a
Keras layer, callback, optimizer or model. Each is refused with a sentence that names the
graphfit counterpart, looked up in graphfit's registries by the Keras class name.
"""

from __future__ import annotations

import keras

from graphfit.core.registry import CALLBACKS, LAYERS, OPTIMIZERS

__all__ = ["is_keras_object", "keras_object_hint"]


def is_keras_object(value) -> bool:
    """Whether `value` is a Keras tensor, layer, model, callback or optimizer."""
    return isinstance(value, (keras.KerasTensor, keras.Layer, keras.callbacks.Callback,
                              keras.optimizers.Optimizer))


def _counterpart(kind: str, registry, name: str, otherwise: str) -> str:
    if name in registry:
        return f"use graphfit.{kind}.{name}(...) with the same arguments"
    return otherwise


def keras_object_hint(value, what: str) -> str:
    """`what` (e.g. "Sequential received") followed by the Keras object and its graphfit
    counterpart; a plain description for any other object."""
    kind = type(value)
    name = kind.__name__
    if isinstance(value, keras.KerasTensor):
        return (f"{what} a Keras tensor ({value!r}), made by keras.Input or a Keras layer. "
                f"graphfit models start from gf.Input(shape, dtype=..., name=...) (import "
                f"graphfit as gf), then graphfit layers and gf.Model(inputs, outputs); a "
                f"Sequential takes gf.Input(...) or input_shape=(...).")
    if isinstance(value, keras.Model):
        return (f"{what} a Keras model ({name} {value.name!r}). Build it from graphfit layers "
                f"(gf.Model(inputs, outputs) with gf.Input, or gf.Sequential), or wrap the "
                f"Keras model as one layer: graphfit.layers.KerasLayer(model).")
    if isinstance(value, keras.Layer):
        wrap = f"wrap it: graphfit.layers.KerasLayer(keras.layers.{name}(...))"
        instead = _counterpart("layers", LAYERS, name, wrap)
        if name in LAYERS:
            instead += f", or {wrap}"
        return f"{what} a Keras layer ({name} {value.name!r}); {instead}."
    if isinstance(value, keras.callbacks.Callback):
        instead = _counterpart("callbacks", CALLBACKS, name,
                               "subclass graphfit.callbacks.Callback, which has Keras's hooks")
        return f"{what} a Keras callback ({name}); {instead}."
    if isinstance(value, keras.optimizers.Optimizer):
        instead = _counterpart("optimizers", OPTIMIZERS, name,
                               f"use one of graphfit.optimizers ({', '.join(OPTIMIZERS.names())})")
        return f"{what} a Keras optimizer ({name}); {instead}."
    return f"{what} an object of type {kind.__module__}.{kind.__qualname__}: {value!r}."

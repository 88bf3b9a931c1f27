"""`Sequential`: a model that is a plain stack of layers."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import tensorflow as tf

from graphfit.core.keras_objects import is_keras_object, keras_object_hint
from graphfit.core.layer import Layer
from graphfit.core.registry import LAYERS, register_layer
from graphfit.core.symbolic import SymbolicTensor
from graphfit.models.model import Model

__all__ = ["Sequential", "layer_to_config", "layer_from_config"]


def layer_to_config(layer: Layer) -> dict[str, Any]:
    """{'type': registered name, 'config': constructor arguments}."""
    cls = type(layer)
    name = next((n for n in LAYERS.names() if LAYERS.get(n) is cls), None)
    if name is None:
        raise ValueError(
            f"Layer class {cls.__qualname__} is not registered, so a config cannot name it. "
            f"Decorate it with @graphfit.register_layer."
        )
    return {"type": name, "config": layer.get_config()}


def layer_from_config(entry: dict[str, Any]) -> Layer:
    return LAYERS.get(entry["type"]).from_config(entry.get("config", {}))


@dataclasses.dataclass
class _InputHolder:
    """The `gf.Input` a Sequential was given first, outside TensorFlow's tracking."""

    tensor: SymbolicTensor | None = None


@register_layer
class Sequential(Model):
    """Layers applied one after the other.

    Args:
        layers: the layers, in order.
        name: the model's name.
        dtype: the dtype of every layer that does not set its own ("float64" for
            Levenberg–Marquardt and the NIST problems).
        trainable: False freezes every layer.
        input_shape: the shape of one sample, e.g. (64,), to build the model at once
            (otherwise it builds on the first data it sees).

    Example:

        >>> import graphfit as gf
        >>> from graphfit import layers
        >>> model = gf.Sequential([layers.Dense(16, activation="relu"), layers.Dense(3)],
        ...                       input_shape=(4,))
        >>> [type(layer).__name__ for layer in model.layers]
        ['Dense', 'Dense']
        >>> model.output_spec.shape.as_list()
        [None, 3]
    """

    keeps_example_axis = True

    # Each layer casts its own inputs: the container passes the data on as it came, so an
    # Embedding's float ids reach it unrounded by a 16-bit compute dtype (as in Keras).
    casts_floating_inputs = False

    def __init__(self, layers: Iterable[Layer] = (), name: str | None = None, dtype=None,
                 trainable: bool = True, input_shape=None):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self._stack: list[Layer] = []
        self._input = _InputHolder()
        for layer in layers:
            self.add(layer)
        if input_shape is not None:
            self.build((None, *input_shape))
        elif self._input.tensor is not None and self._stack:
            self.build_for(tf.TensorSpec([None, *self._input.tensor.shape[1:]],
                                         self._input.tensor.dtype))

    def add(self, layer: Layer) -> None:
        """Appends a layer (before the model is built). A `gf.Input(shape)` first, as in
        Keras, gives the input's shape and dtype: the model builds when its layers are given
        to the constructor."""
        if isinstance(layer, SymbolicTensor) and not self._stack and self._input.tensor is None:
            self._input.tensor = layer
            return
        if not isinstance(layer, Layer):
            what = f"Sequential {self.name!r} received"
            if isinstance(layer, SymbolicTensor):
                raise TypeError(f"{what} {layer!r}: a gf.Input can only come first. Wire layers "
                                f"called on symbolic tensors with gf.Model(inputs, outputs).")
            if is_keras_object(layer):
                raise TypeError(keras_object_hint(layer, what))
            raise TypeError(f"Sequential takes graphfit layers; "
                            f"{keras_object_hint(layer, 'received')}")
        if self.built:
            raise ValueError(
                f"Sequential {self.name!r} is already built; create a new Sequential to add "
                f"layers."
            )
        if any(existing.name == layer.name for existing in self._stack):
            raise ValueError(
                f"Sequential {self.name!r} already has a layer named {layer.name!r}; layer "
                f"names must be unique within a model."
            )
        if not self.trainable:
            layer.trainable = False
        self._stack.append(layer)

    @property
    def layers(self) -> list[Layer]:
        return list(self._stack)

    def call(self, inputs, training: bool = False):
        if not self._stack:
            raise ValueError(f"Sequential {self.name!r} has no layers; add some first.")
        if isinstance(inputs, dict):  # several named inputs (a batch of graphs, say)
            raise ValueError(
                f"Sequential {self.name!r} takes one input, but the data has several named "
                f"inputs ({', '.join(sorted(inputs))}). Wire them with a GraphModel (in a "
                f"recipe: model with inputs, nodes and outputs).")
        outputs = inputs
        for layer in self._stack:
            outputs = layer(outputs, training=training)
        return outputs

    def get_config(self) -> dict[str, Any]:
        config = {**self._base_config(), "layers": [layer_to_config(l) for l in self._stack]}
        if self._input.tensor is not None:  # built for a gf.Input: rebuilt for its shape
            config["input_shape"] = self._input.tensor.shape.as_list()[1:]
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Sequential":
        config = dict(config)
        layers = [layer_from_config(entry) for entry in config.pop("layers", [])]
        return cls(layers, **config)

"""`Sequential`: a model that is a plain stack of layers."""

from __future__ import annotations

from typing import Any, Iterable

from graphfit.core.layer import Layer
from graphfit.core.registry import LAYERS, register_layer
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
        for layer in layers:
            self.add(layer)
        if input_shape is not None:
            self.build((None, *input_shape))

    def add(self, layer: Layer) -> None:
        """Appends a layer (before the model is built)."""
        if not isinstance(layer, Layer):
            raise TypeError(
                f"Sequential takes graphfit layers; received {type(layer).__name__}. Wrap a Keras "
                f"layer with graphfit.layers.KerasLayer(...)."
            )
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
        return {**self._base_config(), "layers": [layer_to_config(l) for l in self._stack]}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Sequential":
        config = dict(config)
        layers = [layer_from_config(entry) for entry in config.pop("layers", [])]
        return cls(layers, **config)

"""`LayerTracking`: which layers and variables a layer holds, in Keras's collections.

A layer's sublayers are the layers in its attributes (directly, or in lists and dicts); its
variables are its own `add_weight` variables followed by its sublayers'. Freezing a layer
(`trainable = False`) freezes every layer inside it.
"""

from __future__ import annotations

import collections.abc
import itertools
from typing import Iterator

import tensorflow as tf

from graphfit.core.variables import assign_in_order, count_parameters

__all__ = ["LayerTracking"]


class LayerTracking:
    """The variable collections and sublayer traversal that `Layer` inherits.

    Expects `_trainable`, `_trainable_weights` and `_non_trainable_weights` set by
    `Layer.__init__`.
    """

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        """Freezes (False) or unfreezes (True) this layer and every layer inside it."""
        self._trainable = bool(value)
        for layer in self.direct_sublayers():
            layer.trainable = value

    @property
    def variables(self) -> list[tf.Variable]:
        """Every variable, in Keras order: own trainable, own non-trainable, then sublayers'."""
        return _dedupe(
            itertools.chain(
                self._trainable_weights,
                self._non_trainable_weights,
                *(layer.variables for layer in self.direct_sublayers()),
            )
        )

    @property
    def trainable_variables(self) -> list[tf.Variable]:
        """The variables the optimizer updates: empty when the layer is frozen."""
        if not self._trainable:
            return []
        return _dedupe(
            itertools.chain(
                self._trainable_weights,
                *(layer.trainable_variables for layer in self.direct_sublayers()),
            )
        )

    @property
    def non_trainable_variables(self) -> list[tf.Variable]:
        """Variables gradients never touch: moving statistics, and all of a frozen layer's."""
        trainable = {id(v) for v in self.trainable_variables}
        return [v for v in self.variables if id(v) not in trainable]

    # Keras's "weights" are its variables less other state (random seed state, which a
    # wrapped Keras layer keeps only in `variables`); they are what get_weights copies.
    @property
    def weights(self) -> list[tf.Variable]:
        """The weights, in the order of `variables`: own, then sublayers' `weights`."""
        return _dedupe(
            itertools.chain(
                self._trainable_weights,
                self._non_trainable_weights,
                *(layer.weights for layer in self.direct_sublayers()),
            )
        )

    @property
    def trainable_weights(self) -> list[tf.Variable]:
        return self.trainable_variables

    @property
    def non_trainable_weights(self) -> list[tf.Variable]:
        """The weights gradients never touch (moving statistics, a frozen layer's)."""
        trainable = {id(v) for v in self.trainable_variables}
        return [v for v in self.weights if id(v) not in trainable]

    def get_weights(self) -> list:
        """The values of `weights` as NumPy arrays, in order (Keras's method)."""
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights) -> None:
        """Assigns NumPy arrays to `weights`, in the order of `get_weights()`.

        Raises:
            ValueError: for another number of arrays, or an array of another shape.
        """
        assign_in_order(self.weights, weights, self.name)

    def count_params(self) -> int:
        """The number of scalars in the layer's weights (Keras's `count_params`)."""
        return count_parameters(self.weights)

    def direct_sublayers(self) -> list["LayerTracking"]:
        """Layers held in this layer's attributes (directly, or in lists and dicts)."""
        found: list[LayerTracking] = []
        seen = {id(self)}
        for key, value in vars(self).items():
            if key.startswith("_self_") or key in ("_constructor_arguments",):
                continue
            for layer in _layers_in(value):
                if id(layer) not in seen:
                    seen.add(id(layer))
                    found.append(layer)
        return found

    def flatten_layers(self, include_self: bool = True) -> Iterator["LayerTracking"]:
        """This layer and every layer inside it, depth first, each once."""
        seen: set[int] = set()
        stack = [self] if include_self else list(reversed(self.direct_sublayers()))
        while stack:
            layer = stack.pop()
            if id(layer) in seen:
                continue
            seen.add(id(layer))
            yield layer
            stack.extend(reversed(layer.direct_sublayers()))


def _layers_in(value) -> Iterator[LayerTracking]:
    if isinstance(value, LayerTracking):
        yield value
    elif isinstance(value, collections.abc.Mapping):
        for item in value.values():
            yield from _layers_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _layers_in(item)


def _dedupe(variables) -> list[tf.Variable]:
    seen: set[int] = set()
    result = []
    for v in variables:
        if id(v) not in seen:
            seen.add(id(v))
            result.append(v)
    return result

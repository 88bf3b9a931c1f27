"""Finding a model's frozen leading part, and the trainable tail that runs on its outputs.

`fit(..., cache_frozen=True)` (`graphfit.training.frozen_cache`) computes the frozen part once
and trains the tail on the stored outputs. This module decides what that part is:

- `Sequential`: the longest run of leading layers that hold no trainable variable, register
  no update hook and are deterministic in training mode. A variable-free layer that was not
  frozen and draws random numbers (a `Dropout` of the head) ends the run; a *frozen* layer
  that does (a `Dropout` inside a frozen base) turns the cache off, since skipping it would
  change training.
- `GraphModel`: every node that reads only model inputs and such nodes, under the same rules;
  the tail is a `GraphModel` whose inputs are the values it reads across the cut (the frozen
  nodes' outputs, and model inputs that trainable nodes read directly).
- other models: a subclassed `call` has no part that can be cut off; the cache is off.

A layer declares that `call(training=True)` is random with the class attribute
`stochastic_in_training = True` (graphfit's `Dropout`, and `KerasLayer`s wrapping Keras's
dropout, noise and `Random*` augmentation layers, are known without it).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf

from graphfit.core import update_hooks
from graphfit.core.autograph_scope import traced_function

__all__ = ["STOCHASTIC_ATTRIBUTE", "FrozenSplit", "frozen_outputs", "is_stochastic", "split_frozen"]

STOCHASTIC_ATTRIBUTE = "stochastic_in_training"


def is_stochastic(layer) -> bool:
    """Whether `layer` computes something random when called with `training=True`
    (`Layer.stochastic_in_training`: Dropout with a rate above 0, noise layers, a BlackBox,
    a KerasLayer wrapping Keras's dropout, noise or `Random*` augmentation layers)."""
    return bool(getattr(layer, STOCHASTIC_ATTRIBUTE, False))


@dataclasses.dataclass
class FrozenSplit:
    """A model cut into a frozen leading part and the trainable tail that reads its outputs.

    Attributes:
        frozen: the layers of the frozen part, in the order they run.
        tail: a model of the remaining layers (the same layer objects: it trains the model's
            own variables); its inputs are what `run_frozen` returns.
        run_frozen: `(x, training) -> features`: the frozen part on the model's inputs.
    """

    frozen: list
    tail: object
    run_frozen: Callable


class _Refusal(Exception):
    """The frozen part cannot be cached; the message says why, in one line."""


def split_frozen(model) -> FrozenSplit | str:
    """The frozen part of `model` and its tail, or a one-line reason why there is none.

    The model must be built (its update hooks are found by tracing a training pass).
    """
    from graphfit.models import GraphModel, Sequential  # models import the training package

    try:
        if isinstance(model, Sequential):
            return _split_sequential(model, _hooked_layers(model))
        if isinstance(model, GraphModel):
            return _split_graph(model, _hooked_layers(model))
    except _Refusal as refusal:
        return str(refusal)
    return (f"{type(model).__name__} {model.name!r} is a subclassed model: its call() has no "
            f"leading part graphfit can cut off (only Sequential and GraphModel models are "
            f"cached)")


def _hooked_layers(model) -> set[int]:
    """Ids of the layers that register update hooks in a training step."""
    return {id(hook.layer) for hook in model.update_ops}


def _qualifies(layer, hooked: set[int]) -> bool:
    """Whether `layer` can join the frozen part; raises _Refusal when it is frozen but
    random or batch-dependent in training (caching it would change training)."""
    inner = list(layer.flatten_layers())
    if layer.trainable_variables or any(id(l) in hooked for l in inner):
        return False
    frozen = any(not l.trainable for l in inner)
    for test, what in ((is_stochastic, "draws random numbers in training mode"),
                       (lambda l: bool(getattr(l, "mixes_examples", False)),
                        "mixes the examples of a batch in training mode")):
        found = [l for l in inner if test(l)]
        if found and frozen:
            raise _Refusal(
                f"the frozen part is not deterministic: layer {found[0].name!r} "
                f"({type(found[0]).__name__}) {what}, so its outputs cannot be computed once")
        if found:
            return False  # a trainable-side layer: it ends the frozen part
    return True


def _check_worth_it(frozen: list, trainable_left: bool) -> None:
    if not any(layer.variables for layer in frozen):
        raise _Refusal("nothing to cache: the model has no frozen leading part (no leading "
                       "layer with trainable=False)")
    if not trainable_left:
        raise _Refusal("every layer of the model is frozen: nothing would train on the cache")


def _split_sequential(model, hooked: set[int]) -> FrozenSplit:
    from graphfit.models import Sequential

    layers = model.layers
    frozen = []
    for layer in layers:
        if not _qualifies(layer, hooked):
            break
        frozen.append(layer)
    rest = layers[len(frozen):]
    _check_worth_it(frozen, bool(rest))
    tail = Sequential(rest, name=f"{model.name}_tail", dtype=model.dtype_policy)

    def run_frozen(x, training):
        for layer in frozen:
            x = layer(x, training=training)
        return x

    return FrozenSplit(frozen, tail, run_frozen)


def _split_graph(model, hooked: set[int]) -> FrozenSplit:
    from graphfit.models import GraphModel  # models import the training package

    known = set(model.input_names)
    frozen, rest = [], []
    for node in model.nodes:  # in running order
        if all(s in known for s in node.input_names) and _qualifies(node.layer, hooked):
            frozen.append(node)
            known.add(node.name)
        else:
            rest.append(node)
    _check_worth_it([node.layer for node in frozen], bool(rest))
    read = {s for node in rest for s in node.input_names} | set(model.output_list)
    boundary = [name for name in [*model.input_names, *(node.name for node in frozen)]
                if name in read and name in known]
    tail = GraphModel(boundary, rest, model.graph_outputs, name=f"{model.name}_tail",
                      dtype=model.dtype_policy)

    def run_frozen(x, training):
        values = dict(x)
        for node in frozen:
            sources = node.input_names
            args = values[sources[0]] if isinstance(node.inputs, str) else [
                values[s] for s in sources]
            fixed = node.training
            values[node.name] = node.layer(args, training=training if fixed is None else fixed)
        return {name: values[name] for name in boundary}

    return FrozenSplit([node.layer for node in frozen], tail, run_frozen)


def frozen_outputs(split: FrozenSplit, x, batch_size: int, training: bool):
    """The frozen part's outputs for all of `x` (tensors, the model's input structure),
    computed batch by batch; update hooks (frozen layers register none) are discarded."""

    def forward(batch):
        with update_hooks.collect_updates():
            return split.run_frozen(batch, training)

    traced = traced_function(forward, reduce_retracing=True)
    total = int(tf.shape(tf.nest.flatten(x)[0])[0])
    parts = [traced(tf.nest.map_structure(lambda t, s=start: t[s:s + batch_size], x))
             for start in range(0, total, batch_size)]
    return tf.nest.map_structure(lambda *p: tf.concat(p, axis=0), *parts)

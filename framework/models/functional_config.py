"""A functional model's config in Keras's layout, and the model rebuilt from it.

    {"name": ..., "trainable": ...,
     "layers": [{"type": "Dense", "config": {...}, "name": "dense",
                 "inbound_nodes": [{"args": [<tensor>], "kwargs": {}}]}, ...],
     "input_layers": [["input_layer", 0, 0]], "output_layers": [["dense", 0, 0]]}

A tensor in `args` is {"class_name": "__keras_tensor__", "config": {"keras_history":
[layer name, node index, tensor index]}} (a list of them for a layer called on a list), the
node index counting only the nodes inside this model, as Keras's does. Layers are named by
their registered type (`graphfit.register_layer`), as in `GraphModel` and `Sequential`
configs; `input_layers` and `output_layers` keep the form the model was given them in (one
reference, a list, or a dict).
"""

from __future__ import annotations

from typing import Any

from graphfit.core.registry import LAYERS
from graphfit.core.symbolic import SymbolicTensor, call_nodes
from graphfit.models.input_layer import InputLayer
from graphfit.models.sequential import layer_from_config, layer_to_config

__all__ = ["to_config", "tensors_from_config"]

_TENSOR = "__keras_tensor__"


def to_config(model, nodes: list, input_layers: list) -> dict[str, Any]:
    """The config of a functional model that runs `nodes` (CallNodes, in running order) from
    the `input_layers`."""
    index: dict[int, int] = {}  # id(CallNode) -> its index among the model's calls of its layer
    per_layer: dict[int, list] = {}
    for node in nodes:
        calls = per_layer.setdefault(id(node.layer), [])
        index[id(node)] = len(calls)
        calls.append(node)
    inputs = {id(tensor): layer for tensor, layer in zip(model.inputs, input_layers)}

    def reference(tensor: SymbolicTensor) -> list:
        if id(tensor) in inputs:
            return [inputs[id(tensor)].name, 0, 0]
        layer, node_index, tensor_index = tensor.history
        return [layer.name, index[id(call_nodes(layer)[node_index])], tensor_index]

    def argument(value):
        if isinstance(value, SymbolicTensor):
            return {"class_name": _TENSOR, "config": {"keras_history": reference(value)}}
        return [argument(item) for item in value]

    layers = []
    for layer in model.layers:
        inbound = [{"args": [argument(node.arguments)],
                    "kwargs": {} if node.training is None else {"training": node.training}}
                   for node in per_layer.get(id(layer), [])]
        layers.append({**_layer_entry(layer), "name": layer.name, "inbound_nodes": inbound})
    return {"name": model.name, "trainable": model.trainable, "layers": layers,
            "input_layers": _map(model.input, reference),
            "output_layers": _map(model.output, reference)}


def _layer_entry(layer) -> dict[str, Any]:
    """{"type", "config"}: the registered name, or (as Keras's `class_name`) the class name of
    an unregistered layer, which `from_config` then finds in its `custom_objects`."""
    if not any(LAYERS.get(name) is type(layer) for name in LAYERS.names()):
        return {"type": type(layer).__name__, "config": layer.get_config()}
    return layer_to_config(layer)


def _layer_from_entry(entry: dict[str, Any], custom_objects: dict | None):
    custom = (custom_objects or {}).get(entry["type"])
    if custom is not None:
        return custom.from_config(entry.get("config", {}))
    return layer_from_config(entry)


def _map(structure, function):
    if isinstance(structure, dict):
        return {key: function(value) for key, value in structure.items()}
    if isinstance(structure, (list, tuple)):
        return [function(value) for value in structure]
    return function(structure)


def _is_reference(value) -> bool:
    return (isinstance(value, list) and len(value) == 3 and isinstance(value[0], str)
            and all(isinstance(v, int) for v in value[1:]))


def tensors_from_config(config: dict[str, Any], custom_objects: dict | None = None):
    """(inputs, outputs): the symbolic tensors of the model a config describes, made by
    creating its layers (registered ones by name, others from `custom_objects`, {class
    name: class}) and calling them in an order that has each node's inputs ready.

    Raises:
        ValueError: for a config whose nodes read a layer or node it does not have, or
            form a loop.
    """
    layers, pending = {}, []
    dtype = config.get("dtype")  # the policy of every layer without one of its own
    for entry in config["layers"]:
        if dtype is not None and entry["type"] != "InputLayer" and "dtype" not in entry.get(
                "config", {}):
            entry = {**entry, "config": {**entry.get("config", {}), "dtype": dtype}}
        layer = _layer_from_entry(entry, custom_objects)
        layers[entry.get("name", layer.name)] = layer
        pending += [(layer, k, node) for k, node in enumerate(entry.get("inbound_nodes", []))]
    # An input layer makes its tensor when it is created.
    made: dict[tuple[str, int], SymbolicTensor] = {
        (name, 0): layer.output for name, layer in layers.items() if isinstance(layer, InputLayer)}

    def tensor(reference):
        return made.get((reference[0], reference[1]))

    def arguments(value):
        if isinstance(value, dict) and value.get("class_name") == _TENSOR:
            return tensor(value["config"]["keras_history"])
        return [arguments(item) for item in value]

    while pending:
        progress = []
        for item in pending:
            layer, k, node = item
            args = arguments(node["args"][0])
            ready = all(t is not None for t in (args if isinstance(args, list) else [args]))
            if ready and k == sum(1 for key in made if key[0] == _name_of(layers, layer)):
                made[(_name_of(layers, layer), k)] = layer(args, **node.get("kwargs", {}))
                progress.append(item)
        if not progress:
            layer, k, node = pending[0]
            raise ValueError(
                f"Invalid functional model config: node {k} of layer "
                f"{_name_of(layers, layer)!r} reads tensors that no layer of the config "
                f"makes, or the nodes form a loop ({node['args']}). Its layers: {list(layers)}."
            )
        done = {id(item) for item in progress}
        pending = [item for item in pending if id(item) not in done]

    def resolve(structure):
        if _is_reference(structure):
            found = made.get((structure[0], structure[1]))
            if found is None:
                raise ValueError(f"Invalid functional model config: it has no layer output "
                                 f"{structure}. Its layers: {list(layers)}.")
            return found
        if isinstance(structure, dict):
            return {key: resolve(value) for key, value in structure.items()}
        return [resolve(value) for value in structure]

    return resolve(config["input_layers"]), resolve(config["output_layers"])


def _name_of(layers: dict, layer) -> str:
    return next(name for name, candidate in layers.items() if candidate is layer)

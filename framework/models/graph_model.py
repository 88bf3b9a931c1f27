"""`GraphModel`: a declarative graph of named nodes, for branches and several inputs or outputs.

Each node is a layer and the names of the inputs or nodes it reads. The graph is checked when
it is created (unknown names with a "did you mean", cycles, duplicate names, unused nodes) and
evaluated in topological order. Recipes describe models this way.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.core.registry import did_you_mean, register_layer
from graphfit.models.model import Model
from graphfit.models.sequential import layer_from_config, layer_to_config

__all__ = ["GraphModel", "Node"]


@dataclasses.dataclass
class Node:
    """One node of a `GraphModel`: a layer applied to named inputs or nodes.

    Args:
        layer: the layer; its name is the node's name.
        inputs: the name it reads, or a list of names (the layer then receives a list).
        training: True or False fixes the flag the layer is called with (Keras's
            `layer(x, training=False)` in a functional model); None passes on the model's.
        node_name: the node's name when it is not the layer's: a layer called by several
            nodes (a shared layer) has one name per node.
    """

    layer: Layer
    inputs: str | Sequence[str]
    training: bool | None = None
    node_name: str | None = None

    @property
    def name(self) -> str:
        return self.node_name or self.layer.name

    @property
    def input_names(self) -> list[str]:
        return [self.inputs] if isinstance(self.inputs, str) else list(self.inputs)


@register_layer
class GraphModel(Model):
    """A model from named inputs, nodes and outputs.

    Args:
        inputs: the input names, or a dict {name: shape of one sample} to build at once.
        nodes: `Node`s, in any order.
        outputs: the node (or input) name of the output, or a list of names; with several
            outputs the model returns a dict {name: tensor}. A dict {output name: node name}
            names the outputs otherwise than their nodes.
        name, dtype, trainable: as for `Model`.

    Example:

        >>> import graphfit as gf
        >>> from graphfit import layers
        >>> model = gf.GraphModel(
        ...     inputs={"pixels": (64,)},
        ...     nodes=[gf.Node(layers.Dense(32, activation="relu", name="trunk"), "pixels"),
        ...            gf.Node(layers.Dense(10, name="digit"), "trunk"),
        ...            gf.Node(layers.Dense(1, name="is_even"), "trunk")],
        ...     outputs=["digit", "is_even"])
        >>> sorted(model.output_spec)
        ['digit', 'is_even']
    """

    keeps_example_axis = True

    # Each layer casts its own inputs: the container passes the data on as it came, so an
    # Embedding's float ids reach it unrounded by a 16-bit compute dtype (as in Keras).
    casts_floating_inputs = False

    def __init__(self, inputs, nodes: Sequence[Node], outputs, name: str | None = None,
                 dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        shapes = dict(inputs) if isinstance(inputs, dict) else None
        self._structure = _Structure(shapes)
        self.input_names = [inputs] if isinstance(inputs, str) else list(inputs)
        self.output_list = [outputs] if isinstance(outputs, str) else list(
            outputs.values() if isinstance(outputs, dict) else outputs)
        if not self.input_names:
            raise ValueError("A GraphModel needs at least one input name.")
        ordered = _topological_order(self.input_names, list(nodes), self.output_list)
        self._structure.output_keys = list(outputs) if isinstance(outputs, dict) else None
        self._node_list = _NodeList(ordered)
        self._structure.wiring = [
            (node.name, node.input_names, isinstance(node.inputs, str), node.training)
            for node in ordered
        ]
        self._graph_layers: list[Layer] = [node.layer for node in ordered]
        if not self.trainable:
            for layer in self._graph_layers:
                layer.trainable = False
        if shapes is not None and all(s is not None for s in shapes.values()):
            self.build({k: (None, *v) for k, v in shapes.items()})

    @property
    def layers(self) -> list[Layer]:
        return list(self._graph_layers)

    @property
    def nodes(self) -> list[Node]:
        """The nodes in running order (each after what it reads)."""
        return list(self._node_list.nodes)

    @property
    def graph_outputs(self):
        """The outputs as the constructor takes them: a list of node names, or a dict
        {output name: node name} when the outputs are named otherwise than their nodes."""
        keys = self._structure.output_keys
        return dict(zip(keys, self.output_list)) if keys else list(self.output_list)

    def arrange_inputs(self, x):
        """Inputs (data or specs) as a dict by input name, however they were given."""
        if isinstance(x, dict):
            return x
        if len(self.input_names) == 1:
            return {self.input_names[0]: x}
        return self._named_inputs(x)

    def _named_inputs(self, inputs) -> dict[str, tf.Tensor]:
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise ValueError(
                    f"GraphModel {self.name!r} needs inputs {', '.join(self.input_names)}; "
                    f"missing {', '.join(missing)}."
                )
            return {n: inputs[n] for n in self.input_names}
        if isinstance(inputs, (list, tuple)):
            if len(inputs) != len(self.input_names):
                raise ValueError(
                    f"GraphModel {self.name!r} has {len(self.input_names)} inputs "
                    f"({', '.join(self.input_names)}); received {len(inputs)}."
                )
            return dict(zip(self.input_names, inputs))
        if len(self.input_names) != 1:
            names = ", ".join(self.input_names)
            raise ValueError(
                f"GraphModel {self.name!r} has {len(self.input_names)} inputs ({names}) but "
                f"received one array; pass a dict {{name: array}} with a key per input."
            )
        return {self.input_names[0]: inputs}

    def call(self, inputs, training: bool = False):
        values = self._named_inputs(inputs)
        wiring = self._structure.wiring
        for layer, (name, sources, single, fixed) in zip(self._graph_layers, wiring):
            args = values[sources[0]] if single else [values[s] for s in sources]
            values[name] = layer(args, training=training if fixed is None else fixed)
        if len(self.output_list) == 1:
            return values[self.output_list[0]]
        keys = self._structure.output_keys or self.output_list
        return {key: values[name] for key, name in zip(keys, self.output_list)}

    def get_config(self) -> dict[str, Any]:
        nodes = []
        for layer, (name, sources, single, fixed) in zip(self._graph_layers,
                                                         self._structure.wiring):
            entry = {**layer_to_config(layer), "inputs": sources[0] if single else sources}
            if fixed is not None:
                entry["training"] = fixed
            if name != layer.name:
                entry["node_name"] = name
            nodes.append(entry)
        shapes = self._structure.input_shapes
        inputs = {k: list(v) for k, v in shapes.items()} if shapes else list(self.input_names)
        return {**self._base_config(), "inputs": inputs, "nodes": nodes,
                "outputs": self.graph_outputs}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "GraphModel":
        config = dict(config)
        nodes = [Node(layer_from_config(entry), entry["inputs"], entry.get("training"),
                      entry.get("node_name")) for entry in config.pop("nodes")]
        return cls(nodes=nodes, **config)


@dataclasses.dataclass
class _NodeList:
    """The nodes, outside TensorFlow's attribute tracking (their layers are tracked as
    `_graph_layers`)."""

    nodes: list


@dataclasses.dataclass
class _Structure:
    """Input shapes and wiring: plain data, held outside TensorFlow's attribute tracking (which
    would wrap the lists, and a config must be plain lists and dicts)."""

    input_shapes: dict | None
    wiring: list = dataclasses.field(default_factory=list)
    output_keys: list | None = None  # the keys of several outputs, when not the node names


def _topological_order(inputs: list[str], nodes: list[Node], outputs: list[str]) -> list[Node]:
    """Nodes ordered so each comes after what it reads; every problem reported at once."""
    problems = []
    by_name: dict[str, Node] = {}
    for node in nodes:
        if not isinstance(node, Node):
            raise TypeError(f"GraphModel nodes must be graphfit.Node objects; received {node!r}.")
        if node.name in by_name or node.name in inputs:
            problems.append(f"the name {node.name!r} is used twice")
        by_name[node.name] = node
    known = set(inputs) | set(by_name)
    for node in nodes:
        for source in node.input_names:
            if source not in known:
                problems.append(
                    f"node {node.name!r} reads {source!r}, which is neither an input nor a node"
                    + did_you_mean(source, known, " (did you mean {!r}?)")
                )
    for output in outputs:
        if output not in known:
            problems.append(
                f"output {output!r} is neither an input nor a node"
                + did_you_mean(output, known, " (did you mean {!r}?)")
            )
    if not outputs:
        problems.append("it has no outputs")
    if problems:
        raise ValueError("Invalid GraphModel: " + "; ".join(problems) + ".")

    ordered: list[Node] = []
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        if name in inputs or state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = path[path.index(name):] + [name]
            raise ValueError(f"Invalid GraphModel: the nodes form a cycle {' -> '.join(cycle)}.")
        state[name] = "visiting"
        for source in by_name[name].input_names:
            visit(source, path + [name])
        state[name] = "done"
        ordered.append(by_name[name])

    for node in nodes:
        visit(node.name, [])
    used = {s for node in nodes for s in node.input_names} | set(outputs)
    unused = [node.name for node in nodes if node.name not in used]
    if unused:
        raise ValueError(
            f"Invalid GraphModel: nodes {unused} feed no other node and are not outputs; remove "
            f"them or list them in outputs."
        )
    return ordered

"""The layer calls between a functional model's inputs and outputs, and Keras's order of its
layers (keras/src/ops/function.py `map_graph`: by depth from the outputs, deepest first, then
in the order a walk back from the outputs first reaches them)."""

from __future__ import annotations

from graphfit.core.symbolic import CallNode, SymbolicTensor, call_nodes
from graphfit.models.input_layer import InputLayer

__all__ = ["CallGraph"]


class CallGraph:
    """Walks back from `outputs` to `inputs` through the recorded layer calls.

    Attributes:
        input_ids: {id(input tensor): its position in `inputs`}.
        nodes: the calls the model runs (no input layer's), each after those it reads.

    Raises:
        ValueError: for an output that needs an input not among `inputs`.
    """

    def __init__(self, inputs: list[SymbolicTensor], outputs: list[SymbolicTensor],
                 labels: list | None = None):
        self.input_ids = {id(t): i for i, t in enumerate(inputs)}
        self.nodes: list[CallNode] = []
        self._inputs = inputs
        self._finished: list[CallNode] = []  # input layers' nodes too, as Keras's walk
        self._done: set[int] = set()
        self._first_seen: dict[int, int] = {}  # id(layer) -> order of the walk's first visit
        self._layers: dict[int, object] = {}
        # Keras walks a dict of outputs in the order of its sorted keys (its tree.flatten).
        walk = (enumerate(outputs) if labels is None
                else sorted(zip(labels, outputs), key=lambda item: item[0]))
        for label, tensor in walk:
            self._visit(tensor, label)

    def _visit(self, tensor: SymbolicTensor, output) -> None:
        layer, node_index, _ = tensor.history
        node = call_nodes(layer)[node_index]
        if id(node) in self._done:
            return
        is_input = isinstance(layer, InputLayer)
        if id(tensor) in self.input_ids and not is_input:
            self._done.add(id(node))  # a cut: the sub-model starts at this tensor
            return
        if is_input and id(tensor) not in self.input_ids:
            names = [t.name for t in self._inputs]
            raise ValueError(
                f"gf.Model: output {output!r} is not connected to the inputs: it depends on "
                f"input {layer.name!r}, which is not among the model's inputs {names}. Add "
                f"it to inputs, or build the output from the given inputs."
            )
        self._first_seen.setdefault(id(layer), len(self._first_seen))
        self._layers[id(layer)] = layer
        if not is_input:
            for source in node.input_tensors:
                self._visit(source, output)
        self._done.add(id(node))
        self._finished.append(node)
        if not is_input:
            self.nodes.append(node)

    def keras_layer_order(self, input_layers: list) -> list:
        """The layers in Keras's `model.layers` order; input layers of cut sub-models (not
        in the walk) first, unused inputs at depth 0, as Keras places them."""
        in_graph = {id(node) for node in self._finished}
        node_depth: dict[int, int] = {}
        layer_depth: dict[int, int] = {}
        for node in reversed(self._finished):
            depth = max(node_depth.setdefault(id(node), 0), layer_depth.get(id(node.layer), 0))
            layer_depth[id(node.layer)] = node_depth[id(node)] = depth
            for source in node.input_tensors:
                parent = call_nodes(source.history.layer)[source.history.node_index]
                if id(parent) in in_graph:
                    node_depth[id(parent)] = max(depth + 1, node_depth.get(id(parent), 0))
        deepest = max(layer_depth.values(), default=0) + 1
        layers, first_seen = dict(self._layers), dict(self._first_seen)
        for position, layer in enumerate(input_layers):
            if id(layer) not in layer_depth:
                cut = id(self._inputs[position].history.layer) != id(layer)
                layer_depth[id(layer)] = deepest if cut else 0
                first_seen[id(layer)] = -len(input_layers) + position
                layers[id(layer)] = layer
        return sorted(layers.values(),
                      key=lambda layer: (-layer_depth[id(layer)], first_seen[id(layer)]))

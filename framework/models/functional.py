"""`Functional`: the model `gf.Model(inputs, outputs)` makes from layers called on `gf.Input`s.

A functional model is a `GraphModel`: the layer calls recorded on the symbolic tensors
(`graphfit.core.symbolic`) are walked back from the outputs to the inputs and become the
graph's nodes, so both run, train, cache and export through the same code. `gf.Model` tells
the two uses apart as Keras's `Model.__new__` does: called with inputs and outputs (symbolic
tensors), `Model` and its subclasses that keep `Model.__init__` become functional; a subclass
whose own `__init__` passes inputs and outputs to `super().__init__` becomes functional there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from graphfit.core import symbolic
from graphfit.core.dtype_policy import dtype_policy
from graphfit.core.keras_objects import is_keras_object, keras_object_hint
from graphfit.core.registry import register_layer
from graphfit.core.shapes import shape_text
from graphfit.core.symbolic import CallNode, SymbolicTensor, call_nodes
from graphfit.models import functional_config
from graphfit.models.functional_graph import CallGraph
from graphfit.models.graph_model import GraphModel, Node
from graphfit.models.input_layer import InputLayer
from graphfit.models.model import Model

__all__ = ["Functional", "become_functional", "functional_arguments", "functional_class"]


def functional_arguments(args: tuple, kwargs: dict) -> bool:
    """Whether `Model(*args, **kwargs)` asks for a functional model: inputs and outputs."""
    if "inputs" in kwargs or "outputs" in kwargs:
        return True
    return bool(args) and symbolic.holds_placeholder(args[0])


_CLASSES: dict[type, type] = {}


def functional_class(cls: type) -> type:
    """The functional variant of a `Model` subclass: the subclass's overrides (train_step,
    ...) first, then `Functional`'s wiring (as Keras injects `Functional`)."""
    if issubclass(cls, Functional):
        return cls
    if cls is Model:
        return Functional
    if cls not in _CLASSES:
        _CLASSES[cls] = type(cls.__name__, (cls, Functional), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__})
    return _CLASSES[cls]


def become_functional(model, args: tuple, kwargs: dict) -> None:
    """Turns a subclass instance whose `__init__` called `Model.__init__(inputs, outputs)`
    into the functional variant of its class."""
    model.__class__ = functional_class(type(model))
    Functional.__init__(model, *args, **kwargs)


@dataclasses.dataclass
class _Wiring:
    """What the constructor received and what it found; plain data outside TensorFlow's
    attribute tracking (which would wrap the lists and dicts)."""

    inputs: Any  # the inputs as given: a tensor, a list / tuple or a dict of them
    outputs: Any
    input_tensors: list  # flat, in the order of the graph's input names
    call_nodes: list  # the CallNodes the model runs, each after those it reads
    layers: list  # input layers and called layers, in Keras's order


def _flat(structure, what: str) -> tuple[list, list | None]:
    """(tensors, dict keys or None) of a tensor, list, tuple or dict of symbolic tensors."""
    if isinstance(structure, dict):
        keys, tensors = list(structure), list(structure.values())
    elif isinstance(structure, (list, tuple)):
        keys, tensors = None, list(structure)
    else:
        keys, tensors = None, [structure]
    for tensor in tensors:
        if isinstance(tensor, SymbolicTensor):
            continue
        if is_keras_object(tensor):
            raise TypeError(keras_object_hint(tensor, f"gf.Model's {what} hold"))
        deeper = ", not nested deeper" if isinstance(tensor, (list, tuple, dict)) else ""
        raise ValueError(
            f"All of gf.Model's {what} must be symbolic tensors (from gf.Input and the layers "
            f"called on it): one, a list or a dict of them{deeper}. Received: {structure!r}"
        )
    if not tensors:
        raise ValueError(f"gf.Model needs at least one tensor in {what}.")
    return tensors, keys


@register_layer
class Functional(GraphModel):
    """A model from symbolic inputs and outputs: `gf.Model(inputs, outputs)` (Keras's
    functional API). Make it through `gf.Model`; it is a `GraphModel` whose nodes are the
    layer calls between the inputs and the outputs.

    Args:
        inputs: a symbolic tensor from `gf.Input` (or from a layer, for a sub-model), a list
            of them, or a dict {name: tensor}: the data is then given in the same form (a
            list, or a dict by these names; a list's inputs can also be given as a dict by
            the `gf.Input` names).
        outputs: a symbolic tensor, a list or a dict of them. With several outputs the
            model's call returns a dict by output name (the dict's keys, or the output
            layers' names for a list: losses and labels are matched by name), and `predict`
            returns them in the form given.
        name: the model's name.
        trainable: False freezes every layer.
        dtype: the model's dtype policy; its layers are built when they are called on the
            inputs, so they must have been given the same variable dtype.

    Raises:
        TypeError: for inputs or outputs that are not symbolic tensors (a Keras tensor
            names `gf.Input`).
        ValueError: for an output not computed from the inputs.

    Example:

        >>> import graphfit as gf
        >>> from graphfit import layers
        >>> inputs = gf.Input(shape=(3,))
        >>> shared = layers.Dense(4, name="shared")
        >>> outputs = layers.Add()([shared(inputs), shared(inputs)])
        >>> model = gf.Model(inputs, outputs)
        >>> len(model.get_layer("shared").inbound_nodes), model.count_params()
        (2, 16)
    """

    def __init__(self, inputs=None, outputs=None, name: str | None = None,
                 trainable: bool = True, dtype=None, **kwargs):
        if inputs is None or outputs is None:
            raise ValueError(
                "gf.Model(inputs, outputs) needs both: the symbolic inputs (gf.Input(...)) and "
                "the outputs of the layers called on them. Received: "
                f"inputs={inputs!r}, outputs={outputs!r}"
            )
        if kwargs:
            raise TypeError(
                f"gf.Model(inputs, outputs) takes name, trainable and dtype; received "
                f"{sorted(kwargs)}."
            )
        input_tensors, input_keys = _flat(inputs, "inputs")
        output_tensors, output_keys = _flat(outputs, "outputs")
        input_layers = [_input_layer_of(t) for t in input_tensors]
        input_names = input_keys or [layer.name for layer in input_layers]
        if len(set(map(id, input_tensors))) != len(input_tensors):
            raise ValueError("gf.Model received the same input tensor twice; give each once.")
        graph = CallGraph(input_tensors, output_tensors, output_keys)
        _check_dtype(dtype, graph.nodes)
        refs = _node_names(graph.nodes)
        nodes = [Node(node.layer, _sources(node, graph, input_names, refs), node.training,
                      refs[id(node)] if refs[id(node)] != node.layer.name else None)
                 for node in graph.nodes]
        output_refs = [_reference(t, graph, input_names, refs) for t in output_tensors]
        if output_keys is not None:
            graph_outputs = dict(zip(output_keys, output_refs))
        else:
            graph_outputs = output_refs
            if len(set(output_refs)) != len(output_refs):
                raise ValueError("gf.Model received the same output tensor twice; give "
                                 "outputs as a dict to name each once.")
        super().__init__(inputs=input_names, nodes=nodes, outputs=graph_outputs, name=name,
                         dtype=dtype, trainable=trainable)
        self._input_layers = input_layers
        self._wiring = _Wiring(inputs, outputs, input_tensors, graph.nodes,
                               graph.keras_layer_order(input_layers))
        self.build_for({name: tf.TensorSpec(t.shape, t.dtype)  # a fixed batch size kept
                        for name, t in zip(input_names, input_tensors)})

    # --------------------------------------------------------------------- Keras's views
    @property
    def layers(self) -> list:
        """The input layers and every layer the model calls, each once, in Keras's order
        (by depth from the outputs, deepest first): `variables` and `get_weights` follow it,
        so a Keras twin's weights line up."""
        return list(self._wiring.layers)

    def direct_sublayers(self) -> list:
        wiring = getattr(self, "_wiring", None)  # None while GraphModel.__init__ runs
        if wiring is None:
            return super().direct_sublayers()
        rest = [l for l in super().direct_sublayers() if all(l is not k for k in wiring.layers)]
        return [*wiring.layers, *rest]

    @property
    def inputs(self) -> list[SymbolicTensor]:
        """The symbolic inputs, as a flat list."""
        return list(self._wiring.input_tensors)

    @property
    def outputs(self) -> list[SymbolicTensor]:
        """The symbolic outputs, as a flat list."""
        outputs = self._wiring.outputs
        return list(outputs.values() if isinstance(outputs, dict) else tf.nest.flatten(outputs))

    @property
    def input(self):
        """The symbolic inputs in the form the model was given them."""
        return self._wiring.inputs

    @property
    def output(self):
        """The symbolic outputs in the form the model was given them."""
        return self._wiring.outputs

    @property
    def input_shape(self):
        """The inputs' shapes with the batch axis: a tuple, or a list or dict of them."""
        shapes = [tuple(t.shape.as_list()) for t in self._wiring.input_tensors]
        given = self._wiring.inputs
        if isinstance(given, dict):
            return dict(zip(given, shapes))
        return shapes if isinstance(given, (list, tuple)) else shapes[0]

    # -------------------------------------------------------------------------- running
    def __call__(self, inputs, *args, **kwargs):
        if isinstance(inputs, dict) and symbolic.holds_placeholder(inputs):
            # A node reads a tensor or a list: symbolic inputs by name, in the inputs' order.
            missing = [name for name in self.input_names if name not in inputs]
            if missing:
                raise ValueError(f"Model {self.name!r} needs inputs {self.input_names}; the "
                                 f"dict of symbolic inputs lacks {missing}.")
            inputs = [inputs[name] for name in self.input_names]
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training: bool = False):
        named = self.arrange_inputs(inputs)
        for name, tensor in zip(self.input_names, self._wiring.input_tensors):
            _check_input(self, name, tensor, named.get(name))
        return super().call(named, training=training)

    def predict(self, x, *args, **kwargs):
        """As `Model.predict`; several outputs come back in the form the model was given
        them (a list, a tuple or a dict)."""
        result = super().predict(x, *args, **kwargs)
        kind = type(self._wiring.outputs)
        if kind in (list, tuple) and isinstance(result, dict):
            return kind(result[name] for name in self.graph_outputs)
        return result

    # ---------------------------------------------------------------------- configuration
    def get_config(self) -> dict[str, Any]:
        """Keras's functional layout: `layers` (each with its `inbound_nodes`),
        `input_layers` and `output_layers` as [layer name, node index, tensor index]."""
        return {**self._base_config(),
                **functional_config.to_config(self, self._wiring.call_nodes, self._input_layers)}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None
                    ) -> "Functional":
        """The model `get_config()` describes; layer classes that are not registered are
        looked up in `custom_objects` ({class name: class}), as in Keras."""
        inputs, outputs = functional_config.tensors_from_config(config, custom_objects)
        return cls(inputs, outputs, name=config.get("name"),
                   trainable=config.get("trainable", True), dtype=config.get("dtype"))


def _check_dtype(dtype, nodes: list[CallNode]) -> None:
    """A functional model's layers are built before it: its dtype must be theirs."""
    if dtype is None:
        return
    wanted = dtype_policy(dtype, "dtype").variable_dtype
    other = [n.layer.name for n in nodes if n.layer.built and n.layer.variable_dtype != wanted]
    if other:
        raise ValueError(
            f"gf.Model(inputs, outputs, dtype={dtype!r}): layers {other} were built with other "
            f"variables when they were called on the inputs. Give the layers dtype={dtype!r} "
            f"(and gf.Input(dtype=...)) when you create them."
        )


def _input_layer_of(tensor: SymbolicTensor) -> InputLayer:
    """The `gf.Input` layer of an input tensor; a new one for an intermediate tensor (a
    sub-model cut from the middle of another)."""
    layer = tensor.history.layer
    if isinstance(layer, InputLayer):
        return layer
    return InputLayer(batch_shape=(None, *tensor.shape[1:]), dtype=tensor.dtype)


def _node_names(nodes: list[CallNode]) -> dict[int, str]:
    """A name per node: the layer's, and "layer/1", "layer/2" for its further calls ("/"
    cannot be in a layer's name, so no node name is another layer's)."""
    seen: dict[int, int] = {}
    names = {}
    for node in nodes:
        count = seen.get(id(node.layer), 0)
        seen[id(node.layer)] = count + 1
        names[id(node)] = node.layer.name if count == 0 else f"{node.layer.name}/{count}"
    return names


def _reference(tensor: SymbolicTensor, graph: CallGraph, input_names, refs) -> str:
    if id(tensor) in graph.input_ids:
        return input_names[graph.input_ids[id(tensor)]]
    layer, node_index, _ = tensor.history
    return refs[id(call_nodes(layer)[node_index])]


def _sources(node: CallNode, graph: CallGraph, input_names, refs):
    if isinstance(node.arguments, SymbolicTensor):
        return _reference(node.arguments, graph, input_names, refs)
    return [_reference(t, graph, input_names, refs) for t in node.arguments]


def _check_input(model, name: str, expected: SymbolicTensor, value) -> None:
    if isinstance(value, (list, tuple)):
        raise ValueError(
            f"Model {model.name!r} expects {len(model.input_names)} input(s), but it received "
            f"{len(value)} input tensors for input {name!r}."
        )
    shape = getattr(value, "shape", None)
    if shape is None:
        return
    given, wanted = tf.TensorShape(shape), expected.shape
    if given.rank is None:
        return
    fits = given.rank == wanted.rank and all(
        w is None or g is None or w == g for w, g in zip(wanted.as_list()[1:],
                                                         given.as_list()[1:]))
    if not fits:
        raise ValueError(
            f"Input {name!r} of model {model.name!r} is incompatible with the data: expected "
            f"shape={shape_text([None, *wanted.as_list()[1:]])}, found "
            f"shape={shape_text(given)}."
        )

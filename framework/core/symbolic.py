"""Symbolic tensors: the functional API's placeholders, and the layer calls they record.

`gf.Input(shape)` returns a `SymbolicTensor`; a layer called on symbolic tensors computes
nothing: it builds for their shapes, works out its output's shape and dtype by tracing its
`call` once, records the call as a `CallNode` on the layer (Keras's inbound node), and returns
a symbolic output whose `history` points at that node. `gf.Model(inputs, outputs)` walks the
recorded nodes back from the outputs and wires them into a `GraphModel`, so the functional API
and the declarative graph are one mechanism.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import keras
import tensorflow as tf

from graphfit.core.keras_objects import keras_object_hint
from graphfit.core.shapes import shape_text

__all__ = ["CallNode", "History", "LayerNodes", "SymbolicTensor", "call_nodes",
           "call_symbolically", "holds_placeholder", "is_symbolic", "set_operator_recorder"]


class History(NamedTuple):
    """Where a symbolic tensor comes from: the layer, which of its calls, which output."""

    layer: Any
    node_index: int
    tensor_index: int


class SymbolicTensor:
    """The shape and dtype of data a model will receive, and the layer call that makes it.

    Made by `gf.Input(...)` and by calling layers on symbolic tensors; pass them to
    `gf.Model(inputs, outputs)`. It holds no values: TensorFlow operations and arithmetic
    on it are refused with the layer to use instead.
    """

    def __init__(self, shape, dtype, history: History, name: str | None = None):
        self.shape = tf.TensorShape(shape)
        self.dtype = tf.as_dtype(dtype)
        self.history = history
        self.name = name or history.layer.name

    @property
    def keras_history(self) -> History:
        """Keras's name for `history`: (layer, node_index, tensor_index)."""
        return self.history

    @property
    def ndim(self) -> int | None:
        return self.shape.rank

    @property
    def spec(self) -> tf.TensorSpec:
        return tf.TensorSpec(self.shape, self.dtype)

    def __repr__(self) -> str:
        return (f"<SymbolicTensor shape={shape_text(self.shape)} dtype={self.dtype.name} "
                f"from layer {self.history.layer.name!r}>")

    def _refuse(self, *_args, **_kwargs):
        raise TypeError(
            f"{self!r} is a placeholder of graphfit's functional API: it holds no values, so "
            f"TensorFlow operations, iteration and Keras layers or models cannot be applied "
            f"to it (Python's arithmetic operators and indexing can). Apply a graphfit layer "
            f"instead (layers.Concatenate(), layers.Reshape(...), a gf.Layer subclass whose "
            f"call does the computation, or a Keras layer or model wrapped: "
            f"layers.KerasLayer(...))."
        )

    def _operator(operation: str, reverse: bool = False):
        def apply(self, other):
            return _record(operation, self, other, reverse)
        return apply

    __add__, __radd__ = _operator("add"), _operator("add", reverse=True)
    __sub__, __rsub__ = _operator("subtract"), _operator("subtract", reverse=True)
    __mul__, __rmul__ = _operator("multiply"), _operator("multiply", reverse=True)
    __truediv__, __rtruediv__ = _operator("divide"), _operator("divide", reverse=True)
    __matmul__, __rmatmul__ = _operator("matmul"), _operator("matmul", reverse=True)
    __pow__, __rpow__ = _operator("power"), _operator("power", reverse=True)
    del _operator

    def __neg__(self):
        return _record("negative", self)

    def __getitem__(self, key):
        return _record("getitem", self, index=key)

    __iter__ = __len__ = __bool__ = __array__ = _refuse


@dataclasses.dataclass
class _OperatorRecorder:
    """What records Python operators on symbolic tensors: set by the layer library
    (`graphfit.layers.operations`), which core cannot import."""

    record: Any = None
    index_of: Any = None


_OPERATORS = _OperatorRecorder()


def set_operator_recorder(record, index_of) -> None:
    """Installs `record(operation, tensor, other, reverse, index)`, which applies one layer
    for a Python operator on a symbolic tensor, and `index_of(key)`, the serializable form of
    an index."""
    _OPERATORS.record, _OPERATORS.index_of = record, index_of


def _record(operation: str, tensor: SymbolicTensor, other=None, reverse: bool = False,
            index=None):
    if _OPERATORS.record is None:
        tensor._refuse()
    if operation == "getitem":
        return _OPERATORS.record(operation, tensor, index=_OPERATORS.index_of(index))
    return _OPERATORS.record(operation, tensor, other, reverse)


def _refuse_conversion(value, dtype=None, name=None, as_ref=False):
    value._refuse()


tf.register_tensor_conversion_function(SymbolicTensor, _refuse_conversion)


@dataclasses.dataclass(eq=False)
class CallNode:
    """One call of a layer on symbolic tensors (Keras's node).

    Attributes:
        layer: the layer called.
        arguments: what it was called on: a `SymbolicTensor` or a list of them.
        outputs: the `SymbolicTensor` it returned.
        training: the `training` value the call fixed (True or False), or None to follow
            the model's.
    """

    layer: Any
    arguments: Any
    outputs: Any = None
    training: bool | None = None

    @property
    def input_tensors(self) -> list[SymbolicTensor]:
        return list(tf.nest.flatten(self.arguments))


@dataclasses.dataclass
class _Nodes:
    """A layer's calls on symbolic tensors, kept outside TensorFlow's attribute tracking."""

    nodes: list = dataclasses.field(default_factory=list)


def call_nodes(layer) -> list[CallNode]:
    """The layer's recorded calls, in order (the list itself: `call_symbolically` and
    `gf.Input` append to it)."""
    return vars(layer).setdefault("_call_nodes", _Nodes()).nodes


def _leaves(inputs) -> list:
    return tf.nest.flatten(inputs) if isinstance(inputs, (list, tuple, dict)) else [inputs]


def holds_placeholder(value) -> bool:
    """Whether `value` (or an item of a list, tuple or dict) is a symbolic tensor or a Keras
    tensor: what `gf.Model(inputs, outputs)` receives."""
    return any(isinstance(leaf, (SymbolicTensor, keras.KerasTensor)) for leaf in _leaves(value))


def is_symbolic(inputs, what: str = "A graphfit layer was called on") -> bool:
    """Whether a layer is being called on symbolic tensors (`gf.Input` and what follows).

    Raises:
        TypeError: for a Keras tensor (`keras.Input`), naming `gf.Input`; the message starts
            with `what`.
    """
    leaves = _leaves(inputs)
    for leaf in leaves:
        if isinstance(leaf, keras.KerasTensor):
            raise TypeError(keras_object_hint(leaf, what))
    return any(isinstance(leaf, SymbolicTensor) for leaf in leaves)


def call_symbolically(layer, inputs, args, kwargs, training) -> SymbolicTensor:
    """Records `layer(inputs)` on symbolic tensors and returns its symbolic output."""
    _check_call(layer, inputs, args, kwargs, training)
    specs = tf.nest.map_structure(lambda t: t.spec, inputs)

    def forward(x):
        return layer(x, training=False)

    # Builds the layer (its variables are made outside the trace) and checks the shapes now,
    # as Keras does while the model is defined.
    outputs = tf.function(forward, autograph=False).get_concrete_function(specs)
    output = outputs.structured_outputs
    if not isinstance(output, tf.Tensor):
        raise ValueError(
            f"Layer {layer.name!r} ({type(layer).__name__}) returns "
            f"{type(output).__name__} of tensors; graphfit's functional API wires layers with "
            f"one output tensor. Give each output its own layer, or subclass gf.Model."
        )
    nodes = call_nodes(layer)
    node = CallNode(layer, inputs, training=None if training is None else bool(training))
    node.outputs = SymbolicTensor(output.shape, output.dtype, History(layer, len(nodes), 0))
    nodes.append(node)
    return node.outputs


def _check_call(layer, inputs, args, kwargs, training) -> None:
    where = f"Layer {layer.name!r} ({type(layer).__name__}) called on symbolic tensors"
    if args or kwargs:
        extra = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        raise TypeError(
            f"{where} received extra arguments ({', '.join(extra)}). graphfit's functional "
            f"API passes each layer one input (a tensor or a list of tensors) and `training`; "
            f"give the layer its settings in its constructor."
        )
    if training is not None and not isinstance(training, bool):
        raise TypeError(f"{where}: training must be True, False or None. "
                        f"Received: training={training!r}")
    single = isinstance(inputs, SymbolicTensor)
    listed = isinstance(inputs, (list, tuple)) and all(
        isinstance(t, SymbolicTensor) for t in inputs)
    if not (single or listed):
        raise TypeError(
            f"{where} must receive one symbolic tensor or a list of them (every item from "
            f"gf.Input or a layer). Received: {inputs!r}"
        )


class LayerNodes:
    """Keras's `layer.input` and `layer.output`, from the layer's calls on symbolic tensors."""

    @property
    def inbound_nodes(self) -> list[CallNode]:
        """The layer's calls on symbolic tensors, in order (Keras's `_inbound_nodes`)."""
        return list(call_nodes(self))

    def _only_node(self, what: str) -> CallNode:
        nodes = call_nodes(self)
        if len(nodes) == 1:
            return nodes[0]
        reason = ("was never called on symbolic tensors (gf.Input(...) and what follows)"
                  if not nodes else f"was called {len(nodes)} times, so it has several")
        raise ValueError(  # not AttributeError: Layer.__getattr__ would hide this message
            f"Layer {self.name!r} has no single {what}: it {reason}. Read the tensors from "
            f"layer.inbound_nodes[i] ({'.outputs' if what == 'output' else '.arguments'})."
        )

    @property
    def input(self):
        """The symbolic tensor (or list) the layer was called on in the functional API."""
        return self._only_node("input").arguments

    @property
    def output(self) -> SymbolicTensor:
        """The symbolic tensor the layer returned in the functional API."""
        return self._only_node("output").outputs

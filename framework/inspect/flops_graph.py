"""FLOPs of every op of a traced graph, and the layer that created it.

`framework/flops.py` builds on this: `op_flops` reads the FLOPs of each op of a `tf.function`
graph, nested functions included; `LayerOwners` records which layer created each op. Op types
TensorFlow has no statistic for but graphfit's layers run (Max, Einsum, ResizeBilinear) are
counted by graphfit's own rules (`op_statistics`).

The counting itself is TensorFlow's: `tf.compat.v1.profiler.profile(graph,
options=ProfileOptionBuilder.float_operation())` in its "scope" view, which gives each op the
"flops" statistic registered for its type (`tensorflow/python/profiler/internal/
flops_registry.py` and `tensorflow/python/ops/nn_ops.py`). What this module adds is the
function library: the profiler looks at one graph only, so a nested `tf.function`, the body of
a `tf.while_loop` or the branches of a `tf.cond` are, to it, a single call op (`While`,
`StatelessIf`, `StatefulPartitionedCall`, ...) with no FLOPs. Here each function such an op
calls is profiled on its own `FuncGraph` (recursively) and its FLOPs are added to the call op,
once per call site: a loop body counts once, whatever the trip count, and every branch of a
conditional counts, though only one runs. Ops whose results nothing uses (and that have no
side effect) are left out, as `tf.function` prunes them before running: the tape's gradient
functions build some that are never needed, such as the input gradient of a first Conv2D.

Uses three TensorFlow internals, for want of public equivalents: op callbacks
(`tensorflow.python.framework.op_callbacks`, to see each op as a layer creates it), the graph's
function library (`Graph._get_function`) and the statistics registry (to tell which op types
have a FLOP count).

TensorFlow registers no FLOP statistic for the gradients of 3-D and depthwise convolutions
(Conv3DBackpropInputV2, which is also Conv3DTranspose's forward op, Conv3DBackpropFilterV2,
DepthwiseConv2dNativeBackpropInput and ...Filter); they are counted here with TensorFlow's own
formula for the 2-D ones (`_convolution_gradient_flops`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import re

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_callbacks
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.profiler.internal import flops_registry
from tensorflow.python.util import deprecation

from graphfit.inspect import op_statistics

__all__ = ["GraphStats", "LayerOwners", "op_flops", "walk_layers"]

# Attributes through which an op calls functions of the library.
_FUNCTION_ATTRS = ("f", "then_branch", "else_branch", "cond", "body", "branches")
_LOOPS = frozenset({"While", "StatelessWhile"})
_CONDITIONALS = frozenset({"If", "StatelessIf", "Case", "StatelessCase"})
# Ops that move, reshape, read or select data, or call functions: no arithmetic, so their
# missing FLOP statistic is no loss and they are not listed among the uncounted ops.
_NO_ARITHMETIC = frozenset({
    "Placeholder", "Const", "Identity", "IdentityN", "NoOp", "ReadVariableOp",
    "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "VarHandleOp",
    "Reshape", "Shape", "ShapeN", "Size", "Rank", "Squeeze", "ExpandDims", "Pack", "Unpack",
    "ConcatV2", "Split", "SplitV", "Tile", "BroadcastTo", "BroadcastArgs",
    "BroadcastGradientArgs", "Fill", "ZerosLike", "OnesLike", "StridedSlice", "Slice",
    "StridedSliceGrad", "GatherV2", "Transpose", "Cast", "StopGradient", "PreventGradient",
    "Range", "Select", "SelectV2", "Pad", "PadV2", "ReverseV2", "EnsureShape",
    "PartitionedCall", "StatefulPartitionedCall", *_LOOPS, *_CONDITIONALS,
})
_INCOMPLETE = re.compile(r"(\d+) ops no flops stats due to incomplete shapes")


def _convolution_gradient_flops(op: tf.Operation, image: tf.TensorShape,
                                kernel: tf.TensorShape) -> int | None:
    """TensorFlow's formula for Conv2DBackpropInput / Conv2DBackpropFilter, for any rank:
    2 * image elements * kernel elements / (image channels * product of the strides), where
    the image is the convolution's input (its gradient, for the input gradient). For a
    depthwise kernel (kh, kw, channels, multiplier) that is 2 * image elements * kh * kw *
    multiplier / stride^2. None when a shape is not fully defined."""
    if not (image.is_fully_defined() and kernel.is_fully_defined()):
        return None
    channels_first = op.get_attr("data_format").decode().startswith("NC")
    strides = list(op.get_attr("strides"))
    strides = strides[2:] if channels_first else strides[1:-1]
    channels = image[1] if channels_first else image[-1]
    return (2 * image.num_elements() * kernel.num_elements()
            // (channels * int(np.prod(strides))))


# Convolution gradients without a FLOP statistic in TensorFlow (the 3-D and depthwise ones;
# also the forward op of Conv3DTranspose): {op type: (the image's shape, the kernel's)}.
_CONVOLUTION_GRADIENTS = {
    "Conv3DBackpropInputV2": lambda op: (op.outputs[0].shape, op.inputs[1].shape),
    "DepthwiseConv2dNativeBackpropInput": lambda op: (op.outputs[0].shape, op.inputs[1].shape),
    "Conv3DBackpropFilterV2": lambda op: (op.inputs[0].shape, op.outputs[0].shape),
    "DepthwiseConv2dNativeBackpropFilter": lambda op: (op.inputs[0].shape,
                                                       op.outputs[0].shape),
}


def _registered_types() -> frozenset[str]:
    """Op types with a registered "flops" statistic (what the profiler can count)."""
    try:
        keys = tf_ops._stats_registry.list()  # pylint: disable=protected-access
        types = frozenset(k.split(",")[0] for k in keys if k.endswith(",flops"))
    except AttributeError:  # a TensorFlow without the private registry: its public list
        types = frozenset(flops_registry.IMPLEMENTED_OPS)
    return types | frozenset(_CONVOLUTION_GRADIENTS)


@dataclasses.dataclass
class GraphStats:
    """What the counting met, for the notes of the report.

    Attributes:
        loops: while loops (their bodies are counted once).
        conditionals: cond/case ops (all their branches are counted).
        incomplete_shapes: ops with a FLOP statistic that counted 0 for want of static shapes.
        missing_functions: called functions whose graph could not be found (counted 0).
        uncounted: {op type: number of ops} of arithmetic ops TensorFlow has no FLOP
            statistic for (they count 0: Relu, Sigmoid, Exp, ...).
        dead_ops: ops left out because nothing uses their results (TensorFlow prunes them).
        dead_flops: the FLOPs those ops would have counted.
    """

    loops: int = 0
    conditionals: int = 0
    incomplete_shapes: int = 0
    missing_functions: set = dataclasses.field(default_factory=set)
    uncounted: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    dead_ops: int = 0
    dead_flops: int = 0


def _profile(graph: tf.Graph) -> tuple[dict[str, int], int]:
    """The profiler's own FLOPs of each op of `graph` by name, and how many ops it could not
    count because their shapes are not fully defined."""
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_empty_output().build()
    messages = io.StringIO()
    # The profiler writes its "incomplete shapes" count to stderr and uses a deprecated shape
    # helper; keep both out of the user's console, and report the count in the notes.
    with contextlib.redirect_stderr(messages), deprecation.silence():
        root = tf.compat.v1.profiler.profile(graph, cmd="scope", options=options)
    per_op: dict[str, int] = {}
    # Ops nest under ops whose name is a prefix of theirs: read each node's own count.
    stack = list(root.children)
    while stack:
        node = stack.pop()
        if node.float_ops:
            per_op[node.name] = int(node.float_ops)
        stack.extend(node.children)
    match = _INCOMPLETE.search(messages.getvalue())
    return per_op, int(match.group(1)) if match else 0


def _live_ops(graph: tf.Graph, needed=None) -> set[str] | None:
    """Names of the ops a function call runs: its stateful ops, its control outputs and what
    they or its outputs depend on. TensorFlow prunes the other (stateless, unused) ops when it
    instantiates a function, e.g. the input gradient of a first convolution that the tape never
    asked for. None for a graph that is not a function (every op counts). `needed`: the only
    outputs whose inputs count; the others' own ops are kept, what only they use is not."""
    outputs = getattr(graph, "outputs", None)
    if outputs is None:
        return None
    roots = outputs if needed is None else needed
    stack = [t.op for t in roots if t is not None] + list(graph.control_outputs)
    stack += [op for op in graph.get_operations() if _is_stateful(op)]
    live: set[str] = set()
    while stack:
        op = stack.pop()
        if op.name not in live:
            live.add(op.name)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    if needed is not None:  # the other outputs' own ops (identities) are returned
        live.update(t.op.name for t in outputs if t is not None)
    return live


def _is_stateful(op: tf.Operation) -> bool:
    try:
        return bool(op.op_def.is_stateful)
    except (AttributeError, ValueError):  # a type without an OpDef: keep it
        return True


def _called_functions(op: tf.Operation) -> list[str]:
    names = []
    for attr in _FUNCTION_ATTRS:
        if attr not in op.node_def.attr:
            continue
        value = op.node_def.attr[attr]
        if value.HasField("func"):
            names.append(value.func.name)
        elif value.HasField("list"):
            names.extend(f.name for f in value.list.func)
    return names


def _function_graph(graphs: list[tf.Graph], name: str) -> tf.Graph | None:
    """The FuncGraph of library function `name`, searched in `graphs` and their outer graphs."""
    for graph in graphs:
        while graph is not None:
            function = graph._get_function(name)  # pylint: disable=protected-access
            if function is not None:
                return getattr(function, "graph", None)
            graph = getattr(graph, "outer_graph", None)
    return None


class _Counter:
    def __init__(self, top: tf.Graph, stats: GraphStats):
        self.top = top
        self.stats = stats
        self.registered = _registered_types()
        self.function_totals: dict[str, int] = {}

    def ops(self, graph: tf.Graph, needed=None, outside=frozenset()) -> dict[str, int]:
        per_op, incomplete = _profile(graph)
        self.stats.incomplete_shapes += incomplete
        live = _live_ops(graph, needed)
        totals = {}
        for op in graph.get_operations():
            if op.name in outside:
                totals[op.name] = 0
                continue
            flops = per_op.get(op.name, 0)
            if op.type in _CONVOLUTION_GRADIENTS and not flops:
                flops = _convolution_gradient_flops(op, *_CONVOLUTION_GRADIENTS[op.type](op))
                if flops is None:
                    self.stats.incomplete_shapes += 1
                    flops = 0
            if live is not None and op.name not in live:
                totals[op.name] = 0
                self.stats.dead_ops += 1
                self.stats.dead_flops += flops + sum(
                    self.function(graph, name) for name in _called_functions(op))
                continue
            if op.type in _LOOPS:
                self.stats.loops += 1
            elif op.type in _CONDITIONALS:
                self.stats.conditionals += 1
            if op.type not in self.registered and op.type not in _NO_ARITHMETIC:
                own = op_statistics.count(op)  # graphfit's rule for a type TF lacks
                if own is None:
                    self.stats.uncounted[op.type] += 1
                else:
                    flops += own
            for name in _called_functions(op):
                flops += self.function(graph, name)
            totals[op.name] = flops
        return totals

    def function(self, graph: tf.Graph, name: str) -> int:
        if name not in self.function_totals:
            self.function_totals[name] = 0  # a guard: library functions do not recurse
            body = _function_graph([graph, self.top], name)
            if body is None:
                self.stats.missing_functions.add(name)
            else:
                self.function_totals[name] = sum(self.ops(body).values())
        return self.function_totals[name]


def op_flops(graph: tf.Graph, stats: GraphStats | None = None, outputs=None,
             outside=frozenset()) -> dict[str, int]:
    """FLOPs of each op of `graph`, with the FLOPs of the functions it calls added to it.

    Args:
        graph: a traced graph (a `ConcreteFunction.graph`) with static shapes.
        stats: a `GraphStats` that receives what the counting met (loops, conditionals,
            ops counted 0); a new one when None.
        outputs: the outputs of `graph` to count for, None: all. Ops that only the other
            outputs use are left out as unused (a compiled train step counted as the loss
            alone needs it).
        outside: names of ops that are not part of what is counted (a compiled step's own
            ops around the training step counted): 0 FLOPs, and not in `stats`.

    Returns:
        {op name: FLOPs} for every op of `graph`, in the graph's creation order.
    """
    counter = _Counter(graph, stats if stats is not None else GraphStats())
    return counter.ops(graph, outputs, frozenset(outside))


class LayerOwners:
    """Which layer created each op: recorded while graphs are traced (`recording()`).

    An op belongs to the innermost layer (below the model) whose `call` is running when the op
    is created (`Layer.__call__` flags it in `in_call`, inside the layer's name scope). Ops
    the tape adds later are named `gradient_tape/<forward op's name scope>/...`, and belong to
    the layer that owns that name scope. Both hold for a layer called twice, whose second
    name scope is `dense_1` (TensorFlow makes scope names unique).
    """

    def __init__(self, model):
        self.depth: dict[int, int] = {}
        self.layers = []
        for layer, depth in walk_layers(model):
            self.depth[id(layer)] = depth
            self.layers.append(layer)
        self.recorded: dict[tuple[int, str], object] = {}
        self.maps: dict[int, tuple[dict, dict]] = {}

    def __call__(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        # An op callback: runs as each op is created. It only looks; None keeps the op.
        if outputs:
            running = [layer for layer in self.layers if layer.in_call]
            op = getattr(outputs[0], "op", None)
            if running and op is not None:
                owner = max(running, key=lambda layer: self.depth[id(layer)])
                self.recorded[(id(op.graph), op.name)] = owner
        return None

    @contextlib.contextmanager
    def recording(self):
        op_callbacks.add_op_callback(self)
        try:
            yield
        finally:
            op_callbacks.remove_op_callback(self)

    def owner(self, graph: tf.Graph, op_name: str, gradient: bool = False):
        """The layer that owns op `op_name` of `graph` (a gradient op: the forward op it
        differentiates), or None for ops outside every layer."""
        if id(graph) not in self.maps:
            by_op = {name: layer for (g, name), layer in self.recorded.items() if g == id(graph)}
            by_scope = {}
            for name, layer in by_op.items():
                by_scope.setdefault(name.rpartition("/")[0], layer)
            self.maps[id(graph)] = (by_op, by_scope)
        by_op, by_scope = self.maps[id(graph)]
        if gradient:
            op_name = op_name.removeprefix("gradient_tape/")
        elif op_name in by_op:
            return by_op[op_name]
        scope = op_name.rpartition("/")[0]
        while scope:  # ops the callback did not see (no outputs), and gradient ops
            if scope in by_scope:
                return by_scope[scope]
            scope = scope.rpartition("/")[0]
        return None


def walk_layers(model):
    """(layer, depth) for every layer below `model`, depth first, each once."""
    seen, stack = {id(model)}, [(layer, 1) for layer in reversed(model.direct_sublayers())]
    while stack:
        layer, depth = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        yield layer, depth
        stack.extend((child, depth + 1) for child in reversed(layer.direct_sublayers()))

"""What XLA cannot compile well: ops it has no kernel for, and inputs whose shape keeps changing.

`jit_compile="auto"` asks two questions of a model. Before tracing, each layer's declared
`Layer.supports_jit`; after tracing a step, the step's graph (and the functions it calls) for
ops that run Python (`tf.numpy_function`, `tf.py_function`), which XLA cannot compile. While
training, XLA compiles the step once per distinct input shape: `ShapeLog` counts the shapes a
compiled step has seen, inside the compiled loop, so that a model fed a new shape every batch
(graphs with a variable number of nodes) can drop XLA instead of recompiling every batch.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["UNSUPPORTED_OPS", "XlaUnsupportedError", "find_unsupported_op", "ShapeLog",
           "MAX_XLA_SHAPES"]

# Ops that call back into Python: XLA has no kernel for them.
UNSUPPORTED_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

# Distinct input shapes a compiled step may see before XLA is dropped: a full batch and a last,
# smaller one per stage stay under it; a new shape every batch goes over it quickly.
MAX_XLA_SHAPES = 4


class XlaUnsupportedError(ValueError):
    """A traced step holds an op XLA cannot compile; `layer` names where it came from."""

    def __init__(self, op_type: str, op_name: str, layer: str):
        self.op_type, self.op_name, self.layer = op_type, op_name, layer
        super().__init__(
            f"{layer} runs a {op_type} op ({op_name!r}: tf.numpy_function or tf.py_function), "
            f"which XLA cannot compile. Compile with jit_compile=False or 'auto' (which then "
            f"runs without XLA), or replace the Python function with TensorFlow ops; a layer "
            f"that needs one should set supports_jit = False."
        )


def _graph_ops(graph):
    """The ops of `graph` and of every function it calls (nested tf.functions)."""
    for op in graph.get_operations():
        yield op.type, op.name
    functions = getattr(graph, "_functions", {}) or {}
    for function in list(functions.values()):
        definition = getattr(function, "cached_definition", None) or getattr(
            function, "definition", None)
        for node in getattr(definition, "node_def", []):
            yield node.op, node.name


def _layer_of(op_name: str, model) -> str:
    """The innermost layer whose name scope holds the op, as "layer 'name' (Type)"."""
    scopes = op_name.split("/")
    found = None
    for layer in model.flatten_layers():
        scope = getattr(layer, "_scope_name", None)
        if scope in scopes and layer is not model:
            depth = scopes.index(scope)
            if found is None or depth > found[0]:
                found = (depth, layer)
    if found is None:
        return f"model {model.name!r} ({type(model).__name__})"
    return f"layer {found[1].name!r} ({type(found[1]).__name__})"


def find_unsupported_op(graph, model) -> XlaUnsupportedError | None:
    """The first op of `graph` XLA cannot compile, as an error naming its layer; or None."""
    for op_type, op_name in _graph_ops(graph):
        if op_type in UNSUPPORTED_OPS:
            return XlaUnsupportedError(op_type, op_name, _layer_of(op_name, model))
    return None


class ShapeLog:
    """The distinct input shapes one compiled step has seen, recorded inside the loop.

    A row per shape (the dimensions of every input tensor, concatenated), up to
    `MAX_XLA_SHAPES + 1` rows; `count` says how many are filled.
    """

    def __init__(self, capacity: int = MAX_XLA_SHAPES + 1):
        self.capacity = capacity
        self._rows: dict[int, tf.Variable] = {}
        self._counts: dict[int, tf.Variable] = {}

    def record(self, data, rows=None) -> None:
        """Adds the shape of `data` (a nest of tensors) when new; runs in the traced loop.

        Args:
            data: the batch, or (with `rows`) the arrays batches are gathered from.
            rows: the batch size (a scalar tensor) standing for the first dimension of every
                tensor of `data`: the shape of its batches, without gathering one.
        """
        tensors = [t for t in tf.nest.flatten(data) if t is not None]
        if any(t.shape.rank is None for t in tensors):
            return  # unknown ranks: no fixed-width row (rare; the log stays silent)
        shapes = [tf.shape(t, out_type=tf.int64) for t in tensors]
        if rows is not None:
            rows = tf.reshape(tf.cast(rows, tf.int64), [1])
            shapes = [tf.concat([rows, s[1:]], 0) for s in shapes]
        shape = tf.concat(shapes, 0)
        width = sum(t.shape.rank for t in tensors)
        rows, count = self._variables(width)
        seen = tf.reduce_any(tf.reduce_all(tf.equal(rows, shape[None]), axis=1))

        def add():
            rows.scatter_nd_update(tf.reshape(count.read_value(), [1, 1]), shape[None])
            count.assign_add(1)
            return tf.constant(0)

        tf.cond(tf.logical_or(seen, count >= self.capacity), lambda: tf.constant(0), add)

    def prepare(self, specs) -> None:
        """Creates the log for data of these specs (or tensors), eagerly: a variable created
        while a function is first traced would make TensorFlow trace it twice."""
        specs = [s for s in tf.nest.flatten(specs) if s is not None]
        if all(s.shape.rank is not None for s in specs):
            self._variables(sum(s.shape.rank for s in specs))

    def _variables(self, width: int):
        if width not in self._rows:
            with tf.init_scope():
                self._rows[width] = tf.Variable(
                    tf.fill([self.capacity, width], tf.constant(-1, tf.int64)), trainable=False,
                    name="xla_shape_log")
                # int64: an int32 variable lives in host memory, out of an XLA GPU step's reach.
                self._counts[width] = tf.Variable(0, trainable=False, dtype=tf.int64,
                                                  name="xla_shape_count")
        return self._rows[width], self._counts[width]

    def count(self) -> int:
        """The distinct shapes seen so far (capped at the capacity)."""
        return sum(int(c.numpy()) for c in self._counts.values())

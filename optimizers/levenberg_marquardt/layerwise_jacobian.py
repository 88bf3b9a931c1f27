"""The per-example Jacobian in closed form, layer by layer, for models made of affine layers.

When examples are independent and every trained variable belongs to an affine layer
(`layers.Dense`: `z = x · W + b`), example i's rows depend on `W` only through `z_i`, so

    ∂r_i/∂W = x_i ⊗ ∂r_i/∂z_i,    ∂r_i/∂b = ∂r_i/∂z_i,

and one backward pass of `Σ_i r_i` gives every `∂r_i/∂z_i` (the rows of other examples do not
depend on `z_i`). With k rows per example it takes k backward passes, one per row position.
This is the same Jacobian as `jacobian.per_example_jacobian` (each example differentiated on
a batch of its own, vectorized by pfor) at a fraction of the ops, so it traces faster
(docs/guides/levenberg_marquardt.md, "Jacobians, chunk by chunk", has the counts).

A layer that is not affine may give its own part in closed form through a layer hook,
`example_jacobian(inputs, variables)` (docs/guides/architecture.md, "Per-example Jacobians";
`layers.Formula` has one): its calls are recorded as `Dense`'s are, and its variables'
columns are `∂r_i/∂out_i · ∂out_i/∂θ`, the first factor from the same backward passes, the
second from the hook.

It applies only where it is exact. The model's layers must all keep the examples on the first
axis (`applies_to`: the built-in layers and models say so with the class attribute
`keeps_example_axis = True`, which is not part of `Layer`; a custom one may set it), and a
`Dense` is recorded only when it multiplies by its variables themselves
(`dense_forms.dense_layers`). Then, while tracing: each trained variable must be read only by
the `Dense` layers recorded (`dense_forms.recording`), as many times as they report it; a
variable read elsewhere as well (a tied weight, a layer without a closed
form, a nested `tf.function`) leaves the Jacobian to pfor. So does eager execution (no graph
to check), a layer called inside a control-flow branch or loop of its own, and more than
`MAX_ROWS_PER_EXAMPLE` rows per example. Under a `tf.distribute` strategy each replica reads
its own variables' handles, and the same check applies.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from typing import Callable, Iterator, NamedTuple, Sequence

import numpy as np
import tensorflow as tf

from graphfit.core.interception import replaced_method
from graphfit.optimizers.levenberg_marquardt import dense_forms, jacobian_hooks

__all__ = ["MAX_ROWS_PER_EXAMPLE", "CallRecord", "applies_to", "hook_layers",
           "layerwise_jacobian", "recording_calls"]

# Each row position costs a backward pass of the whole chunk: beyond this many rows per
# example (a softmax over many classes) pfor's single vectorized pass traces fewer ops.
MAX_ROWS_PER_EXAMPLE = 16


def applies_to(model) -> bool:
    """Whether every layer of `model` (itself included) keeps the examples on the first
    axis (it sets `keeps_example_axis = True`), so that a Dense's first axis is the examples. A
    custom layer or model that does not say so could transpose to time-major or fold time
    into the batch axis, where the closed form would pair the wrong rows."""
    return all(getattr(layer, "keeps_example_axis", False) for layer in model.flatten_layers())


def hook_layers(model) -> list:
    """The layers of `model` (itself included) that give their own per-example Jacobian:
    they define `example_jacobian(inputs, variables)` (docs/guides/architecture.md, "Per-example
    Jacobians")."""
    return [layer for layer in model.flatten_layers()
            if callable(getattr(layer, "example_jacobian", None))]


class CallRecord(NamedTuple):
    """One call of a layer with an `example_jacobian` hook.

    Attributes:
        layer: the layer.
        variables: its trainable variables.
        inputs: what its `call` received.
        outputs: what it returned, (batch, ...).
    """

    layer: object
    variables: tuple
    inputs: tf.Tensor
    outputs: tf.Tensor


@contextlib.contextmanager
def recording_calls(layers) -> Iterator[list[CallRecord]]:
    """Collects a `CallRecord` of every call of `layers` inside the block."""
    records: list[CallRecord] = []

    def record(layer, call):
        def recorded(inputs, *args, **kwargs):
            outputs = call(inputs, *args, **kwargs)
            records.append(CallRecord(layer, tuple(layer.trainable_variables), inputs,
                                      outputs))
            return outputs

        return recorded

    with contextlib.ExitStack() as stack:
        for layer in layers:
            stack.enter_context(replaced_method(layer, "call", functools.partial(record, layer)))
        yield records


def layerwise_jacobian(rows_for: Callable, data, variables: Sequence[tf.Variable],
                       rows_per_example: int | None, dense_layers: Sequence = (),
                       hooked_layers: Sequence = ()):
    """`(C, rho)` of `rows_for(data)` in closed form, or None where that is not exact.

    Args:
        rows_for: `rows_for(part) -> (rows, rho)`, flat, example by example, the same
            number of rows per example.
        data: a structure of tensors whose first axis is the example.
        variables: the trained variables (n scalars in all).
        rows_per_example: the rows of one example (a Python int), or None when not static.
        dense_layers: the model's `Dense` layers (`dense_forms.dense_layers`), whose calls
            are recorded.
        hooked_layers: the model's layers with an `example_jacobian` hook (`hook_layers`),
            whose calls are recorded and whose hook gives their part of the Jacobian.

    Returns:
        `(C, rho)` as `jacobian.per_example_jacobian` returns them, or None (nothing is
        computed then; the ops traced for the check are pruned from the graph).
    """
    k = rows_per_example
    if (not tf.inside_function() or not variables or k is None
            or not 1 <= k <= MAX_ROWS_PER_EXAMPLE):
        return None
    graph = tf.compat.v1.get_default_graph()
    ops_before = len(graph.get_operations())
    with tf.GradientTape(watch_accessed_variables=False, persistent=k > 1) as tape:
        tape.watch(variables)
        with dense_forms.recording(dense_layers) as records, \
                recording_calls(hooked_layers) as calls:
            rows, rho = rows_for(data)
        if k == 1:
            sums = [tf.reduce_sum(rows)]
        else:
            by_example = tf.reshape(rows, [-1, k])
            sums = [tf.reduce_sum(by_example[:, j]) for j in range(k)]
    trained = {v.ref() for v in variables}
    records = [r for r in records if any(v.ref() in trained for v in r.variables)]
    calls = [r for r in calls if any(v.ref() in trained for v in r.variables)]
    # A layer called inside a tf.cond or loop of its own records tensors of that inner graph,
    # which this tape cannot differentiate with respect to.
    if any(tf.is_symbolic_tensor(t) and t.graph is not graph
           for r in (*records, *calls) for t in (r.inputs, r.outputs)):
        return None
    if not _reads_are_recorded(graph.get_operations()[ops_before:], variables,
                               (*records, *calls)):
        return None
    outputs = [r.outputs for r in (*records, *calls)]
    per_row = [tape.gradient(total, outputs, unconnected_gradients=tf.UnconnectedGradients.ZERO)
               for total in sums]
    del tape
    columns = {v.ref(): [] for v in variables}
    for i, record in enumerate(records):  # the chunk's examples along the first axis
        # (examples, k, [positions,] units): example-major rows, as `rows` orders them.
        dz = tf.stack([_per_example(g[i]) for g in per_row], axis=1)
        units = record.outputs.shape[-1]
        x = _per_example(record.inputs)
        kernel, *bias = record.variables
        if kernel.ref() in columns:
            columns[kernel.ref()].append(_outer(x, dz, k, x.shape[-1] * units))
        if bias and bias[0].ref() in columns:
            columns[bias[0].ref()].append(
                dz if record.outputs.shape.rank == 2 else tf.reduce_sum(dz, axis=2))
    for i, call in enumerate(calls, start=len(records)):
        _add_hook_columns(call, [g[i] for g in per_row], trained, columns)
    dtype = rows.dtype
    parts = []
    for v in variables:
        size = int(np.prod(v.shape.as_list()))
        total = tf.add_n(columns[v.ref()]) if len(columns[v.ref()]) > 1 else columns[v.ref()][0]
        parts.append(tf.reshape(tf.cast(total, dtype), [-1, size]))
    return tf.concat(parts, axis=1), rho


def _add_hook_columns(call: CallRecord, per_row, trained, columns) -> None:
    """Appends to `columns` the part of each trained variable's Jacobian that flows through
    `call`: `∂r_i/∂θ = ∂r_i/∂out_i · ∂out_i/∂θ`, the latter from the layer's hook."""
    wanted = [v for v in call.variables if v.ref() in trained]
    # (examples, k, outputs per example): example-major rows, as `rows` orders them.
    dz = tf.stack([tf.reshape(g, [tf.shape(g)[0], -1]) for g in per_row], axis=1)
    parts = jacobian_hooks.checked_parts(call.layer, call.inputs, call.outputs, wanted,
                                         call.layer.example_jacobian(call.inputs, wanted))
    for variable, part in zip(wanted, parts):  # part: (examples, outputs, size)
        part = tf.cast(part, dz.dtype)
        if part.shape[1] == 1:  # one output per example: a broadcast product
            columns[variable.ref()].append(dz * part)
        else:
            columns[variable.ref()].append(tf.reduce_sum(dz[..., None] * part[:, None], 2))


def _per_example(t: tf.Tensor) -> tf.Tensor:
    """`t` (batch, ..., features) as (batch, positions, features); rank 2 is left as is."""
    if t.shape.rank == 2:
        return t
    return tf.reshape(t, [tf.shape(t)[0], -1, tf.shape(t)[-1]])


def _outer(x: tf.Tensor, dz: tf.Tensor, k: int, size: int) -> tf.Tensor:
    """The kernel's Jacobian (examples, k, features · units): `x ⊗ dz` per example and row,
    summed over the positions of a rank > 2 input."""
    if x.shape.rank == 2:  # x (b, f), dz (b, k, u): a broadcast product traces and runs cheapest
        features, units = x.shape[-1], dz.shape[-1]
        if features and units:  # static: reshapes trace fewer ops than new axes
            product = tf.reshape(x, [-1, 1, features, 1]) * tf.reshape(dz, [-1, k, 1, units])
        else:
            product = x[:, None, :, None] * dz[:, :, None, :]
    else:  # x (b, p, f), dz (b, k, p, u)
        product = tf.einsum("bpf,bkpu->bkfu", x, dz)
    return tf.reshape(product, [-1, k, size])


def _reads_are_recorded(new_ops, variables, records) -> bool:
    """Whether every trained variable is covered by a record, and the ops traced for the
    rows read each one exactly as often as the records say (one read per record)."""
    recorded = Counter(v.ref() for r in records for v in r.variables)
    if any(recorded[v.ref()] == 0 for v in variables):
        return False
    handles = {}
    for v in variables:
        handle = getattr(v, "handle", None)
        if handle is None or tf.is_symbolic_tensor(handle):
            return False  # a distributed or otherwise wrapped variable: not checked here
        handles[id(handle)] = v.ref()
    reads = Counter()
    for op in new_ops:
        for t in op.inputs:
            if t.dtype == tf.resource:
                source = _captured_source(t)
                if id(source) in handles:
                    reads[handles[id(source)]] += 1
    return all(reads[v.ref()] == recorded[v.ref()] for v in variables)


def _captured_source(t):
    """The tensor outside every function graph that `t` captures (a variable's eager handle),
    or `t` itself when it is not a capture."""
    while tf.is_symbolic_tensor(t) and t.op.type == "Placeholder":
        outer = {id(internal): external for external, internal in
                 getattr(t.graph, "captures", ())}.get(id(t))
        if outer is None:
            return t
        t = outer
    return t

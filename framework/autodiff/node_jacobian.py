"""The machinery behind `graphfit.autodiff.jacobian`: reaching a node, and differentiating it.

`node_function` turns `of` ("output", an output name, or a layer name) into a function
`x -> node tensor` that runs the model's forward pass and returns the tensor that node computed,
through `graphfit.core.layer_outputs.capture_outputs`. `wrt_variables` and `wrt_inputs`
differentiate such a function in forward or reverse mode. Jacobians with respect to variables,
and the full Jacobian with respect to the inputs, reuse the Levenberg–Marquardt optimizer's
vectorized Jacobian of a vector of rows
(`graphfit.optimizers.levenberg_marquardt.jacobian.jacobian`); the
per-example (batch_jacobian-style) Jacobian with respect to the inputs is computed here.

Every forward pass runs inside `update_hooks.collect_updates()`, whose collected updates are
dropped, so a Jacobian at `training=True` never moves batch-norm statistics.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import tensorflow as tf

from graphfit.core import layer_outputs, update_hooks
from graphfit.core.registry import did_you_mean
from graphfit.core.shapes import num_elements

__all__ = ["OUTPUT", "node_function", "layer_names", "wrt_variables", "wrt_inputs",
           "diagonal_blocks", "choose_mode", "size", "Activation", "activation",
           "wrt_activation"]

OUTPUT = "output"
_ZERO = tf.UnconnectedGradients.ZERO


def layer_names(model) -> list[str]:
    """The names of every layer inside `model`, nested models included, depth first."""
    return [layer.name for layer in model.flatten_layers(include_self=False)]


def size(shape) -> int:
    """The number of elements of a static shape."""
    return num_elements(shape)


def node_function(model, of: str, training: bool) -> Callable:
    """`x -> tensor`: the forward pass, returning the model output or a named layer's output.

    Raises:
        ValueError: for an `of` that names nothing (listing the layer names), "output" on a
            model with several outputs, and (when the function runs) a layer that runs more
            than once or not at all, or whose output is not one floating tensor.
    """
    if not isinstance(of, str):
        raise ValueError("of must be 'output', an output name or a layer name. "
                         f"Received: of={of!r}")
    output_names = model.output_names
    if of == OUTPUT and output_names is not None and len(output_names) > 1:
        raise ValueError(
            f"Model {model.name!r} has several outputs {output_names}, so of='output' is "
            f"ambiguous: pass of=<one output name>, e.g. of={output_names[0]!r}, or a layer name."
        )
    if of == OUTPUT or (output_names is not None and of in output_names):
        key = of if of != OUTPUT else (output_names[0] if output_names else None)

        def output(x):
            with update_hooks.collect_updates():  # dropped: a Jacobian never moves statistics
                y = model(x, training=training)
            return _single_tensor(y if key is None else y[key], f"output {of!r}")

        return output
    names = layer_names(model)
    if of not in names:
        hint = did_you_mean(of, names)
        outputs = f" Its outputs: {output_names}." if output_names else ""
        raise ValueError(
            f"of={of!r} is neither 'output' nor a layer of model {model.name!r}.{hint} "
            f"Its layers: {names}.{outputs}"
        )

    def layer_output(x):
        with update_hooks.collect_updates(), \
                layer_outputs.capture_outputs(model, [of]) as captured:
            model(x, training=training)
        calls = captured.calls.get(of, 0)
        if calls == 0:
            raise ValueError(
                f"Layer {of!r} does not run in the forward pass of model {model.name!r} "
                f"(training={training}), so it has no output to differentiate."
            )
        if calls > 1:
            raise ValueError(
                f"Layer {of!r} runs {calls} times in one forward pass of model {model.name!r} "
                f"(a shared layer), so 'its output' is ambiguous. Give each use its own layer "
                f"to differentiate one of them."
            )
        return _single_tensor(captured[of], f"layer {of!r}")

    return layer_output


def _single_tensor(value, what: str) -> tf.Tensor:
    if not isinstance(value, tf.Tensor):
        raise ValueError(
            f"The {what} is a {type(value).__name__}, not a single tensor; jacobian "
            f"differentiates one tensor. Name a layer (or output) that returns one."
        )
    if not value.dtype.is_floating:
        raise ValueError(
            f"The {what} has dtype {value.dtype.name}; only floating tensors can be "
            f"differentiated."
        )
    if value.shape.rank is None or value.shape.rank < 1:
        raise ValueError(f"The {what} has shape {value.shape}; jacobian needs a batch axis.")
    return value


def choose_mode(mode: str, inputs: int, outputs: int) -> str:
    """`mode`, or for "auto": forward mode when fewer numbers go in than come out."""
    from graphfit.optimizers.levenberg_marquardt import (
        jacobian as lm_jacobian,  # the optimizers package imports graphfit
    )

    return lm_jacobian.choose_mode(mode, inputs, outputs, examples_independent=False)


def _flat_rows(node_fn, x) -> Callable:
    def rows_fn():
        rows = tf.reshape(node_fn(x), [-1])
        return rows, tf.zeros([0], rows.dtype)  # lm_jacobian's `rho`, unused here

    return rows_fn


def wrt_variables(node_fn, x, out_shape, variables: Sequence[tf.Variable], mode: str) -> list:
    """[(batch, *out[1:], *var.shape) for each variable] in forward or reverse mode."""
    from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian

    rows_fn = _flat_rows(node_fn, x)
    matrix, _ = lm_jacobian.jacobian(rows_fn, list(variables), mode)
    columns = tf.split(matrix, [size(v.shape) for v in variables], axis=1)
    return [tf.reshape(c, tf.concat([out_shape, v.shape.as_list()], 0))
            for c, v in zip(columns, variables)]


def wrt_inputs(node_fn, x, out_shape, mode: str, per_example: bool):
    """The Jacobian with respect to the inputs, in `x`'s structure.

    per_example: one (batch, *out[1:], *in[1:]) block per example, else the full
    (batch, *out[1:], batch, *in[1:]) Jacobian.
    """
    flat = [tf.convert_to_tensor(t) for t in tf.nest.flatten(x)]
    batch = tf.shape(flat[0])[0]
    widths = [size(t.shape[1:]) for t in flat]
    # Each input as (batch, features): the Jacobian is computed on these flat views.
    views = [tf.reshape(t, [batch, w]) for t, w in zip(flat, widths)]

    def rows(views):
        inputs = [tf.reshape(v, tf.shape(t)) for v, t in zip(views, flat)]
        return tf.reshape(node_fn(tf.nest.pack_sequence_as(x, inputs)), [batch, -1])

    if not per_example:
        from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian

        matrix, _ = lm_jacobian.jacobian(
            lambda: (tf.reshape(rows(views), [-1]), tf.zeros([0], flat[0].dtype)), views, mode)
        columns = tf.split(matrix, [batch * w for w in widths], axis=1)
        parts = [tf.reshape(c, tf.concat([out_shape, tf.shape(t)], 0))
                 for c, t in zip(columns, flat)]
    else:
        blocks = _reverse_blocks(rows, views) if mode == "reverse" else _forward_blocks(
            rows, views, widths)
        parts = [tf.reshape(b, tf.concat([out_shape, tf.shape(t)[1:]], 0))
                 for b, t in zip(blocks, flat)]
    return tf.nest.pack_sequence_as(x, parts)


def diagonal_blocks(full, out, x) -> tf.Tensor:
    """The blocks d out[b] / d x[b] of a full (batch, *out[1:], batch, *x[1:]) Jacobian:
    exact even when the examples interact, unlike blocks computed example by example."""
    batch = tf.shape(full)[0]
    out_size, in_size = size(out.shape[1:]), size(x.shape[1:])
    square = tf.reshape(full, [batch, out_size, batch, in_size])
    diagonal = tf.linalg.diag_part(tf.transpose(square, [1, 3, 0, 2]))  # (out, in, batch)
    blocks = tf.transpose(diagonal, [2, 0, 1])
    return tf.reshape(blocks, tf.concat([tf.shape(out), tf.shape(x)[1:]], 0))


def _reverse_blocks(rows, views) -> list:
    """[(batch, out, in_k)]: one backward pass per output element, vectorized (pfor)."""
    with tf.GradientTape(persistent=len(views) > 1, watch_accessed_variables=False) as tape:
        tape.watch(views)
        out = rows(views)
    blocks = [tape.batch_jacobian(out, v, unconnected_gradients=_ZERO,
                                  experimental_use_pfor=True) for v in views]
    del tape
    return blocks


def _forward_blocks(rows, views, widths) -> list:
    """[(batch, out, in_k)]: one forward pass per input feature, vectorized over features.

    The tangent of feature j is e_j in every example at once; since examples are independent,
    the output of example b then carries d out_b / d in_{b, j}.
    """
    from graphfit.optimizers.levenberg_marquardt.jacobian import TANGENT_GROUP

    total, dtype = sum(widths), views[0].dtype
    groups = []
    for start in range(0, total, TANGENT_GROUP):
        count = min(TANGENT_GROUP, total - start)

        def jvp(unit):
            primals = [tf.identity(v) for v in views]  # watched inside this trace
            tangents = [tf.broadcast_to(tf.cast(p, v.dtype)[None], tf.shape(v))
                        for p, v in zip(tf.split(unit, widths), views)]
            with tf.autodiff.ForwardAccumulator(primals, tangents) as accumulator:
                out = rows(primals)
            return accumulator.jvp(out, unconnected_gradients=_ZERO)

        units = tf.one_hot(tf.range(start, start + count), total, dtype=dtype)
        groups.append(tf.vectorized_map(jvp, units))  # (count, batch, out)
    stacked = groups[0] if len(groups) == 1 else tf.concat(groups, 0)
    return tf.split(tf.transpose(stacked, [1, 2, 0]), widths, axis=2)


@dataclasses.dataclass(frozen=True)
class Activation:
    """`wrt=activation("hidden")`: differentiate with respect to the output of the layer
    named "hidden" in the forward pass (its activation), not its variables.

    Example:

        >>> activation("hidden")
        Activation(layer='hidden')
    """

    layer: str


def activation(layer: str) -> Activation:
    """The output of the layer named `layer`, as `jacobian`'s `wrt` (see `Activation`)."""
    if not isinstance(layer, str) or not layer:
        raise ValueError(f"activation() takes a layer name. Received: layer={layer!r}")
    return Activation(layer)


def check_activation(model, wrt: Activation) -> None:
    """Refuses an `Activation` naming no layer of `model` (listing the names)."""
    names = layer_names(model)
    if wrt.layer not in names:
        hint = did_you_mean(wrt.layer, names)
        raise ValueError(f"wrt=activation({wrt.layer!r}) names no layer of model "
                         f"{model.name!r}.{hint} Its layers: {names}.")


def wrt_activation(model, node_fn, x, name: str, per_example) -> tf.Tensor:
    """d node / d (layer `name`'s output): (batch, *out[1:], *a[1:]) blocks per example
    (`per_example` True), the full (batch, *out[1:], batch, *a[1:]) Jacobian (False), or the
    exact blocks cut out of it ("diagonal")."""
    layer = next(item for item in model.flatten_layers(include_self=False)
                 if item.name == name)
    held = []
    with tf.GradientTape(persistent=False, watch_accessed_variables=False) as tape:
        def watch(_, outputs):
            outputs = _single_tensor(outputs, f"layer {name!r}")
            tape.watch(outputs)
            held.append(outputs)
            return outputs

        with layer_outputs.transform_outputs([layer], watch):
            out = node_fn(x)
    if len(held) != 1:
        raise ValueError(
            f"Layer {name!r} runs {len(held)} times in one forward pass of model "
            f"{model.name!r}, so 'its output' is ambiguous; wrt=activation() needs a layer "
            f"that runs once.")
    (inner,) = held
    if per_example is True:
        return tape.batch_jacobian(out, inner, unconnected_gradients=_ZERO,
                                   experimental_use_pfor=True)
    full = tape.jacobian(out, inner, unconnected_gradients=_ZERO, experimental_use_pfor=True)
    return diagonal_blocks(full, out, inner) if per_example == "diagonal" else full

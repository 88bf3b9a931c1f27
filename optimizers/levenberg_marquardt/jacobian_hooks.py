"""The contract of the per-example Jacobian layer hook, `example_jacobian(inputs, variables)`
(docs/guides/architecture.md, "Per-example Jacobians"): one tensor per variable asked for,
each of shape (batch, outputs per example, variable size).

`checked_parts` holds a hook's answer to the contract's count and static shapes while
`layerwise_jacobian` traces (every call, at no run-time cost), so a malformed hook stops with
a ValueError naming the layer rather than a TensorFlow shape error or an IndexError.
`compare_with_autodiff` (`graphfit.testing.check_example_jacobian`) checks its values: the
one thing a trace cannot check, and an opt-in test, since a hook with the wrong values trains
silently to a wrong fit.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

__all__ = ["CONTRACT", "checked_parts", "compare_with_autodiff"]

CONTRACT = ("example_jacobian(inputs, variables) must return one tensor per variable in "
            "`variables`, in that order, each of shape (batch, outputs per example, variable "
            "size): each example's derivatives of its outputs (docs/guides/architecture.md, "
            "\"Per-example Jacobians\")")


def _describe(layer) -> str:
    return f"{type(layer).__name__} {getattr(layer, 'name', '')!r}"


def _expected(inputs, outputs, variable) -> tuple:
    batch = tf.TensorShape(tf.nest.flatten(inputs)[0].shape)[0]
    per_example = tf.TensorShape(outputs.shape)[1:].num_elements()
    return batch, per_example, int(np.prod(variable.shape.as_list()))


def checked_parts(layer, inputs, outputs, variables: Sequence[tf.Variable], parts) -> list:
    """`parts`, the hook's answer for `variables`, as a list, once its count and static
    shapes fit the contract (a dimension unknown while tracing is not checked).

    Raises:
        ValueError: naming the layer, the variable, what was returned and the contract.
    """
    if not isinstance(parts, (list, tuple)) or len(parts) != len(variables):
        got = (f"{len(parts)} tensor(s)" if isinstance(parts, (list, tuple))
               else type(parts).__name__)
        raise ValueError(
            f"{_describe(layer)}: {CONTRACT}. It was asked for {len(variables)} variable(s) "
            f"({', '.join(v.name for v in variables)}) and returned {got}.")
    for variable, part in zip(variables, parts):
        want = _expected(inputs, outputs, variable)
        shape = tf.TensorShape(getattr(part, "shape", np.shape(part)))
        fits = shape.rank == 3 and all(
            w is None or s is None or s == w for s, w in zip(shape.as_list(), want))
        if not fits:
            text = "(" + ", ".join("batch" if w is None else str(w) for w in want) + ")"
            raise ValueError(
                f"{_describe(layer)}: {CONTRACT}. For {variable.name} (shape "
                f"{variable.shape.as_list()}) it must have shape {text}; it returned a "
                f"tensor of shape {shape}.")
    return list(parts)


def compare_with_autodiff(layer, inputs, rtol: float = 1e-6, atol: float = 1e-9) -> float:
    """The largest |hook − autodiff| over the layer's trainable variables on `inputs`
    (`GradientTape.jacobian` of the layer's outputs); see
    `graphfit.testing.check_example_jacobian`.

    Raises:
        AssertionError: naming the layer, the variable and the worst entry.
    """
    inputs = tf.convert_to_tensor(inputs)
    layer(inputs)  # built
    variables = list(layer.trainable_variables)
    if variables and inputs.dtype.is_floating:
        inputs = tf.cast(inputs, variables[0].dtype)
    with tf.GradientTape() as tape:
        outputs = layer(inputs)
    reference = tape.jacobian(outputs, variables,
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
    parts = checked_parts(layer, inputs, outputs, variables,
                          layer.example_jacobian(inputs, variables))
    worst = 0.0
    batch = int(outputs.shape[0])
    for variable, part, full in zip(variables, parts, reference):
        size = int(np.prod(variable.shape.as_list()))
        # (batch, *outputs per example, *variable shape): each example's derivatives.
        want = np.reshape(np.asarray(full), (batch, -1, size))
        got = np.asarray(tf.cast(part, want.dtype))
        error = np.abs(got - want)
        index = np.unravel_index(np.argmax(error), error.shape)
        worst = max(worst, float(error[index]))
        if np.any(error > atol + rtol * np.abs(want)):
            raise AssertionError(
                f"{_describe(layer)}: example_jacobian differs from GradientTape.jacobian for "
                f"{variable.name}: worst at [example {index[0]}, output {index[1]}, entry "
                f"{index[2]}]: the hook gives {got[index]:.6g}, autodiff {want[index]:.6g} "
                f"(rtol {rtol:g}, atol {atol:g})")
    return worst

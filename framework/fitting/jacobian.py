"""The Jacobian of a model's outputs with respect to its fit parameters, in float64.

Small parameter counts (the usual curve fit) take one eager forward-mode pass per parameter,
which traces nothing; larger ones use `graphfit.autodiff.jacobian` (one traced, vectorized
call). Columns are with respect to the parameters' bounded values: each internal column is
divided by d value / d internal value (`FitParameter.derivative`).

Example:

    >>> import numpy as np, graphfit as gf
    >>> from graphfit import layers
    >>> from graphfit.fitting import model_parameters
    >>> model = gf.Sequential([layers.Formula("a*x + b", params={"a": 2.0, "b": 1.0})],
    ...                       input_shape=(1,), dtype="float64")
    >>> parameter_jacobian(model, np.array([[0.0], [3.0]]), model_parameters(model))
    array([[0., 1.],
           [3., 1.]])
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from graphfit.fitting.parameters import FitParameter

__all__ = ["parameter_jacobian", "model_outputs", "EAGER_PARAMETERS"]

# Up to this many parameters the Jacobian is one eager forward pass per parameter (no trace).
EAGER_PARAMETERS = 64


def _inputs(model, x):
    spec = getattr(model, "built_input_spec", None)
    if isinstance(spec, tf.TensorSpec) and spec.shape.rank == 2 and np.ndim(x) == 1:
        x = np.asarray(x)[:, None]  # as fit reads a vector for one input column
    dtype = tf.as_dtype(model.compute_dtype)
    return tf.nest.map_structure(
        lambda a: tf.constant(a, dtype) if np.asarray(a).dtype.kind == "f" else tf.constant(a),
        x)


def _single(outputs, model) -> tf.Tensor:
    if not isinstance(outputs, (tf.Tensor, tf.Variable)):
        raise ValueError(
            f"a fit report needs a model with one output tensor; model {model.name!r} returns "
            f"{type(outputs).__name__}. Report on a model of that output alone.")
    return outputs


def model_outputs(model, x) -> np.ndarray:
    """The model's outputs at `x` (inference mode) as float64, shape (examples, values)."""
    outputs = _single(model(_inputs(model, x), training=False), model)
    values = np.asarray(outputs.numpy(), np.float64)
    return values.reshape(values.shape[0], -1)


def parameter_jacobian(model, x, parameters: Sequence[FitParameter]) -> np.ndarray:
    """d outputs / d parameters at `x`: shape (examples × values, len(parameters)), float64,
    the outputs flattened row by row as `model_outputs(...).ravel()`.

    Raises:
        ValueError: for a parameter that does not vary (it has no trainable variable).
    """
    fixed = [p.name for p in parameters if p.variable is None]
    if fixed:
        raise ValueError(f"parameter_jacobian takes varying parameters only; fixed: {fixed}")
    inputs = _inputs(model, x)
    if len(parameters) <= EAGER_PARAMETERS:
        columns = [_forward_column(model, inputs, p) for p in parameters]
    else:
        columns = _traced_columns(model, inputs, parameters)
    jacobian = np.stack(columns, axis=1) if columns else np.zeros((0, 0))
    slopes = np.array([p.derivative for p in parameters], np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(slopes != 0, jacobian / np.where(slopes != 0, slopes, 1.0), 0.0)


def _forward_column(model, inputs, parameter: FitParameter) -> np.ndarray:
    variable = parameter.variable
    tangent = np.zeros(variable.shape, variable.dtype.as_numpy_dtype)
    tangent[parameter.index] = 1
    with tf.autodiff.ForwardAccumulator(variable, tf.constant(tangent)) as accumulator:
        outputs = _single(model(inputs, training=False), model)
    column = accumulator.jvp(outputs, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return np.asarray(column.numpy(), np.float64).ravel()


def _traced_columns(model, inputs, parameters) -> list[np.ndarray]:
    from graphfit import autodiff

    variables = list({id(p.variable): p.variable for p in parameters}.values())
    blocks = autodiff.jacobian(model, inputs, wrt=variables)
    keyed = {autodiff.variable_key(v): v for v in variables}
    by_variable = {}
    for key, block in blocks.items():
        variable = keyed[key]
        array = np.asarray(block.numpy(), np.float64)
        by_variable[id(variable)] = array.reshape(-1, *variable.shape.as_list()) if \
            variable.shape.rank else array.reshape(-1)
    return [by_variable[id(p.variable)][(slice(None), *p.index)] for p in parameters]

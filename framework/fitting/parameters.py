"""The parameters a fit report describes: one `FitParameter` per scalar a model fits.

A layer may describe its own parameters through a `fit_parameters()` method (the layer hook
the fit report reads; `layers.Formula` has one: names, bounds, fixed parameters and data
sets). Any other trainable variable counts element by element, named after its path
(`"dense/kernel[0,1]"`), unbounded.

Example:

    >>> import graphfit as gf
    >>> from graphfit import layers
    >>> model = gf.Sequential([layers.Dense(1, name="dense")], input_shape=(2,), name="line")
    >>> [p.name for p in model_parameters(model)]
    ['line/dense/kernel[0,0]', 'line/dense/kernel[1,0]', 'line/dense/bias[0]']
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import tensorflow as tf

__all__ = ["FitParameter", "model_parameters"]


@dataclasses.dataclass(frozen=True)
class FitParameter:
    """One fitted scalar.

    Attributes:
        name: its name in the report.
        value: its (bounded) value now.
        vary: False for a fixed parameter (no optimizer moves it).
        min, max: its bounds (-inf and inf: none).
        variable: the trainable variable that holds it (its internal, unbounded value), or
            None for a fixed parameter.
        index: its position inside `variable` (() for a scalar variable).
        derivative: d value / d internal value at the current point (1 without bounds).
        data_set: the data set it belongs to in a global fit, or None (shared).
    """

    name: str
    value: float
    vary: bool = True
    min: float = -math.inf
    max: float = math.inf
    variable: tf.Variable | None = None
    index: tuple = ()
    derivative: float = 1.0
    data_set: int | None = None


def _variable_key(variable) -> str:
    return getattr(variable, "path", None) or variable.name.split(":")[0]


def model_parameters(model) -> list[FitParameter]:
    """Every parameter of `model`: those its layers describe (`fit_parameters()`), then the
    elements of its other trainable variables."""
    parameters: list[FitParameter] = []
    described: set[int] = set()
    for layer in model.flatten_layers(include_self=True):
        describe = getattr(layer, "fit_parameters", None)
        if describe is None:
            continue
        for parameter in describe():
            parameters.append(parameter)
        described.update(id(v) for v in layer.variables)
    for variable in model.trainable_variables:
        if id(variable) in described:
            continue
        values = np.asarray(variable.numpy(), np.float64)
        for index in np.ndindex(values.shape):
            suffix = "[" + ",".join(map(str, index)) + "]" if index else ""
            parameters.append(FitParameter(_variable_key(variable) + suffix,
                                           float(values[index]), variable=variable,
                                           index=index))
    return parameters

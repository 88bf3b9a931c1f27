"""Variables: the one parameter counter of graphfit, `as_tf_variable`, and the constraint
each variable carries (`constraint_of`, `attach_constraint`).

Example:

    >>> import tensorflow as tf
    >>> from graphfit.core.variables import count_parameters
    >>> count_parameters([tf.Variable(tf.zeros((3, 2))), tf.Variable(0.0)])
    7
"""

from __future__ import annotations

import weakref
from typing import Callable, Iterable

import numpy as np
import tensorflow as tf

from graphfit.core.shapes import num_elements

__all__ = ["count_parameters", "as_tf_variable", "weight_initializer", "constraint_of",
           "attach_constraint", "assign_in_order"]

# Constraints of variables created elsewhere (a wrapped Keras layer's weights carry theirs on
# the Keras variable, not on the tf.Variable the optimizers update), by id of the tf.Variable;
# an entry goes when its variable is garbage-collected.
_ATTACHED: dict[int, tuple[weakref.ref, Callable]] = {}


def count_parameters(variables: Iterable) -> int:
    """The total number of scalars in `variables` (anything with a static `.shape`)."""
    return sum(num_elements(v.shape) for v in variables)


def as_tf_variable(variable) -> tf.Variable:
    """The `tf.Variable` itself: `variable`, or the one a Keras 3 `keras.Variable` wraps.

    Raises:
        ValueError: for anything else (optimizers update `tf.Variable` objects only).
    """
    if isinstance(variable, tf.Variable):
        return variable
    # A keras.Variable on the TensorFlow backend wraps a tf.Variable.
    inner = getattr(variable, "value", None)
    if isinstance(inner, tf.Variable):
        return inner
    raise ValueError(
        f"Optimizers update tf.Variable objects. Received: {variable!r} "
        f"(of type {type(variable).__name__})."
    )


def weight_initializer(name: str, initializer, trainable: bool):
    """The initializer `add_weight` calls: `initializer` (a Keras initializer, its name or
    config, or a callable `(shape, dtype) -> tensor`), by default 'glorot_uniform' for a
    trainable weight and 'zeros' for the others.

    Raises:
        ValueError: naming the weight and the value received.
    """
    if initializer is None:
        initializer = "glorot_uniform" if trainable else "zeros"
    init = initializer
    if isinstance(initializer, (str, dict)):
        import keras  # the module stays importable without Keras's cost

        init = keras.initializers.get(initializer)
    if not callable(init):
        raise ValueError(
            f"initializer of weight {name!r} must be a Keras initializer, its name, or a "
            f"callable (shape, dtype) -> tensor. Received: initializer={initializer!r}"
        )
    return init


def attach_constraint(variable: tf.Variable, constraint: Callable | None) -> None:
    """Records `constraint` (`tensor -> tensor`) as the constraint of `variable`, for a
    variable whose constructor did not get it (the `tf.Variable` under a Keras weight that has
    a `constraint`). None removes an attached constraint."""
    key = id(variable)
    if constraint is None:
        _ATTACHED.pop(key, None)
        return
    reference = weakref.ref(variable, lambda _, key=key: _ATTACHED.pop(key, None))
    _ATTACHED[key] = (reference, constraint)


def constraint_of(variable) -> Callable | None:
    """The constraint optimizers apply to `variable` after each update: its own
    (`tf.Variable(..., constraint=fn)`), else one attached with `attach_constraint`, else
    None."""
    own = getattr(variable, "constraint", None)
    if own is not None:
        return own
    entry = _ATTACHED.get(id(variable))
    if entry is not None and entry[0]() is variable:
        return entry[1]
    return None


def assign_in_order(variables, values, owner: str) -> None:
    """Assigns `values` to `variables` one by one, after checking count and shapes."""
    values = list(values)
    if len(values) != len(variables):
        raise ValueError(
            f"{owner!r} has {len(variables)} weights but {len(values)} arrays were given. Its "
            f"weights, in order: {[(v.name, tuple(v.shape)) for v in variables]}"
        )
    for variable, value in zip(variables, values):
        value = np.asarray(value)
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(
                f"{owner!r}: weight {variable.name!r} has shape {tuple(variable.shape)}, but the "
                f"array given for it has shape {value.shape}."
            )
    for variable, value in zip(variables, values):
        variable.assign(np.asarray(value, dtype=variable.dtype.as_numpy_dtype))

"""`TensorOperation`: Python operators and indexing on the functional API's symbolic tensors.

`a + b`, `x * 2.0`, `-x`, `x ** 2`, `a @ b` and `x[:, 0]` on tensors from `gf.Input` each
record one `TensorOperation` layer, as Keras 3 records an operation for them: a layer with no
variables whose config names the operation (and the constant or the index), so a functional
model using them saves, loads and runs from a recipe like any other.
"""

from __future__ import annotations

import numbers
from typing import Any

import tensorflow as tf

from graphfit.core import symbolic
from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer

__all__ = ["TensorOperation"]

_BINARY = {
    "add": tf.add,
    "subtract": tf.subtract,
    "multiply": tf.multiply,
    "divide": tf.divide,
    "power": tf.pow,
    "matmul": tf.matmul,
}
_OPERATIONS = (*_BINARY, "negative", "getitem")


@register_layer
class TensorOperation(Layer):
    """One Python operator applied to tensors: what `a + b` or `x[:, 0]` records on symbolic
    tensors of the functional API.

    Called on a list `[a, b]` for an operator between two tensors, or on one tensor for an
    operator with a constant (`x * 2.0`: `constant=2.0`; `2.0 - x`: also `reverse=True`),
    for `negative`, and for `getitem` (`index`, in the serializable form `index_of` gives).
    Broadcasting follows TensorFlow's (and NumPy's) rules; a constant is cast to the tensor's
    dtype.

    Args:
        operation: one of "add", "subtract", "multiply", "divide", "power", "matmul",
            "negative", "getitem".
        constant: the number (or nested list of numbers) on the other side, or None.
        reverse: True when the constant is on the left (`2.0 - x`).
        index: for "getitem", a list of entries: an int, None (a new axis), "..." or
            `{"slice": [start, stop, step]}`.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for an unknown operation, a constant that is not numbers, or an index
            entry of another kind.

    Example:

        >>> import graphfit as gf
        >>> inputs = gf.Input((3,))
        >>> outputs = 2.0 * inputs[:, :2] + 1.0
        >>> model = gf.Model(inputs, outputs)
        >>> model(tf.ones((1, 3))).numpy().tolist()
        [[3.0, 3.0]]
    """

    keeps_example_axis = False  # indexing may take rows
    xla_friendly_on_cpu = True

    def __init__(self, operation: str, constant=None, reverse: bool = False, index=None,
                 name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        if operation not in _OPERATIONS:
            raise ValueError(f"operation must be one of {', '.join(_OPERATIONS)}. "
                             f"Received: operation={operation!r}")
        if constant is not None and not _numbers(constant):
            raise ValueError(f"constant must be a number or a nested list of numbers. "
                             f"Received: constant={constant!r}")
        self.operation = operation
        self.constant = constant
        self.reverse = bool(reverse)
        self.index = None if index is None else [_checked_entry(e) for e in index]
        if operation == "getitem" and self.index is None:
            raise ValueError("operation='getitem' needs an index.")
        self.keeps_example_axis = operation != "getitem" or _keeps_first_axis(self.index)

    def call(self, inputs, training: bool = False):
        if self.operation == "negative":
            return tf.negative(inputs)
        if self.operation == "getitem":
            return inputs[tuple(_key(entry) for entry in self.index)]
        if self.constant is None:
            left, right = inputs
        else:
            left = inputs
            right = tf.constant(self.constant, dtype=inputs.dtype)
            if self.reverse:
                left, right = right, left
        return _BINARY[self.operation](left, right)

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "operation": self.operation,
                "constant": _plain(self.constant), "reverse": self.reverse,
                "index": _plain(self.index)}


def _plain(value):
    """Lists and dicts as plain Python (attribute tracking wraps those a layer holds)."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _numbers(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_numbers(v) for v in value)
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def index_of(key) -> list:
    """The serializable form of a Python index (`x[key]`), for `TensorOperation(index=...)`.

    Raises:
        TypeError: for an index other than ints, slices of ints, `None` and `...`.
    """
    entries = key if isinstance(key, tuple) else (key,)
    return [_checked_entry(_entry(e)) for e in entries]


def _entry(item):
    if isinstance(item, slice):
        return {"slice": [item.start, item.stop, item.step]}
    if item is Ellipsis:
        return "..."
    return item


def _checked_entry(entry):
    ok = (entry is None or entry == "..." or (isinstance(entry, int) and not isinstance(
        entry, bool)) or (isinstance(entry, dict) and set(entry) == {"slice"} and len(
            entry["slice"]) == 3 and all(v is None or (isinstance(v, int) and not isinstance(
                v, bool)) for v in entry["slice"])))
    if not ok:
        raise TypeError(
            f"A symbolic tensor can be indexed with ints, slices of ints, None and '...' "
            f"(x[:, 0], x[..., 1:3]). Received the index entry {entry!r}; for other "
            f"selections write a gf.Layer whose call does it.")
    return entry


def _key(entry):
    if entry == "...":
        return Ellipsis
    if isinstance(entry, dict):
        return slice(*entry["slice"])
    return entry


def _keeps_first_axis(index: list) -> bool:
    first = index[0] if index else "..."
    return first == "..." or first == {"slice": [None, None, None]}


def _operate(operation: str, tensor, other=None, reverse: bool = False, index=None):
    """Records `operation` on a symbolic tensor (and `other`: a symbolic tensor or a
    constant), through one `TensorOperation` layer."""
    if isinstance(other, symbolic.SymbolicTensor):
        inputs = [other, tensor] if reverse else [tensor, other]
        return TensorOperation(operation)(inputs)
    if other is not None and not _numbers(other):
        return NotImplemented
    return TensorOperation(operation, constant=other, reverse=reverse, index=index)(tensor)


symbolic.set_operator_recorder(_operate, index_of)

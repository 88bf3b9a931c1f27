"""The list inputs of graph layers (`GINConv`, `SegmentPooling`): their count and ranks.

Both layers take three tensors in a list, a float one of rank 2 and two integer ones of rank
1; a wrong list is the most common mistake when wiring them in a GraphModel, so the message
names the layer and the inputs it expects.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["input_error", "checked_shapes", "checked_dtypes", "checked_inputs"]


def input_error(layer, expected: str, message: str) -> ValueError:
    """`"<Class> '<name>' takes <expected>; <message>"`."""
    return ValueError(f"{type(layer).__name__} {layer.name!r} takes {expected}; {message}")


def checked_shapes(layer, expected: str, shapes, ranks: dict[str, int]) -> list:
    """The `tf.TensorShape`s of the list `shapes`, once its length and ranks match `ranks`
    (input name -> rank, in order); else a ValueError naming the layer."""
    names = list(ranks)
    if not isinstance(shapes, (list, tuple)) or len(shapes) != len(names):
        got = (f"{len(shapes)} input(s)" if isinstance(shapes, (list, tuple))
               else "one tensor, not a list")
        raise input_error(layer, expected, f"received {got}. In a GraphModel, give the node "
                                           f"inputs: [{', '.join(names)}].")
    shapes = [tf.TensorShape(s) for s in shapes]
    for name, shape in zip(names, shapes):
        if shape.rank is not None and shape.rank != ranks[name]:
            raise input_error(layer, expected, f"{name} has shape {tuple(shape.as_list())}, "
                                               f"rank {shape.rank}, but must have rank "
                                               f"{ranks[name]}.")
    return shapes


def checked_dtypes(layer, expected: str, inputs, names: tuple[str, str, str], hint: str):
    """`inputs` with the first (the node values) cast to the layer's floating dtype, once the
    other two (index inputs, `names[1:]`) are checked to be integers."""
    values, *indices = inputs
    for name, tensor in zip(names[1:], indices):
        if not tensor.dtype.is_integer:
            raise input_error(layer, expected, f"{name} has dtype {tensor.dtype.name}, but "
                                               f"must be integers (int32). {hint}")
    if not values.dtype.is_floating:
        values = tf.cast(values, layer.compute_dtype)
    return (values, *indices)


def checked_inputs(layer, expected: str, inputs, check_shapes, names: tuple[str, str, str],
                   hint: str):
    """`check_shapes(layer, shapes)` (the layer's own shape checks) on the list `inputs`,
    then `checked_dtypes`: the inputs, ready for the layer's `call`."""
    check_shapes(layer, [getattr(t, "shape", None) for t in inputs]
                 if isinstance(inputs, (list, tuple)) else inputs)
    return checked_dtypes(layer, expected, inputs, names, hint)

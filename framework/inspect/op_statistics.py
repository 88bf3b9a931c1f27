"""FLOP counts of op types TensorFlow's profiler has no statistic for, that graphfit's layers
run: graphfit's own rules, in TensorFlow's conventions.

TensorFlow's registry (`tensorflow/python/profiler/internal/flops_registry.py`) counts a
reduction (Sum) as its input size minus its output size and MatMul as `2*m*n*k`; it has no
rule for Max/Min/Prod, Einsum or the image resizes, so a global max pooling or an attention
layer would count 0 where it computes. Here:

- Max, Min, Prod (GlobalMaxPooling*, reductions): input elements minus output elements, as
  TensorFlow's Sum.
- Einsum of two operands (MultiHeadAttention's scores and weighted values): 2 times the
  product of the sizes of every index of the equation, as MatMul's `2*m*n*k` (an ellipsis,
  or another operand count, is left uncounted).
- ResizeBilinear (UpSampling2D(interpolation='bilinear')): 9 per output element, its three
  linear interpolations (subtract, multiply, add each).

Example:

    >>> import tensorflow as tf
    >>> graph = tf.function(lambda x: tf.reduce_max(x, axis=1)).get_concrete_function(
    ...     tf.TensorSpec((2, 5, 3))).graph
    >>> [count(op) for op in graph.get_operations() if op.type == "Max"]
    [24]
"""

from __future__ import annotations

import math
from typing import Callable

import tensorflow as tf

__all__ = ["COUNTED", "count"]


def _size(tensor: tf.Tensor) -> int | None:
    shape = tensor.shape
    return shape.num_elements() if shape.is_fully_defined() else None


def _reduction(op: tf.Operation) -> int | None:
    size_in, size_out = _size(op.inputs[0]), _size(op.outputs[0])
    return None if size_in is None or size_out is None else size_in - size_out


def _einsum(op: tf.Operation) -> int | None:
    equation = op.get_attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    operands = equation.split("->")[0].split(",")
    if "." in equation or len(operands) != 2 or len(op.inputs) != 2:
        return None
    sizes: dict[str, int] = {}
    for letters, tensor in zip(operands, op.inputs):
        if not tensor.shape.is_fully_defined() or len(letters) != tensor.shape.rank:
            return None
        sizes.update(zip(letters, tensor.shape.as_list()))
    return 2 * math.prod(sizes.values())


def _resize_bilinear(op: tf.Operation) -> int | None:
    size = _size(op.outputs[0])
    return None if size is None else 9 * size


COUNTED: dict[str, Callable[[tf.Operation], int | None]] = {
    "Max": _reduction, "Min": _reduction, "Prod": _reduction,
    "Einsum": _einsum, "ResizeBilinear": _resize_bilinear,
}


def count(op: tf.Operation) -> int | None:
    """The FLOPs of `op` by graphfit's rule for its type; None when there is no rule or the
    shapes are not static (the caller then counts it as TensorFlow would: 0)."""
    rule = COUNTED.get(op.type)
    return None if rule is None else rule(op)

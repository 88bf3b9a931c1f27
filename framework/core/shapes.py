"""Shapes in messages and sizes: the one shape formatter of graphfit.

Example:

    >>> from graphfit.core.shapes import shape_text, num_elements
    >>> shape_text((None, 3))
    '(None, 3)'
    >>> shape_text([4])
    '(4,)'
    >>> num_elements((2, 3))
    6
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["shape_text", "nested_shape_text", "num_elements"]


def shape_text(shape) -> str:
    """A static shape as Python prints a tuple: "(None, 3)", "(3,)"; "()" for unknown rank.

    Args:
        shape: a `tf.TensorShape`, a list or tuple of sizes (None for unknown), or None.
    """
    shape = tf.TensorShape(shape)
    dims = shape.as_list() if shape.rank is not None else []
    return str(tuple(dims))


def nested_shape_text(shape) -> str:
    """`shape_text` of a shape, a list of shapes, or a dict {name: shape} (several outputs)."""
    if isinstance(shape, dict):
        return ", ".join(f"{k}: {nested_shape_text(v)}" for k, v in shape.items())
    if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple)):
        return ", ".join(nested_shape_text(s) for s in shape)
    return shape_text(shape)


def num_elements(shape) -> int:
    """The number of elements of a fully known static shape (1 for a scalar)."""
    return int(np.prod(tf.TensorShape(shape).as_list(), dtype=np.int64))

"""A batch as the compiled loops handle it: gathered from in-memory arrays, or read from a
dataset as a tuple.

Example:

    >>> import tensorflow as tf
    >>> x, y = gather_batch((tf.constant([[1.0], [2.0], [3.0]]), tf.constant([4, 5, 6])), [2, 0])
    >>> x.numpy().ravel().tolist(), y.numpy().tolist()
    ([3.0, 1.0], [6, 4])
    >>> as_tuple(x) == (x,)
    True
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["gather_batch", "as_tuple"]


def gather_batch(data: tuple, indices):
    """The rows `indices` of every array in `data` (a structure of tensors, samples first)."""
    return tf.nest.map_structure(lambda t: tf.gather(t, indices), data)


def as_tuple(element):
    """A dataset element as `(x, ...)`: a bare `x` becomes `(x,)`."""
    return element if isinstance(element, tuple) else (element,)

"""`all_finite`: the one check that a step's numbers (gradients, a linear system) are finite,
for the optimizers that skip a step otherwise (`LossScaleOptimizer`, Levenberg–Marquardt
under it)."""

from __future__ import annotations

import tensorflow as tf

__all__ = ["all_finite"]


def all_finite(tensors) -> tf.Tensor:
    """Whether every element of every tensor is finite (a scalar bool tensor); None entries
    (variables without a gradient) are left out, `tf.IndexedSlices` checked by their values.

    Example:

        >>> import tensorflow as tf
        >>> bool(all_finite([tf.ones(2), None, tf.constant([1.0, float("inf")])]))
        False
    """
    flags = [tf.reduce_all(tf.math.is_finite(t.values if isinstance(t, tf.IndexedSlices) else t))
             for t in tensors if t is not None]
    return tf.reduce_all(tf.stack(flags)) if flags else tf.constant(True)

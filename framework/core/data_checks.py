"""What a layer requires of the data a batch brings it, and the error when a batch fails it.

A layer states its requirements with `Layer.batch_checks(inputs, training)`: `(ok, message)`
pairs, `ok` a boolean tensor that must be all True (an id inside the vocabulary, a label
among the classes, an edge between the batch's nodes). The training loops evaluate them
before each step, outside the compiled step (XLA drops assertions inside one), and raise
`DataCheckError` with the first failing message and where the batch was; nothing of that
batch reaches a variable. Called directly (outside `fit`), a layer may assert the same checks
in its `call` with `assertion`.

Example:

    >>> import tensorflow as tf
    >>> ids = tf.constant([1, 5])
    >>> try:
    ...     assertion(tf.reduce_all(ids < 3), "ids must be below 3")
    ... except tf.errors.InvalidArgumentError as error:
    ...     print(DATA_CHECK_MARK in error.message)
    True
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["DATA_CHECK_MARK", "DataCheckError", "assertion"]

DATA_CHECK_MARK = "graphfit data check: "


def assertion(ok, message: str):
    """An assertion op that fails, with `message` (marked), when the scalar `ok` is False."""
    return tf.debugging.assert_equal(ok, True, message=DATA_CHECK_MARK + message)


class DataCheckError(ValueError):
    """A batch failed a data check; nothing of it reached the model.

    Attributes:
        reason: the check's message.
        layer: the layer whose `batch_checks` failed, or None for a check of the loss's
            labels.
        where: where the batch was ("batch 3", "rows 64 to 95 of x").
    """

    def __init__(self, reason: str, layer=None, where: str = ""):
        super().__init__(f"{reason} ({where})." if where else reason)
        self.reason, self.layer, self.where = reason, layer, where

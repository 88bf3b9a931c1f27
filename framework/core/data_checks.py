"""In-graph checks of the data a step reads, whose failure `fit` reports as a plain ValueError.

A layer that must refuse bad data (an index out of range, a label outside the classes) checks
it with an assertion op. When that fails inside a compiled step, TensorFlow raises an
`InvalidArgumentError` wrapped in its "Graph execution error" text; a message that starts with
`DATA_CHECK_MARK` is recognized by the training loops, which raise the message alone as a
ValueError naming the batch. XLA drops assertions, so a check that must hold under XLA as well
also runs in the loop, outside the step (`graphfit.training.input_checks`).

Example:

    >>> import tensorflow as tf
    >>> ids = tf.constant([1, 5])
    >>> try:
    ...     assertion(tf.reduce_all(ids < 3), "ids must be below 3")
    ... except tf.errors.InvalidArgumentError as error:
    ...     print(reason_of(error))
    ids must be below 3
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["DATA_CHECK_MARK", "assertion", "reason_of"]

DATA_CHECK_MARK = "graphfit data check: "


def assertion(ok, message: str):
    """An assertion op that fails, with `message` (marked), when the scalar `ok` is False."""
    return tf.debugging.assert_equal(ok, True, message=DATA_CHECK_MARK + message)


def reason_of(error: Exception) -> str | None:
    """The message of a failed data check, without TensorFlow's wrapping ("assertion failed:
    [...] [Condition ...]", quotes escaped), or None for another error."""
    text = getattr(error, "message", str(error))
    if DATA_CHECK_MARK not in text:
        return None
    reason = text.split(DATA_CHECK_MARK, 1)[1].split("\n")[0].split("] [")[0]
    return reason.replace("\\'", "'").rstrip("]")

"""Gradient records: how a compiled training step sees the gradients `minimize` computed.

`Optimizer.minimize` owns the gradient computation (a second-order optimizer replaces it), so
the step cannot take the gradients itself; instead `minimize` reports them with
`record_gradients`, and the step collects them with `collect_gradients` (TensorBoard's gradient
histograms copy them into tap variables, inside the same compiled step).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Sequence

import tensorflow as tf

__all__ = ["collect_gradients", "record_gradients"]

_recorders = threading.local()


@contextlib.contextmanager
def collect_gradients() -> Iterator[dict]:
    """Collects the gradients that the `minimize` calls inside the block report.

    Yields a dict `{variable.ref(): gradient}` that `record_gradients` fills. The compiled
    training step uses it to copy the gradients into TensorBoard's gradient taps; inside a
    trace it runs once per trace and holds symbolic tensors of that trace.
    """
    stack = getattr(_recorders, "stack", None)
    if stack is None:
        stack = _recorders.stack = []
    stack.append({})
    try:
        yield stack[-1]
    finally:
        stack.pop()


def record_gradients(gradients: Sequence[Any], variables: Sequence[tf.Variable]) -> None:
    """Reports the gradients of the loss a `minimize` computed; a no-op outside
    `collect_gradients`.

    The base `minimize` reports the raw gradients, as the tape returns them (before clipping
    and weight decay). A `minimize` override (a second-order optimizer) that has a gradient of
    the loss may report it the same way; one that reports nothing leaves the record empty.
    None gradients are skipped.
    """
    stack = getattr(_recorders, "stack", None)
    if not stack:
        return
    for gradient, variable in zip(gradients, variables):
        if gradient is not None:
            stack[-1][_unwrapped(variable).ref()] = gradient




def _unwrapped(variable) -> tf.Variable:
    from graphfit.optimizers.optimizer import _as_tf_variable  # avoids a circular import

    return _as_tf_variable(variable)

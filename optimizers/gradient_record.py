"""Gradient records: how a compiled training step sees the gradients `minimize` computed.

`Optimizer.minimize` owns the gradient computation (a second-order optimizer replaces it), so
the step cannot take the gradients itself; instead `minimize` reports them with
`record_gradients`, and the step collects them with `collect_gradients` (TensorBoard's gradient
histograms copy them into tap variables, inside the same compiled step).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import tensorflow as tf

from graphfit.core.context_stack import ContextStack
from graphfit.core.variables import as_tf_variable

__all__ = ["collect_gradients", "record_gradients", "recording"]

_records: ContextStack[dict] = ContextStack()


@contextlib.contextmanager
def collect_gradients() -> Iterator[dict]:
    """Collects the gradients that the `minimize` calls inside the block report.

    Yields a dict `{variable.ref(): gradient}` that `record_gradients` fills. The compiled
    training step uses it to copy the gradients into TensorBoard's gradient taps; inside a
    trace it runs once per trace and holds symbolic tensors of that trace.
    """
    with _records.push({}) as record:
        yield record


def recording() -> bool:
    """Whether a `collect_gradients` block is open: a `minimize` that can skip computing the
    loss gradient (Levenberg–Marquardt has it from its Jacobian) computes it only then."""
    return _records.top() is not None


def record_gradients(gradients: Sequence[Any], variables: Sequence[tf.Variable]) -> None:
    """Reports the gradients of the loss a `minimize` computed; a no-op outside
    `collect_gradients`.

    The base `minimize` reports the raw gradients, as the tape returns them (before clipping
    and weight decay). A `minimize` override (a second-order optimizer) that has a gradient of
    the loss may report it the same way; one that reports nothing leaves the record empty.
    None gradients are skipped.
    """
    record = _records.top()
    if record is None:
        return
    for gradient, variable in zip(gradients, variables):
        if gradient is not None:
            record[as_tf_variable(variable).ref()] = gradient

"""Errors from Python code that a compiled step calls back into, reported as themselves.

A BlackBox's function runs inside the step through `tf.numpy_function`. When it raises,
TensorFlow stops the step with an `InvalidArgumentError` ("Graph execution error") whose
message buries the original under the op's creation traceback. The host-side code records
its error here before raising; the loop that ran the step re-raises the recorded error in
place of TensorFlow's, so the user reads the layer's own message.

The record is process-wide rather than per thread: `tf.numpy_function` runs on one of
TensorFlow's worker threads, not on the thread that waits for the step.

Example:

    >>> from graphfit.core import host_errors
    >>> host_errors.clear()
    >>> host_errors.record(ValueError("BlackBox 'plant': its function returned NaN"))
    >>> host_errors.take()
    ValueError("BlackBox 'plant': its function returned NaN")
    >>> host_errors.take() is None        # taken once
    True
"""

from __future__ import annotations

import threading

__all__ = ["record", "take", "clear"]

_lock = threading.Lock()
_recorded: list[BaseException] = []


def record(error: BaseException) -> None:
    """Remembers `error`, raised on the host inside a step, for the loop to re-raise."""
    with _lock:
        _recorded[:] = [error]


def take() -> BaseException | None:
    """The recorded error (once), or None."""
    with _lock:
        error = _recorded.pop() if _recorded else None
    return error


def clear() -> None:
    """Forgets any recorded error (before a new run of a step)."""
    with _lock:
        _recorded.clear()

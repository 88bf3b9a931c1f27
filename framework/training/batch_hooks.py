"""When the loops call the callbacks' batch hooks: once per execution, as Keras does.

Keras 3 calls `on_*_batch_begin(first)` before each execution of `steps_per_execution`
batches and `on_*_batch_end(last, logs)` after it, the batch indices counted from 0 in the
epoch; with `steps_per_execution=1` that is once per batch. graphfit's loops run chunks of
batches whose edges also fall where the rows change shape (a pass's last, smaller batch) or a
new pass over the data starts; `HookSchedule` keeps the hooks on Keras's executions anyway:
it cuts the chunks at the executions' edges (`aligned`) and calls the hooks only there. The
`last` index is the last batch that ran (Keras reports `first + steps_per_execution - 1`
even when the epoch's last execution ran fewer batches; graphfit does not count batches
that did not run).

With `steps_per_execution="auto"` the chunk is the execution: the loop sizes them itself
(one batch each when a callback other than the progress bar listens, as Keras's default).
"""

from __future__ import annotations

import numbers
from typing import Callable, Iterator

__all__ = ["HookSchedule"]


class HookSchedule:
    """The batch hooks of one pass of a stage, called at the edges of its executions.

    Args:
        begin: `begin(first_batch)`, the stage's `on_*_batch_begin`.
        end: `end(last_batch, logs)`, the stage's `on_*_batch_end`.
        setting: compile's `steps_per_execution` (an int: executions of that many batches;
            "auto": each chunk is an execution).
        enabled: whether any callback listens (else nothing is called).

    Example:

        >>> calls = []
        >>> hooks = HookSchedule(lambda b: calls.append(("begin", b)),
        ...                      lambda b, logs: calls.append(("end", b)), setting=2)
        >>> for first, ran in ((0, 2), (2, 1), (3, 1)):  # batch 3: a smaller last batch
        ...     hooks.chunk_begins(first)
        ...     _ = hooks.chunk_ran(first, ran, {})
        >>> hooks.close({})
        >>> calls
        [('begin', 0), ('end', 1), ('begin', 2), ('end', 3)]
    """

    def __init__(self, begin: Callable, end: Callable, setting, enabled: bool = True):
        self._begin, self._end = begin, end
        fixed = isinstance(setting, numbers.Integral) and not isinstance(setting, bool)
        self.every = int(setting) if fixed else None
        self.enabled = enabled
        self._open = False  # an execution began and has not ended
        self._ran = 0  # batches run in the open execution
        self._last = -1
        self.position = 0  # the first batch of the next chunk

    def aligned(self, sizes: Iterator[int]) -> Iterator[int]:
        """`sizes`, cut so that no chunk runs past the end of an execution."""
        for size in sizes:
            if self.every is not None:
                size = min(size, self.every - self.position % self.every)
            yield size

    def chunk_begins(self, first: int) -> None:
        """Before a chunk that starts at batch `first`: begins an execution there."""
        self.position = first
        if self.enabled and not self._open:
            self._open, self._ran = True, 0
            self._begin(first)

    def chunk_ran(self, first: int, ran: int, logs: dict) -> bool:
        """After a chunk ran `ran` batches from `first`; ends the execution when complete,
        with `logs`. Returns whether an end hook was called."""
        self.position = first + ran
        if ran:
            self._ran, self._last = self._ran + ran, first + ran - 1
        if self.every is not None and self.position % self.every:
            return False  # the execution goes on in the next chunk
        return self._close(logs)

    def close(self, logs: dict) -> None:
        """After the pass: ends an execution the pass left open (its last, shorter one)."""
        self._close(logs)

    def _close(self, logs) -> bool:
        if not (self.enabled and self._open):
            return False
        self._open = False
        if not self._ran:
            return False  # the data ran out as the execution began: Keras calls no end hook
        self._end(self._last, logs)
        return True

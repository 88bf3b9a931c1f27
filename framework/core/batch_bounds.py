"""The batch sizes a traced training step may rely on, and the size it did rely on.

One trace of the training step serves every batch size (its batch axis is unknown), so the
step cannot see how large its batches get. `fit` knows for in-memory arrays (its batch size):
`CompiledSteps` traces the training step inside `promised(largest)`. Code in the step that can
do less work for batches up to some size (Levenberg–Marquardt's linearization: in one piece,
without the loop over Jacobian chunks, when a batch fits one chunk) reads `largest()` and, when
it specializes, reports the size it relied on with `rely_on(limit)`. Before a fit with larger
batches (or a dataset, whose batches it cannot bound) `CompiledSteps` traces the step again.
Outside such a block (eager code, a step a user traces) `largest()` is None: no promise.
The promise is about the batches `fit` feeds the step: a `train_step` override that enlarges
its batch before the optimizer sees it (repeats it, concatenates another) breaks it, and the
batch is then linearized in one piece (the same numbers, the memory of its whole Jacobian).

Example:

    >>> from graphfit.core import batch_bounds
    >>> with batch_bounds.promised(1000) as promise:
    ...     seen = batch_bounds.largest()
    ...     batch_bounds.rely_on(4096)
    >>> seen, promise.limit
    (1000, 4096)
    >>> batch_bounds.largest() is None  # no step traced here
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

from graphfit.core.context_stack import ContextStack

__all__ = ["BatchPromise", "largest", "promised", "rely_on", "tightest"]


@dataclasses.dataclass
class BatchPromise:
    """What one traced step was promised, and what it relied on.

    Attributes:
        largest: the most examples a batch will hold, or None (no bound).
        limit: the smallest batch size a part of the step relied on not being exceeded, or
            None when nothing specialized.
    """

    largest: int | None
    limit: int | None = None


_promises: ContextStack[BatchPromise] = ContextStack()


@contextlib.contextmanager
def promised(largest: int | None) -> Iterator[BatchPromise]:
    """Promises the code traced inside the block batches of at most `largest` examples
    (None: no promise); yields the `BatchPromise`, whose `limit` the code fills."""
    with _promises.push(BatchPromise(largest)) as promise:
        yield promise


def largest() -> int | None:
    """The most examples a batch of the step being traced will hold, or None."""
    promise = _promises.top()
    return None if promise is None else promise.largest


def rely_on(limit: int) -> None:
    """Records that the traced step is only as cheap as it is for batches of at most
    `limit` examples (larger ones still compute the same numbers, with more memory)."""
    promise = _promises.top()
    if promise is not None:
        promise.limit = tightest(promise.limit, limit)


def tightest(*limits: int | None) -> int | None:
    """The smallest of `limits` that are not None (None: none is), as limits combine.

    Example:

        >>> tightest(None, 8, 4), tightest(None, None)
        (4, None)
    """
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None

"""`ContextStack`: a per-thread stack of the blocks that are open, innermost last.

Several parts of graphfit let a `with` block receive what code deep inside it reports, without
passing anything down: update hooks (`collect_updates`), layer outputs (`capture_outputs`),
the step's context (`step_context`: labels, added losses, recorded gradients). Each keeps
one `ContextStack`; a block pushes its collector, and the reporting code reads `top()`. The
stack is thread-local, so two threads tracing models at once never see each other's blocks.

Example:

    >>> from graphfit.core.context_stack import ContextStack
    >>> collectors = ContextStack()
    >>> collectors.top() is None
    True
    >>> with collectors.push([]) as outer:
    ...     with collectors.push([]) as inner:
    ...         collectors.top().append("seen by the innermost block")
    ...     collectors.top() is outer
    True
    >>> inner
    ['seen by the innermost block']
"""

from __future__ import annotations

import contextlib
import threading
from typing import Generic, Iterator, TypeVar

__all__ = ["ContextStack"]

T = TypeVar("T")


class ContextStack(Generic[T]):
    """A thread-local stack of open blocks' objects."""

    def __init__(self):
        self._local = threading.local()

    def _items(self) -> list[T]:
        items = getattr(self._local, "items", None)
        if items is None:
            items = self._local.items = []
        return items

    @contextlib.contextmanager
    def push(self, item: T) -> Iterator[T]:
        """Makes `item` the innermost entry for the block; yields it.

        Args:
            item: what code inside the block finds with `top()`.
        """
        items = self._items()
        items.append(item)
        try:
            yield item
        finally:
            items.pop()

    def top(self, default: T | None = None) -> T | None:
        """The innermost open block's item, or `default` when no block is open."""
        items = self._items()
        return items[-1] if items else default

    def __bool__(self) -> bool:
        """Whether a block is open in this thread."""
        return bool(self._items())

    def __len__(self) -> int:
        return len(self._items())

"""SIGTERM (`docker stop`, Slurm, Kubernetes) ends a study as Ctrl-C does: the trial running
is marked interrupted, and the study's report of what ran is written. Python's default
SIGTERM ends the process at once, with no report and the trial left running in storage
until its heartbeat goes stale.

Example:

    >>> with sigterm_as_interrupt():
    ...     pass
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

__all__ = ["Terminated", "sigterm_as_interrupt"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises `Terminated` (main thread only: elsewhere a signal
    handler cannot be set, and the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

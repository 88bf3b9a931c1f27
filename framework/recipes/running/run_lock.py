"""The lock a process holds on a run directory while it writes into it.

Two `graphfit train --resume` of one run at once would both "succeed", the later silently
overwriting the other's checkpoints and files; the lock makes the second one stop with a
message naming the first.
"""

from __future__ import annotations

import os
import sys

__all__ = ["RunLock", "RunBusy", "LOCK_FILE", "writing_process"]

LOCK_FILE = ".lock"


class RunBusy(ValueError):
    """Another process holds the run directory's lock (a train or resume of it is running)."""


class RunLock:
    """An exclusive lock on a run directory, held while a process writes into it.

    The lock is `fcntl.flock` on `RUN/.lock` (released by the kernel when the process dies),
    and the file holds the holder's pid. Where `fcntl` is missing, the file is created with
    O_EXCL instead; a lock left by a dead process is then taken over. Either way taking over
    a dead process's lock prints a note.
    """

    def __init__(self, run: str):
        self.run = os.path.abspath(run)
        self.path = os.path.join(self.run, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        """Takes the lock.

        Raises:
            RunBusy: when a live process holds it.
        """
        try:
            import fcntl
        except ImportError:  # no flock (Windows): an O_EXCL lock file
            return self._acquire_exclusive()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(self.path)
            os.close(fd)
            raise self._busy(holder) from None
        previous = _read_pid(self.path)
        if previous is not None and previous != os.getpid():
            _note(f"took over the lock of {self.run} left by process {previous}, which is no "
                  f"longer running (it was killed)")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def _acquire_exclusive(self) -> "RunLock":
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = _read_pid(self.path)
                if holder is not None and _alive(holder):
                    raise self._busy(holder) from None
                _note(f"took over the lock of {self.run} left by process {holder}, which is "
                      f"no longer running")
                os.remove(self.path)
                continue
            os.write(fd, f"{os.getpid()}\n".encode())
            self._fd = fd
            return self
        raise self._busy(_read_pid(self.path))

    def _busy(self, holder: int | None) -> RunBusy:
        who = f"process {holder}" if holder is not None else "another process"
        return RunBusy(f"the run {self.run} is in use by {who} (a graphfit train or resume of "
                       f"it is running); two processes writing one run would overwrite each "
                       f"other. Wait for it to end (or stop it), then try again.")

    def release(self) -> None:
        """Gives the lock back (an empty lock file means: released cleanly)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        if not _has_flock():
            os.remove(self.path)

    def __enter__(self) -> "RunLock":
        if self._fd is None:
            self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def writing_process(run: str) -> int | None:
    """The pid of a live process holding `run`'s lock (training or resuming it), or None
    (released cleanly: the file is empty; or left by a process that died)."""
    holder = _read_pid(os.path.join(run, LOCK_FILE))
    if holder is None or holder == os.getpid() or not _alive(holder):
        return None
    return holder


def _has_flock() -> bool:
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return True


def _read_pid(path: str) -> int | None:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


def _note(text: str) -> None:
    print(f"graphfit: note: {text}", file=sys.stderr)

"""Faults of the disk a run writes to, told in plain words.

A full disk or a folder that cannot be written surfaces from wherever the write happened:
Python's `OSError` (`[Errno 28] No space left on device`), or TensorFlow's
`ResourceExhaustedError: {{function_node __wrapped__SaveV2_...}}` from a checkpoint. Every
file of a run is written whole or not at all (a staging file renamed over the old one;
checkpoints keep the earlier ones until the new one is complete), so nothing written before
the fault is lost. `describe` turns such an error into one sentence: which file, what
happened, that the earlier files are intact, and what to do.

Example:

    >>> import errno
    >>> print(describe(OSError(errno.ENOSPC, "No space left on device", "/runs/a/history.json")))
    cannot write /runs/a/history.json: the disk is full (No space left on device). Nothing \
written before it was lost. Free some space, or write the run elsewhere (--run-dir)
"""

from __future__ import annotations

import errno
import re

from graphfit.recipes.running.error_chain import error_chain

__all__ = ["describe", "is_disk_fault", "DiskFault"]

_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG)
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
# TensorFlow's messages carry the OS's words, not an errno.
_TF_FULL = re.compile(r"No space left on device|Disk quota exceeded|File too large", re.I)
_TF_READ_ONLY = re.compile(r"Read-only file system|Permission denied", re.I)
_TF_PATH = re.compile(r"(/[^\s:;'\"{}\[\]]+)")


class DiskFault(RuntimeError):
    """A write of a run failed on a full disk or a read-only folder (exit code 1)."""


def _kind(error: BaseException) -> tuple[str, str | None] | None:
    """("full" or "read-only", the file) for a disk fault, else None."""
    if isinstance(error, OSError) and error.errno in _FULL + _READ_ONLY:
        kind = "full" if error.errno in _FULL else "read-only"
        return kind, error.filename if isinstance(error.filename, str) else None
    text = str(error)
    if type(error).__module__.startswith("tensorflow") or "Errno" in text:
        for kind, pattern in (("full", _TF_FULL), ("read-only", _TF_READ_ONLY)):
            if pattern.search(text):
                paths = [p for p in _TF_PATH.findall(text) if "/" in p[1:] and
                         not p.startswith("/job:")]
                return kind, paths[0] if paths else None
    return None


def is_disk_fault(error: BaseException) -> bool:
    """Whether `error` (or one it was raised from) is a full disk or a read-only folder."""
    return any(_kind(link) for link in error_chain(error))


def describe(error: BaseException, run: str | None = None) -> str | None:
    """One sentence for a disk fault (which file, what happened, what to do), or None."""
    found = next((kind for kind in map(_kind, error_chain(error)) if kind), None)
    if found is None:
        return None
    kind, path = found
    target = path or (f"into the run {run}" if run else "the file")
    what = ("the disk is full (No space left on device)" if kind == "full"
            else "the folder is read-only (permission denied or a read-only file system)")
    remedy = ("Free some space, or write the run elsewhere (--run-dir)" if kind == "full"
              else "Make the folder writable, or write the run elsewhere (--run-dir)")
    resume = (f"; the epochs checkpointed so far continue with `graphfit train --resume "
              f"{run}`" if run else "")
    return f"cannot write {target}: {what}. Nothing written before it was lost{resume}. {remedy}"

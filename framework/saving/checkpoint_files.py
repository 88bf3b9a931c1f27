"""Finding the newest checkpoint of a `tf.train.CheckpointManager` folder that really loads.

A checkpoint can be damaged after it was written (a truncated data file, a disk error), and
the manager's `checkpoint` state file can be garbled; TensorFlow then reports no checkpoint at
all, or fails on the newest one although older intact ones sit beside it. These functions
read every candidate in full before trusting it and fall back to the next older one, with a
warning that names both.
"""

from __future__ import annotations

import os
import re
import warnings

import tensorflow as tf

__all__ = ["candidates", "newest_intact", "repair_state_file", "unreadable_reason"]

_INDEX = re.compile(r"ckpt-(\d+)\.index")
STATE_FILE = "checkpoint"


def _number(path: str) -> int:
    match = re.search(r"-(\d+)$", path)
    return int(match.group(1)) if match else 0


def _scanned(folder: str) -> list[str]:
    """The checkpoint prefixes whose index file is in `folder`, newest first."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    numbers = sorted((int(m.group(1)) for m in map(_INDEX.fullmatch, names) if m), reverse=True)
    return [os.path.join(folder, f"ckpt-{n}") for n in numbers]


def _state(folder: str):
    """The parsed state file, None when there is none; False when it is garbled."""
    if not os.path.isfile(os.path.join(folder, STATE_FILE)):
        return None
    try:
        state = tf.train.get_checkpoint_state(folder)
    except Exception:  # a garbled protobuf text may raise instead of being ignored
        return False
    return state if state is not None and state.model_checkpoint_path else False


def candidates(folder: str) -> tuple[list[str], bool]:
    """(checkpoint prefixes newest first, whether the state file is garbled).

    With a readable state file these are the checkpoints it lists (files of a save killed
    midway are not listed and never trusted); with a garbled one, every checkpoint in the
    folder.
    """
    state = _state(folder)
    if state is None:
        return [], False
    if state is False:
        return _scanned(folder), True
    listed = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    listed = [p if os.path.isabs(p) else os.path.join(folder, p) for p in listed]
    return sorted(set(listed), key=_number, reverse=True), False


def unreadable_reason(path: str) -> str | None:
    """Why the checkpoint at `path` cannot be read (every tensor is read), or None."""
    try:
        reader = tf.train.load_checkpoint(path)
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    except Exception as error:  # TensorFlow raises many kinds for damaged files
        text = str(error).strip().splitlines()
        return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
    return None


def newest_intact(folder: str, warned: set | None = None) -> str | None:
    """The prefix of the newest checkpoint in `folder` that reads in full, or None.

    A damaged newer checkpoint, or a garbled state file, is reported with a warning naming
    what was skipped and what is used instead (once per `warned` set).
    """
    paths, garbled = candidates(folder)
    warned = set() if warned is None else warned
    skipped = []
    for path in paths:
        reason = unreadable_reason(path)
        if reason is None:
            _report(folder, garbled, skipped, path, warned)
            return path
        skipped.append(f"{path} ({reason})")
    if skipped or garbled:
        _report(folder, garbled, skipped, None, warned)
    return None


def _report(folder, garbled, skipped, used, warned) -> None:
    if not (garbled or skipped):
        return
    parts = []
    if garbled:
        parts.append(f"the state file {os.path.join(folder, STATE_FILE)} is garbled")
    if skipped:
        parts.append(f"the checkpoint {'; '.join(skipped)} cannot be read")
    using = (f"using the newest intact checkpoint {used} instead" if used
             else "no intact checkpoint is left there")
    message = f"{', and '.join(parts)}: {using}."
    if message not in warned:
        warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def repair_state_file(folder: str) -> None:
    """Rewrites a garbled state file from the intact checkpoints in `folder` (the garbled
    one is kept as `checkpoint.garbled`), so a manager opened there sees them: otherwise it
    would list none and sweep their files away as leftovers."""
    if _state(folder) is not False:
        return
    intact = [p for p in _scanned(folder) if unreadable_reason(p) is None]
    os.replace(os.path.join(folder, STATE_FILE), os.path.join(folder, STATE_FILE + ".garbled"))
    if intact:
        tf.compat.v1.train.update_checkpoint_state(
            folder, intact[0], all_model_checkpoint_paths=list(reversed(intact)))

"""Finding the newest checkpoint of a `tf.train.CheckpointManager` folder that really loads.

A checkpoint can be damaged after it was written (a truncated data file, a disk error), and
the manager's `checkpoint` state file can be garbled; TensorFlow then reports no checkpoint at
all, or fails on the newest one although older intact ones sit beside it. These functions
read every candidate in full before trusting it and fall back to the next older one, with a
warning that names both.

The state file is also what a `tf.train.CheckpointManager` rebuilds its list from, and it
keeps only the checkpoints whose timestamp lies above the file's `last_preserved_timestamp`
and not after the clock: a file without timestamps (older TensorFlow, a hand-written one),
with fewer timestamps than paths (cut short), or written on a clock ahead of this one gives
it a list without them, and its next save would then orphan them (and graphfit's sweep of
leftovers delete them). `repair_state_file` rewrites such a file before a manager opens it.
A folder whose state file is gone (deleted, or not copied with the checkpoints) is read as
one with a garbled file: its checkpoints are found by their index files, and the state file
is rebuilt from the intact ones, so the next save does not sweep them away as leftovers.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
import warnings

import tensorflow as tf

__all__ = ["EPOCH_KEY", "best_instead_of_latest", "candidates", "checkpoint_number",
           "newest_intact", "remove_leftovers", "repair_state_file", "unreadable",
           "unreadable_reason"]

_INDEX = re.compile(r"ckpt-(\d+)\.index")
STATE_FILE = "checkpoint"
EPOCH_KEY = "fit_state/epoch/.ATTRIBUTES/VARIABLE_VALUE"  # the epochs a checkpoint completed


def checkpoint_number(path: str) -> int:
    """The number N of the checkpoint prefix `.../ckpt-N` (0 for another name)."""
    match = re.search(r"-(\d+)$", path)
    return int(match.group(1)) if match else 0


def _scanned(folder: str) -> list[str]:
    """The checkpoint prefixes whose index file is in `folder`, newest first (absolute, as
    `candidates` gives them: `unreadable` joins the two lists)."""
    folder = os.path.abspath(folder)
    names = os.listdir(folder) if os.path.isdir(folder) else []
    numbers = sorted((int(m.group(1)) for m in map(_INDEX.fullmatch, names) if m), reverse=True)
    return [os.path.join(folder, f"ckpt-{n}") for n in numbers]


@contextlib.contextmanager
def _tensorflow_quiet():
    """TensorFlow logs its own warnings for a garbled state file (a ParseError, "Checkpoint
    ignored") and a deprecation note: graphfit reports the damage itself, in one line."""
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        yield
    finally:
        logger.setLevel(level)


def _state(folder: str):
    """The parsed state file, None when there is none; False when it is garbled (it does not
    parse, names no newest checkpoint, or was cut short inside its list of paths: that list
    then lacks the newest checkpoint, which TensorFlow always writes last)."""
    if not os.path.isfile(os.path.join(folder, STATE_FILE)):
        return None
    try:
        with _tensorflow_quiet():
            state = tf.train.get_checkpoint_state(folder)
    except Exception:  # a garbled protobuf text may raise instead of being ignored
        return False
    if state is None or not state.model_checkpoint_path:
        return False
    listed = state.all_model_checkpoint_paths
    return False if listed and state.model_checkpoint_path not in listed else state


def _newest_named(folder: str) -> int | None:
    """The number of the newest checkpoint a garbled state file still names in full (its
    first line), or None."""
    try:
        with open(os.path.join(folder, STATE_FILE), encoding="utf-8", errors="replace") as f:
            match = re.match(r'model_checkpoint_path: "(?:.*/)?ckpt-(\d+)"\n', f.read(200))
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _absolute(folder: str, path: str) -> str:
    return path if os.path.isabs(path) else os.path.join(folder, path)


def candidates(folder: str) -> tuple[list[str], str | None]:
    """(checkpoint prefixes newest first, what is wrong with the state file: None,
    "garbled" or "missing").

    With a readable state file these are the checkpoints it lists (files of a save killed
    midway are not listed and never trusted); with a garbled one, every checkpoint in the
    folder, up to the newest the file still names when it was cut short; with none, every
    checkpoint in the folder ("missing" only when there is one).
    """
    # TensorFlow joins a relative path in the state file to the folder it was given; an
    # absolute folder keeps that from being joined twice.
    folder = os.path.abspath(folder)
    state = _state(folder)
    if state is None:
        scanned = _scanned(folder)
        return scanned, ("missing" if scanned else None)
    if state is False:
        newest = _newest_named(folder)
        return [p for p in _scanned(folder)
                if newest is None or checkpoint_number(p) <= newest], "garbled"
    listed = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    listed = [_absolute(folder, p) for p in listed]
    return sorted(set(listed), key=checkpoint_number, reverse=True), None


def unreadable_reason(path: str) -> str | None:
    """Why the checkpoint at `path` cannot be read (every tensor is read but a `tf.data`
    iterator's state, a variant that only restoring reads), or None."""
    try:
        reader = tf.train.load_checkpoint(path)
        for key, dtype in reader.get_variable_to_dtype_map().items():
            if dtype != tf.variant:
                reader.get_tensor(key)
    except Exception as error:  # TensorFlow raises many kinds for damaged files
        text = str(error).strip().splitlines()
        return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
    return None


def unreadable(folder: str) -> list[tuple[str, str]]:
    """(prefix, reason) of every checkpoint in `folder` (listed or not) that cannot be read,
    newest first."""
    paths = sorted(set(candidates(folder)[0]) | set(_scanned(folder)), key=checkpoint_number,
                   reverse=True)
    reasons = ((path, unreadable_reason(path)) for path in paths)
    return [(path, reason) for path, reason in reasons if reason is not None]


def newest_intact(folder: str, warned: set | None = None,
                  warn_when_none: bool = True) -> str | None:
    """The prefix of the newest checkpoint in `folder` that reads in full, or None.

    A damaged newer checkpoint, or a garbled state file, is reported with a warning naming
    what was skipped and what is used instead (once per `warned` set). When none is left,
    the warning is left to a caller with `warn_when_none=False` (it falls back elsewhere).
    """
    paths, damage = candidates(folder)
    warned = set() if warned is None else warned
    skipped = []
    for path in paths:
        reason = unreadable_reason(path)
        if reason is None:
            _report(folder, damage, skipped, path, warned)
            return path
        skipped.append(f"{path} ({reason})")
    if (skipped or damage) and warn_when_none:
        _report(folder, damage, skipped, None, warned)
    return None


def best_instead_of_latest(directory: str, warned: set, quiet: bool = False) -> str | None:
    """The newest intact checkpoint of `directory/best` when every checkpoint of
    `directory/latest` is damaged (with a warning naming both, unless `quiet`); None when
    `latest/` holds no checkpoint at all.

    Raises:
        ValueError: when `latest/` holds checkpoints, none readable, and `best/` no intact one.
    """
    latest, best_folder = os.path.join(directory, "latest"), os.path.join(directory, "best")
    damaged = unreadable(latest)
    if not damaged:
        return None
    listing = "; ".join(f"{path} ({reason})" for path, reason in damaged)
    best = newest_intact(best_folder, warned, warn_when_none=False)
    if best is None:
        raise ValueError(
            f"no checkpoint in {latest} can be read ({listing}), and {best_folder} holds no "
            f"intact checkpoint either: no saved state is left to resume from. Train the run "
            f"again.")
    if quiet:
        return best
    epoch = int(tf.train.load_checkpoint(best).get_tensor(EPOCH_KEY))
    warnings.warn(f"no checkpoint in {latest} can be read ({listing}): using the newest "
                  f"intact best checkpoint {best} instead (after epoch {epoch}).",
                  RuntimeWarning, stacklevel=4)
    return best


def _report(folder, damage, skipped, used, warned) -> None:
    if not (damage or skipped):
        return
    parts = []
    if damage:
        parts.append(f"the state file {os.path.join(folder, STATE_FILE)} is {damage}")
    if skipped:
        parts.append(f"the checkpoint {'; '.join(skipped)} cannot be read")
    using = (f"using the newest intact checkpoint {used} instead" if used
             else "no intact checkpoint is left there")
    message = f"{', and '.join(parts)}: {using}."
    if message not in warned:
        warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def repair_state_file(folder: str) -> None:
    """Rewrites the state file in `folder` when a `CheckpointManager` opened there would not
    manage every checkpoint it lists, so the manager's next save neither orphans them nor
    leaves them to be swept away as leftovers (that deleted every intact checkpoint).

    A garbled file is rebuilt from the intact checkpoints (see `candidates`) and kept as
    `checkpoint.garbled`; a missing one is written from the intact checkpoints found; a
    readable one keeps its list, sorted oldest first (the order the manager drops them in),
    and gets the timestamps the manager needs: each checkpoint's
    index file time (never after now), above a `last_preserved_timestamp` below them all.
    A file that needs none of this is left as it is. The new file replaces the old one
    atomically: a crash leaves one or the other, never none. A folder that cannot be
    written (a read-only copy restored from) is left as it is: restoring reads the state
    file itself, and `Checkpointer`'s sweep of leftovers spares what the file lists.
    """
    folder = os.path.abspath(folder)
    state = _state(folder)
    paths = sorted(candidates(folder)[0], key=checkpoint_number)  # oldest first
    if not state:  # garbled or missing: only the intact checkpoints are listed again
        paths = [p for p in paths if unreadable_reason(p) is None]
        if state is None and not paths:
            return
    elif _managed_in_full(folder, state, paths):
        return
    try:
        _rewrite(folder, paths, garbled=state is False)
    except (OSError, tf.errors.OpError):
        return


def _rewrite(folder: str, paths: list[str], garbled: bool) -> None:
    """Writes the state file listing `paths` (oldest first), timed; see
    `repair_state_file`."""
    if garbled:
        shutil.copyfile(os.path.join(folder, STATE_FILE),
                        os.path.join(folder, STATE_FILE + ".garbled"))
        if not paths:
            os.remove(os.path.join(folder, STATE_FILE))  # nothing left to list
            return
    now = time.time()
    stamps = [min(_written_at(path, now), now) for path in paths]
    with _tensorflow_quiet():  # its deprecation note is not the user's business
        tf.compat.v1.train.update_checkpoint_state(
            folder, os.path.basename(paths[-1]),
            all_model_checkpoint_paths=[os.path.basename(p) for p in paths],
            all_model_checkpoint_timestamps=stamps,
            last_preserved_timestamp=min(stamps) - 1.0)


def _managed_in_full(folder: str, state, paths: list[str]) -> bool:
    """Whether a `CheckpointManager` reading `state` keeps all of `paths` (oldest first), in
    that order: it keeps a checkpoint only when its timestamp (capped at now) is above
    `last_preserved_timestamp` (lowered to now when after it), pairing paths and timestamps
    one to one."""
    listed = [_absolute(folder, p) for p in state.all_model_checkpoint_paths]
    stamps = list(state.all_model_checkpoint_timestamps)
    now = time.time()
    return (listed == paths and len(stamps) == len(listed)
            and all(state.last_preserved_timestamp < stamp <= now for stamp in stamps))


def _written_at(path: str, default: float) -> float:
    """When the checkpoint at `path` was written: its index file's time, else `default`."""
    try:
        return os.path.getmtime(path + ".index")
    except OSError:
        return default


def remove_leftovers(folder: str, newest: int) -> None:
    """Deletes what a save killed midway left: `ckpt-N_temp` folders, and files of a
    checkpoint numbered after the newest one the state file lists (never referenced)."""
    if not os.path.isdir(folder):
        return
    for name in os.listdir(folder):
        match = re.fullmatch(r"ckpt-(\d+)(_temp|\.index|\.data-\d{5}-of-\d{5})", name)
        if match is None or (match.group(2) != "_temp" and int(match.group(1)) <= newest):
            continue
        path = os.path.join(folder, name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)

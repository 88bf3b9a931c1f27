"""Callback arguments that name files or folders: checked when the recipe is, not at run time.

A CSVLogger `filename`, a ModelCheckpoint `filepath` or a TensorBoard `log_dir` that cannot be
written would otherwise fail only once training has started (or ended). A relative path is
placed inside the run directory (created by the run), so only absolute paths (`/...`, `~/...`)
are checked here: the path, or the folder it would be created in, must be writable.

Example:

    >>> path_problem("/dev/null/logs", folder=True)
    'cannot create /dev/null/logs: /dev/null is a file, not a folder'
"""

from __future__ import annotations

import os

from graphfit.recipes.reading.schema import INVALID, Checker

__all__ = ["PATH_ARGUMENTS", "FOLDER_ARGUMENTS", "check_callback_paths", "path_problem"]

PATH_ARGUMENTS = ("log_dir", "filepath", "filename")  # callback arguments that are paths
FOLDER_ARGUMENTS = ("log_dir", "filepath")  # ... of which these name folders


def _existing_ancestor(path: str) -> str:
    parent = path
    while not os.path.lexists(parent):
        above = os.path.dirname(parent)
        if above == parent:
            break
        parent = above
    return parent


def path_problem(path: str, folder: bool) -> str | None:
    """Why `path` cannot be written (as a folder or a file), or None when it can."""
    if os.path.isdir(path):
        if not folder:
            return f"{path} is a folder; give a file name (inside it)"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"cannot write into {path}: permission denied or a read-only file system"
        return None
    if os.path.lexists(path):
        if folder:
            return f"{path} is a file, but this argument names a folder"
        if not os.access(path, os.W_OK):
            return f"cannot write {path}: permission denied or a read-only file system"
        return None
    parent = _existing_ancestor(os.path.dirname(path))
    if not os.path.isdir(parent):
        return f"cannot create {path}: {parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return (f"cannot create {path}: {parent} is not writable (permission denied or a "
                f"read-only file system)")
    return None


# What a run directory holds already (see running/run_directory.py): a callback's relative
# path must not land on them.
_RUN_FILES = ("recipe.yaml", "overrides.yaml", "versions.json", "preprocessing.json",
              "history.json", "metrics.json", "user_modules.json", ".lock")
_RUN_FOLDERS = ("logs", "checkpoints")


def _run_file_clash(relative: str, folder: bool) -> str | None:
    """Why a relative callback path cannot be written inside the run directory, or None."""
    first = relative.split(os.sep)[0]
    if first == os.pardir:
        return None  # outside the run folder: where the user chose
    if first in _RUN_FILES:
        return (f"{relative} would be inside the run's own file {first}; choose another "
                f"name (relative paths are placed in the run directory)")
    if relative in _RUN_FOLDERS and not folder:
        return (f"{relative} is a folder the run writes ({relative}/); give a file name, such "
                f"as {relative}/training.csv or training.csv")
    return None


def check_callback_paths(entries, checker: Checker) -> None:
    """Reports every absolute callback path that cannot be written, at its argument."""
    if not isinstance(entries, list):
        return
    for index, entry in enumerate(entries):
        if entry is INVALID or not isinstance(entry, dict):
            continue
        for key in PATH_ARGUMENTS:
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip() or "\0" in value:
                continue
            full = os.path.expanduser(value)
            if not os.path.isabs(full):  # inside the run directory, which the run creates
                problem = _run_file_clash(os.path.normpath(full), key in FOLDER_ARGUMENTS)
                if problem:
                    checker.report(("callbacks", index, key), problem)
                continue
            problem = path_problem(os.path.normpath(full), folder=key in FOLDER_ARGUMENTS)
            if problem:
                checker.report(("callbacks", index, key), problem)

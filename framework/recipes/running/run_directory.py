"""Run directories: everything needed to re-evaluate, predict with or resume a run.

    runs/<recipe name>/<YYYYmmdd-HHMMSS>/
        recipe.yaml         the resolved recipe (every default filled in; paths absolute)
        overrides.yaml      the --set overrides given on the command line
        versions.json       graphfit, TensorFlow, Keras, NumPy and Python versions
        preprocessing.json  input shape, feature names and standardization statistics
        history.json        the per-epoch numbers of every stage
        metrics.json        the final train / val / test numbers
        user_modules.json   where the recipe's own modules were imported from
        checkpoints/        training checkpoints (latest/, best/) and the final weights
        logs/               TensorBoard logs: train/, val/, test/
        .lock               held by the process writing the run (its pid)

A run directory is never overwritten: a new run gets a new timestamp (with -2, -3, ... if two
start in the same second), and an explicit `--run-dir` must not exist yet or be empty. It is
created with `os.mkdir` (never check-then-create) and locked while a process writes into it.
`runs/<name>/latest` is a symlink to the newest finished run of a recipe (`find_run` also
resolves it where no link could be made).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import sys
import sysconfig
import time

import yaml

from graphfit.recipes.running.run_lock import LOCK_FILE, RunBusy, RunLock, writing_process

__all__ = ["create_run", "claim_new_run", "find_run", "write_yaml", "write_json", "read_json",
           "read_recipe", "read_yaml", "versions", "lock_run", "RunLock", "RunBusy",
           "update_latest", "record_user_modules", "use_recorded_modules", "CHECKPOINT", "LOGS",
           "LOCK_FILE", "USER_MODULES", "holds_checkpoint", "DamagedRunFile",
           "check_writable"]

CHECKPOINT = os.path.join("checkpoints", "final")
LOGS = "logs"
RECIPE_FILE = "recipe.yaml"
USER_MODULES = "user_modules.json"
LATEST = "latest"


def lock_run(run: str) -> RunLock:
    """Locks an existing run directory for writing (use as a context manager).

    Raises:
        RunBusy: when another live process holds it.
    """
    return RunLock(run).acquire()


def claim_new_run(name: str, run_dir: str | None, root: str = "runs") -> RunLock:
    """Creates a new run directory and returns it locked (`lock.run` is its path).

    The directory is created with `os.mkdir`, which fails when it exists, so two runs never
    get the same one; an explicit `run_dir` may exist if empty, and is checked again once
    locked, so two processes racing for it cannot both write there.

    Raises:
        ValueError: if `run_dir` is given and is a file or already holds files.
    """
    if run_dir is None:
        parent = os.path.abspath(os.path.join(root, name))
        with _creating(parent):
            return lock_run(_new_timestamped(parent))
    run_dir = os.path.abspath(os.path.expanduser(run_dir))
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise ValueError(f"the run directory {run_dir} is a file, not a folder; choose "
                         f"another --run-dir")
    with _creating(run_dir):
        os.makedirs(os.path.dirname(run_dir), exist_ok=True)
        try:
            os.mkdir(run_dir)
        except FileExistsError:
            pass  # an existing empty folder is allowed; checked below, under the lock
    lock = None if _holds_files(run_dir) else lock_run(run_dir)
    if lock is None or _holds_files(run_dir):  # again under the lock: another run won
        if lock is not None:
            lock.release()
        raise ValueError(f"the run directory {run_dir} already exists and is not empty; "
                         f"runs are never overwritten. Choose another --run-dir or remove "
                         f"it yourself.")
    return lock


@contextlib.contextmanager
def _creating(run_dir: str):
    """Turns an OS error while creating `run_dir` into a ValueError naming the path and why
    (a parent that is a file, a folder that cannot be created)."""
    try:
        yield
    except OSError as error:
        parent = os.path.dirname(run_dir)
        while parent != os.path.dirname(parent) and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if os.path.exists(parent) and not os.path.isdir(parent):
            why = f"{parent} is a file, not a folder"
        else:
            where = f"making {error.filename} failed: " if error.filename else ""
            why = f"{where}{error.strerror or type(error).__name__}"
        raise ValueError(f"cannot create the run directory {run_dir}: {why}. Choose another "
                         f"--run-dir (or run_dir in the recipe)") from None


def check_writable(run: str) -> None:
    """Refuses to continue a run that cannot be written (its folder, or a folder or file in
    it that a resume rewrites), before anything else: a resume writes checkpoints, the
    history and logs into the run.

    Raises:
        ValueError: naming what is read-only and what to do.
    """
    written = [run] + [os.path.join(run, name) for name in (LOCK_FILE, "history.json",
                                                             "checkpoints", LOGS)]
    for path in written:
        if os.path.exists(path) and not os.access(path, os.W_OK | (
                os.X_OK if os.path.isdir(path) else 0)):
            raise ValueError(
                f"the run {run} cannot be resumed where it is: {path} is read-only (permission "
                f"denied or a read-only file system), and resuming writes its checkpoints, "
                f"history and logs there. Make it writable, or copy the run to a writable "
                f"place and resume the copy (cp -r {run} COPY; graphfit train --resume COPY)")


def _holds_files(run_dir: str) -> bool:
    return bool(set(os.listdir(run_dir)) - {LOCK_FILE})


def create_run(name: str, run_dir: str | None, root: str = "runs") -> str:
    """Creates and returns a new, empty run directory (see `claim_new_run`, which also
    returns it locked).

    Raises:
        ValueError: if `run_dir` is given and already holds files.
    """
    lock = claim_new_run(name, run_dir, root)
    lock.release()
    return lock.run


def _new_timestamped(parent: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate, suffix = os.path.join(parent, stamp), 1
    while True:
        try:
            os.makedirs(candidate)  # fails if another run took the name first
            return candidate
        except FileExistsError:
            suffix += 1
            candidate = os.path.join(parent, f"{stamp}-{suffix}")


def find_run(path: str) -> str:
    """The absolute run directory `path` names (`.../latest` is the newest run there).

    The user modules the run was trained with are put back on `sys.path` (see
    `use_recorded_modules`).

    Raises:
        ValueError: if it is not a finished graphfit run, or a module it needs is gone.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.basename(path) == LATEST:
        # The concrete run (a recipe that names latest records the run it used).
        path = (os.path.realpath(path) if os.path.exists(path)
                else _newest_finished(os.path.dirname(path)))  # no link yet, or dangling
    if not os.path.isdir(path):
        raise ValueError(f"run directory not found: {path}")
    if not os.path.isfile(os.path.join(path, RECIPE_FILE)):
        raise ValueError(f"{path} is not a graphfit run directory (it has no {RECIPE_FILE})")
    if not os.path.isfile(os.path.join(path, CHECKPOINT + ".index")):
        writer = writing_process(path)
        if writer is not None:
            raise ValueError(f"the run {path} is still training (process {writer}): its final "
                             f"weights are written when it ends. Wait for it to finish, then "
                             f"try again")
        if holds_checkpoint(path):
            advice = (f"Finish it with `graphfit train --resume {path}` (it continues from "
                      f"its latest checkpoint)")
        else:
            advice = (f"It wrote no checkpoint either, so nothing can be resumed: train its "
                      f"recipe again (`graphfit train {os.path.join(path, RECIPE_FILE)}`)")
        raise ValueError(f"the run {path} has no final weights ({CHECKPOINT}): it did not "
                         f"finish. {advice}")
    use_recorded_modules(path)
    return path


def holds_checkpoint(run: str) -> bool:
    """Whether a training checkpoint was written anywhere in the run (wherever the recipe's
    ModelCheckpoint put it)."""
    return any(name.endswith(".index") for _, _, names in os.walk(run) for name in names)


def _newest_finished(parent: str) -> str:
    runs = sorted(
        (entry for entry in (os.listdir(parent) if os.path.isdir(parent) else [])
         if entry != LATEST and os.path.isfile(os.path.join(parent, entry, CHECKPOINT + ".index"))),
        key=lambda entry: os.path.getmtime(os.path.join(parent, entry, CHECKPOINT + ".index")))
    if not runs:
        raise ValueError(f"no finished runs under {parent} to take the latest of; train "
                         f"that recipe first")
    return os.path.join(parent, runs[-1])


def update_latest(run: str) -> str | None:
    """Points `<run's parent>/latest` at `run`: a relative symlink (a directory junction on
    Windows without symlink rights), replaced atomically. Returns the link's path, or None
    when the file system allows neither (`find_run` then still resolves `latest`)."""
    run = os.path.realpath(os.path.abspath(run))  # never `latest` itself: a link to itself
    parent = os.path.dirname(run)
    link = os.path.join(parent, LATEST)
    if os.path.exists(link) and not os.path.islink(link) and not _is_junction(link):
        return None  # a real file or folder named latest: not ours to replace
    staging = os.path.join(parent, f".{LATEST}-{os.getpid()}")
    try:
        if os.path.lexists(staging):
            os.remove(staging)
        os.symlink(os.path.basename(run), staging, target_is_directory=True)
    except (OSError, NotImplementedError):
        return _junction(run, link)
    try:
        os.replace(staging, link)
    except OSError:
        os.remove(staging)
        return None
    return link


def _is_junction(path: str) -> bool:
    return bool(getattr(os.path, "isjunction", lambda _: False)(path))


def _junction(run: str, link: str) -> str | None:
    try:
        import _winapi
    except ImportError:
        return None
    try:
        if _is_junction(link):
            os.rmdir(link)  # removes the junction, never its target
        _winapi.CreateJunction(run, link)
    except OSError:
        return None
    return link


def _module_names(config: dict) -> list[str]:
    """The user modules a resolved recipe names: imports, class_path and data.function."""
    names = list(config.get("imports") or [])

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "class_path" and isinstance(item, str) and "." in item:
                    names.append(item.rsplit(".", 1)[0])
                elif key == "function" and isinstance(item, str) and ":" in item:
                    names.append(item.split(":", 1)[0])
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk({k: v for k, v in config.items() if k != "imports"})
    return list(dict.fromkeys(names))


def _installed_roots() -> set[str]:
    paths = sysconfig.get_paths()
    return {os.path.abspath(paths[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if key in paths}


def _import_root(name: str, file: str) -> str:
    """The sys.path folder from which `name` (whose source is `file`) is imported."""
    folder = os.path.dirname(os.path.abspath(file))
    if os.path.basename(file).startswith("__init__."):
        folder = os.path.dirname(folder)
    for _ in range(name.count(".")):
        folder = os.path.dirname(folder)
    return folder


def record_user_modules(run: str, config: dict, recipe_source: str | None) -> None:
    """Writes `user_modules.json`: the recipe's original folder and, for each user module
    the recipe names (imported by now), its file and the folder it was imported from."""
    import graphfit

    package = os.path.dirname(os.path.abspath(graphfit.__file__))
    installed = _installed_roots()
    modules = []
    for name in _module_names(config):
        file = getattr(sys.modules.get(name), "__file__", None)
        if not file:
            continue
        root = _import_root(name, file)
        if os.path.abspath(file).startswith(package + os.sep) or root in installed:
            continue  # graphfit's own and installed packages are found anywhere
        modules.append({"module": name, "file": os.path.abspath(file), "folder": root})
    folder = (os.path.dirname(os.path.abspath(recipe_source))
              if recipe_source and os.path.isfile(recipe_source) else None)
    write_json(os.path.join(run, USER_MODULES), {"recipe_folder": folder, "modules": modules})


def use_recorded_modules(run: str) -> None:
    """Puts the folders of a run's user modules (and its recipe's original folder) on
    `sys.path`, so its recipe loads from anywhere.

    Raises:
        ValueError: naming the module, where it was and what to do, when it is gone.
    """
    record_path = os.path.join(run, USER_MODULES)
    if not os.path.isfile(record_path):
        return
    record = read_json(record_path)
    folders = [m["folder"] for m in record.get("modules", [])] + [record.get("recipe_folder")]
    for folder in reversed(folders):
        if folder and os.path.isdir(folder) and folder not in sys.path:
            sys.path.insert(0, folder)
    for module in record.get("modules", []):
        name = module["module"]
        try:
            found = name in sys.modules or importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ValueError(
                f"the run {run} needs the module {name!r}, which was {module['file']} when it "
                f"was trained and cannot be found now. Put the module back there, or put the "
                f"folder that holds it on PYTHONPATH (or run graphfit from that folder), then "
                f"try again.")


def write_yaml(path: str, data) -> None:
    _write_atomically(path, yaml.safe_dump(data, sort_keys=False, default_flow_style=False,
                                           width=100))


def write_json(path: str, data) -> None:
    _write_atomically(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


class DamagedRunFile(ValueError):
    """A file of a run directory that graphfit wrote cannot be read back (cut short, edited,
    overwritten); the message names the file and what to do."""


def _damaged(path: str, why: str) -> DamagedRunFile:
    return DamagedRunFile(
        f"{path} is damaged ({why}); graphfit wrote it and reads it back to evaluate, predict, "
        f"export or resume the run. Restore it from a copy of the run, or train the recipe "
        f"again")


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as error:
        raise _damaged(path, f"not UTF-8 text: {error.reason} at byte {error.start}") from None


def read_yaml(path: str, kind: type | None = None):
    """The YAML file `path` of a run; `DamagedRunFile` when it does not parse (or is not a
    `kind`, when given)."""
    try:
        data = yaml.safe_load(_read_text(path))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise _damaged(path, f"not valid YAML{where}: {getattr(error, 'problem', error)}") \
            from None
    return _of_kind(path, data, kind)


def read_json(path: str, kind: type | None = dict):
    """The JSON file `path` of a run (an object unless `kind` says otherwise);
    `DamagedRunFile` naming the file when it does not parse or holds something else."""
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as error:
        raise _damaged(path, f"not valid JSON at line {error.lineno}, column {error.colno}: "
                             f"{error.msg}") from None
    return _of_kind(path, data, kind)


def _of_kind(path: str, data, kind: type | None):
    if kind is not None and not isinstance(data, kind):
        words = {dict: "a mapping", list: "a list"}
        raise _damaged(path, f"it holds {type(data).__name__}, not {words.get(kind, kind)}")
    return data


def read_recipe(run: str) -> str:
    return os.path.join(run, RECIPE_FILE)


def _write_atomically(path: str, text: str) -> None:
    # A run killed mid-write must not leave a truncated recipe or metrics file behind.
    staging = path + ".partial"
    with open(staging, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)


def versions() -> dict[str, str]:
    import keras
    import numpy
    import tensorflow as tf

    import graphfit
    return {"graphfit": graphfit.__version__, "tensorflow": tf.__version__,
            "keras": keras.__version__, "numpy": numpy.__version__,
            "python": platform.python_version()}

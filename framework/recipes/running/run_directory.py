"""Run directories: everything needed to re-evaluate, predict with or resume a run.

    runs/<recipe name>/<YYYYmmdd-HHMMSS>/
        recipe.yaml         the resolved recipe (every default filled in; paths absolute)
        overrides.yaml      the --set overrides given on the command line
        versions.json       graphfit, TensorFlow, Keras, NumPy and Python versions
        preprocessing.json  input shape, feature names and standardization statistics
        history.json        the per-epoch numbers of every stage
        metrics.json        the final train / val / test numbers
        checkpoints/        TensorFlow checkpoint of the final weights
        logs/               TensorBoard logs: train/, val/, test/

A run directory is never overwritten: a new run gets a new timestamp (with -2, -3, ... if two
start in the same second), and an explicit `--run-dir` must not exist yet or be empty.
`runs/<name>/latest` names the newest run of a recipe.
"""

from __future__ import annotations

import json
import os
import platform
import time

import yaml

__all__ = ["create_run", "find_run", "write_yaml", "write_json", "read_json", "read_recipe",
           "versions", "CHECKPOINT", "LOGS"]

CHECKPOINT = os.path.join("checkpoints", "final")
LOGS = "logs"
RECIPE_FILE = "recipe.yaml"


def create_run(name: str, run_dir: str | None, root: str = "runs") -> str:
    """Creates and returns a new, empty run directory.

    Raises:
        ValueError: if `run_dir` is given and already holds files.
    """
    if run_dir is not None:
        run_dir = os.path.abspath(os.path.expanduser(run_dir))
        if os.path.exists(run_dir) and (not os.path.isdir(run_dir) or os.listdir(run_dir)):
            raise ValueError(f"the run directory {run_dir} already exists and is not empty; "
                             f"runs are never overwritten. Choose another --run-dir or remove "
                             f"it yourself.")
        os.makedirs(run_dir, exist_ok=True)
        return run_dir
    parent = os.path.abspath(os.path.join(root, name))
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

    Raises:
        ValueError: if it is not a finished graphfit run.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.basename(path) == "latest" and not os.path.exists(path):
        parent = os.path.dirname(path)
        runs = sorted(
            (entry for entry in (os.listdir(parent) if os.path.isdir(parent) else [])
             if os.path.isfile(os.path.join(parent, entry, CHECKPOINT + ".index"))),
            key=lambda entry: os.path.getmtime(os.path.join(parent, entry, CHECKPOINT + ".index")))
        if not runs:
            raise ValueError(f"no finished runs under {parent} to take the latest of; train "
                             f"that recipe first")
        path = os.path.join(parent, runs[-1])
    if not os.path.isdir(path):
        raise ValueError(f"run directory not found: {path}")
    if not os.path.isfile(os.path.join(path, RECIPE_FILE)):
        raise ValueError(f"{path} is not a graphfit run directory (it has no {RECIPE_FILE})")
    if not os.path.isfile(os.path.join(path, CHECKPOINT + ".index")):
        raise ValueError(f"the run {path} has no final checkpoint ({CHECKPOINT}); it did not "
                         f"finish training")
    return path


def write_yaml(path: str, data) -> None:
    _write_atomically(path, yaml.safe_dump(data, sort_keys=False, default_flow_style=False,
                                           width=100))


def write_json(path: str, data) -> None:
    _write_atomically(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def read_yaml(path: str):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def read_json(path: str):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


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

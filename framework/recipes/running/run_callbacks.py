"""The callbacks of a recipe run, and what TensorBoard shows of the recipe.

A run's callbacks are the recipe's own, plus a `TensorBoard` writing `logs/` (with the resolved
recipe as text and its hyperparameters) and a `ModelCheckpoint` writing `checkpoints/`, unless
the recipe lists its own.

Example:

    >>> hyperparameters({"seed": 0, "optimizer": {"type": "SGD", "learning_rate": 0.1},
    ...                  "model": {"layers": [{}, {}]}})["optimizer.learning_rate"]
    0.1
"""

from __future__ import annotations

import math
import os
from typing import Any

from graphfit.recipes.reading.recipe import Recipe
from graphfit.recipes.running import run_directory
from graphfit.recipes.running.builder import build_callbacks

__all__ = ["table_summary", "hyperparameters", "trial_id", "run_callbacks", "CHECKPOINTS"]

CHECKPOINTS = "checkpoints"


def hyperparameters(config: dict) -> dict[str, Any]:
    """The recipe's scalar settings, flattened ("optimizer.learning_rate": 0.05), for HParams."""
    flat: dict[str, Any] = {}

    def walk(value, prefix):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{prefix}.{key}" if prefix else key)
        elif isinstance(value, (bool, int, float, str)) and not (
                isinstance(value, float) and not math.isfinite(value)):
            flat[prefix] = value

    for section in ("seed", "data", "optimizer", "training", "loss", "distribute"):
        walk(config.get(section), section)
    flat.pop("data.path", None)
    flat["model.layers"] = len(config["model"].get("layers") or config["model"].get("nodes"))
    return flat


def trial_id(config: dict, run: str) -> str:
    """The HParams session name of a run: `<recipe name>/<run folder>`, as in `runs/`."""
    folder = os.path.basename(os.path.abspath(run))
    return folder if folder == config["name"] else f"{config['name']}/{folder}"


def table_summary(table: dict | None) -> str:
    """A table's typed columns and class names, as YAML comments (TensorBoard's Text tab
    shows them under the recipe); "" for other data."""
    if not table:
        return ""
    from graphfit.tabular import Column, describe

    columns = [Column.from_record(c) for c in table["preprocessor"]["columns"]]
    lines = ["", "# data columns (statistics from the training split):"]
    lines += ["#" + line for line in describe(columns, table.get("vocabulary_sizes"))]
    if table.get("class_names"):
        lines.append(f"# classes of {table['target']} (id: name): " + ", ".join(
            f"{i}: {name}" for i, name in enumerate(table["class_names"])))
    for stage, counts in (table.get("oov_counts") or {}).items():
        for name, count in counts.items():
            lines.append(f"# {stage}: {count} value(s) of {name} unseen in training went to "
                         f"the out-of-vocabulary bucket")
    return "\n".join(lines) + "\n"


def run_callbacks(recipe: Recipe, run: str, monitor: str, resumed_epoch: int = 0,
                  writes: bool = True, data_summary: str = "") -> list:
    """The run's callbacks: the recipe's, then TensorBoard and ModelCheckpoint if it has none.

    Args:
        resumed_epoch: the epoch a resumed run starts at (its CSV log keeps earlier rows).
        writes: False on a worker other than the chief (its CSV log is left alone).
        data_summary: text shown after the recipe in TensorBoard (`table_summary`).
    """
    from graphfit import callbacks

    own = build_callbacks(recipe.config, run)
    kinds = {type(callback).__name__ for callback in own}
    for callback in own:
        if isinstance(callback, callbacks.TensorBoard):
            callback.recipe_text = callback.recipe_text or recipe.to_yaml() + data_summary
            callback.hparams = callback.hparams or hyperparameters(recipe.config)
            callback.trial_id = callback.trial_id or trial_id(recipe.config, run)
        if isinstance(callback, callbacks.CSVLogger) and resumed_epoch and writes:
            _keep_csv_rows_before(callback, resumed_epoch)
    extra = []
    if "TensorBoard" not in kinds:
        extra.append(callbacks.TensorBoard(os.path.join(run, run_directory.LOGS),
                                           recipe_text=recipe.to_yaml() + data_summary,
                                           hparams=hyperparameters(recipe.config),
                                           trial_id=trial_id(recipe.config, run)))
    if "ModelCheckpoint" not in kinds:
        extra.append(callbacks.ModelCheckpoint(os.path.join(run, CHECKPOINTS), monitor=monitor))
    return own + extra


def _keep_csv_rows_before(logger, epoch: int) -> None:
    """A resumed run appends to its CSV log, after dropping rows of epochs it will redo."""
    import csv

    logger.append = True
    if not os.path.isfile(logger.filename):
        return
    with open(logger.filename, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle, delimiter=logger.sep))
    kept = rows[:1] + [row for row in rows[1:] if row and int(row[0]) < epoch]
    with open(logger.filename, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, delimiter=logger.sep).writerows(kept)

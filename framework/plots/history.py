"""A run directory's `history.json`, as curves: one panel per metric, one series per stage.

`history.json` holds `{key: [value per epoch that has it]}`: training keys (`loss`,
`accuracy`, `learning_rate`, ...), validation keys `val_<metric>` and test keys
`test_<metric>` (non-finite values are `null`). A stage evaluated every epoch has one value per
epoch; validation every `training.validation_freq` epochs; test at the last epoch, and also
every `training.test_freq` epochs when the recipe sets it. Epochs count from 1, as the
progress lines (`Epoch 1/20`) do.
"""

from __future__ import annotations

import json
import os

__all__ = ["STAGES", "HistoryError", "read_history", "history_panels", "stage_of",
           "run_frequencies"]

STAGES = ("train", "val", "test")  # also graphfit's TensorBoard run folders


class HistoryError(ValueError):
    """A run directory without a readable history.json."""


def read_history(run_dir: str) -> dict[str, list]:
    """The run's `history.json` as {key: list of numbers or None}.

    Raises:
        HistoryError: when `run_dir` is not a folder, or its history.json is missing,
            unreadable or not a {name: [numbers]} object.
    """
    run_dir = os.path.abspath(run_dir)
    if not os.path.isdir(run_dir):
        raise HistoryError(f"{run_dir} is not a folder: give a run directory (the folder "
                           f"`graphfit train` printed, e.g. runs/<recipe>/<timestamp>)")
    path = os.path.join(run_dir, "history.json")
    if not os.path.isfile(path):
        raise HistoryError(f"{path} does not exist: {run_dir} is not a graphfit run directory, "
                           f"or its first epoch has not finished (history.json is written "
                           f"after every epoch)")
    try:
        with open(path, encoding="utf-8") as handle:
            history = json.load(handle)
    except (OSError, ValueError) as error:
        raise HistoryError(f"cannot read {path}: {error}") from None
    if not isinstance(history, dict) or not all(
            isinstance(values, list) and all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                for v in values) for values in history.values()):
        raise HistoryError(f"{path} is not a history: expected an object "
                           f"{{metric name: [one number (or null) per epoch]}}")
    return history


def stage_of(key: str) -> tuple[str, str]:
    """("val", "loss") for "val_loss", ("train", "loss") for "loss"."""
    for stage in STAGES[1:]:
        if key.startswith(stage + "_"):
            return stage, key[len(stage) + 1:]
    return "train", key


def run_frequencies(run_dir: str) -> dict[str, int | None]:
    """{"val": validation_freq, "test": test_freq} from the run's recipe.yaml (1 and None,
    the defaults, when the file or the keys are missing)."""
    frequencies: dict[str, int | None] = {"val": 1, "test": None}
    path = os.path.join(run_dir, "recipe.yaml")
    try:
        import yaml

        with open(path, encoding="utf-8") as handle:
            training = (yaml.safe_load(handle) or {}).get("training") or {}
    except (OSError, ValueError, AttributeError, ImportError):
        return frequencies
    for stage, key in (("val", "validation_freq"), ("test", "test_freq")):
        value = training.get(key) if isinstance(training, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            frequencies[stage] = value
    return frequencies


def _epochs(stage: str, count: int, epochs: int, frequency: int | None) -> list[int]:
    """The (1-based) epochs at which a stage with `count` values was evaluated."""
    if count >= epochs:
        return list(range(1, count + 1))
    if stage == "val":
        schedule = [e for e in range(1, epochs + 1) if e % (frequency or 1) == 0]
    elif stage == "test":
        schedule = [e for e in range(1, epochs + 1)
                    if e == epochs or (frequency and e % frequency == 0)]
    else:
        schedule = list(range(1, epochs + 1))
    # A resumed run drops the test numbers of earlier epochs: the values are the latest ones.
    return schedule[-count:] if count <= len(schedule) else list(range(epochs - count + 1,
                                                                        epochs + 1))


def history_panels(history: dict[str, list],
                   frequencies: dict[str, int | None] | None = None) -> dict[str, dict]:
    """{metric: {stage: (epochs, values)}}: one panel per metric (loss first, then in the
    order of history.json), its stages in the order train, val, test.

    `values` is the history's list itself (None where it holds null); `epochs` are the
    1-based epochs they belong to.

    Example:
        >>> panels = history_panels({"loss": [0.9, 0.5, 0.4], "val_loss": [1.0, 0.7, 0.6],
        ...                          "test_loss": [0.65]})
        >>> panels["loss"]["test"]
        ([3], [0.65])
    """
    frequencies = frequencies or {"val": 1, "test": None}
    epochs = max((len(v) for k, v in history.items() if stage_of(k)[0] == "train"),
                 default=max((len(v) for v in history.values()), default=0))
    names: list[str] = []
    for key in history:
        name = stage_of(key)[1]
        if name not in names:
            names.append(name)
    names.sort(key=lambda name: name != "loss")  # stable: the rest keep their order
    panels: dict[str, dict] = {}
    for name in names:
        panel = {}
        for stage in STAGES:
            key = name if stage == "train" else f"{stage}_{name}"
            values = history.get(key)
            if values:
                panel[stage] = (_epochs(stage, len(values), epochs, frequencies.get(stage)),
                                list(values))
        panels[name] = panel
    return panels

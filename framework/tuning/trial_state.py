"""A trial's end state, written beside its run's metrics.json as `trial.json`:

    {"trial": 4, "state": "pruned", "epochs": 1}

`state` is Optuna's: `complete`, `pruned` (after `epochs` epochs, fewer than the recipe's) or
`failed`; `graphfit compare` shows it next to the trial's metrics, and the MLflow trial run
carries the same words as its tag `graphfit.trial_state`.
"""

from __future__ import annotations

import json
import os

__all__ = ["TRIAL_FILE", "STATE_TAG", "EPOCHS_TAG", "write_trial_state", "read_trial_state",
           "state_text"]

TRIAL_FILE = "trial.json"
STATE_TAG = "graphfit.trial_state"  # the MLflow trial run's tag: complete, pruned, failed
EPOCHS_TAG = "graphfit.trial_epochs"  # ... and the epochs it trained


def write_trial_state(run: str, number: int, state: str, epochs: int | None) -> None:
    """Writes `run/trial.json` (the run directory exists once training began)."""
    if not os.path.isdir(run):
        return  # failed before its run directory was made: the study's trials.csv says why
    with open(os.path.join(run, TRIAL_FILE), "w", encoding="utf-8") as handle:
        json.dump({"trial": number, "state": state, "epochs": epochs}, handle)
        handle.write("\n")


def read_trial_state(run: str) -> dict | None:
    """`run/trial.json` as a dict, or None for a run that is not a study's trial."""
    path = os.path.join(run, TRIAL_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def state_text(record: dict) -> str:
    """`complete`, `pruned after epoch 1`, `failed`."""
    if record.get("state") == "pruned" and record.get("epochs"):
        return f"pruned after epoch {record['epochs']}"
    return str(record.get("state"))

"""`graphfit compare RUN...`: the runs' final metrics next to the hyperparameters that differ.

A study folder stands for all of its trials' runs: the finished ones, and the failed ones (a
row with the state `failed` and no metrics); a study's trials get a `state` column
(`complete`, `pruned after epoch 1`, `failed`) from their `trial.json`.

Example:

    >>> header, rows = comparison_table([
    ...     ("a", {"optimizer.learning_rate": 0.1, "seed": 0}, {"val": {"loss": 0.5}}),
    ...     ("b", {"optimizer.learning_rate": 0.01, "seed": 0}, {"val": {"loss": 0.4}})])
    >>> header
    ['run', 'val_loss', 'optimizer.learning_rate']
    >>> rows[1]
    ['b', 0.4, 0.01]
"""

from __future__ import annotations

import os

__all__ = ["comparison_table", "load_runs", "print_table", "expand_runs"]

_STAGES = ("train", "val", "test")


def expand_runs(paths: list[str]) -> list[str]:
    """Run directories from the arguments: a study folder gives its trials' runs (finished,
    or with a `trial.json` that says how the trial ended)."""
    from graphfit.recipes.running import run_directory
    from graphfit.tuning.trial_state import TRIAL_FILE

    runs = []
    for path in paths:
        trials = os.path.join(path, "trials")
        if os.path.isdir(trials) and not os.path.isfile(os.path.join(path, "recipe.yaml")):
            runs.extend(os.path.join(trials, name) for name in sorted(os.listdir(trials))
                        if any(os.path.isfile(os.path.join(trials, name, file))
                               for file in ("metrics.json", TRIAL_FILE)))
            continue
        runs.append(run_directory.find_run(path))
    if not runs:
        raise ValueError(f"no finished runs in {', '.join(paths)}")
    seen = set()  # runs/NAME/* names the newest run twice: its folder and `latest`
    return [run for run in runs
            if not (os.path.realpath(run) in seen or seen.add(os.path.realpath(run)))]


def load_runs(runs: list[str]) -> list[tuple[str, dict, dict, str | None]]:
    """(name, flattened recipe, final metrics, trial state or None) of each run directory."""
    from graphfit.recipes.running import run_directory
    from graphfit.recipes.running.run_callbacks import hyperparameters
    from graphfit.tuning.trial_state import read_trial_state, state_text

    loaded = []
    for run in runs:
        metrics_file = os.path.join(run, "metrics.json")
        record = read_trial_state(run)
        finished = os.path.isfile(metrics_file)
        if not finished and (record is None or record.get("state") != "failed"):
            raise ValueError(f"{run} has no metrics.json: it did not finish (continue it with "
                             f"graphfit train --resume {run})")
        config = run_directory.read_yaml(run_directory.read_recipe(run))
        name = os.path.relpath(run) if len(os.path.relpath(run)) < len(run) else run
        metrics = run_directory.read_json(metrics_file) if finished else {}
        loaded.append((name, hyperparameters(config), metrics,
                       None if record is None else state_text(record)))
    return loaded


def comparison_table(loaded) -> tuple[list[str], list[list]]:
    """(header, rows): run, its trial state when some run is a study's trial, each stage's
    final metrics, then every hyperparameter whose value is not the same in all runs.

    Args:
        loaded: (name, params, metrics) or (name, params, metrics, state) per run.
    """
    states = [entry[3] if len(entry) > 3 else None for entry in loaded]
    loaded = [entry[:3] for entry in loaded]
    metric_keys = []
    for _, _, metrics in loaded:
        for stage in _STAGES:
            for name in (metrics.get(stage) or {}):
                key = f"{stage}_{name}" if stage != "train" else name
                if key not in metric_keys:
                    metric_keys.append(key)
    names = []
    for _, params, _ in loaded:
        names.extend(key for key in params if key not in names)
    differing = [key for key in names
                 if len({repr(params.get(key)) for _, params, _ in loaded}) > 1]
    rows = []
    for (run, params, metrics), state in zip(loaded, states):
        values = []
        for key in metric_keys:
            stage, _, name = key.partition("_")
            stage, name = (stage, name) if stage in ("val", "test") and name else ("train", key)
            values.append((metrics.get(stage) or {}).get(name))
        shown = [state] if any(states) else []
        rows.append([run, *shown, *values, *[params.get(key) for key in differing]])
    return ["run", *(["state"] if any(states) else []), *metric_keys, *differing], rows


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def print_table(header: list[str], rows: list[list]) -> None:
    """Prints the table with aligned columns."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in
              enumerate(header)]
    print("  ".join(name.ljust(width) for name, width in zip(header, widths)).rstrip())
    for row in cells:
        print("  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip())

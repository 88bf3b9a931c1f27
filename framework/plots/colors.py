"""The colours TensorBoard gives graphfit's train, val and test runs.

TensorBoard's web app (tensorboard/webapp/util/colors.ts, `DEFAULT_PALETTE`) colours runs from
a palette of seven, in light mode: slate #425066, cyan #12b5cb, pink #e52592, yellow #f9ab00,
purple #9334e6, light green #7cb342, orange #e8710a. With the default "group by run", run i
of the run list gets colour i (modulo 7; runs_reducers.ts), and the run list comes from the
backend sorted by start time (the wall time of each run's first event, whole seconds for
TensorFlow's event files), ties broken by run name (core_plugin.py `_serve_runs`).

A recipe run's `logs/` holds four runs: "." (the recipe text and hyperparameters, written at
the start), then `train/` and `val/` (first written at the end of epoch 1) and `test/`. So
`tensorboard --logdir RUN/logs` shows, in the usual case, train cyan, val pink, test yellow;
when the whole run took about a second, the three stage runs start in the same second and
sort by name (test, train, val). `stage_colors` reads that order from the event files'
names, as TensorBoard would, and falls back to the usual order when there are no logs.
"""

from __future__ import annotations

import os

__all__ = ["TENSORBOARD_PALETTE", "TYPICAL_RUN_ORDER", "tensorboard_run_order", "stage_colors"]

TENSORBOARD_PALETTE = ("#425066", "#12b5cb", "#e52592", "#f9ab00", "#9334e6", "#7cb342",
                       "#e8710a")
TYPICAL_RUN_ORDER = (".", "train", "val", "test")
_EVENTS = "tfevents"  # TensorBoard's test for an event file: the name contains it


def _start_time(folder: str, files: list[str]) -> int | None:
    """The earliest creation time in the event files' names (events.out.tfevents.<time>...)."""
    times = []
    for name in files:
        parts = name.split(".")
        if _EVENTS in name and len(parts) > 3 and parts[3].isdigit():
            times.append(int(parts[3]))
    return min(times) if times else None


def tensorboard_run_order(log_dir: str) -> list[str]:
    """The runs under `log_dir` in TensorBoard's run-list order ("." is log_dir itself).

    Example:
        >>> import tempfile, os
        >>> logs = tempfile.mkdtemp()
        >>> for run, t in (("", 100), ("val", 105), ("train", 105), ("test", 109)):
        ...     os.makedirs(os.path.join(logs, run), exist_ok=True)
        ...     open(os.path.join(logs, run, f"events.out.tfevents.{t}.host.1.0.v2"), "w").close()
        >>> tensorboard_run_order(logs)
        ['.', 'train', 'val', 'test']
    """
    runs = []
    for folder, _, files in os.walk(log_dir):
        start = _start_time(folder, files)
        if start is not None or any(_EVENTS in name for name in files):
            name = os.path.relpath(folder, log_dir).replace(os.sep, "/")
            runs.append((start if start is not None else float("inf"), name))
    return [name for _, name in sorted(runs)]


def stage_colors(log_dir: str | None = None) -> dict[str, str]:
    """{"train": colour, "val": colour, "test": colour}: what TensorBoard shows for the runs
    in `log_dir` (the usual order when it is None or holds no event files).

    Example:
        >>> stage_colors()
        {'train': '#12b5cb', 'val': '#e52592', 'test': '#f9ab00'}
    """
    order = tensorboard_run_order(log_dir) if log_dir and os.path.isdir(log_dir) else []
    # Stages without event files (no test split...) take the colours that follow.
    order += [run for run in TYPICAL_RUN_ORDER if run not in order]
    return {stage: TENSORBOARD_PALETTE[order.index(stage) % len(TENSORBOARD_PALETTE)]
            for stage in ("train", "val", "test")}

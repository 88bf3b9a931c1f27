"""`compare_runs`: several runs on one chart per metric (`graphfit plot RUN_A RUN_B ...`)."""

from __future__ import annotations

import math
import os
import re

from graphfit.plots import backend, colors
from graphfit.plots.curves import STAGE_LABELS, PlotResult, decorate_axes, draw_series
from graphfit.plots.history import history_panels, read_history, run_frequencies

__all__ = ["compare_runs", "run_labels", "comparison_file"]

# Each run is a colour; the stage is the line style (and a single test number a marker).
_LINESTYLES = {"train": "-", "val": "--", "test": ":"}


def run_labels(run_dirs: list[str]) -> list[str]:
    """The shortest trailing parts of each path that tell the runs apart.

    Example:
        >>> run_labels(["runs/quickstart/2024-01-01", "runs/moons/2024-01-01"])
        ['quickstart/2024-01-01', 'moons/2024-01-01']
        >>> run_labels(["a/run1", "b/run2"])
        ['run1', 'run2']
    """
    parts = [os.path.abspath(path).strip(os.sep).split(os.sep) for path in run_dirs]
    for depth in range(1, max(len(p) for p in parts) + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    # The same run given twice: its folder name, numbered.
    return [f"{p[-1]} ({index + 1})" for index, p in enumerate(parts)]


def comparison_file(metric: str) -> str:
    """`comparison_<metric>.png`, the metric's name made safe for a file name."""
    return f"comparison_{re.sub(r'[^A-Za-z0-9_.-]+', '_', metric)}.png"


def compare_runs(run_dirs: list[str], output: str = ".") -> PlotResult:
    """One chart per metric comparing runs: each run a colour (TensorBoard's palette, in the
    order given), train a solid line, validation dashed, test dotted (a single test number a
    marker with a dotted line across).

    Args:
        run_dirs: run directories (each holds history.json); at least one.
        output: the folder for the `comparison_<metric>.png` files (created if missing).

    Returns:
        PlotResult: `paths` = the PNGs written, one per metric; `data` = {metric: {run label:
        {stage: (epochs, values)}}} with the values of each run's history.json.

    Raises:
        HistoryError: for a run without a readable history.json (naming the file).
        ValueError: for no runs, or an `output` that is a file.
        PlotsUnavailable: when matplotlib is not installed.

    Example:
        >>> import json, os, tempfile
        >>> root = tempfile.mkdtemp()
        >>> for name, loss in (("a", [0.9, 0.5]), ("b", [0.8, 0.3])):
        ...     os.makedirs(os.path.join(root, name))
        ...     with open(os.path.join(root, name, "history.json"), "w") as f:
        ...         json.dump({"loss": loss, "val_loss": [1.0, 0.7]}, f)
        >>> result = compare_runs([os.path.join(root, "a"), os.path.join(root, "b")],
        ...                       output=os.path.join(root, "charts"))
        >>> result.data["loss"]["b"]["train"], [os.path.basename(p) for p in result.paths]
        (([1, 2], [0.8, 0.3]), ['comparison_loss.png'])
    """
    if not run_dirs:
        raise ValueError("compare_runs needs at least one run directory")
    if os.path.exists(output) and not os.path.isdir(output):
        raise ValueError(f"--output {os.path.abspath(output)} is a file; give a folder for the "
                         f"comparison_<metric>.png charts")
    runs = {label: history_panels(read_history(path), run_frequencies(path))
            for label, path in zip(run_labels(run_dirs), run_dirs)}
    metrics: list[str] = []
    for panels in runs.values():
        metrics += [name for name in panels if name not in metrics]
    data, paths = {}, []
    for metric in metrics:
        data[metric] = {label: panels[metric] for label, panels in runs.items()
                        if metric in panels}
        paths.append(_chart(metric, data[metric], list(runs), output))
    return PlotResult(paths, data)


def _chart(metric: str, by_run: dict, order: list[str], output: str) -> str:
    figure = backend.new_figure(7.5, 4.6)
    axes = figure.add_subplot(1, 1, 1)
    values, epochs = [], 1
    for label, panel in by_run.items():
        color = colors.TENSORBOARD_PALETTE[order.index(label) % len(colors.TENSORBOARD_PALETTE)]
        for stage, (x, y) in panel.items():
            draw_series(axes, x, y, color, f"{label} {STAGE_LABELS[stage]}",
                        linestyle=_LINESTYLES[stage])
            values += [v for v in y if v is not None and math.isfinite(v)]
            epochs = max([epochs, *x])
    decorate_axes(axes, metric, values, epochs)
    axes.set_title(f"{metric}: {len(by_run)} run{'s' if len(by_run) > 1 else ''}")
    # Beside the chart: one entry per run and stage would cover the curves.
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return backend.save_png(figure, os.path.join(output, comparison_file(metric)))

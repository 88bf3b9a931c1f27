"""`learning_curves`: one PNG of a run's learning curves, one panel per metric."""

from __future__ import annotations

import dataclasses
import math
import os

from graphfit.plots import backend, colors
from graphfit.plots.history import history_panels, read_history, run_frequencies

__all__ = ["PlotResult", "learning_curves", "draw_series", "decorate_axes", "LEARNING_CURVES",
           "STAGE_LABELS"]

LEARNING_CURVES = "learning_curves.png"
STAGE_LABELS = {"train": "train", "val": "validation", "test": "test"}
_COLUMNS = 3


@dataclasses.dataclass
class PlotResult:
    """What a plotting function drew: the files it wrote and the data of every series.

    Attributes:
        paths: the PNG files written (absolute paths).
        data: {panel title: {series name: (x list, y list)}} for learning curves, other
            shapes for other plots (see each function).
    """

    paths: list[str]
    data: dict


def _finite(values) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def draw_series(axes, x: list, y: list, color: str, label: str, linestyle: str = "-",
                last_epoch: int | None = None) -> None:
    """One series on `axes`: a line with markers, or, for a single number (a final test
    result), a marker with a thin horizontal line across the panel at its height."""
    y = [math.nan if v is None else v for v in y]
    if len(x) == 1:
        axes.plot(x, y, linestyle="none", marker="D", markersize=6, color=color, label=label,
                  zorder=3)
        if math.isfinite(y[0]):
            axes.axhline(y[0], color=color, linewidth=0.9, linestyle=":", alpha=0.8)
        return
    axes.plot(x, y, color=color, linestyle=linestyle, linewidth=1.6, label=label,
              marker="o" if len(x) <= 30 else None, markersize=3)


def decorate_axes(axes, title: str, values: list[float], epochs: int) -> None:
    """Title, axis labels, integer epoch ticks, a log scale for a loss spanning more than
    two decades, a light grid and a legend."""
    from matplotlib.ticker import MaxNLocator

    axes.set_title(title, fontsize=11)
    axes.set_xlabel("epoch")
    axes.set_ylabel(title)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
    axes.set_xlim(0.5 if epochs <= 1 else 1 - 0.02 * (epochs - 1),
                  1.5 if epochs <= 1 else epochs + 0.02 * (epochs - 1))
    positive = [v for v in values if v > 0]
    if (title.endswith("loss") and positive and len(positive) == len(values)
            and max(positive) > 100 * min(positive)):
        axes.set_yscale("log")
    axes.grid(True, alpha=0.3)
    axes.tick_params(labelsize=8)
    axes.legend(fontsize=8, framealpha=0.8)


def learning_curves(run_dir: str, output: str | None = None) -> PlotResult:
    """Draws the run's learning curves from its history.json into one PNG.

    One panel per metric (loss first), train, validation and test on the same panel in the
    colours TensorBoard gives graphfit's three runs (`graphfit.plots.colors`), epochs on x.
    A number the run measured once (the final test loss) is a marker at its epoch with a
    dotted line across. Losses spanning more than two decades get a log scale.

    Args:
        run_dir: a run directory (it holds history.json).
        output: the PNG's path (default `<run_dir>/learning_curves.png`).

    Returns:
        PlotResult: `paths` = [the PNG], `data` = {metric: {stage: (epochs, values)}}, the
        values as history.json holds them (None for null).

    Raises:
        HistoryError: when the run has no readable history.json.
        PlotsUnavailable: when matplotlib is not installed.

    Example:
        >>> import json, os, tempfile
        >>> run = tempfile.mkdtemp()
        >>> with open(os.path.join(run, "history.json"), "w") as f:
        ...     json.dump({"loss": [0.9, 0.4], "val_loss": [1.0, 0.6], "test_loss": [0.7]}, f)
        >>> result = learning_curves(run)
        >>> result.data["loss"]["val"], result.data["loss"]["test"]
        (([1, 2], [1.0, 0.6]), ([2], [0.7]))
        >>> [os.path.basename(path) for path in result.paths]
        ['learning_curves.png']
    """
    run_dir = os.path.abspath(run_dir)
    panels = history_panels(read_history(run_dir), run_frequencies(run_dir))
    figure = _figure_for(len(panels))
    palette = colors.stage_colors(_log_dir(run_dir))
    epochs = max((max(x) for panel in panels.values() for x, _ in panel.values() if x),
                 default=1)
    for index, (title, panel) in enumerate(panels.items()):
        axes = figure.add_subplot(math.ceil(len(panels) / _COLUMNS),
                                  min(len(panels), _COLUMNS), index + 1)
        for stage, (x, y) in panel.items():
            draw_series(axes, x, y, palette[stage], STAGE_LABELS[stage])
        decorate_axes(axes, title, [v for _, y in panel.values() for v in _finite(y)], epochs)
    figure.suptitle(_run_title(run_dir), fontsize=12)
    path = backend.save_png(figure, output or os.path.join(run_dir, LEARNING_CURVES))
    return PlotResult([path], panels)


def _figure_for(count: int):
    columns = min(max(count, 1), _COLUMNS)
    rows = max(math.ceil(count / _COLUMNS), 1)
    return backend.new_figure(4.4 * columns + 0.4, 3.3 * rows + 0.5)


def _log_dir(run_dir: str) -> str:
    """Where the run's TensorBoard logs are: a TensorBoard callback's log_dir in the
    recipe, else logs/."""
    try:
        import yaml

        with open(os.path.join(run_dir, "recipe.yaml"), encoding="utf-8") as handle:
            entries = (yaml.safe_load(handle) or {}).get("callbacks") or []
        for entry in entries:
            if entry.get("type") == "TensorBoard" and isinstance(entry.get("log_dir"), str):
                return os.path.join(run_dir, entry["log_dir"])
    except (OSError, ValueError, AttributeError):
        pass
    return os.path.join(run_dir, "logs")


def _run_title(run_dir: str) -> str:
    """`<recipe name>/<run folder>` (the last two parts of the run's path)."""
    parent, folder = os.path.split(run_dir)
    return f"{os.path.basename(parent)}/{folder}" if os.path.basename(parent) else folder

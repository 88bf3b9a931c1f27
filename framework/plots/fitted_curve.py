"""`fitted_curve`: a curve-fit run's data, fitted curve and bands (`fit.png`).

It draws the `fitted_curve.json` a curve-fit run writes (`graphfit.fitting.run_report`): the
data as points, the fit as a line, the confidence band shaded and the prediction band's
edges dashed; a global fit's data sets together, each in its own colour.
"""

from __future__ import annotations

import json
import os

from graphfit.plots import backend
from graphfit.plots.colors import TENSORBOARD_PALETTE
from graphfit.plots.curves import PlotResult

__all__ = ["FIT_PLOT", "fitted_curve", "has_fitted_curve"]

FIT_PLOT = "fit.png"
_CURVE = "fitted_curve.json"


def has_fitted_curve(run_dir: str) -> bool:
    """Whether the run wrote a fitted curve to draw."""
    return os.path.isfile(os.path.join(run_dir, _CURVE))


def fitted_curve(run_dir: str, path: str | None = None) -> PlotResult:
    """Writes `fit.png` (or `path`) from the run's `fitted_curve.json`.

    Returns:
        PlotResult: `paths` = [the PNG]; `data` = the curve file's content.

    Raises:
        ValueError: when the run has no readable fitted_curve.json.
        PlotsUnavailable: when matplotlib is not installed.
    """
    source = os.path.join(run_dir, _CURVE)
    try:
        with open(source, encoding="utf-8") as handle:
            curve = json.load(handle)
    except (OSError, ValueError) as error:
        raise ValueError(f"{run_dir} has no readable {_CURVE} (only curve-fit runs write "
                         f"one): {error}") from None
    figure = backend.new_figure(6.4, 4.4)
    axes = figure.add_subplot(1, 1, 1)
    level = f"{100 * curve.get('level', 0.95):g} %"
    if "data_sets" in curve:  # a global fit: each data set's data, fit and bands, in its colour
        for number, one in enumerate(curve["data_sets"]):
            color = TENSORBOARD_PALETTE[(number + 1) % len(TENSORBOARD_PALETTE)]
            _draw(axes, one, level, (color, color, color), f"data set {one['data_set']}",
                  styles=number == 0)
    else:
        _draw(axes, curve, level, ("#12b5cb", "#e52592", "#888888"), "fit")
    axes.set_xlabel("x")
    axes.set_ylabel("y")
    axes.set_title(os.path.basename(os.path.normpath(run_dir)))
    axes.legend(fontsize=8)
    target = path or os.path.join(run_dir, FIT_PLOT)
    return PlotResult([backend.save_png(figure, target)], curve)


def _draw(axes, curve: dict, level: str, colors: tuple, fit: str,
          styles: bool = True) -> None:
    """One curve's bands (confidence shaded, prediction dashed), data and fit; `colors` of the
    fit and confidence band, the data, the prediction band; `fit` the fit's legend label,
    `styles` whether data and bands get theirs (once for a global fit's data sets)."""
    line, points, dashes = colors
    if "confidence" in curve:
        lower, upper = curve["confidence"]
        axes.fill_between(curve["grid"], lower, upper, color=line, alpha=0.3,
                          label=f"{level} confidence band" if styles else None)
    if "prediction" in curve:
        lower, upper = curve["prediction"]
        axes.plot(curve["grid"], lower, "--", color=dashes, lw=1,
                  label=f"{level} prediction band" if styles else None)
        axes.plot(curve["grid"], upper, "--", color=dashes, lw=1)
    axes.plot(curve["x"], curve["y"], "o", color=points, ms=4,
              label="data" if styles else None)
    axes.plot(curve["grid"], curve["fit"], "-", color=line, lw=2, label=fit)

"""The fit report of a recipe run: which runs are curve fits, and the files they get.

A run is a curve fit when its model has one output and a mean-squared-error loss, its
training split is in memory, the Jacobian of its outputs has at most `MAX_JACOBIAN_VALUES`
numbers, and either a layer describes its fit parameters (`layers.Formula`) or its optimizer
has a direct solver (`max_parameters`, LevenbergMarquardt's) that its parameters fit. A
network trained by a first-order optimizer gets no report. Such a run writes, next to
`metrics.json`:

- `fit_report.json`: `FitReport.to_dict()` plus the 95 % linearised intervals;
- `fit_report.txt`: the report as `graphfit train` prints it;
- `fitted_curve.json` (one input column): the data, the fitted curve on a grid over the data's
  range, and its 95 % confidence and prediction bands, which `graphfit plot` draws
  (`fit.png`); for a global fit (one input column before the data-set column), the same for
  each data set (`data_sets`), drawn together. A weighted run (a table's `sample_weight`
  column, read as 1/σ²) is reported with its weights, as `model.fit_report(x, y,
  sample_weight=...)`; its curve has no prediction band (that needs the σ of a new
  measurement at each x of the grid).

Example:

    >>> MAX_JACOBIAN_VALUES
    2000000
"""

from __future__ import annotations

import json
import os

import numpy as np

__all__ = ["is_curve_fit", "write_run_report", "FIT_REPORT_JSON", "FIT_REPORT_TEXT",
           "FIT_CURVE", "MAX_JACOBIAN_VALUES", "BAND_LEVEL"]

FIT_REPORT_JSON, FIT_REPORT_TEXT = "fit_report.json", "fit_report.txt"
FIT_CURVE = "fitted_curve.json"
MAX_JACOBIAN_VALUES = 2_000_000
BAND_LEVEL = 0.95
_GRID = 200
_MSE = ("mean_squared_error", "mse")


def is_curve_fit(model, x, y) -> bool:
    """Whether a run of `model` on the training data `x, y` gets a fit report (see above)."""
    state = getattr(model, "compile_state", None)
    loss_set = getattr(state, "loss_set", None)
    if loss_set is None or loss_set.output_names is not None or y is None:
        return False
    loss = loss_set.losses.get(None)
    if getattr(loss, "name", None) not in _MSE or isinstance(x, (dict, list, tuple)):
        return False
    if not isinstance(x, np.ndarray) or not isinstance(y, np.ndarray):
        return False
    parameters = sum(int(np.prod(v.shape.as_list())) for v in model.trainable_variables)
    if not 0 < parameters or y.size * parameters > MAX_JACOBIAN_VALUES:
        return False
    described = any(callable(getattr(layer, "fit_parameters", None))
                    for layer in model.flatten_layers(include_self=True))
    limit = getattr(model.optimizer, "max_parameters", None)
    return described or isinstance(limit, int) and parameters <= limit


def _intervals(report) -> dict | None:
    try:
        from graphfit.fitting.intervals import linear_intervals

        return {name: list(pair) if pair else None
                for name, pair in linear_intervals(report, BAND_LEVEL).items()}
    except ImportError:
        return None


def write_run_report(run: str, model, x, y, sample_weight=None,
                     absolute_sigma: bool = False):
    """Computes the run's fit report on its training data, weighted by the sample weights
    the fit used (read as 1/σ², as `model.fit_report` reads them; `absolute_sigma`: as
    known errors), and writes its files; returns the `FitReport`."""
    from graphfit.fitting.report import fit_report

    report = fit_report(model, x, y, sample_weight=sample_weight,
                        absolute_sigma=absolute_sigma)
    content = report.to_dict()
    content["intervals_95"] = _intervals(report)
    _write(os.path.join(run, FIT_REPORT_JSON), json.dumps(content, indent=2))
    _write(os.path.join(run, FIT_REPORT_TEXT), str(report) + "\n")
    curve = _curve(model, report, x, y)
    if curve is None:
        curve = _data_set_curves(model, report, x, y)
    if curve is not None:
        _write(os.path.join(run, FIT_CURVE), json.dumps(curve))
    return report


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _data_set_curves(model, report, x, y) -> dict | None:
    """A global fit's curves, one per data set (`_curve` of its rows), for one input column
    before the data-set column (`data_set_index`): `{"data_sets": [curve, ...], "level"}`."""
    index = None
    for layer in model.flatten_layers(include_self=True):
        locate = getattr(layer, "data_set_index", None)
        index = locate(x) if callable(locate) else None
        if index is not None:
            break
    x = np.asarray(x, np.float64)
    if index is None or x.ndim != 2 or x.shape[1] != 2 or np.asarray(y).size != len(x):
        return None
    y = np.asarray(y, np.float64).reshape(len(x))
    curves = [{"data_set": int(number), **_curve(model, report, x[index == number, :1],
                                                 y[index == number], int(number))}
              for number in np.unique(index)]
    return {"data_sets": curves, "level": BAND_LEVEL}


def _curve(model, report, x, y, data_set: int | None = None) -> dict | None:
    """The data, the fit on a grid and its bands, for one input column and one output (of
    data set `data_set` of a global fit: its index is the model's last input column)."""
    x = np.asarray(x, np.float64)
    if x.ndim > 2 or x.ndim == 2 and x.shape[1] != 1 or np.asarray(y).size != len(x):
        return None
    column = x.reshape(len(x))
    grid = np.linspace(column.min(), column.max(), _GRID)
    shaped = grid.reshape(-1, *x.shape[1:])
    if data_set is not None:
        shaped = np.stack([grid, np.full(_GRID, float(data_set))], 1)
    from graphfit.fitting.jacobian import model_outputs

    curve = {"x": column.tolist(), "y": np.asarray(y, np.float64).ravel().tolist(),
             "grid": grid.tolist(), "fit": model_outputs(model, shaped).ravel().tolist(),
             "level": BAND_LEVEL}
    try:
        from graphfit.fitting.intervals import band

        # A weighted fit's prediction band needs σ at each grid x, which the data do not
        # give between their points: only the confidence band.
        kinds = (("confidence", False),) + ((("prediction", True),) if not report.weighted
                                            else ())
        for kind, prediction in kinds:
            _, lower, upper = band(model, report, shaped, BAND_LEVEL, prediction=prediction)
            if np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)):
                curve[kind] = [lower.tolist(), upper.tolist()]
    except ImportError:
        pass  # no SciPy: the curve without bands
    return curve

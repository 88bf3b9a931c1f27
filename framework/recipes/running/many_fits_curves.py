"""The first few curves of a `fit_many:` run with their fits, for `graphfit plot` (`fit.png`).

A `fit_many:` run trains no model, so it has no learning curves; what there is to look at is
the data and the fitted curves. `graphfit train` writes `fitted_curve.json` for the first
`PLOTTED` data sets (each one's points and its fitted formula on a grid over its x range, in
the `data_sets` form of a global fit's file, `graphfit.fitting.run_report`), and `graphfit
plot RUN` draws them (`plots.fitted_curve`). Formulas of several input columns (x1, x2, ...)
have no curve over one x: they get no file.

Example:

    >>> import numpy as np
    >>> from graphfit import fitting
    >>> x = np.linspace(0.0, 2.0, 5)
    >>> y = np.stack([np.exp(-x), 2.0 * np.exp(-x)])
    >>> fits = fitting.fit_many("a*exp(-k*x)", x, y, p0={"a": 1.0, "k": 0.5})
    >>> curves = sample_curves("a*exp(-k*x)", ["c1", "c2"], x, y, None, fits, grid=3)
    >>> [(c["data_set"], np.round(c["fit"], 6).tolist()) for c in curves["data_sets"]]
    [('c1', [1.0, 0.367879, 0.135335]), ('c2', [2.0, 0.735759, 0.270671])]
"""

from __future__ import annotations

import numpy as np

__all__ = ["PLOTTED", "sample_curves"]

PLOTTED = 6
_GRID = 200


def sample_curves(expression: str, ids: list, x: np.ndarray, y: np.ndarray, mask, fits,
                  grid: int = _GRID) -> dict | None:
    """`{"data_sets": [...], "curves": N}`: the first `PLOTTED` data sets' points (`x`
    `(m,)` or `(N, m)`, `y` `(N, m)`, the points where `mask` is True) and their fits on a
    grid; None for a formula of several input columns."""
    from graphfit.fitting.numpy_trial import numpy_formula

    expression = " ".join(expression.splitlines()).strip()
    if x.ndim == 2 and x.shape == (y.shape[1], 1) and len(y) != y.shape[1]:
        x = x[:, 0]  # one column (m, 1), shared
    if x.ndim not in (1, 2):
        return None
    formula = numpy_formula(expression, tuple(fits.names))
    if any(name not in ("x", "x1") for name in formula.inputs):
        return None
    shown = []
    for i in range(min(len(y), PLOTTED)):
        keep = np.ones(y.shape[1], bool) if mask is None else np.asarray(mask[i], bool)
        row = x if x.ndim == 1 else x[min(i, len(x) - 1)]
        points, values = row[keep], y[i][keep]
        line = np.linspace(points.min(), points.max(), grid)
        with np.errstate(all="ignore"):
            fit = formula.values({**dict(zip(fits.names, fits.params[i].tolist())),
                                  "x": line, "x1": line})
        fit = np.broadcast_to(np.asarray(fit, np.float64), line.shape)
        shown.append({"data_set": str(ids[i]), "x": points.tolist(), "y": values.tolist(),
                      "grid": line.tolist(),
                      "fit": [v if np.isfinite(v) else None for v in fit.tolist()]})
    return {"data_sets": shown, "curves": int(len(y))}

"""Which parameters a fit reports on a bound ("at lower bound", "at upper bound"), for
`fit_report`, `fit_curve` and `fit_many`.

A parameter is on a bound when it lies within `BOUND_TOLERANCE` of the bound's scale (its
range, or max(1, |bound|) with one bound) and within `BOUND_ERROR_FRACTION` of its standard
error as a free parameter. A bound that holds its parameter leaves it about 1e-14 of its
error from the bound (or exactly on it: the sigmoid saturates), while an optimum inside the
bounds may lie closer than the bound's scale (a rate of 5e-8 with min 0, or 0.05 in
[0, 1e6]) yet hundreds of its errors away; the second condition keeps that one "varied",
with SciPy's standard errors.

Example:

    >>> parameter_status([[5e-8, 1e-17]], [0.0, 0.0], [np.inf, np.inf], [True, True],
    ...                  [[1.5e-10, 5e-3]]).tolist()
    [['varied', 'at lower bound']]
"""

from __future__ import annotations

import math

import numpy as np

from graphfit.fitting import covariance

__all__ = ["BOUND_TOLERANCE", "BOUND_ERROR_FRACTION", "parameter_status", "free_errors",
           "model_statuses"]

# A parameter within this fraction of its range (or of max(1, |bound|) with one bound) of a
# bound, and within BOUND_ERROR_FRACTION of its standard error, is reported on it.
BOUND_TOLERANCE = 1e-7
BOUND_ERROR_FRACTION = 1e-3


def parameter_status(values, lows, highs, vary, free_errors=None) -> np.ndarray:
    """Each parameter's status, `[N, p]` text for values `[N, p]` and per-parameter bounds
    and `vary`: "fixed", "at lower bound", "at upper bound" or "varied".

    A parameter is on a bound within `BOUND_TOLERANCE` of its range (or of max(1, |bound|)
    with one bound) and, where `free_errors` `[N, p]` gives its standard error as a free
    parameter (finite and positive), within `BOUND_ERROR_FRACTION` of that error.
    """
    values = np.asarray(values, np.float64)
    lows, highs = np.asarray(lows, np.float64), np.asarray(highs, np.float64)
    both = np.isfinite(lows) & np.isfinite(highs)
    one = np.where(np.isfinite(lows), lows, highs)
    with np.errstate(invalid="ignore"):
        scale = np.where(both, highs - lows, np.maximum(1.0, np.abs(one))) * BOUND_TOLERANCE
        if free_errors is not None:
            errors = np.asarray(free_errors, np.float64)
            known = np.isfinite(errors) & (errors > 0)
            scale = np.where(known, np.minimum(scale, BOUND_ERROR_FRACTION * errors), scale)
        low = np.isfinite(lows) & (values - lows <= scale)
        high = np.isfinite(highs) & (highs - values <= scale)
    status = np.where(low, "at lower bound", np.where(high, "at upper bound", "varied"))
    return np.where(np.asarray(vary, bool), status, "fixed").astype(object)


def free_errors(weighted_jacobian, names, chi_square: float, dof: int,
                absolute_sigma: bool) -> np.ndarray:
    """The standard errors of `names` all taken as free (`[p]`; inf where the data do not
    determine one): what `parameter_status` compares a distance to a bound with."""
    solved = covariance.from_jacobian(weighted_jacobian, list(names))
    scale = 1.0 if absolute_sigma else (chi_square / dof if dof > 0 else math.inf)
    errors = dict(zip(solved["free"], np.sqrt(np.abs(np.diag(solved["covariance"])) * scale)))
    return np.array([errors.get(name, math.inf) for name in names], np.float64)


def model_statuses(parameters, free, weighted_jacobian, chi_square: float, points: int,
                   absolute_sigma: bool) -> list[str]:
    """`parameter_status` of a model's parameters (`FitParameter`s); `free`: the indices of
    those that vary, the columns of `weighted_jacobian`."""

    def row(attribute):
        return np.array([[getattr(p, attribute) for p in parameters]], np.float64)

    near = parameter_status(row("value"), row("min"), row("max"), [p.vary for p in parameters])
    errors = None
    if np.any((near != "varied") & (near != "fixed")):  # near a bound: how near, in errors?
        errors = np.full((1, len(parameters)), np.nan)
        errors[0, free] = free_errors(weighted_jacobian, [parameters[i].name for i in free],
                                      chi_square, points - len(free), absolute_sigma)
    return [str(s) for s in parameter_status(row("value"), row("min"), row("max"),
                                             [p.vary for p in parameters], errors)[0]]

"""Curve fitting as a scientist expects it: fit reports (standard errors, correlations, χ²,
AIC, BIC), confidence intervals (linearised and profile likelihood) and bands, for a model
fitted by any optimizer (usually `optimizers.LevenbergMarquardt`). See
`graphfit.fitting.report`, `graphfit.fitting.intervals` and docs/levenberg_marquardt.md."""

from graphfit.fitting.jacobian import model_outputs, parameter_jacobian
from graphfit.fitting.parameters import FitParameter, model_parameters
from graphfit.fitting.report import FitReport, ParameterResult, fit_report

__all__ = ["FitParameter", "FitReport", "ParameterResult", "fit_report", "model_outputs",
           "model_parameters", "parameter_jacobian"]

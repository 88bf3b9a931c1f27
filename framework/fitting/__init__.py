"""Curve fitting as a scientist expects it.

- Fits outside `Model.fit`: one formula fitted to one data set (`fit_curve`) or to many
  independent data sets at once (`fit_many`), in one traced `tf.while_loop` cached per formula
  (`batched_lm`), with per-data-set results (`ManyFits`, `CurveFit`: parameters, standard
  errors, covariances, RSS, why each fit stopped).
- Fit reports of a fitted model (`fit_report`, `Model.fit_report`: standard errors,
  correlations, χ², AIC, BIC, undetermined parameters), confidence intervals (linearised and
  profile likelihood) and bands (`graphfit.fitting.intervals`), for a model fitted by any
  optimizer; recipe runs write them (`graphfit.fitting.run_report`).

    from graphfit import fitting
    fits = fitting.fit_many("b1*(1-exp(-b2*x))", x, y, p0={"b1": 500.0, "b2": 1e-4})

docs/guides/levenberg_marquardt.md ("Many fits at once", "Fit reports") has the algorithms and the
choices; docs/benchmarks/performance.md ("Small fits and many fits") the timings.
"""

from graphfit.fitting.fits import fit_curve, fit_many
from graphfit.fitting.jacobian import model_outputs, parameter_jacobian
from graphfit.fitting.parameters import FitParameter, model_parameters
from graphfit.fitting.report import FitReport, ParameterResult, fit_report
from graphfit.fitting.results import REASONS, CurveFit, ManyFits

__all__ = ["fit_many", "fit_curve", "ManyFits", "CurveFit", "REASONS", "FitParameter",
           "FitReport", "ParameterResult", "fit_report", "model_outputs", "model_parameters",
           "parameter_jacobian"]

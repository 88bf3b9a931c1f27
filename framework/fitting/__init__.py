"""Curve fitting with Levenberg–Marquardt outside `Model.fit`: one formula fitted to one data
set (`fit_curve`) or to many independent data sets at once (`fit_many`), in one traced
`tf.while_loop` cached per formula (`batched_lm`), with per-data-set results (`ManyFits`,
`CurveFit`: parameters, standard errors, covariances, RSS, why each fit stopped).

    from graphfit import fitting
    fits = fitting.fit_many("b1*(1-exp(-b2*x))", x, y, p0={"b1": 500.0, "b2": 1e-4})

docs/levenberg_marquardt.md ("Many fits at once") has the algorithm and the choices;
docs/performance.md ("Small fits and many fits") the timings.
"""

from graphfit.fitting.fits import fit_curve, fit_many
from graphfit.fitting.results import REASONS, CurveFit, ManyFits

__all__ = ["fit_many", "fit_curve", "ManyFits", "CurveFit", "REASONS"]

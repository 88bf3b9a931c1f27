"""The results of `fitting.fit_many` and `fitting.fit_curve`: parameters, convergence, RSS and
standard errors per data set."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from graphfit.fitting import arguments, covariance
from graphfit.fitting import report as fit_reports
from graphfit.optimizers.levenberg_marquardt import convergence as lm_convergence

__all__ = ["ManyFits", "CurveFit", "covariances", "REASONS"]

# What each convergence code means (`LevenbergMarquardt.convergence_reason`'s codes; 0 here:
# `max_steps` were spent).
REASONS = {
    lm_convergence.NOT_CONVERGED: "max_steps reached",
    lm_convergence.FTOL: "ftol",
    lm_convergence.XTOL: "xtol",
    lm_convergence.FTOL_AND_XTOL: "ftol and xtol",
    lm_convergence.GTOL: "gtol",
    lm_convergence.STALLED: "stalled: no step reduces the loss",
    lm_convergence.NOT_FINITE: "not finite: NaN or inf in the data or the model",
}
_CONVERGED = (lm_convergence.FTOL, lm_convergence.XTOL, lm_convergence.FTOL_AND_XTOL,
              lm_convergence.GTOL)


def covariances(jtj: np.ndarray, chi_square: np.ndarray, dof, absolute_sigma: bool,
                free: np.ndarray | None = None) -> np.ndarray:
    """`s²(JᵀWJ)⁻¹` per data set (`[N, p, p]`), as SciPy's `curve_fit`: `s² = χ² / dof`
    (`dof` a number or one per data set), or 1 with `absolute_sigma` (the weights are then
    read as 1/σ of known errors). dof <= 0 without `absolute_sigma`, or a non-finite `JᵀJ`,
    gives inf (SciPy's choice). A singular `JᵀJ` gives inf only for the parameters the data
    do not determine (`covariance.from_gram`, as `fit_report`): the others keep their
    covariance from the pseudo-inverse. `free` `[N, p]` (bool) limits the inverse to the
    parameters that vary and are not on a bound; the others' rows and columns are NaN (no
    standard error), as in `fit_report`."""
    count, p = jtj.shape[0], jtj.shape[-1]
    if free is not None:
        free = np.asarray(free, bool)
        pair = free[:, :, None] & free[:, None, :]
        jtj = np.where(pair, jtj, np.eye(p)[None])
    out = np.full((count, p, p), np.inf)
    finite = np.all(np.isfinite(jtj), axis=(1, 2))
    if np.any(finite):
        sub = jtj[finite]
        # Inverted in the scale of each parameter (the unit diagonal of the correlations): a
        # matrix ill-conditioned only by its parameters' units (NIST's MGH10, b1 1e-2 and b2
        # 6e3) is not singular. Rank by singular values, as NumPy's pinv does.
        norms = np.sqrt(np.diagonal(sub, axis1=1, axis2=2))
        positive = np.all(norms > 0, axis=1)
        norms = np.where(norms > 0, norms, 1.0)
        scaled = sub / norms[:, :, None] / norms[:, None, :]
        # Its singular values are its eigenvalues (ascending; eigvalsh is 3x faster than svd).
        values = np.linalg.eigvalsh(scaled)
        full = positive & (values[:, 0] > values[:, -1] * p * np.finfo(np.float64).eps)
        inverse = np.full(sub.shape, np.inf)
        if np.any(full):
            inverse[full] = (np.linalg.inv(scaled[full]) / norms[full][:, :, None]
                             / norms[full][:, None, :])
        for row in np.flatnonzero(~full):  # singular: the determined parameters' part
            inverse[row] = _determined_part(sub[row])
        out[finite] = inverse
    if not absolute_sigma:
        dof = np.broadcast_to(np.asarray(dof), (count,))
        with np.errstate(divide="ignore", invalid="ignore"):
            out = out * np.where(dof > 0, chi_square / np.where(dof > 0, dof, 1),
                                 np.inf)[:, None, None]
    if free is not None:
        out = np.where(pair, out, np.nan)
    return out


def _determined_part(jtj: np.ndarray) -> np.ndarray:
    """`(JᵀJ)⁻¹` `[p, p]` of a singular `JᵀJ`: `covariance.from_gram`'s over the determined
    parameters, inf in the rows and columns of the undetermined ones."""
    names = [str(i) for i in range(len(jtj))]
    solved = covariance.from_gram(jtj, names)
    keep = [int(name) for name in solved["free"]]
    out = np.full(jtj.shape, np.inf)
    out[np.ix_(keep, keep)] = solved["covariance"]
    return out


@dataclasses.dataclass(frozen=True)
class _Parameter:
    """What `report.assemble` reads of a parameter."""

    name: str
    value: float
    min: float = -math.inf
    max: float = math.inf
    data_set: int | None = None


@dataclasses.dataclass(frozen=True)
class CurveFit:
    """One data set's fit.

    Attributes:
        values: `{name: fitted value}`.
        standard_errors: `{name: standard error}` (from `s²(JᵀWJ)⁻¹`; inf for a parameter
            the data do not determine, NaN for a fixed parameter or one on its bound).
        covariance: `[p, p]`.
        rss: the residual sum of squares `Σ r²`, unweighted (the report's RSS).
        converged: whether a convergence test ended the fit.
        reason: why the fit stopped (`REASONS`); `reason_code` its code.
        steps: LM steps.
        evaluations: evaluations of the residuals (SciPy's nfev: the start, each trial
            point and, with geodesic acceleration, two more per trial).
        jacobian_evaluations: evaluations of the Jacobian (SciPy's njev: the start and
            each trial point).
        status: `{name: "varied", "fixed", "at lower bound", "at upper bound" or
            "undetermined"}` (varied, but the data do not determine it: no standard error).
        dof: points minus the parameters that vary and are not on a bound.
        chi_square: `Σ (r/σ)²`, the weighted sum the fit minimises (`rss` without sigma).

    `report()` gives its whole `FitReport` (`ManyFits.report`).
    """

    values: dict
    standard_errors: dict
    covariance: np.ndarray
    rss: float
    converged: bool
    reason: str
    reason_code: int
    steps: int
    evaluations: int
    jacobian_evaluations: int = 0
    status: dict = dataclasses.field(default_factory=dict)
    dof: int = 0
    chi_square: float = math.nan
    fits: "ManyFits | None" = dataclasses.field(default=None, repr=False, compare=False)
    index: int = 0

    def report(self, strong_correlation: float = fit_reports.STRONG_CORRELATION
               ) -> fit_reports.FitReport:
        """The fit's `FitReport` (as `model.fit_report` gives it for a Formula model fitted
        to the same data; `print` shows it)."""
        if self.fits is None:
            raise ValueError("this CurveFit was built by hand, without the fit it came from: "
                             "report() needs fit_curve's (or ManyFits.curve's) result")
        return self.fits.report(self.index, strong_correlation)


@dataclasses.dataclass(frozen=True)
class ManyFits:
    """The fits of N data sets to one formula, one row per data set.

    Attributes:
        names: the parameter names, the columns of `params`.
        params: `[N, p]` the fitted parameters.
        standard_errors: `[N, p]`, the square roots of the covariances' diagonals.
        covariance: `[N, p, p]`, `s²(JᵀJ)⁻¹` as SciPy's `curve_fit` gives it.
        jtj: `[N, p, p]` `JᵀJ` of the weighted residuals at the solution (for reports).
        rss: `[N]` residual sums of squares `Σ r²`, unweighted (the report's RSS).
        dof: `[N]` degrees of freedom: each data set's points minus its parameters that
            vary and are not on a bound.
        reason_codes: `[N]` why each fit stopped (`REASONS`).
        steps: `[N]` LM steps.
        evaluations: `[N]` evaluations of the residuals (SciPy's nfev: one at the start, one
            per trial point, two more per trial with geodesic acceleration).
        chi_square: `[N]` `Σ (r/σ)²`, the weighted sums the fits minimise (`rss` without
            sigma).
        total: `[N]` `Σ w (y − ȳ_w)²` (w = 1/σ²), the denominator of R².
        absolute_sigma: whether σ was read as known errors.
        points: `[N]` the points of each data set (padding excluded).
        status: `[N, p]` "varied", "fixed", "at lower bound", "at upper bound" or
            "undetermined" (varied, but the data do not determine it: no standard error).
        jacobian_evaluations: `[N]` evaluations of the Jacobian (SciPy's njev: the start
            and each trial point, with that point's residuals in one backward pass).
        bounds: `(min [p], max [p])` the parameters' bounds (-inf, inf: none).
        weighted: `[N]` bool: the data set had sigma other than 1 (`FitReport.weighted`).
        details: `[N]` a fuller reason where there is one ("" where not): for a fit
            stopped as not finite, where (the point and its x) and what to do.

    Per data set, `statistics()` gives the fit report's numbers (χ², reduced χ², residual
    std, R², AIC, BIC, dof: `fitting.fit_statistics`, the formulas of `fit_report`),
    `strong_correlations(i)` the flagged pairs and `report(i)` the whole `FitReport`.

    Example:

        >>> import numpy as np
        >>> from graphfit import fitting
        >>> t = np.linspace(0, 5, 20)
        >>> y = np.stack([2.0 * np.exp(-0.5 * t), 3.0 * np.exp(-1.5 * t), np.ones(20)])
        >>> x = np.stack([t, t, t - 1000.0])  # exp(-k x) overflows on the third data set
        >>> fits = fitting.fit_many("a*exp(-k*x)", x, y, p0={"a": 1.0, "k": 1.0})
        >>> fits.params[:2].round(6).tolist(), fits.converged.tolist()
        ([[2.0, 0.5], [3.0, 1.5]], [True, True, False])
        >>> fits.reasons[2]  # doctest: +ELLIPSIS
        'not finite: the model is inf or NaN at the start, at point 0 (x = -1000.0, and 19 more...'
        >>> report = fits.report(0)
        >>> report.dof, round(report.statistics["r_squared"], 6), report.strong_correlations
        (18, 1.0, [])
    """

    names: tuple
    params: np.ndarray
    standard_errors: np.ndarray
    covariance: np.ndarray
    jtj: np.ndarray
    rss: np.ndarray
    dof: int
    reason_codes: np.ndarray
    steps: np.ndarray
    evaluations: np.ndarray
    chi_square: np.ndarray
    total: np.ndarray
    absolute_sigma: bool = False
    points: np.ndarray | None = None
    status: np.ndarray | None = None
    jacobian_evaluations: np.ndarray | None = None
    bounds: tuple = ()
    details: tuple = ()
    weighted: np.ndarray | None = None

    def _reason(self, index: int) -> str:
        code = int(self.reason_codes[index])
        detail = self.details[index] if len(self.details) > index else ""
        return detail or REASONS.get(code, f"code {code}")

    @property
    def plain_rss(self) -> np.ndarray:
        """`rss` (its former name, when `rss` was the weighted sum `chi_square`)."""
        return self.rss

    @property
    def free(self) -> np.ndarray:
        """`[N, p]` bool: the parameter varied and did not end on a bound (undetermined
        parameters included: they count in the dof, as in the report)."""
        return np.isin(self.status, ("varied", "undetermined"))

    @property
    def at_bound(self) -> np.ndarray:
        """`[N, p]` bool: the parameter ended on one of its bounds."""
        return np.isin(self.status, ("at lower bound", "at upper bound"))

    def statistics(self) -> dict:
        """The fit report's statistics, one array entry per data set (NaN where undefined):
        points, varying_parameters (varied, not on a bound), dof, chi_square,
        reduced_chi_square, rss (unweighted), residual_std, r_squared, aic, bic."""
        return fit_reports.fit_statistics(self.chi_square, self.rss, self.total, self.points,
                                          np.count_nonzero(self.free, axis=1))

    @property
    def correlation(self) -> np.ndarray:
        """`[N, p, p]` the parameters' correlations per data set."""
        return fit_reports.correlation_matrix(self.covariance)

    def strong_correlations(self, index: int,
                            threshold: float = fit_reports.STRONG_CORRELATION) -> list:
        """`(name, name, r)` of data set `index` with |r| above `threshold`."""
        index = arguments.data_set_index(index, len(self.params))
        return fit_reports.strong_pairs(self.names, self.correlation[index], threshold)

    def report(self, index: int, strong_correlation: float = fit_reports.STRONG_CORRELATION
               ) -> fit_reports.FitReport:
        """The `FitReport` of data set `index`, as `fit_report` gives it for a model fitted
        to that data set alone (its covariance is `covariance[index]` over the parameters
        that vary and are not on a bound; `print` shows it)."""
        index = arguments.data_set_index(index, len(self.params))
        free = self.free[index]
        names = [name for name, keep in zip(self.names, free) if keep]
        statistics = fit_reports.fit_statistics(
            self.chi_square[index], self.rss[index], self.total[index],
            int(self.points[index]), len(names))
        jtj = self.jtj[index][np.ix_(free, free)]
        notes = []
        if np.isfinite(self.chi_square[index]) and np.all(np.isfinite(jtj)):
            solved = covariance.from_gram(jtj, names)
        else:
            notes.append("NaN or inf in this data set or the model at its last parameters: "
                         "no standard errors")
            solved = {"covariance": np.zeros((0, 0)), "free": [], "undetermined": [],
                      "condition": None, "notes": []}
        parameters = [_Parameter(name, float(value), low, high) for name, value, low, high
                      in zip(self.names, self.params[index], *self.bounds)]
        weighted = self.weighted is not None and bool(self.weighted[index])
        return fit_reports.assemble(
            parameters, [str(status) for status in self.status[index]], solved, statistics,
            self.absolute_sigma, strong_correlation,
            {"optimizer": "fit_many (batched LevenbergMarquardt)",
             "steps": int(self.steps[index]), "epochs": None,
             "function_evaluations": int(self.evaluations[index]),
             "jacobian_evaluations": int(self.jacobian_evaluations[index]),
             "stop_reason": self._reason(index)}, [], weighted, notes)

    @property
    def converged(self) -> np.ndarray:
        """`[N]` bool: a convergence test (ftol, xtol, gtol) ended the fit."""
        return np.isin(self.reason_codes, _CONVERGED)

    @property
    def reasons(self) -> list[str]:
        """Why each fit stopped, in words."""
        return [self._reason(index) for index in range(len(self.reason_codes))]

    def __len__(self) -> int:
        return len(self.params)

    def curve(self, index: int) -> CurveFit:
        """The `CurveFit` of data set `index`."""
        index = arguments.data_set_index(index, len(self.params))
        code = int(self.reason_codes[index])
        return CurveFit(
            values=dict(zip(self.names, map(float, self.params[index]))),
            standard_errors=dict(zip(self.names, map(float, self.standard_errors[index]))),
            covariance=self.covariance[index], rss=float(self.rss[index]),
            chi_square=float(self.chi_square[index]), fits=self, index=index,
            converged=bool(self.converged[index]), reason=self._reason(index),
            reason_code=code, steps=int(self.steps[index]),
            evaluations=int(self.evaluations[index]),
            jacobian_evaluations=int(self.jacobian_evaluations[index]),
            status=dict(zip(self.names, map(str, self.status[index]))),
            dof=int(self.dof[index]))

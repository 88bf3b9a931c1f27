"""`fit_report`: how well a fitted model's parameters are determined.

At the solution, with residuals `r = y − f(x)`, sample weights `w` read as `1/σ²` (1 when
none are given), and `J` the Jacobian of `f` with respect to the parameters that vary (not
fixed, not on a bound):

    χ² = Σ w r²       RSS = Σ r²       dof = N − P (N weighted points, P varying parameters)
    s² = χ² / dof     (the reduced χ²; the residual standard deviation is s)
    C  = s² (JᵀWJ)⁻¹  or, with absolute_sigma=True, (JᵀWJ)⁻¹ (SciPy's curve_fit)
    R² = 1 − χ² / Σ w (y − ȳ_w)²          (ȳ_w the weighted mean)
    AIC = N ln(χ²/N) + 2P      BIC = N ln(χ²/N) + P ln N

These are lmfit's formulas with two differences, chosen on purpose: P counts only the
parameters that vary and are not on a bound (lmfit's `nvarys` counts a parameter on a bound
too, so its dof, reduced χ², AIC and BIC differ there), and R² weighs as χ² does (lmfit's
`rsquared` is always unweighted, `1 − Σ r² / Σ (y − ȳ)²`); without weights and with no
parameter on a bound, every number is lmfit's.

The covariance comes from the SVD of `W^½ J` with its columns scaled to unit length
(`graphfit.fitting.covariance`, the same algorithm `fit_many` uses from `JᵀWJ`); a singular
value below `RANK_TOLERANCE` of the largest marks the parameters of its singular vector as
not determined by the data: they get no standard error, and the others' come from the
pseudo-inverse. Everything is computed in float64 with NumPy. NaN or inf in the data is
refused (`arguments.NonFiniteData`), as `fit_curve` refuses it.

Example:

    >>> import numpy as np, graphfit as gf
    >>> from graphfit import layers, optimizers
    >>> x = np.linspace(0, 1, 6)
    >>> y = np.array([1.02, 1.38, 1.83, 2.21, 2.58, 3.01])
    >>> model = gf.Sequential([layers.Formula("a*x + b", params={"a": 1.0, "b": 0.0})],
    ...                       input_shape=(1,), dtype="float64")
    >>> model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    >>> history = model.fit(x, y, batch_size=None, epochs=20, verbose=0)
    >>> report = fit_report(model, x, y)
    >>> report.dof, round(report["a"].value, 4), round(report["a"].stderr, 4)
    (4, 1.99, 0.0273)
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np

from graphfit.fitting import arguments, covariance, text
from graphfit.fitting.bound_status import (
    BOUND_ERROR_FRACTION,
    BOUND_TOLERANCE,
    model_statuses,
    parameter_status,
)
from graphfit.fitting.covariance import RANK_TOLERANCE
from graphfit.fitting.jacobian import model_outputs, parameter_jacobian
from graphfit.fitting.parameters import model_parameters

__all__ = ["FitReport", "ParameterResult", "fit_report", "assemble", "fit_statistics",
           "total_sum_of_squares", "correlation_matrix", "strong_pairs", "parameter_status",
           "RANK_TOLERANCE", "STRONG_CORRELATION", "BOUND_TOLERANCE", "BOUND_ERROR_FRACTION"]

# |correlation| above this is flagged.
STRONG_CORRELATION = 0.9


@dataclasses.dataclass
class ParameterResult:
    """One parameter in a report.

    Attributes:
        name, value: the parameter and its fitted value.
        stderr: its standard error, or None (fixed, on a bound, not determined, no dof).
        status: "varied", "fixed", "at lower bound", "at upper bound" or "undetermined".
        min, max: its bounds (None where there is none).
        data_set: its data set in a global fit, or None (shared).
    """

    name: str
    value: float
    stderr: float | None
    status: str
    min: float | None = None
    max: float | None = None
    data_set: int | None = None

    @property
    def relative_error(self) -> float | None:
        """stderr / |value|, or None."""
        if self.stderr is None or self.value == 0:
            return None
        return self.stderr / abs(self.value)


@dataclasses.dataclass
class FitReport:
    """A fit's parameters with their uncertainties, and its statistics (see the module).

    Attributes:
        parameters: one `ParameterResult` per parameter, in the model's order.
        free: the names of the parameters in `covariance` (varied and determined).
        covariance, correlation: over `free` (float64 arrays).
        statistics: points, varying parameters, dof, chi_square, reduced_chi_square, rss,
            residual_std, r_squared, aic, bic, condition_number.
        strong_correlations: `(name, name, r)` with |r| above the threshold.
        undetermined: groups of parameter names the data do not determine separately.
        fit: the optimizer, the steps it took and why it stopped (when known).
        data_sets: per data set of a global fit: points, chi_square, rss, r_squared.
        absolute_sigma: whether the weights were taken as absolute 1/σ².
        notes: warnings in words (ill-conditioning, no degrees of freedom, ...).
        weighted: whether the fit had weights other than 0 and 1 (σ not all 1): then the
            residual standard deviation is in units of σ, not of y, and a prediction band
            needs the new measurement's σ (`intervals.band(..., sigma=)`).
        strong_threshold: the |r| above which `strong_correlations` are flagged.
    """

    parameters: list[ParameterResult]
    free: list[str]
    covariance: np.ndarray
    correlation: np.ndarray
    statistics: dict[str, float | int | None]
    strong_correlations: list[tuple[str, str, float]]
    undetermined: list[list[str]]
    fit: dict[str, Any]
    data_sets: list[dict[str, Any]]
    absolute_sigma: bool
    notes: list[str]
    weighted: bool = False
    strong_threshold: float = STRONG_CORRELATION

    def __getitem__(self, name: str) -> ParameterResult:
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise KeyError(f"no parameter {name!r}; the report has "
                       f"{', '.join(p.name for p in self.parameters)}")

    @property
    def dof(self) -> int:
        """The degrees of freedom, N − P."""
        return int(self.statistics["dof"])

    def values(self) -> dict[str, float]:
        """`{name: value}` of every parameter."""
        return {p.name: p.value for p in self.parameters}

    def stderrs(self) -> dict[str, float | None]:
        """`{name: standard error or None}` of every parameter."""
        return {p.name: p.stderr for p in self.parameters}

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready: NaN and inf as None)."""
        return _plain({
            "parameters": [dataclasses.asdict(p) for p in self.parameters],
            "free": self.free, "covariance": self.covariance.tolist(),
            "correlation": self.correlation.tolist(), "statistics": self.statistics,
            "strong_correlations": [list(c) for c in self.strong_correlations],
            "undetermined": self.undetermined, "fit": self.fit, "data_sets": self.data_sets,
            "absolute_sigma": self.absolute_sigma, "notes": self.notes,
            "weighted": self.weighted, "strong_threshold": self.strong_threshold})

    def to_json(self, indent: int = 2) -> str:
        """`to_dict()` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        return text.format_report(self)


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _weights(sample_weight, shape) -> np.ndarray:
    if sample_weight is None:
        return np.ones(shape)
    w = np.asarray(sample_weight, np.float64)
    if w.ndim == 2 and w.shape[1] == 1 or w.ndim > 1 and w.shape == shape:
        w = w.reshape(w.shape[0], -1)
    if w.shape[0] != shape[0] or w.ndim > 2 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(
            f"sample_weight must hold one finite weight >= 0 per example (read as 1/σ²), "
            f"{shape[0]} of them. Received: an array of shape {np.shape(sample_weight)}"
            f"{' with negative or non-finite values' if w.shape[:1] == shape[:1] else ''}")
    return np.broadcast_to(w.reshape(shape[0], -1), shape)


def fit_report(model, x, y, sample_weight=None, absolute_sigma: bool = False,
               strong_correlation: float = STRONG_CORRELATION) -> FitReport:
    """The fit report of `model` (already fitted) on the data `x, y` it was fitted to.

    Args:
        model: a model (or layer) with one output; its parameters come from
            `graphfit.fitting.model_parameters` (a `Formula`'s names, bounds and fixed
            parameters; any other variable element by element).
        x, y: the data, as given to `fit` (arrays).
        sample_weight: per-example weights, read as 1/σ² (as `fit` weighs the squared
            residuals); None: all 1.
        absolute_sigma: True takes the weights as absolute (the covariance is (JᵀWJ)⁻¹);
            False (the default) scales it by the reduced χ², as SciPy's `curve_fit`.
        strong_correlation: |r| above which a correlation is flagged.

    Returns:
        A `FitReport`; `print(report)` shows it.

    Raises:
        NonFiniteData: NaN or inf in x, y or sample_weight (a ValueError naming the points,
            as `fit_curve` raises it).
        ValueError: for a model with several outputs, data whose size does not match the
            outputs, or bad weights.
    """
    _finite(x, y, sample_weight)
    parameters = model_parameters(model)
    _data_set_index(model, x)  # a global fit's data-set column, checked before the model runs
    fitted = model_outputs(model, x)
    observed = np.asarray(y, np.float64)
    if observed.size != fitted.size:
        raise ValueError(f"y must hold one value per model output: the model gives "
                         f"{fitted.shape} for x, y has shape {observed.shape}")
    observed = observed.reshape(fitted.shape)
    weights = _weights(sample_weight, fitted.shape)
    rows = np.sqrt(weights.ravel())
    residuals = (observed - fitted).ravel()
    points = int(np.count_nonzero(rows))
    free = [i for i, p in enumerate(parameters) if p.vary]
    jacobian = parameter_jacobian(model, x, [parameters[i] for i in free]) if free else \
        np.zeros((fitted.size, 0))
    statuses = model_statuses(parameters, free, jacobian * rows[:, None],
                         float(np.sum(np.square(residuals * rows))), points, absolute_sigma)
    keep = [k for k, i in enumerate(free) if statuses[i] == "varied"]
    varying, jacobian = [parameters[free[k]] for k in keep], jacobian[:, keep]
    solved = covariance.from_jacobian(jacobian * rows[:, None], [p.name for p in varying])
    statistics = _statistics(residuals, rows, observed.ravel(), points, len(varying))
    return assemble(parameters, statuses, solved, statistics, absolute_sigma,
                    strong_correlation, _fit_state(model), _data_sets(
                        model, x, residuals, rows, observed.ravel(), parameters),
                    weighted=_is_weighted(weights))


def assemble(parameters, statuses, solved: dict[str, Any], statistics: dict[str, Any],
             absolute_sigma: bool, strong_correlation: float, fit: dict[str, Any],
             data_sets: list[dict[str, Any]], weighted: bool, notes=()) -> FitReport:
    """The `FitReport` from its pieces, for `fit_report` and `ManyFits.report` alike: the
    parameters (`name`, `value`, `min`, `max`, `data_set`) with their statuses, `solved`
    (`covariance.from_jacobian` or `from_gram`: `(JᵀWJ)⁻¹` over the determined parameters)
    and the statistics (`fit_statistics`); the covariance is scaled by the reduced χ²
    unless `absolute_sigma`."""
    statistics = dict(statistics, condition_number=solved["condition"])
    notes = list(notes) + list(solved["notes"])
    scale = 1.0 if absolute_sigma else statistics["reduced_chi_square"]
    if scale is None or not math.isfinite(scale):
        notes.append(f"no degrees of freedom ({statistics['points']} points, "
                     f"{statistics['varying_parameters']} varying parameters): no standard "
                     f"errors" if statistics["dof"] <= 0 else
                     "the reduced chi-square is not finite: no standard errors")
        scale = math.nan
    covariance_matrix = solved["covariance"] * scale
    errors = dict(zip(solved["free"], np.sqrt(np.diag(covariance_matrix))))
    undetermined_names = {name for group in solved["undetermined"] for name in group}
    results = []
    for p, status in zip(parameters, statuses):
        if p.name in undetermined_names:
            status = "undetermined"
        stderr = errors.get(p.name)
        results.append(ParameterResult(
            p.name, float(p.value), float(stderr) if stderr is not None and math.isfinite(stderr)
            else None, status, p.min if math.isfinite(p.min) else None,
            p.max if math.isfinite(p.max) else None, p.data_set))
    correlation = correlation_matrix(covariance_matrix)
    strong = strong_pairs(solved["free"], correlation, strong_correlation)
    return FitReport(results, solved["free"], covariance_matrix, correlation, statistics,
                     strong, solved["undetermined"], fit, data_sets, absolute_sigma, notes,
                     weighted, strong_correlation)


def _finite(x, y, sample_weight) -> None:
    """NaN or inf in the data: `arguments.NonFiniteData`, naming the examples (a model's
    report would otherwise be NaN, or NumPy's SVD would fail on an inf)."""
    named = [("y", y), ("sample_weight", sample_weight)]
    if isinstance(x, dict):
        named += [(f"x[{key!r}]", value) for key, value in x.items()]
    elif isinstance(x, (list, tuple)):
        named += [(f"x[{i}]", value) for i, value in enumerate(x)]
    else:
        named.append(("x", x))
    arguments.finite_examples(named, "drop those examples (or give them sample_weight 0 "
                                     "and a finite stand-in value) and report again")


def _is_weighted(weights: np.ndarray) -> bool:
    """Whether weights other than 0 and 1 were given (1/σ² with σ not all 1)."""
    return bool(np.any((weights != 0) & (weights != 1)))


def correlation_matrix(covariance: np.ndarray) -> np.ndarray:
    """The correlations of a covariance `[..., p, p]` (a stack of them too): `C_ij / (σ_i σ_j)`."""
    covariance = np.asarray(covariance, np.float64)
    deviations = np.sqrt(np.diagonal(covariance, axis1=-2, axis2=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return covariance / (deviations[..., :, None] * deviations[..., None, :])


def strong_pairs(names, correlation: np.ndarray, threshold: float = STRONG_CORRELATION
                 ) -> list[tuple[str, str, float]]:
    """`(name, name, r)` for each pair of one correlation matrix with |r| above `threshold`."""
    return [(names[i], names[j], float(correlation[i, j]))
            for i in range(len(names)) for j in range(i + 1, len(names))
            if abs(correlation[i, j]) > threshold]


def total_sum_of_squares(observed, weights, axis: int = -1) -> np.ndarray:
    """`Σ w (y − ȳ_w)²` along `axis` (ȳ_w the weighted mean), the denominator of R²."""
    observed, weights = np.asarray(observed, np.float64), np.asarray(weights, np.float64)
    mean = (np.sum(weights * observed, axis, keepdims=True)
            / np.maximum(np.sum(weights, axis, keepdims=True), 1e-300))
    return np.sum(weights * (observed - mean) ** 2, axis)


def fit_statistics(chi_square, rss, total, points, varying: int) -> dict[str, Any]:
    """The report's statistics from `χ² = Σ w r²`, `RSS = Σ r²`, the total sum of squares
    (`total_sum_of_squares`), the number of weighted points and of varying parameters.

    Scalars give numbers (None where undefined: no dof, no spread in y); arrays (one entry
    per data set, as `ManyFits.statistics`) give arrays with NaN there.
    """
    chi = np.asarray(chi_square, np.float64)
    total = np.asarray(total, np.float64)
    points = np.asarray(points)
    dof = points - varying
    with np.errstate(divide="ignore", invalid="ignore"):
        reduced = np.where(dof > 0, chi / np.where(dof > 0, dof, 1), np.nan)
        r_squared = np.where(total > 0, 1.0 - chi / np.where(total > 0, total, 1.0), np.nan)
        log_likelihood = np.where(points > 0, points * np.log(
            np.maximum(chi, 1e-300) / np.maximum(points, 1)), np.nan)
        statistics = {
            "points": points, "varying_parameters": varying, "dof": dof, "chi_square": chi,
            "reduced_chi_square": reduced, "rss": np.asarray(rss, np.float64),
            "residual_std": np.sqrt(reduced), "r_squared": r_squared,
            "aic": log_likelihood + 2 * varying,
            "bic": log_likelihood + np.log(np.maximum(points, 1)) * varying}
    if np.ndim(chi) or np.ndim(points):
        statistics["varying_parameters"] = np.full(np.shape(dof), varying)
        return statistics
    optional = ("reduced_chi_square", "residual_std", "r_squared")
    return {key: (int(value) if key in ("points", "varying_parameters", "dof") else
                  None if key in optional and not np.isfinite(value) else float(value))
            for key, value in statistics.items()}


def _statistics(residuals, rows, observed, points: int, varying: int) -> dict[str, Any]:
    weights = rows ** 2
    return fit_statistics(np.sum(weights * residuals ** 2), np.sum(residuals ** 2),
                          total_sum_of_squares(observed, weights), points, varying)


def _fit_state(model) -> dict[str, Any]:
    """The optimizer, its steps and why fit stopped, as far as the model tells."""
    optimizer = getattr(model, "optimizer", None)
    history = getattr(model, "history", None)
    epochs = len(history.epoch) if getattr(history, "epoch", None) is not None else None
    steps = getattr(optimizer, "iterations", None)
    reason = getattr(model, "stop_reason", None)
    if reason is None and epochs is not None:
        reason = (f"ran its {epochs} epochs without meeting a convergence test: the fit may not "
                  f"have converged")
    state = {"optimizer": type(optimizer).__name__ if optimizer is not None else None,
             "steps": int(steps.numpy()) if steps is not None else None,
             "epochs": epochs, "stop_reason": reason}
    # An optimizer that counts its evaluations (SciPy's nfev and njev) says so.
    for key, name in (("function_evaluations", "evaluations"),
                      ("jacobian_evaluations", "jacobian_evaluations")):
        count = getattr(optimizer, name, None)
        if count is not None and hasattr(count, "numpy"):
            state[key] = int(count.numpy())
    return state


def _data_set_index(model, x):
    """Each example's data set, from the first layer that locates them, or None."""
    for layer in model.flatten_layers(include_self=True):
        locate = getattr(layer, "data_set_index", None)
        if callable(locate):
            index = locate(x)
            if index is not None:
                return index
    return None


def _data_sets(model, x, residuals, rows, observed, parameters) -> list[dict[str, Any]]:
    """Per data set of a global fit (a layer with `data_set_index(x)`): its statistics."""
    index = _data_set_index(model, x)
    if index is None:
        return []
    per_row = np.repeat(np.asarray(index), residuals.size // len(index))
    sets = []
    for number in np.unique(per_row):
        mask = per_row == number
        w = rows[mask] ** 2
        chi_square = float(np.sum(w * residuals[mask] ** 2))
        total = float(total_sum_of_squares(observed[mask], w))
        sets.append({
            "data_set": int(number), "points": int(np.count_nonzero(w)),
            "parameters": [p.name for p in parameters if p.data_set in (None, int(number))],
            "chi_square": chi_square, "rss": float(np.sum(residuals[mask] ** 2)),
            "rms_residual": math.sqrt(chi_square / max(np.count_nonzero(w), 1)),
            "r_squared": 1.0 - chi_square / total if total > 0 else None})
    return sets

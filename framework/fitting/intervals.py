"""Confidence intervals of fitted parameters, and confidence and prediction bands of the curve.

- `linear_intervals`: value ± t(level, dof) · stderr, the Student t quantile at the report's
  degrees of freedom (SciPy's `t.ppf`; exact for a model linear in its parameters).
- `profile_intervals` (a `layers.Formula` model): where the profile χ² — the χ² of a re-fit
  with the parameter held fixed at a value — crosses lmfit's F-test threshold
  `χ²_min (1 + F(level; 1, dof) / dof)` (lmfit's `conf_interval` with its `f_compare`). The
  crossing is found by Levenberg–Marquardt re-fits with the parameter held
  (`fitting.profile_refits`: `fit_curve`'s Python loop for a float64 Formula, milliseconds
  per re-fit; a traced `model.fit` for a global or float32 one), on the signed root
  `±sqrt(χ² − χ²_min)`, nearly linear in the parameter, bracketed from the linear interval
  and closed by regula falsi (Illinois). A side that reaches the parameter's bound without
  crossing ends there; one that does not cross within 30 doublings of the first step is NaN.
  A re-fit that does not converge makes its side NaN; one below χ²_min (the fit was not at
  its minimum) makes every interval NaN, since none is measured from the right χ²; both
  with a warning naming the value.
- `band`: the delta method: Var f(x₀) = g C gᵀ, g = ∂f(x₀)/∂p; the confidence band is
  f ± t·sqrt(g C gᵀ), the prediction band f ± t·sqrt(g C gᵀ + s²σ₀²) with s² the reduced χ²
  and σ₀ the new measurement's σ (`sigma=`; 1 without weights), or f ± t·sqrt(g C gᵀ + σ₀²)
  when the weights are absolute. A weighted fit's prediction band needs `sigma=`: its s is
  in units of σ, not of y.

The quantiles need SciPy (`pip install graphfit[fit]`).

Example:

    >>> import numpy as np, graphfit as gf
    >>> from graphfit import layers, optimizers
    >>> from graphfit.fitting import fit_report
    >>> x = np.linspace(0, 1, 6)
    >>> y = np.array([1.02, 1.38, 1.83, 2.21, 2.58, 3.01])
    >>> model = gf.Sequential([layers.Formula("a*x + b", params={"a": 1.0, "b": 0.0})],
    ...                       input_shape=(1,), dtype="float64")
    >>> model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    >>> history = model.fit(x, y, batch_size=None, epochs=20, verbose=0)
    >>> low, high = linear_intervals(fit_report(model, x, y), level=0.95)["a"]
    >>> round(low, 4), round(high, 4)
    (1.9143, 2.0657)
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np

from graphfit.fitting.jacobian import model_outputs, parameter_jacobian
from graphfit.fitting.parameters import model_parameters
from graphfit.fitting.profile_refits import held_refits

__all__ = ["linear_intervals", "band", "profile_intervals", "t_quantile", "f_threshold"]


def _scipy_stats():
    try:
        from scipy import stats
    except ImportError:  # pragma: no cover - scipy is in the test extra
        raise ImportError("confidence intervals and bands need SciPy's t and F quantiles: "
                          "pip install graphfit[fit] (or scipy)") from None
    return stats


def _check_level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a probability between 0 and 1 (e.g. 0.95). "
                         f"Received: level={level!r}")
    return float(level)


def t_quantile(level: float, dof: int) -> float:
    """The two-sided Student t quantile: t with P(|T| <= t) = level at `dof`."""
    level = _check_level(level)
    if dof <= 0:
        return math.nan
    return float(_scipy_stats().t.ppf(0.5 + level / 2, dof))


def f_threshold(chi_square: float, dof: int, level: float, fixed: int = 1) -> float:
    """The χ² at which lmfit's F-test gives probability `level` for `fixed` parameters held."""
    level = _check_level(level)
    if dof <= 0:  # as `t_quantile`: no threshold without degrees of freedom
        return math.nan
    return chi_square * (1.0 + fixed * float(_scipy_stats().f.ppf(level, fixed, dof)) / dof)


def linear_intervals(report, level: float = 0.95) -> dict[str, tuple[float, float] | None]:
    """`{name: (lower, upper)}`: value ± t · stderr (None where there is no stderr)."""
    t = t_quantile(level, report.dof)
    return {p.name: (p.value - t * p.stderr, p.value + t * p.stderr)
            if p.stderr is not None and math.isfinite(t) else None for p in report.parameters}


def band(model, report, x, level: float = 0.95, prediction: bool = False,
         sigma=None):
    """The fitted curve at `x` and its confidence (or prediction) band.

    Args:
        model: the fitted model `report` describes.
        report: its `FitReport`.
        x: where to evaluate (any number of examples).
        level: the band's probability.
        prediction: the band of a new measurement instead of the curve.
        sigma: for a prediction band, the new measurement's σ at each `x` (a number, or
            one per example), in the units the fit's weights `w = 1/σ²` give it. The band
            adds the variance `s²σ²` (s the residual standard deviation), or `σ²` when the
            report's weights are absolute. Without weights, σ = 1 by default: `s²`, the
            residuals' variance (1 under absolute_sigma). A weighted fit (`report.weighted`)
            has no default: its s is in units of σ, not of y, so the prediction band needs σ.

    Returns:
        `(fit, lower, upper)`, arrays of shape (examples,) for a one-column output, else
        (examples × values,).

    Raises:
        ValueError: a prediction band of a weighted fit without `sigma`; a `sigma` that is
            not positive and finite, or not one per example.
    """
    t = t_quantile(level, report.dof)
    by_name = {p.name: p for p in model_parameters(model)}
    free = [by_name[name] for name in report.free]
    fitted = model_outputs(model, x)
    jacobian = parameter_jacobian(model, x, free) if free else np.zeros((fitted.size, 0))
    variance = np.einsum("ij,jk,ik->i", jacobian, report.covariance, jacobian)
    if prediction:
        noise = _new_sigma(report, sigma, fitted.shape) ** 2
        scale = 1.0 if report.absolute_sigma else report.statistics["reduced_chi_square"]
        variance = variance + (math.nan if scale is None else scale) * noise
    half = t * np.sqrt(np.maximum(variance, 0.0))
    fit = fitted.ravel()
    return fit, fit - half, fit + half


def _new_sigma(report, sigma, shape) -> np.ndarray:
    """The new measurement's σ per value of the model's outputs `shape` (see `band`)."""
    if sigma is None:
        if report.weighted:
            raise ValueError(
                "band(prediction=True) of a weighted fit needs sigma=, the standard deviation "
                "of a new measurement at each x (in the units of the fit's sigma, w = 1/σ²): "
                "the residual standard deviation of a weighted fit is in units of σ, not of "
                "y. Pass sigma=<a number or one per x>, or prediction=False for the "
                "confidence band.")
        return np.ones(int(np.prod(shape)))
    values = np.asarray(sigma, np.float64)
    values = np.full(shape[0], float(values)) if values.ndim == 0 else values
    count, width = shape[0], int(np.prod(shape[1:]))
    if values.shape[:1] != (count,) or values.size not in (count, count * width):
        raise ValueError(f"sigma must be a number or one per example of x ({count}). "
                         f"Received: sigma of shape {np.shape(sigma)}")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"sigma must be positive and finite (a standard deviation). "
                         f"Received: values from {np.min(values)!r} to {np.max(values)!r}")
    return np.broadcast_to(values.reshape(count, -1), (count, width)).ravel()


def _formula_of(model):
    from graphfit.layers import Formula

    formulas = [l for l in model.flatten_layers(include_self=True) if isinstance(l, Formula)]
    others = [v for v in model.trainable_variables
              if not any(v is w for f in formulas for w in f.variables)]
    if len(formulas) != 1 or others:
        raise ValueError(
            f"profile_intervals re-fits a model made of one layers.Formula (the parameters it "
            f"holds fixed in turn); model {model.name!r} has {len(formulas)} Formula layers and "
            f"{len(others)} other trainable variables. Use linear_intervals for it.")
    return formulas[0]


class _NoEnd(Exception):
    """A profile side that cannot give an end (NaN), with the warning that says why."""


class _BelowMinimum(_NoEnd):
    """A re-fit below the fit's χ²: the fit was not at its minimum, so no end measured from
    its χ² is right, on either side of any parameter."""


def _crossing(root, best: float, step: float, side: int, target: float, limit: float,
              tolerance: float) -> float:
    """Where `root(v)` (0 at `best`, growing away from it) reaches `target` on one side:
    the `limit` (a bound) when it comes first, NaN when 30 doublings of `step` do not
    reach `target` (the data do not limit the parameter there)."""
    a, za = best, 0.0
    b = best + side * step
    for _ in range(30):  # bracket: step out, doubling
        if side * (b - limit) >= 0:
            b = limit
            zb = root(b)
            if zb < target:
                return limit  # the bound comes first
            break
        zb = root(b)
        if zb >= target:
            break
        a, za, b = b, zb, best + 2 * (b - best)
    else:
        return math.nan
    for _ in range(40):  # regula falsi, Illinois: halve the kept end's value when it stays
        c = b - (zb - target) * (b - a) / (zb - za)
        zc = root(c)
        if abs(zc - target) <= tolerance * target or abs(b - a) <= 1e-12 * abs(b) + 1e-300:
            return c
        if (zc - target) * (zb - target) < 0:
            a, za = b, zb
        else:
            za = target + (za - target) / 2
        b, zb = c, zc
    return b


def _signed_root(profile, name: str, best: float, chi_min: float):
    """`v -> sqrt(χ²(v) − χ²_min)` of `profile`; `_NoEnd` where a re-fit does not converge or
    goes below χ²_min (the fit was not at its minimum: no interval is right then)."""

    def root(value: float) -> float:
        if value == best:
            return 0.0
        chi_square, converged, reason = profile.chi_square(value)
        if not converged or not math.isfinite(chi_square):
            raise _NoEnd(
                f"profile_intervals: the re-fit with {name} held at {value:.8g} did not "
                f"converge in {profile.epochs} LM steps ({reason}; χ² = {chi_square:.8g}): "
                f"no end of {name}'s interval on that side (NaN). More epochs= may help.")
        if chi_square < chi_min * (1 - 1e-9):
            raise _BelowMinimum(
                f"profile_intervals: the re-fit with {name} held at {value:.8g} reaches χ² = "
                f"{chi_square:.8g}, below the fit's χ² = {chi_min:.8g}: the fit was not at "
                f"its minimum. Fit again (e.g. from {name} = {value:.8g}) and profile that "
                f"fit; no interval is measured from this one (NaN).")
        return math.sqrt(chi_square - chi_min)

    return root


def profile_intervals(model, x, y, sample_weight=None, level: float = 0.95,
                      names: Sequence[str] | None = None, report=None, epochs: int = 500,
                      tolerance: float = 1e-6) -> dict[str, tuple[float, float]]:
    """Profile-likelihood intervals of a `layers.Formula` model's scalar parameters.

    Args:
        model: the fitted model (one Formula, fitted to `x, y`).
        x, y, sample_weight: the data and weights of the fit.
        level: the intervals' probability (lmfit's F-test).
        names: the parameters to profile (default: every varied scalar one).
        report: the fit report at the solution (computed when not given).
        epochs: the most LM steps of each re-fit (`fit_curve`'s `max_steps`, or the
            traced re-fit's epochs, one step each); a re-fit that needs more has not
            converged.
        tolerance: the relative accuracy of sqrt(Δχ²) at the ends.

    Returns:
        `{name: (lower, upper)}`; an end is the bound where the profile reaches a bound
        first, NaN where it never crosses within the search (30 doublings of the first
        step, t·stderr: the data do not limit the parameter there), and NaN, with a
        warning naming the value, where a re-fit does not converge; every end is NaN, with
        that warning, when a re-fit reaches a χ² below the fit's (the fit was not at its
        minimum: fit again from there).

    Raises:
        ValueError: for a model that is not one Formula, an unknown or fixed name,
            sample weights that are not one per point and >= 0, or a fit without degrees
            of freedom.
    """
    from graphfit.fitting.report import fit_report

    formula = _formula_of(model)
    report = report or fit_report(model, x, y, sample_weight=sample_weight)
    varied = [p for p in report.parameters if p.status == "varied" and p.data_set is None]
    chosen = [p.name for p in varied] if names is None else list(names)
    unknown = [n for n in chosen if n not in {p.name for p in varied}]
    if unknown:
        raise ValueError(f"names: {unknown} are not varied scalar parameters of the fit "
                         f"(those are {[p.name for p in varied]})")
    if report.dof <= 0:
        raise ValueError(f"profile_intervals needs degrees of freedom: the fit has "
                         f"{report.statistics['points']} points for "
                         f"{report.statistics['varying_parameters']} varied parameters (dof "
                         f"{report.dof}), so its χ² says nothing of how far a parameter may "
                         f"move; fit more points than parameters, or fix some")
    chi_min = report.statistics["chi_square"]
    target = math.sqrt(f_threshold(chi_min, report.dof, level) - chi_min)
    t = t_quantile(level, report.dof)
    intervals = {}
    for name in chosen:
        parameter = report[name]
        profile = held_refits(formula, name, x, y, sample_weight, epochs)
        root = _signed_root(profile, name, parameter.value, chi_min)
        step = t * parameter.stderr if parameter.stderr else max(abs(parameter.value), 1.0) * 0.1
        low = -math.inf if parameter.min is None else parameter.min
        high = math.inf if parameter.max is None else parameter.max
        ends = []
        for side, limit in ((-1, low), (1, high)):
            try:
                ends.append(_crossing(root, parameter.value, step, side, target, limit,
                                      tolerance))
            except _BelowMinimum as reason:
                warnings.warn(str(reason), stacklevel=2)
                return {n: (math.nan, math.nan) for n in chosen}
            except _NoEnd as reason:
                warnings.warn(str(reason), stacklevel=2)
                ends.append(math.nan)
        intervals[name] = tuple(ends)
    return intervals

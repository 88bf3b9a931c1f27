"""Re-fits of a fitted `layers.Formula` with one parameter held fixed: the profile χ² that
`intervals.profile_intervals` searches.

`held_refits` picks how to re-fit:

- `CurveRefits` (a float64 Formula with one value per parameter, the usual case):
  `fitting.fit_curve`, the Python Levenberg–Marquardt loop with the formula evaluated in
  NumPy, the same algorithm, rules and defaults as `optimizers.LevenbergMarquardt` on a
  float64 model (`python_lm`), without a trace: about 1.6 ms of CPU per re-fit, 30 ms for
  both intervals of a two-parameter exponential, where traced re-fits took 2.4-2.6 s, most
  of it a trace per profiled parameter (docs/benchmarks/performance.md, "Profile intervals
  on the Python loop").
- `ModelRefits` (a global fit, parameters given per data set, which `fit_curve` does not
  take; or a float32 Formula, whose fit a float64 re-fit would undercut by rounding): a clone
  of the Formula fitted by a traced `model.fit` with `LevenbergMarquardt`, one LM step per
  epoch, one trace per profiled parameter.

Both hold the parameter through the Formula's own `vary: false`, keep the other parameters'
bounds, run at most `epochs` LM steps per re-fit, and start each re-fit from the converged
re-fit nearest in the held value (the fit's own values at first), so that far out the other
parameters follow along. A re-fit has converged when LM itself ended it before `epochs`
steps (`model.stop_reason` set: ftol, xtol, gtol, or LM's stop on a stall or NaN); one that
ran out of steps has not (`profile_intervals` also refuses a χ² that is NaN or inf).

Example:

    >>> import graphfit as gf
    >>> from graphfit import layers
    >>> formula = layers.Formula("a*x + b", params={"a": 1.0, "b": 0.0}, dtype="float64")
    >>> _ = gf.Sequential([formula], input_shape=(1,), dtype="float64")  # builds it
    >>> x = np.array([0.0, 1.0, 2.0, 3.0])
    >>> y = 2.0 * x + 1.0 + np.array([0.1, -0.1, -0.1, 0.1])
    >>> refits = held_refits(formula, "a", x, y, None, epochs=100)
    >>> refit = refits.chi_square(2.0)  # b re-fitted with a held at 2: b = 1, χ² = 4·0.1²
    >>> round(refit.chi_square, 12), refit.converged, type(refits).__name__
    (0.04, True, 'CurveRefits')
"""

from __future__ import annotations

import math
import typing

import numpy as np

from graphfit.fitting import numpy_trial
from graphfit.fitting.fits import fit_curve
from graphfit.fitting.jacobian import model_outputs
from graphfit.optimizers.levenberg_marquardt import convergence as lm_convergence

__all__ = ["Refit", "CurveRefits", "ModelRefits", "held_refits"]


class Refit(typing.NamedTuple):
    """One re-fit: its χ² (weighted by the sample weights), whether it converged, and why
    it stopped, in words."""

    chi_square: float
    converged: bool
    reason: str


def held_refits(formula, name: str, x, y, sample_weight, epochs: int):
    """`CurveRefits` for a float64 Formula without per-data-set parameters, else
    `ModelRefits` (see the module docstring)."""
    import tensorflow as tf

    per_data_set = any(spec.per_data_set for spec in formula.specs.values())
    float64 = all(v.dtype == tf.float64 for v in formula.variables)
    kind = CurveRefits if float64 and not per_data_set else ModelRefits
    return kind(formula, name, x, y, sample_weight, epochs)


def _held_params(formula, name: str) -> dict:
    """The Formula's params with `name` fixed (`vary: false`, its bounds dropped: a held
    value may be a bound itself)."""
    params = dict(formula.get_config()["params"])
    given = params[name] if isinstance(params[name], dict) else {"value": params[name]}
    params[name] = {"value": given["value"], "vary": False}
    return params


class _Starts:
    """The converged re-fits' values by held value; `nearest(value)` the start of the next
    re-fit: those of the converged re-fit nearest in the held value, with `value` held."""

    def __init__(self, name: str, best: dict):
        self.name, self.by_held = name, {float(best[name]): best}

    def nearest(self, value: float) -> dict:
        held = min(self.by_held, key=lambda known: abs(known - value))
        return {**self.by_held[held], self.name: value}

    def add(self, value: float, values: dict) -> None:
        self.by_held[float(value)] = values


class CurveRefits:
    """χ² of re-fits by `fitting.fit_curve` (the Python LM loop, NumPy's evaluation) with
    `name` held, at most `epochs` LM steps each (`max_steps`).

    The weights enter as `fit_curve`'s σ = 1/sqrt(w) (its χ² `Σ (r/σ)²` is then `Σ w r²`,
    the weighted sum `model.fit` minimises), a zero weight as a masked point."""

    def __init__(self, formula, name: str, x, y, sample_weight, epochs: int):
        from graphfit.layers import Formula

        self.name, self.epochs, self.evaluations = name, epochs, 0
        self.held = Formula(formula.expression, params=_held_params(formula, name),
                            dtype="float64")
        self.starts = _Starts(name, formula.values())
        x = np.asarray(x, np.float64)
        self.x = x[:, 0] if x.ndim == 2 and x.shape[1] == 1 else x
        self.y = np.ravel(np.asarray(y, np.float64))
        self.sigma, self.mask = _sigma_and_mask(sample_weight, len(self.y))

    def chi_square(self, value: float) -> Refit:
        """The re-fit with the parameter held at `value`."""
        if not any(spec.vary for spec in self.held.specs.values()):
            return self._evaluated(value)  # nothing else to fit: χ² at `value` itself
        starts = _off_bounds(self.held, self.starts.nearest(value))
        fit = fit_curve(self.held, self.x, self.y, p0=starts, sigma=self.sigma, mask=self.mask,
                        max_steps=self.epochs)
        self.evaluations += 1
        converged = fit.reason_code != lm_convergence.NOT_CONVERGED  # not max_steps
        if converged and math.isfinite(fit.chi_square):
            self.starts.add(value, fit.values)
        return Refit(fit.chi_square, converged, fit.reason)

    def _evaluated(self, value: float) -> Refit:
        specs = tuple(self.held.specs.values())
        x = self.x[:, None] if self.x.ndim == 1 else self.x
        weights = np.ones_like(self.y) if self.sigma is None else 1.0 / self.sigma
        if self.mask is not None:
            weights = np.where(self.mask, weights, 0.0)
        with np.errstate(all="ignore"):
            curve = numpy_trial.NumpyCurve(self.held.expression, specs, np.array([value]), x,
                                           np.where(weights > 0, self.y, 0.0), weights)
            residuals = curve.residuals(np.zeros((1, 0)))
        self.evaluations += 1
        return Refit(float(np.sum(np.square(residuals))), True, "nothing to fit")


def _off_bounds(formula, starts: dict) -> dict:
    """A re-fit's starts moved off the bounds a parameter ended on: `sqrt(ε)·(max − min)`
    inside a two-sided bound, `sqrt(ε)·max(1, |bound|)` inside a one-sided one (ε of the
    formula's dtype). On a bound, the transform's slope dp/du is 0 (the sigmoid saturates)
    or the gap itself (the softplus: 5e-324 one float above 0), and the re-fit never moved
    the parameter off it, where the profile with it free is lower: an interval 44 % short."""
    import tensorflow as tf

    resolution = math.sqrt(np.finfo(tf.as_dtype(formula.dtype).as_numpy_dtype).eps)
    moved = dict(starts)
    for spec in formula.specs.values():
        if not spec.bounded:
            continue
        if math.isfinite(spec.min) and math.isfinite(spec.max):
            low = spec.min + resolution * (spec.max - spec.min)
            high = spec.max - resolution * (spec.max - spec.min)
        else:
            bound = spec.min if math.isfinite(spec.min) else spec.max
            margin = resolution * max(1.0, abs(bound))
            low, high = (spec.min + margin, math.inf) if math.isfinite(spec.min) else \
                (-math.inf, spec.max - margin)
        value = np.clip(np.asarray(starts[spec.name], np.float64), low, high)
        moved[spec.name] = value.tolist() if value.ndim else float(value)
    return moved


def _sigma_and_mask(sample_weight, points: int):
    """`fit_curve`'s sigma and mask for sample weights `w` (None, a number, or one per point):
    σ = 1/sqrt(w), False in the mask where w = 0 (None, None without weights)."""
    if sample_weight is None:
        return None, None
    weights = np.asarray(sample_weight, np.float64)
    weights = np.full(points, float(weights)) if weights.ndim == 0 else np.ravel(weights)
    if weights.shape != (points,) or not np.all(weights >= 0):
        raise ValueError(
            f"sample_weight must hold one weight >= 0 per point of y ({points}), as the fit "
            f"was given them. Received: sample_weight of shape {np.shape(sample_weight)} "
            f"with values from {float(np.min(weights)):g} to {float(np.max(weights)):g}")
    used = weights > 0
    sigma = np.where(used, 1.0 / np.sqrt(np.where(used, weights, 1.0)), 1.0)
    return sigma, (None if used.all() else used)


class ModelRefits:
    """χ² of re-fits by a traced `model.fit` with `LevenbergMarquardt` (a clone of the
    Formula, one traced fit reused for every value: `set_values`, `reset_state`), one LM
    step per epoch, at most `epochs`."""

    def __init__(self, formula, name: str, x, y, sample_weight, epochs: int):
        import graphfit as gf
        from graphfit import layers, optimizers

        self.clone = layers.Formula(formula.expression, params=_held_params(formula, name),
                                    dtype=formula.dtype)
        self.model = gf.Sequential([self.clone], dtype=formula.dtype)
        self.model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
        x = np.asarray(x)
        x = x[:, None] if x.ndim == 1 else x  # as fit reads one input column
        self.data = (x, np.asarray(y, np.float64).reshape(len(x), -1), sample_weight)
        self.name, self.epochs, self.evaluations = name, epochs, 0
        self.starts = _Starts(name, formula.values())
        self.model(x[:1])  # builds the clone's variables

    def chi_square(self, value: float) -> Refit:
        """The re-fit with the parameter held at `value`."""
        x, y, weights = self.data
        self.clone.set_values(_off_bounds(self.clone, self.starts.nearest(value)))
        self.model.optimizer.reset_state()
        self.model.fit(x, y, sample_weight=weights, batch_size=None, epochs=self.epochs,
                       verbose=0)
        reason = self.model.stop_reason
        self.evaluations += 1
        residuals = y - model_outputs(self.model, x)
        w = 1.0 if weights is None else np.asarray(weights, np.float64).reshape(len(y), -1)
        chi_square = float(np.sum(w * residuals ** 2))
        converged = reason is not None  # LM stopped the fit before `epochs` ran out
        if converged and math.isfinite(chi_square):
            self.starts.add(value, self.clone.values())
        return Refit(chi_square, converged, reason or f"{self.epochs} epochs reached")

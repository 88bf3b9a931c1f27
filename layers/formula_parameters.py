"""The parameters of a `layers.Formula`: initial values, bounds, fixed ones, per-data-set ones.

A parameter is given as a number (its initial value), or as a mapping
`{value: ..., min: ..., max: ..., vary: ...}` (lmfit's names). `value` may be a list: one
value per data set of a global fit (the last input column names each example's data set).

Bounds are honoured through a smooth change of variables, as MINUIT and lmfit do: the
trainable variable holds an unbounded internal value `u`, and the layer computes the bounded
value `p` from it, so any optimizer keeps `p` inside its bounds without knowing about them:

    min and max:  p = min + (max − min) · sigmoid(u)
    min only:     p = min + softplus(u)          softplus(u) = log(1 + eᵘ)
    max only:     p = max − softplus(u)

MINUIT's and lmfit's transformations (`min + (sin u + 1)(max − min)/2`, `min − 1 +
sqrt(u² + 1)`) reach the bound at a finite u where dp/du = 0 and d²p/du² does not vanish, so
near the bound the curvature of p(u) outgrows its slope without limit. LevenbergMarquardt's
geodesic acceleration (on by default for float64) then rejects trial after trial, the damping
climbs, and the other parameters freeze before they converge: fitting `a*exp(-k*x)` with
k ≤ 0.5 (unbounded optimum 0.8) ended with k on its bound but a = 2.4514 instead of 2.37489
(lmfit: 2.37489), and 2.3787 with the sqrt form. Here the bound lies at u = ±∞, where
p''/p' stays bounded (2 for the sigmoid, 1 for softplus): the same fit ends on the bound
with a right to 10 digits in 5 steps. Far from a bound softplus is the identity shifted, as
sqrt(u² + 1) is.

A fixed parameter (`vary: false`) is a non-trainable variable: no optimizer moves it. Bounds
given with it are checked (its value must lie within them, a bound included) and reported.

Example:

    >>> spec = ParameterSpec.of("b", {"value": 2.0, "min": 0.0, "max": 10.0})
    >>> spec.bounded, round(float(spec.external(spec.internal(2.0))), 12)
    (True, 2.0)
    >>> ParameterSpec.of("b", {"value": -1.0, "min": 0.0})
    Traceback (most recent call last):
    ...
    ValueError: params: the initial value of 'b' must lie strictly inside its bounds ...
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import numpy as np
import tensorflow as tf

__all__ = ["ParameterSpec", "SPEC_KEYS"]

SPEC_KEYS = ("value", "min", "max", "vary")


def _number(value, what: str, received: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise ValueError(f"params: {what} must be a number. {received}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class ParameterSpec:
    """One parameter of a Formula: its initial value(s), bounds and whether it varies.

    Attributes:
        name: the parameter's name.
        value: the initial value, or a tuple of them (one per data set).
        min, max: the bounds (-inf and inf: none).
        vary: False holds the parameter fixed at its value.
    """

    name: str
    value: float | tuple[float, ...]
    min: float = -math.inf
    max: float = math.inf
    vary: bool = True

    @classmethod
    def of(cls, name: str, given: Any) -> "ParameterSpec":
        """The spec from a number, a list of numbers, or a `{value, min, max, vary}` mapping.

        Raises:
            ValueError: naming the parameter, for anything else, unknown keys, bounds with
                min >= max, a varying parameter's initial value outside or on a bound, or a
                fixed one's outside its bounds (on a bound is allowed).
        """
        # "params['w']": a recipe places the error at the parameter (`...params.w`).
        received = f"Received: params[{name!r}]={given!r}"
        if isinstance(given, dict):
            unknown = sorted(set(given) - set(SPEC_KEYS))
            if unknown or "value" not in given:
                problem = ("unknown: " + ", ".join(map(repr, unknown)) if unknown
                           else "value is missing")
                raise ValueError(
                    f"params: {name!r} as a mapping takes the keys value (required), min, max "
                    f"and vary; {problem}. {received}")
            low, high = (default if given.get(key) is None else _number(
                given[key], f"{key} of {name!r}",
                f"Received: params[{name!r}][{key!r}]={given[key]!r}")
                for key, default in (("min", -math.inf), ("max", math.inf)))
            vary = given.get("vary", True)
            if not isinstance(vary, bool):
                raise ValueError(f"params: vary of {name!r} must be true or false. {received}")
            value = given["value"]
        else:
            low, high, vary, value = -math.inf, math.inf, True, given
        value = _values(name, value, received)
        if not low < high:
            raise ValueError(f"params: {name!r} needs min < max. {received}")
        spec = cls(name, value, low, high, vary)
        outside = [v for v in spec.values if not low <= v <= high]
        if not vary and outside:
            raise ValueError(
                f"params: {name!r} is fixed (vary: false) at {outside[0]:g}, outside its own "
                f"bounds [{low:g}, {high:g}]: a fixed parameter keeps its value, so the value "
                f"must lie within min and max. Move the value inside, or change or drop the "
                f"bounds. {received}")
        if vary and (low > -math.inf or high < math.inf):
            inside = [v for v in spec.values if low < v < high]
            if len(inside) != len(spec.values):
                raise ValueError(
                    f"params: the initial value of {name!r} must lie strictly inside its bounds "
                    f"[{low:g}, {high:g}] (the transformed parameter reaches a bound only in the "
                    f"limit). {received}")
        return spec

    @property
    def values(self) -> tuple[float, ...]:
        """The initial value(s) as a tuple."""
        return self.value if isinstance(self.value, tuple) else (self.value,)

    @property
    def per_data_set(self) -> bool:
        """True for a list of values, one per data set."""
        return isinstance(self.value, tuple)

    @property
    def bounded(self) -> bool:
        """True when a varying parameter has a bound (its variable holds the internal value)."""
        return self.vary and (self.min > -math.inf or self.max < math.inf)

    def internal(self, value):
        """The internal (unbounded) value(s) for the bounded value(s) `value` (NumPy)."""
        p = np.asarray(value, np.float64)
        if not self.bounded:
            return p
        if self.min > -math.inf and self.max < math.inf:
            share = np.clip((p - self.min) / (self.max - self.min), 1e-300, 1.0 - 1e-16)
            return np.log(share) - np.log1p(-share)  # the logit
        gap = np.maximum(p - self.min if self.min > -math.inf else self.max - p, 1e-300)
        return gap + np.log(-np.expm1(-gap))  # softplus's inverse

    def internal_start(self, value):
        """`internal` of a start: a start within `sqrt(ε)·(max − min)` of either end of a
        two-sided bound begins that far inside. One float inside, the sigmoid's slope dp/du
        is about 1e-16·(max − min) and a fit leaves the parameter there (it stopped at once
        on ftol, at χ² 43.9 where the optimum has 39.1); at sqrt(ε) it is about
        1e-8·(max − min), enough to come off."""
        p = np.asarray(value, np.float64)
        if self.bounded and self.min > -math.inf and self.max < math.inf:
            margin = math.sqrt(np.finfo(np.float64).eps) * (self.max - self.min)
            p = np.clip(p, self.min + margin, self.max - margin)
        return self.internal(p)

    def external(self, u):
        """The bounded value from the internal value `u` (a tensor; NumPy arrays work too)."""
        if not self.bounded:
            return u
        if isinstance(u, (tf.Tensor, tf.Variable)):
            sigmoid, softplus = tf.math.sigmoid, tf.math.softplus
        else:
            sigmoid, softplus = _sigmoid, _softplus
        if self.min > -math.inf and self.max < math.inf:
            return self.min + sigmoid(u) * (self.max - self.min)
        return self.min + softplus(u) if self.min > -math.inf else self.max - softplus(u)

    def derivative(self, u) -> np.ndarray:
        """dp/du at the internal value(s) `u` (NumPy): 1 without bounds, 0 on a bound."""
        u = np.asarray(u, np.float64)
        if not self.bounded:
            return np.ones_like(u)
        share = _sigmoid(u)
        if self.min > -math.inf and self.max < math.inf:
            return share * (1.0 - share) * (self.max - self.min)
        return share if self.min > -math.inf else -share

    def to_config(self) -> Any:
        """The YAML-friendly form: a number (or list) when nothing else is set."""
        value = list(self.value) if self.per_data_set else self.value
        if self.vary and self.min == -math.inf and self.max == math.inf:
            return value
        config: dict[str, Any] = {"value": value}
        if self.min > -math.inf:
            config["min"] = self.min
        if self.max < math.inf:
            config["max"] = self.max
        if not self.vary:
            config["vary"] = False
        return config


def _sigmoid(u):
    """1 / (1 + e⁻ᵘ), to rounding on both tails (as TensorFlow's sigmoid: near a lower bound
    the share is tiny, and `0.5 (1 + tanh(u/2))` would keep only its absolute accuracy)."""
    u = np.asarray(u, np.float64)
    small = np.exp(-np.abs(u))
    return np.where(u >= 0, 1.0, small) / (1.0 + small)


def _softplus(u):
    return np.logaddexp(0.0, np.asarray(u, np.float64))


def _values(name: str, value, received: str):
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"params: {name!r} has an empty list of values (one value per "
                             f"data set is needed). {received}")
        return tuple(_finite(name, v, received) for v in value)
    return _finite(name, value, received)


def _finite(name: str, value, received: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"params: the initial value of {name!r} must be a finite number. "
                         f"{received}")
    return float(value)

"""One curve's trial evaluations in NumPy, for the Python loop (`python_lm`): what
`batched_lm.trial_function` computes, without a TensorFlow call.

`NumpyCurve` is `batched_lm._Curves` for one curve: the weighted residuals `w·(f(x; b) − y)`
of a formula (`layers.formula_numpy`, over the parser's own checked tree) and their exact
Jacobian (forward mode) with respect to the varying parameters' internal values. A bounded
parameter goes through the Formula layer's own transform (`ParameterSpec.external`, the
chain rule by `ParameterSpec.derivative`), a fixed one enters as a constant. `trial` is the
trial function's trial: geodesic acceleration's two extra points (values only), the trial
point, its residuals, Jacobian, loss and normal equations.

Where a trial's evaluations hold NaN or inf, `trial` returns None and the Python loop asks
TensorFlow's trial function for that trial instead (`python_lm`): TensorFlow's is the
reference there. (An infinite slope times a zero inner derivative, `sqrt(b·x)` at x = 0,
is 0 in both: `formula_numpy`'s rules.) NumPy and TensorFlow round their elementary
functions differently in the last bit, so fits agree to rounding, as the Python loop and
the traced loop do.

Example:

    >>> import numpy as np
    >>> from graphfit.layers.formula_parameters import ParameterSpec
    >>> specs = (ParameterSpec("a", 0.0), ParameterSpec("k", 0.0, min=0.0))
    >>> x = np.array([[1.0], [2.0]])
    >>> curve = NumpyCurve("a*exp(-k*x)", specs, np.zeros(0), x, np.zeros(2), np.ones(2))
    >>> r, jac = curve.linearize(np.array([2.0, 0.0]))  # k = softplus(0) = log 2
    >>> np.round(r, 6).tolist(), np.round(jac, 6).tolist()  # dk/du = sigmoid(0) = 1/2
    ([1.0, 0.5], [[0.5, -0.5], [0.25, -0.5]])
"""

from __future__ import annotations

import functools
import math

import numpy as np

from graphfit.layers.formula_numpy import Dual, NumpyFormula
from graphfit.optimizers.levenberg_marquardt import geodesic as lm_geodesic

__all__ = ["NumpyCurve", "numpy_formula"]


@functools.lru_cache(maxsize=64)
def numpy_formula(expression: str, names: tuple) -> NumpyFormula:
    """The formula's NumPy evaluators, cached per expression and parameter names."""
    return NumpyFormula(expression, names)


class NumpyCurve:
    """One curve's residuals and Jacobian in NumPy.

    Args:
        expression: the formula.
        specs: one `ParameterSpec` per parameter (its bounds and `vary` are used).
        fixed: `[q]` the fixed parameters' values.
        x: `[m, k]` the inputs. y, weights: `[m]`.

    Example:

        >>> from graphfit.layers.formula_parameters import ParameterSpec
        >>> specs = (ParameterSpec("a", 0.0), ParameterSpec("c", 0.0, vary=False))
        >>> curve = NumpyCurve("a*x + c", specs, np.array([1.0]), np.array([[1.0], [2.0]]),
        ...                    np.array([2.0, 3.0]), np.ones(2))
        >>> r, jac = curve.linearize(np.array([1.0]))  # the fixed c = 1 has no column
        >>> r.tolist(), jac.tolist()
        ([0.0, 0.0], [[1.0], [2.0]])
        >>> curve.residuals(np.array([[1.0], [2.0]])).tolist()  # two parameter sets
        [[0.0, 0.0], [1.0, 2.0]]
    """

    def __init__(self, expression: str, specs: tuple, fixed, x, y, weights):
        self.formula = numpy_formula(expression, tuple(spec.name for spec in specs))
        self.varying = [spec for spec in specs if spec.vary]
        self.names = tuple(spec.name for spec in self.varying)
        self.bounded = any(spec.bounded for spec in self.varying)
        self.y, self.weights = np.asarray(y, np.float64), np.asarray(weights, np.float64)
        self.constants = {spec.name: np.float64(value)
                          for spec, value in zip([s for s in specs if not s.vary], fixed)}
        self.constants.update({name: np.asarray(x[:, 0 if name == "x" else int(name[1:]) - 1],
                                                np.float64)
                               for name in self.formula.inputs})
        # The same as forward-mode constants, made once.
        self.duals = {name: Dual(value) for name, value in self.constants.items()}

    def _values(self, columns, constants=None):
        values = dict(self.constants if constants is None else constants)
        for spec, u in zip(self.varying, columns):
            values[spec.name] = spec.external(u) if spec.bounded else u
        return values

    def residuals(self, params) -> np.ndarray:
        """`[n, m]` for `n` sets of parameters `[n, p]` (internal values)."""
        model = self.formula.values(self._values(params.T[:, :, None]))
        return (model - self.y) * self.weights

    def linearize(self, params):
        """`(r [m], J [m, p])` at the internal values `params` `[p]`."""
        model, jac = self.formula.linearize(self._values(params, self.duals), self.names)
        r = (model - self.y) * self.weights
        jac = jac * self.weights[:, None]
        if self.bounded:
            jac = jac * np.array([spec.derivative(u) for spec, u in zip(self.varying, params)])
        return r, jac  # [m] and [m, p] by broadcasting with y's and the weights' [m]

    def trial(self, params, delta, d, within: bool, inverse, r, jac):
        """`batched_lm.trial_function`'s trial for this curve: `(trial params, their r, J,
        (‖r‖², JᵀJ, Jᵀr))`, or None where an evaluation is not finite. `inverse`: the
        trial's damped inverse `−(A + λD)⁻¹` (for the geodesic correction; None: without
        geodesic acceleration); `r`, `jac` those at `params`; with `within` False the
        point is `params` itself."""
        step = delta
        if inverse is not None and within:
            h = lm_geodesic.STEP
            ahead, behind = self.residuals(np.array([params + h * delta, params - h * delta]))
            second = (ahead - 2.0 * r + behind) / (h * h)
            if not np.isfinite(second).all():
                return None
            accel = inverse @ (jac.T @ second)
            sqrt_d = np.sqrt(d)
            if np.isfinite(accel).all() and 2.0 * _norm(sqrt_d * accel) <= (
                    lm_geodesic.ALPHA * _norm(sqrt_d * delta)):
                step = delta + 0.5 * accel
        point = params + step if within else params + 0.0
        r_new, jac_new = self.linearize(point)
        loss, jtj = float(r_new @ r_new), jac_new.T @ jac_new
        # NaN or inf in r or J shows in ‖r‖² or JᵀJ's trace (sums of squares).
        if not math.isfinite(loss + float(jtj.trace())):
            return None
        return point, r_new, jac_new, (loss, jtj, jac_new.T @ r_new)


def _norm(v) -> float:
    return math.sqrt(float(v @ v))

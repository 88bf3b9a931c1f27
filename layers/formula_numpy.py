"""A Formula's expression evaluated in NumPy: values, or values with their exact Jacobian.

The same parse and whitelist as the TensorFlow evaluator (`formula_parser.parse` with another
`Operations` table): nothing here reads the expression's text. Two tables:

- `VALUES`: the formula's values (NumPy arrays broadcast as the inputs are);
- `DUAL`: forward mode. Each node is a `Dual`: its value `[...]` and its derivative
  `[..., p]` with respect to the p parameters being differentiated, or None where the node
  does not depend on them (inputs, constants, fixed parameters: no derivative is computed
  through them, as a backward pass does not reach them).

The derivative rules are those of TensorFlow's registered gradients, factor for factor, so
that a NumPy Jacobian is TensorFlow's `GradientTape` one to rounding, at the edges too:
`a/b` gives `da/b + db·((−a/b)/b)`; `a**b` gives `da·b·a**(b−1)` (so `0**p` has the slope
`p·0**(p−1)`: 0 for p > 1, 1 for p = 1, inf for p < 1, NaN for p = 0) and `db·a**b·log a`
where a > 0, else 0 (no false singularity at a = 0); `sqrt` `0.5·d/√a` (inf at 0);
`abs` `d·sign(a)` (0 at 0); `log` `d·(1/a)`; `tan` `d·(1/cos a)²`; `arctan`
`d·1/(1 + a²)`; `tanh` `d·(1 − tanh² a)`; `exp` `d·eᵃ`. Two rules on top make NumPy and
TensorFlow agree where a slope is infinite: a zero inner derivative gives a zero outer one
(`f'(u)·0 = 0`, also for `inf`: `sqrt(b·x)`, `(b·x)**0.5`, `log(b·x)`, `abs(b·x)**p`,
`x/(b·x)` in b at x = 0), and, as for TensorFlow's Jacobians
(`formula_parser.zero_nan_slopes`), a NaN derivative where the value is finite is 0.

Example:

    >>> import numpy as np
    >>> formula = NumpyFormula("b1*(1-exp(-b2*x))", ("b1", "b2"))
    >>> x = np.array([0.0, 1.0])
    >>> value, jacobian = formula.linearize({"b1": 2.0, "b2": 1.0, "x": x}, ("b1", "b2"))
    >>> np.round(value, 6).tolist(), np.round(jacobian, 6).tolist()
    ([0.0, 1.264241], [[0.0, 0.0], [0.632121, 0.735759]])
"""

from __future__ import annotations

import functools
from typing import Mapping, Sequence

import numpy as np

from graphfit.layers import formula_parser

__all__ = ["Dual", "VALUES", "DUAL", "NumpyFormula", "zero_nan_slopes"]


class Dual:
    """A forward-mode node: `value` `[...]` and `d`, its derivative `[..., p]` with respect
    to the differentiated parameters (None: it does not depend on them).

    Example:

        >>> import numpy as np
        >>> b = Dual(np.float64(3.0), np.array([1.0]))
        >>> square = DUAL.binary["*"](b, b)
        >>> float(square.value), square.d.tolist()
        (9.0, [6.0])
    """

    __slots__ = ("value", "d")

    def __init__(self, value, d=None):
        self.value = value
        self.d = d


def _times(d, factor):
    """`d [..., p]` times `factor [...]` (None stays None). A zero `d` gives zero even where
    `factor` is inf or NaN: the chain rule's limit, `f'(u)·du` with `du = 0` (`sqrt(b·x)`'s
    slope in b at x = 0 is 0, not `0·inf`)."""
    if d is None:
        return None
    out = d * factor[..., None] if isinstance(factor, np.ndarray) and factor.ndim else (
        d * factor)
    return _zero_where_still(out, d)


def _zero_where_still(out, d):
    """`out`, with 0 where `d` is 0 and `out` is not finite (a cheap check first)."""
    if np.isfinite(out).all():
        return out
    return np.where(d == 0, 0.0, out)


def _plus(d, e):
    if d is None:
        return e
    return d if e is None else d + e


def _add(a: Dual, b: Dual) -> Dual:
    return Dual(a.value + b.value, _plus(a.d, b.d))


def _subtract(a: Dual, b: Dual) -> Dual:
    return Dual(a.value - b.value, _plus(a.d, None if b.d is None else -b.d))


def _multiply(a: Dual, b: Dual) -> Dual:
    return Dual(a.value * b.value, _plus(_times(a.d, b.value), _times(b.d, a.value)))


def _divide(a: Dual, b: Dual) -> Dual:
    """TensorFlow's RealDiv gradient: `da / b` and `db · ((−a / b) / b)`."""
    divisor = b.value[..., None] if isinstance(b.value, np.ndarray) and b.value.ndim else (
        b.value)
    da = None if a.d is None else _zero_where_still(a.d / divisor, a.d)
    return Dual(a.value / b.value, _plus(da, _times(b.d, (-a.value / b.value) / b.value)))


def _power(a: Dual, b: Dual) -> Dual:
    """TensorFlow's Pow gradient: `da · b · a**(b − 1)`, and `db · a**b · log a` where
    a > 0, else 0."""
    value = np.power(a.value, b.value)
    d = _times(a.d, b.value * np.power(a.value, b.value - 1.0))
    if b.d is not None:
        positive = np.asarray(a.value) > 0
        log = np.where(positive, np.log(np.where(positive, a.value, 1.0)), 0.0)
        d = _plus(d, _times(b.d, value * log))
    return Dual(value, d)


def _negative(a: Dual) -> Dual:
    return Dual(-a.value, None if a.d is None else -a.d)


def _chain(function, slope):
    """The Dual of `function` with `slope(x, y)` its derivative at x (y = function(x))."""

    def dual(a: Dual) -> Dual:
        value = function(a.value)
        return Dual(value, None if a.d is None else _times(a.d, slope(a.value, value)))

    return dual


_SLOPES = {
    "exp": (np.exp, lambda x, y: y),
    "log": (np.log, lambda x, y: np.reciprocal(x)),
    "sqrt": (np.sqrt, lambda x, y: 0.5 / y),
    "sin": (np.sin, lambda x, y: np.cos(x)),
    "cos": (np.cos, lambda x, y: -np.sin(x)),
    "tan": (np.tan, lambda x, y: np.square(np.reciprocal(np.cos(x)))),
    "arctan": (np.arctan, lambda x, y: np.reciprocal(1.0 + np.square(x))),
    "tanh": (np.tanh, lambda x, y: 1.0 - y * y),
    "abs": (np.abs, lambda x, y: np.sign(x)),
}
_SLOPES["atan"] = _SLOPES["arctan"]

VALUES = formula_parser.Operations(
    functions={name: function for name, (function, _) in _SLOPES.items()},
    binary={"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
            "**": np.power},
    unary={"-": np.negative, "+": lambda value: value},
    constant=lambda number, dtype: np.float64(number))

DUAL = formula_parser.Operations(
    functions={name: _chain(*rule) for name, rule in _SLOPES.items()},
    binary={"+": _add, "-": _subtract, "*": _multiply, "/": _divide, "**": _power},
    unary={"-": _negative, "+": lambda value: value},
    constant=lambda number, dtype: Dual(np.float64(number)))


class NumpyFormula:
    """A formula over parameter names, evaluated in NumPy (float64).

    Args:
        expression: the formula (`formula_parser`'s whitelist; its errors as there).
        params: the parameter names.

    Example:

        >>> formula = NumpyFormula("a*x**2", ("a",))
        >>> formula.values({"a": 3.0, "x": np.array([1.0, 2.0])}).tolist()
        [3.0, 12.0]
    """

    def __init__(self, expression: str, params: Sequence[str]):
        parsed = formula_parser.parse(expression, params, VALUES)
        self.inputs = parsed.inputs
        self._values = parsed.evaluate
        self._dual = formula_parser.parse(expression, params, DUAL).evaluate

    def values(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """The formula's values for `values` (every parameter and input name), broadcast."""
        return self._values(values, np.float64)

    def linearize(self, values: Mapping[str, np.ndarray], wrt: Sequence[str]):
        """`(value [...], jacobian [..., len(wrt)])`: the values, and their exact derivatives
        with respect to the (scalar) parameters `wrt`, broadcast to the value's shape. A
        value that is a `Dual` already (an input's `Dual(x)`, made once) is taken as it is."""
        duals = {name: value if isinstance(value, Dual) else Dual(value)
                 for name, value in values.items()}
        for name, seed in zip(wrt, _seeds(len(wrt))):
            duals[name] = Dual(np.float64(values[name]), seed)
        out = self._dual(duals, np.float64)
        value = np.asarray(out.value)
        if out.d is None:
            return value, np.zeros(value.shape + (len(wrt),))
        shape = value.shape + (len(wrt),)
        d = zero_nan_slopes(value, out.d)
        return value, d if d.shape == shape else np.broadcast_to(d, shape)


def zero_nan_slopes(value, jacobian):
    """`jacobian [..., p]` with its NaN entries 0 where `value [...]` is finite: a `0·inf`
    of the chain rule at a point where the formula is defined (`formula_parser.
    zero_nan_slopes`, TensorFlow's, the same rule). ±inf, and NaN where the value is not
    finite, stay."""
    jacobian = np.asarray(jacobian)
    if np.isfinite(jacobian).all():
        return jacobian
    finite = np.isfinite(value)
    finite = finite[..., None] if np.ndim(finite) else finite
    return np.where(np.isnan(jacobian) & finite, 0.0, jacobian)


@functools.lru_cache(maxsize=16)
def _seeds(count: int) -> np.ndarray:
    """The unit vectors that seed `count` parameters' derivatives (read only)."""
    seeds = np.eye(count)
    seeds.flags.writeable = False
    return seeds

"""`Formula`: a curve-fitting layer written as a formula string, `b1*(1-exp(-b2*x))`."""

from __future__ import annotations

import keyword
import re
from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.fitting.parameters import FitParameter
from graphfit.layers import formula_parser
from graphfit.layers.formula_parameters import ParameterSpec

__all__ = ["Formula"]

_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@register_layer
class Formula(Layer):
    """A model `y = f(x; params)` written as a formula string, for curve fitting.

    The expression is parsed safely (a syntax tree walked against a whitelist, never
    evaluated as Python) into TensorFlow ops. It may hold:

    - numbers, and the constant `pi` (there is no `e`: write `exp(1)`; `e` may be a parameter);
    - the parameters, by name; each is a scalar variable of the layer's dtype, named
      after it and initialized to the value given in `params`;
    - the inputs: `x` for inputs of shape `(batch,)` or `(batch, 1)`, or `x1`, `x2`, ... for
      the columns 0, 1, ... of inputs of shape `(batch, k)` (not both spellings at once;
      `x0` is free for a parameter);
    - `+ - * / **`, unary `-` and `+`, parentheses (`^` is refused: use `**`);
    - `exp log sqrt sin cos tan arctan tanh abs` (`atan` is `arctan`), one argument each.

    The output has shape `(batch, 1)`. Use `dtype="float64"` for curve fitting: float32
    gradients are too coarse for the certified NIST problems. Line breaks in the expression
    (from a YAML block scalar) are read as spaces.

    A parameter may be bounded, fixed, or given per data set (`params={"b1": {"value": 500,
    "min": 0}, "b2": {"value": 1e-4, "vary": False}}`, lmfit's keys). A bounded parameter's
    variable holds an unbounded internal value that the layer maps into the bounds (MINUIT's
    and lmfit's sin and sqrt transformations, `graphfit.layers.formula_parameters`), so every
    optimizer honours the bounds; a fixed one is a non-trainable variable. A list of values
    (`{"a": [1.0, 2.0]}`) makes a global fit: one value per data set, the data set of each
    example given by the inputs' last column (0, 1, ...), the formula's `x` or `x1`, ...
    being the columns before it; parameters given as numbers are shared by all data sets.
    `values()` gives the bounded values; `graphfit.fitting` reports on the fit.

    The per-example Jacobian (`example_jacobian`, used by LevenbergMarquardt) takes a NaN
    derivative at an example whose output is finite as 0: the `0·inf` of an infinite slope
    times a zero inner derivative, whose limit is 0 (`sqrt(D*x)` in D at x = 0), as
    `fitting.fit_curve` does.

    Args:
        expression: the formula, a string.
        params: `{name: initial value}`, a plain dict (YAML-friendly) of numbers, or of
            `{value, min, max, vary}` mappings, or lists of numbers (one per data set).
            Every parameter must appear in the expression, and every name in the expression
            must be a parameter, an input or `pi`.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: False freezes the parameters.

    Raises:
        ValueError: for a bad `params`, or an expression outside the whitelist, with a
            syntax error, an unknown name or an unused parameter; the message shows the
            expression with carets under the offending part. On the first call, also for
            inputs of rank other than 1 or 2, or fewer columns than the expression uses.

    Example:

        >>> import numpy as np
        >>> from graphfit import layers
        >>> curve = layers.Formula("b1*(1-exp(-b2*x))", params={"b1": 500.0, "b2": 1e-4},
        ...                        dtype="float64")
        >>> curve(np.array([0.0, 1e4])).numpy().round(3)
        array([[  0.  ],
               [316.06]])
        >>> curve.values()
        {'b1': 500.0, 'b2': 0.0001}
        >>> layers.Formula("b1*exp(-c*x)", params={"b1": 1.0, "b2": 2.0})
        Traceback (most recent call last):
        ...
        ValueError: Formula: unknown name 'c' in "b1*exp(-c*x)" (parameters: b1, b2; ...
            b1*exp(-c*x)
                    ^
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(
        self,
        expression: str,
        params: Mapping[str, Any],
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        if not isinstance(expression, str):
            raise ValueError(
                f"expression must be a string such as 'b1*exp(-b2*x)'. "
                f"Received: expression={expression!r}"
            )
        # One line, so that the carets of an error line up (YAML block scalars break lines).
        self.expression = " ".join(expression.replace("\t", " ").splitlines()).strip()
        if not self.expression:
            raise ValueError(
                f"expression must not be empty; write a formula such as 'b1*exp(-b2*x)'. "
                f"Received: expression={expression!r}"
            )
        self.specs = _specs(params)
        self.params = {name: spec.to_config() for name, spec in self.specs.items()}
        self._formula = formula_parser.parse(self.expression, list(self.params))
        unused = [p for p in self.params if p not in self._formula.names]
        if unused:
            raise formula_parser.located_error(
                self.expression, None,
                f"parameter{'s' if len(unused) > 1 else ''} {', '.join(map(repr, unused))} "
                f"not used",
                " (a parameter the formula does not use has no gradient and cannot be fitted):"
                f" remove it from params or use it. Received: params={dict(self.params)!r}",
            )
        self._parameters: dict[str, tf.Variable] = {}
        sizes = {len(spec.values) for spec in self.specs.values() if spec.per_data_set}
        if len(sizes) > 1:
            raise ValueError(
                f"params: the parameters given per data set (lists) must all have one value "
                f"per data set, the same number; received lists of lengths {sorted(sizes)}. "
                f"Received: params={params!r}")
        #: the number of data sets of a global fit (lists in params), else None
        self.data_sets: int | None = sizes.pop() if sizes else None
        self.input_spec = InputSpec(min_ndim=1)

    def build(self, input_shape) -> None:
        rank = input_shape.rank
        if rank not in (1, 2) or self.data_sets and rank != 2:
            raise ValueError(
                f"Formula {self.name!r} expects inputs of shape (batch,) or (batch, columns)"
                f"{' with the data set index as the last column' if self.data_sets else ''}; "
                f"received inputs of shape {tuple(input_shape.as_list())}. Add "
                f"layers.Flatten() before it, or select the columns you need."
            )
        columns = 1 if rank == 1 else input_shape[-1]
        if columns is None:
            raise ValueError(
                f"Formula {self.name!r} needs a known number of input columns. Received "
                f"inputs of shape {tuple(input_shape.as_list())}."
            )
        self._check_columns(int(columns) - (1 if self.data_sets else 0), input_shape)
        for param, spec in self.specs.items():
            initial = spec.internal_start(spec.value)  # off a two-sided bound
            self._parameters[param] = self.add_weight(
                param, np.shape(initial), initializer=_constant(initial),
                trainable=spec.vary)
        self.input_spec = InputSpec(ndim=rank, axes={-1: int(columns)} if rank == 2 else None)

    def _check_columns(self, columns: int, input_shape) -> None:
        shape = tuple(input_shape.as_list())
        sets = " before the data set column" if self.data_sets else ""
        for name in self._formula.inputs:
            span = self._formula.names[name]
            if name == "x" and columns > 1:
                raise formula_parser.located_error(
                    self.expression, span, "'x' stands for a single input column",
                    f", but the inputs have {columns} columns{sets} (shape {shape}): name them "
                    f"x1 ... x{columns} (x1 = column 0)",
                )
            needed = 1 if name == "x" else int(name[1:])
            if needed > columns:
                raise formula_parser.located_error(
                    self.expression, span, f"input {name!r} needs {needed} input columns",
                    f", but the inputs have {columns}{sets} (shape {shape}); x1 is column 0",
                )

    def call(self, inputs, training: bool = False):
        return tf.expand_dims(self._evaluate(inputs, {}), -1)

    @property
    def checks_batches(self) -> bool:
        """Only a global fit checks its batches (the data-set column): a Formula without
        per-data-set parameters spares the loops their check pass."""
        return bool(self.data_sets)

    def batch_checks(self, inputs, training: bool) -> list:
        """A global fit's data-set column holds whole numbers from 0 to data_sets − 1: an
        index outside would pick no data set's values (its parameters read as 0), and a
        fraction would be cut to the set below."""
        del training
        if not self.data_sets:
            return []
        column = inputs[:, -1]
        ok = tf.equal(column, tf.round(column)) & (column >= 0) & (column < self.data_sets)
        return [(ok, f"Formula {self.name!r}: {self._data_set_rule()}; received a value "
                     f"outside that range or not a whole number")]

    def _data_set_rule(self) -> str:
        n = self.data_sets
        listed = ", ".join(name for name, spec in self.specs.items() if spec.per_data_set)
        return (f"the data-set column (the inputs' last column) must hold whole numbers from 0 "
                f"to {n - 1}, since params give {n} value{'s' if n > 1 else ''} per data set "
                f"({listed}). Number the data sets from 0 (a column counted from 1: subtract "
                f"1), and give each per-data-set parameter one value for every data set")

    def _evaluate(self, inputs, copies):
        """The formula on `inputs`, shape (batch,); a parameter named in `copies` takes its
        internal value from there, one copy per example (batch, *shape), instead of its
        variable."""
        sets = None
        if self.data_sets:  # one-hot rows pick each example's values (dense gradients)
            sets = tf.one_hot(tf.cast(inputs[:, -1], tf.int32), self.data_sets,
                              dtype=self.compute_dtype)
        values = {}
        for name, variable in self._parameters.items():
            spec = self.specs[name]
            copied = name in copies
            value = spec.external(copies[name] if copied else self.compute_value(variable))
            if spec.per_data_set:
                value = (tf.reduce_sum(sets * value, -1) if copied
                         else tf.linalg.matvec(sets, value))
            values[name] = value
        for name in self._formula.inputs:
            if inputs.shape.rank == 1:
                values[name] = inputs
            else:
                values[name] = inputs[:, 0 if name == "x" else int(name[1:]) - 1]
        outputs = self._formula.evaluate(values, self.compute_dtype)
        if outputs.shape.rank == 0:  # no input in the formula: one value for every example
            outputs = tf.broadcast_to(outputs, tf.shape(inputs)[:1])
        return outputs

    def example_jacobian(self, inputs, variables):
        """Each example's derivatives of its output with respect to `variables` (trainable
        variables of this layer), in closed form: every example gets its own copy of the
        parameters, and one backward pass of the summed outputs gives each copy's
        derivative, which is its example's alone. Levenberg–Marquardt's per-example Jacobian
        uses this layer hook instead of vectorizing one backward pass per example
        (docs/guides/architecture.md, "Per-example Jacobians").

        Args:
            inputs: the inputs of a call of this layer, (batch, ...).
            variables: some of this layer's trainable variables.

        Returns:
            One tensor per variable, of shape (batch, 1, variable size): d output / d variable
            for each example, in the compute dtype.
        """
        names = {variable.ref(): name for name, variable in self._parameters.items()}
        wanted = [names[v.ref()] for v in variables]
        batch = tf.shape(inputs)[:1]
        copies = {}
        for name in wanted:
            value = self.compute_value(self._parameters[name])
            copies[name] = tf.broadcast_to(value, tf.concat([batch, tf.shape(value)], 0))
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(list(copies.values()))
            outputs = self._evaluate(inputs, copies)
            total = tf.reduce_sum(outputs)
        parts = tape.gradient(total, [copies[name] for name in wanted],
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
        # 0·inf of an infinite slope times a zero inner derivative (sqrt(b*x) at x = 0) is 0
        # where the output is finite, as in fit_curve (`formula_parser.zero_nan_slopes`).
        return [tf.reshape(formula_parser.zero_nan_slopes(outputs, part),
                           tf.concat([batch, [1, -1]], 0)) for part in parts]

    def _require_built(self, what: str) -> None:
        if not self.built:
            raise RuntimeError(
                f"Formula {self.name!r} has no {what} yet: its parameters are created on "
                f"the first call. Call it on data first (layer(x), model.fit(...)); the "
                f"initial values are in .params."
            )

    def values(self) -> dict[str, float | list[float]]:
        """The parameters' current (fitted, bounded) values, `{name: float}` (a list for a
        parameter given per data set), in the order of `params`.

        Raises:
            RuntimeError: before the layer is built (its variables do not exist yet).
        """
        self._require_built("fitted values")
        values = {}
        for name, variable in self._parameters.items():
            value = self.specs[name].external(np.asarray(variable.numpy(), np.float64))
            values[name] = [float(v) for v in value] if np.ndim(value) else float(value)
        return values

    def set_values(self, values: Mapping[str, Any]) -> None:
        """Assigns (bounded) values to some parameters, `{name: value}` (a list for a
        parameter given per data set), fixed ones included.

        Raises:
            RuntimeError: before the layer is built.
            ValueError: for an unknown name, a value of the wrong length, or a value outside
                the parameter's bounds.
        """
        self._require_built("parameters to set")
        for name, value in values.items():
            if name not in self.specs:
                raise ValueError(f"Formula {self.name!r} has no parameter {name!r} (it has "
                                 f"{', '.join(self.specs)}). Received: values={dict(values)!r}")
            spec, variable = self.specs[name], self._parameters[name]
            array = np.asarray(value, np.float64)
            if array.shape != tuple(variable.shape) or not np.all(np.isfinite(array)):
                wanted = (f"a list of {variable.shape[0]} numbers" if variable.shape.rank
                          else "a number")
                raise ValueError(f"Formula {self.name!r}: {name!r} takes {wanted}, finite. "
                                 f"Received: {name}={value!r}")
            if np.any((array < spec.min) | (array > spec.max)):
                raise ValueError(f"Formula {self.name!r}: {name!r} must lie in its bounds "
                                 f"[{spec.min:g}, {spec.max:g}]. Received: {name}={value!r}")
            variable.assign(spec.internal(array).astype(variable.dtype.as_numpy_dtype))

    def fit_parameters(self) -> list[FitParameter]:
        """The parameters for a fit report (`graphfit.fitting`): one per scalar, with its
        bounds, whether it varies, and d value / d internal value (the bounds' transform)."""
        self._require_built("parameters to report")
        parameters = []
        for name, variable in self._parameters.items():
            spec = self.specs[name]
            internal = np.asarray(variable.numpy(), np.float64)
            value, slope = spec.external(internal), spec.derivative(internal)
            vary = spec.vary and self.trainable
            for index in np.ndindex(internal.shape):
                parameters.append(FitParameter(
                    f"{name}[{index[0]}]" if index else name, float(value[index]), vary,
                    spec.min, spec.max, variable if vary else None, index,
                    float(slope[index]), index[0] if index else None))
        return parameters

    def data_set_index(self, x) -> np.ndarray | None:
        """Each example's data set in a global fit (the inputs' last column, as integers),
        or None when no parameter is given per data set.

        Raises:
            ValueError: naming the first row whose data-set value is not a whole number from
                0 to data_sets − 1, its value and the range.
        """
        if not self.data_sets:
            return None
        column = np.asarray(x, np.float64)[:, -1]
        bad = ~((column == np.round(column)) & (column >= 0) & (column < self.data_sets))
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"Formula {self.name!r}: row {row} of the inputs holds "
                f"{float(column[row]):.10g} in the data-set column ({np.count_nonzero(bad)} "
                f"row(s) out of {len(column)} do); {self._data_set_rule()}.")
        return column.astype(np.int64)

    def get_config(self) -> dict[str, Any]:
        # The initial values as given: fitted values travel with the weights, as in Keras.
        # Rebuilt from the specs: plain dicts and lists (tf.Module wraps the stored ones).
        return {**self._base_config(), "expression": self.expression,
                "params": {name: spec.to_config() for name, spec in self.specs.items()}}


def _constant(value):
    """An initializer giving exactly `value` in any dtype (keras's Constant rounds to float32
    first, which would turn a float64 1e-4 into 9.9999997e-05)."""
    return lambda shape, dtype=None: tf.constant(value, dtype, shape)


def _specs(params) -> dict[str, ParameterSpec]:
    """`params` checked: usable names to `ParameterSpec`s."""
    received = f"Received: params={params!r}"
    if not isinstance(params, Mapping):
        raise ValueError(
            f"params must be a dict mapping each parameter name to its initial value, e.g. "
            f"{{'b1': 500.0, 'b2': 1e-4}}. {received}"
        )
    specs: dict[str, ParameterSpec] = {}
    for param, value in params.items():
        if not isinstance(param, str) or not _PARAM_NAME.match(param) or keyword.iskeyword(param):
            raise ValueError(
                f"params: {param!r} is not a usable parameter name (letters, digits and _, not "
                f"starting with a digit, not a Python keyword). {received}"
            )
        reserved = (
            "an input name (x, x1, x2, ...)" if formula_parser.INPUT_NAME.match(param)
            else "a function" if param in formula_parser.FUNCTIONS
            else "a constant" if param in formula_parser.CONSTANTS
            else None
        )
        if reserved:
            raise ValueError(f"params: {param!r} is {reserved}, not a parameter name. {received}")
        specs[param] = ParameterSpec.of(param, value)
    return specs

"""The safe parser behind `layers.Formula` (private): a formula string to a TensorFlow closure.

The string is parsed with `ast.parse(..., mode="eval")` into a syntax tree only; nothing is
ever evaluated, executed or compiled to a code object. A walk over the tree accepts a small
whitelist and turns each node into a closure over the ops of an `Operations` table:
TensorFlow's (`TENSORFLOW`, the default), or NumPy's (`layers.formula_numpy`: values, and
values with their Jacobian), so that every evaluator reads the same checked tree:

- numbers (int or float literals), the constant `pi`;
- names: the parameters, and the inputs `x` (one column) or `x1`, `x2`, ... (column 0, 1, ...);
- the operators `+ - * / **`, unary `-` and `+`, parentheses;
- calls, with one positional argument, of `exp log sqrt sin cos tan arctan atan tanh abs`.

Anything else raises a `ValueError` that quotes the expression and puts carets under the
offending part, with a "did you mean" for mistyped names.

Example:

    >>> from graphfit.layers import formula_parser
    >>> formula = formula_parser.parse("b1*(1-exp(-b2*x))", ["b1", "b2"])
    >>> sorted(formula.names)
    ['b1', 'b2', 'x']
    >>> formula_parser.parse("b1*x^2", ["b1"])
    Traceback (most recent call last):
    ...
    ValueError: Formula: '^' is not a power in "b1*x^2": use ** for powers (x**2); ...
        b1*x^2
            ^
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from typing import Any, Callable, Iterable, Mapping

import tensorflow as tf

from graphfit.core.registry import did_you_mean

__all__ = ["FUNCTIONS", "CONSTANTS", "INPUT_NAME", "MAX_DEPTH", "Span", "ParsedFormula",
           "Operations", "TENSORFLOW", "parse", "located_error", "zero_nan_slopes"]

# One-argument functions; `atan` is the math-module spelling of NumPy's `arctan`.
FUNCTIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "exp": tf.exp,
    "log": tf.math.log,
    "sqrt": tf.sqrt,
    "sin": tf.sin,
    "cos": tf.cos,
    "tan": tf.tan,
    "arctan": tf.atan,
    "atan": tf.atan,
    "tanh": tf.tanh,
    "abs": tf.abs,
}
CONSTANTS: dict[str, float] = {"pi": math.pi}
# `x` is the single input column; `x1`, `x2`, ... number the columns from 1 (`x0` is free
# for a parameter, as in a Gaussian's centre).
INPUT_NAME = re.compile(r"x(?:[1-9][0-9]*)?\Z")
# Deeper trees than any real formula would recurse too deeply when traced.
MAX_DEPTH = 200

# The operators of the whitelist, by the symbol an `Operations` table names them with.
_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_UNARY = {ast.USub: "-", ast.UAdd: "+"}
_OPERATOR_TEXT = {ast.FloorDiv: "//", ast.Mod: "%", ast.MatMult: "@", ast.LShift: "<<",
                  ast.RShift: ">>", ast.BitOr: "|", ast.BitAnd: "&", ast.Not: "not",
                  ast.Invert: "~"}
# Hints for names that string similarity cannot guess.
_HINTS = {"e": "for Euler's number write exp(1)", "ln": "did you mean 'log'?",
          "pow": "write a**b for powers", "power": "write a**b for powers",
          "x0": "input columns are numbered from 1 (x1 is column 0)"}
_REFUSED = {
    ast.Attribute: "attribute access", ast.Subscript: "subscripts (indexing)",
    ast.Compare: "comparisons", ast.BoolOp: "'and'/'or'",
    ast.IfExp: "conditional expressions", ast.Lambda: "lambda",
    ast.NamedExpr: "assignments (:=)", ast.Dict: "dicts", ast.Set: "sets", ast.List: "lists",
    ast.Tuple: "tuples", ast.ListComp: "comprehensions", ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions", ast.GeneratorExp: "generator expressions",
    ast.JoinedStr: "f-strings", ast.Starred: "starred arguments", ast.Slice: "slices",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield",
}
_ALLOWED = ("numbers, parameters, inputs, pi, + - * / **, unary -, parentheses, and calls of "
            + ", ".join(FUNCTIONS))

Evaluator = Callable[[Mapping[str, Any], Any], Any]


@dataclasses.dataclass(frozen=True)
class Operations:
    """What a parsed formula computes with: one callable per whitelisted function (every
    name of `FUNCTIONS`), binary operator (`+ - * / **`) and unary one (`- +`), and
    `constant(number, dtype)` for the numbers and `pi`. The whitelist is the parser's, not
    the table's: a table must cover it exactly.

    Example:

        >>> import numpy as np
        >>> table = Operations(
        ...     functions={name: getattr(np, "arctan" if name == "atan" else name)
        ...                for name in FUNCTIONS},
        ...     binary={"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
        ...             "**": np.power},
        ...     unary={"-": np.negative, "+": lambda value: value},
        ...     constant=lambda number, dtype: dtype(number))
        >>> formula = parse("b*exp(-x)", ["b"], table)
        >>> float(formula.evaluate({"b": 2.0, "x": np.float64(0.0)}, np.float64))
        2.0
    """

    functions: Mapping[str, Callable]
    binary: Mapping[str, Callable]
    unary: Mapping[str, Callable]
    constant: Callable[[float, Any], Any]

    def __post_init__(self):
        for what, table, names in (("functions", self.functions, set(FUNCTIONS)),
                                   ("binary", self.binary, set(_BINARY.values())),
                                   ("unary", self.unary, set(_UNARY.values()))):
            if set(table) != names:
                raise ValueError(f"Operations: {what} must name exactly {sorted(names)}. "
                                 f"Received: {sorted(table)}")


TENSORFLOW = Operations(
    functions=FUNCTIONS,
    binary={"+": tf.add, "-": tf.subtract, "*": tf.multiply, "/": tf.math.divide,
            "**": tf.pow},
    unary={"-": tf.negative, "+": lambda value: value},
    constant=lambda number, dtype: tf.constant(number, dtype))


@dataclasses.dataclass(frozen=True)
class Span:
    """Where a node sits in the (single-line) expression: character columns [start, end)."""

    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class ParsedFormula:
    """A checked formula.

    Attributes:
        expression: the expression text the spans refer to.
        evaluate: `evaluate(values, dtype)`, with `values` mapping every name in `names`
            (parameters and inputs) to a tensor, computes the formula with TensorFlow ops
            (or with those of the `Operations` that `parse` was given).
        names: the first occurrence of each parameter and input name used.
        inputs: the input names used (`x` or `x1`, `x2`, ...), in order of first use.
    """

    expression: str
    evaluate: Evaluator
    names: dict[str, Span]
    inputs: tuple[str, ...]


def located_error(expression: str, span: Span | None, problem: str, detail: str = "") -> ValueError:
    """`Formula: {problem} in "{expression}"{detail}`, then the expression and carets."""
    message = f'Formula: {problem} in "{expression}"{detail}'
    if span is not None:
        width = max(1, min(span.end, len(expression)) - span.start)
        message += f"\n    {expression}\n    {' ' * span.start}{'^' * width}"
    return ValueError(message)


def zero_nan_slopes(values: tf.Tensor, jacobian: tf.Tensor) -> tf.Tensor:
    """A formula's Jacobian by a backward pass, `jacobian [..., p]` (or `[...]`), with its
    NaN entries 0 where `values [...]` is finite: a backward pass meets `inf·0` where an
    infinite slope (`sqrt`, `**0.5`, `log`, a division at 0) is multiplied by a zero inner
    derivative (`sqrt(b·x)` in b at x = 0), whose limit is 0; forward mode in NumPy
    (`formula_numpy`) gives the same. ±inf, and NaN where the value is not finite, stay."""
    values = tf.convert_to_tensor(values)
    for _ in range(jacobian.shape.rank - values.shape.rank):
        values = tf.expand_dims(values, -1)
    return tf.where(tf.math.is_nan(jacobian) & tf.math.is_finite(values),
                    tf.zeros_like(jacobian), jacobian)


def parse(expression: str, params: Iterable[str],
          operations: Operations = TENSORFLOW) -> ParsedFormula:
    """Parses and checks `expression` over the parameter names `params`.

    Args:
        expression: a single-line formula (see the module docstring for what it may hold).
        params: the parameter names.
        operations: the ops the evaluator computes with (TensorFlow's by default).

    Returns:
        The `ParsedFormula`.

    Raises:
        ValueError: for a syntax error or anything outside the whitelist, pointing at it.
    """
    try:
        tree = ast.parse(expression, mode="eval")  # a syntax tree only, never a code object
    except SyntaxError as error:
        if not error.offset:  # the parser ran out of input, e.g. after a trailing operator
            span, reason = Span(len(expression), len(expression) + 1), "it ends too early"
        else:
            start = error.offset - 1  # SyntaxError columns are 1-based characters
            end = error.end_offset - 1 if (error.end_offset or 0) > error.offset else start + 1
            span, reason = Span(start, end), error.msg
        detail = f" ({reason})" if reason != "invalid syntax" else ""
        if re.search(r"(?<![=<>!])=(?!=)", expression):  # `y = a*x`: an assignment
            right = expression.split("=", 1)[1].strip()
            detail = (f" (an equation: write only its right-hand side, the model, as "
                      f"{right!r})")
        raise located_error(expression, span, "invalid syntax", detail) from None
    except (ValueError, RecursionError, MemoryError) as error:
        reason = str(error) or "it is nested too deeply"
        raise located_error(expression, None, f"cannot parse the expression ({reason})") from None
    walker = _Walker(expression, tuple(params), operations)
    evaluate = walker.visit(tree.body, depth=0)
    return ParsedFormula(expression, evaluate, walker.names, tuple(walker.inputs))


class _Walker:
    """Turns a syntax tree into nested closures, refusing anything off the whitelist."""

    def __init__(self, expression: str, params: tuple[str, ...], operations: Operations):
        self.expression = expression
        self.params = params
        self.operations = operations
        self.names: dict[str, Span] = {}
        self.inputs: list[str] = []
        self._source = expression.encode("utf-8")  # ast columns count UTF-8 bytes

    def span(self, node: ast.AST) -> Span:
        def column(offset: int) -> int:
            return len(self._source[:offset].decode("utf-8", errors="replace"))

        end = node.end_col_offset if node.end_lineno == node.lineno else len(self._source)
        return Span(column(node.col_offset), column(end))

    def error(self, node: ast.AST, problem: str, detail: str = "") -> ValueError:
        return located_error(self.expression, self.span(node), problem, detail)

    def visit(self, node: ast.AST, depth: int) -> Evaluator:
        if depth > MAX_DEPTH:
            raise self.error(node, f"the expression is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, ast.Constant):
            return self.constant(node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.BinOp):
            return self.binary(node, depth)
        if isinstance(node, ast.UnaryOp):
            symbol = _UNARY.get(type(node.op))
            if symbol is None:
                symbol = _OPERATOR_TEXT[type(node.op)]
                start = self.span(node).start
                raise located_error(self.expression, Span(start, start + len(symbol)),
                                    f"operator {symbol!r} is not supported",
                                    f" (allowed: {_ALLOWED})")
            operation = self.operations.unary[symbol]
            operand = self.visit(node.operand, depth + 1)
            return lambda values, dtype: operation(operand(values, dtype))
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
            node.attr in FUNCTIONS or node.attr in CONSTANTS
        ):
            raise self.error(node, f"attribute access {node.value.id}.{node.attr} is not "
                                   f"allowed", f": write {node.attr} without the prefix")
        what = _REFUSED.get(type(node), f"{type(node).__name__} expressions")
        raise self.error(node, f"{what} not allowed", f" (allowed: {_ALLOWED})")

    def constant(self, node: ast.Constant) -> Evaluator:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            kind = {str: "string literals", bytes: "bytes literals", complex: "complex numbers",
                    bool: "True/False"}.get(type(value), f"the constant {value!r}")
            raise self.error(node, f"{kind} not allowed", f" (allowed: {_ALLOWED})")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise self.error(node, "the number is out of the floating-point range")
        constant = self.operations.constant
        return lambda values, dtype: constant(number, dtype)

    def name(self, node: ast.Name) -> Evaluator:
        name = node.id
        if name in self.params or INPUT_NAME.match(name):
            self._use(name, node)
            return lambda values, dtype: values[name]
        if name in CONSTANTS:
            number, constant = CONSTANTS[name], self.operations.constant
            return lambda values, dtype: constant(number, dtype)
        if name in FUNCTIONS:
            raise self.error(node, f"{name!r} is a function", f": call it as {name}(...)")
        raise self.unknown_name(node, name)

    def unknown_name(self, node: ast.AST, name: str, function: bool = False) -> ValueError:
        candidates = list(FUNCTIONS) if function else [*self.params, "x", *CONSTANTS]
        hint = _HINTS.get(name) or did_you_mean(name, candidates, "did you mean {!r}?")
        if function:
            known = f"functions: {', '.join(FUNCTIONS)}"
        else:
            known = (f"parameters: {', '.join(self.params) or 'none'}; inputs: x, or x1, x2, "
                     f"... for several columns; constants: {', '.join(CONSTANTS)}")
        kind = "function" if function else "name"
        hint = f"; {hint}" if hint else ""
        return self.error(node, f"unknown {kind} {name!r}", f"{hint} ({known})")

    def _use(self, name: str, node: ast.Name) -> None:
        if name not in self.params:
            single, numbered = name == "x", [n for n in self.inputs if n != "x"]
            if (single and numbered) or (not single and "x" in self.inputs):
                other = numbered[0] if single else "x"
                raise self.error(node, f"{name!r} used together with {other!r}",
                                 ": write x for a single input column, or x1, x2, ... "
                                 "(x1 = column 0) for several columns, not both")
            if name not in self.inputs:
                self.inputs.append(name)
        self.names.setdefault(name, self.span(node))

    def binary(self, node: ast.BinOp, depth: int) -> Evaluator:
        symbol = _BINARY.get(type(node.op))
        if symbol is None:
            symbol = "^" if isinstance(node.op, ast.BitXor) else _OPERATOR_TEXT[type(node.op)]
            # The tree does not locate operators: look between the two operands.
            start, end = self.span(node.left).end, self.span(node.right).start
            found = self.expression.find(symbol, start, end)
            where = Span(found, found + len(symbol)) if found >= 0 else self.span(node)
            if symbol == "^":
                raise located_error(self.expression, where, "'^' is not a power",
                                    ": use ** for powers (x**2); in Python '^' is xor")
            raise located_error(self.expression, where, f"operator {symbol!r} is not supported",
                                f" (allowed: {_ALLOWED})")
        operation = self.operations.binary[symbol]
        left = self.visit(node.left, depth + 1)
        right = self.visit(node.right, depth + 1)
        return lambda values, dtype: operation(left(values, dtype), right(values, dtype))

    def call(self, node: ast.Call, depth: int) -> Evaluator:
        if not isinstance(node.func, ast.Name):
            self.visit(node.func, depth + 1)  # a lambda, np.exp, ...: refused for what it is
            raise self.error(node.func, "only the functions by name can be called",
                             f" (functions: {', '.join(FUNCTIONS)})")
        name = node.func.id
        if name not in FUNCTIONS:
            if name in self.params or INPUT_NAME.match(name) or name in CONSTANTS:
                raise self.error(node.func, f"{name!r} is not a function",
                                 f"; write {name}*(...) to multiply")
            raise self.unknown_name(node.func, name, function=True)
        if node.keywords:
            raise self.error(node.keywords[0], "keyword arguments not allowed",
                             f": {name}() takes one positional argument")
        for argument in node.args:
            if isinstance(argument, ast.Starred):
                raise self.error(argument, "starred arguments not allowed")
        if len(node.args) != 1:
            raise self.error(node, f"{name}() takes 1 argument, {len(node.args)} given")
        function = self.operations.functions[name]
        argument = self.visit(node.args[0], depth + 1)
        return lambda values, dtype: function(argument(values, dtype))

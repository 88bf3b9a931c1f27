"""A reader for NIST StRD nonlinear-regression files (`.dat`), their models as formulas, and
NIST's accuracy measure.

A file states, in its header, the line ranges of its parts ("Starting Values (lines 41 to
42)", "Certified Values (lines 41 to 47)", "Data (lines 61 to 74)"); the parameter lines read
`b1 = start1 start2 certified standard_deviation`, followed by the residual sum of squares
and other certified statistics, and the data columns are `y x` (`y x1 x2` for Nelson). The
NIST files are public domain (U.S. government work); copies of all 27 StRD nonlinear problems
are in `nist_data/` (line ends and trailing blanks normalized, numbers as NIST wrote them):
`PROBLEMS`, the sixteen the LM tests fit, and `MORE_PROBLEMS`, the eleven others, which only
the benchmark (`benchmarks/lm_nist.py`) fits, as a check on problems the defaults were not
chosen on. `FORMULAS` writes each model as a `graphfit.layers.Formula` expression;
`NistProblem.response` is what it predicts (log y for Nelson, whose model is for log[y]).

Example:

    >>> problem = read(DATA / "Misra1a.dat")
    >>> problem.name, problem.parameter_names, problem.x.shape
    ('Misra1a', ['b1', 'b2'], (14, 1))
    >>> problem.expression
    'y = b1*(1-exp[-b2*x])'
    >>> round(log_relative_error(238.94, problem.certified[0]), 2)
    5.05
    >>> nelson = read(DATA / "Nelson.dat")
    >>> nelson.expression, nelson.x.shape
    ('log[y] = b1 - b2*x1 * exp[-b3*x2]', (128, 2))
    >>> bool(np.array_equal(nelson.response, np.log(nelson.y)))
    True
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re

import numpy as np

__all__ = ["NistProblem", "read", "log_relative_error", "DATA", "PROBLEMS", "MORE_PROBLEMS",
           "FORMULAS"]

DATA = pathlib.Path(__file__).with_name("nist_data")
PROBLEMS = ["Misra1a", "Misra1b", "Chwirut1", "Chwirut2", "Lanczos3", "Gauss1", "Gauss2",
            "DanWood", "Eckerle4", "Rat42", "Rat43", "Thurber", "MGH09", "MGH10", "BoxBOD",
            "Bennett5"]
# The other eleven StRD nonlinear problems: not fitted by the tests (their time), only by the
# benchmark, and never used to choose LevenbergMarquardt's defaults.
MORE_PROBLEMS = ["Misra1c", "Misra1d", "Lanczos1", "Lanczos2", "Gauss3", "Kirby2", "Hahn1",
                 "MGH17", "Roszman1", "ENSO", "Nelson"]

_LANCZOS = "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)"
_GAUSS = "b1*exp(-b2*x) + b3*exp(-(x-b4)**2/b5**2) + b6*exp(-(x-b7)**2/b8**2)"
_RATIONAL_CUBIC = "(b1 + b2*x + b3*x**2 + b4*x**3) / (1 + b5*x + b6*x**2 + b7*x**3)"
_ENSO = ("b1 + b2*cos(2*pi*x/12) + b3*sin(2*pi*x/12) + b5*cos(2*pi*x/b4) + b6*sin(2*pi*x/b4)"
         " + b8*cos(2*pi*x/b7) + b9*sin(2*pi*x/b7)")
# Each model as a `layers.Formula` expression (NIST's `exp[...]` written `exp(...)`).
FORMULAS = {
    "Misra1a": "b1*(1-exp(-b2*x))",
    "Misra1b": "b1 * (1-(1+b2*x/2)**(-2))",
    "Chwirut1": "exp(-b1*x)/(b2+b3*x)",
    "Chwirut2": "exp(-b1*x)/(b2+b3*x)",
    "Lanczos3": _LANCZOS,
    "Gauss1": _GAUSS,
    "Gauss2": _GAUSS,
    "DanWood": "b1*x**b2",
    "Eckerle4": "(b1/b2) * exp(-0.5*((x-b3)/b2)**2)",
    "Rat42": "b1 / (1+exp(b2-b3*x))",
    "Rat43": "b1 / ((1+exp(b2-b3*x))**(1/b4))",
    "Thurber": _RATIONAL_CUBIC,
    "MGH09": "b1*(x**2+x*b2) / (x**2+x*b3+b4)",
    "MGH10": "b1 * exp(b2/(x+b3))",
    "BoxBOD": "b1*(1-exp(-b2*x))",
    "Bennett5": "b1 * (b2+x)**(-1/b3)",
    "Misra1c": "b1 * (1-(1+2*b2*x)**(-0.5))",
    "Misra1d": "b1*b2*x*((1+b2*x)**(-1))",
    "Lanczos1": _LANCZOS,
    "Lanczos2": _LANCZOS,
    "Gauss3": _GAUSS,
    "Kirby2": "(b1 + b2*x + b3*x**2) / (1 + b4*x + b5*x**2)",
    "Hahn1": _RATIONAL_CUBIC,
    "MGH17": "b1 + b2*exp(-x*b4) + b3*exp(-x*b5)",
    "Roszman1": "b1 - b2*x - arctan(b3/(x-b4))/pi",
    "ENSO": _ENSO,
    "Nelson": "b1 - b2*x1 * exp(-b3*x2)",  # the model of log[y]: fit it to `response`
}

_RANGE = re.compile(r"(Starting Values|Certified Values|Data)\s*\(lines\s+(\d+)\s+to\s+(\d+)\)")
_PARAMETER = re.compile(r"^\s*(b\d+)\s*=\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
# The model's first line: "y = ..." or "log[y] = ..." (not "pi = 3.14...", Roszman1).
_MODEL_LINE = re.compile(r"^(y|log\[y\])\s*=")
_STATISTIC = re.compile(r"^\s*([A-Za-z][A-Za-z ]+?):\s+(\S+)\s*$")


@dataclasses.dataclass(frozen=True)
class NistProblem:
    """One NIST StRD nonlinear-regression problem.

    Attributes:
        name: the data set's name ("Misra1a").
        expression: the model as NIST writes it, without the error term
            ("y = b1*(1-exp[-b2*x])").
        parameter_names: ["b1", "b2", ...].
        starts: the two starting points, `starts[0]` "Start 1" and `starts[1]` "Start 2".
        certified: the certified parameter values.
        standard_deviations: their certified standard deviations.
        residual_sum_of_squares: the certified residual sum of squares.
        residual_standard_deviation: the certified residual standard deviation,
            sqrt(RSS / (n − p)).
        x: the predictors, shape (n, k): k = 1 but for Nelson (x1, x2). y: the response
            column as the file gives it, shape (n,).
    """

    name: str
    expression: str
    parameter_names: list[str]
    starts: tuple[np.ndarray, np.ndarray]
    certified: np.ndarray
    standard_deviations: np.ndarray
    residual_sum_of_squares: float
    x: np.ndarray
    y: np.ndarray
    residual_standard_deviation: float = math.nan

    @property
    def log_response(self) -> bool:
        """True where NIST writes the model for `log[y]` (Nelson)."""
        return self.expression.startswith("log[y]")

    @property
    def response(self) -> np.ndarray:
        """What the model predicts: `log(y)` where `log_response`, else `y`."""
        return np.log(self.y) if self.log_response else self.y


def read(path) -> NistProblem:
    """Parses a NIST StRD nonlinear-regression `.dat` file.

    Raises:
        ValueError: when a part the format requires is missing.
    """
    path = pathlib.Path(path)
    lines = path.read_text().splitlines()
    ranges = {}
    for line in lines[:20]:
        for match in _RANGE.finditer(line):
            ranges[match.group(1)] = (int(match.group(2)), int(match.group(3)))
    if set(ranges) != {"Starting Values", "Certified Values", "Data"}:
        raise ValueError(f"{path.name}: the header does not give the line ranges of the "
                         f"starting values, certified values and data. Found: {ranges}")
    first, last = ranges["Certified Values"]
    names, starts, certified, deviations, statistics = [], [], [], [], {}
    for line in lines[first - 1:last]:
        parameter = _PARAMETER.match(line)
        statistic = _STATISTIC.match(line)
        if parameter:
            names.append(parameter.group(1))
            values = [float(v) for v in parameter.groups()[1:]]
            starts.append(values[:2])
            certified.append(values[2])
            deviations.append(values[3])
        elif statistic:
            statistics[statistic.group(1).strip()] = float(statistic.group(2))
    if not names or "Residual Sum of Squares" not in statistics:
        raise ValueError(f"{path.name}: no parameters or no residual sum of squares in lines "
                         f"{first} to {last}.")
    first, last = ranges["Data"]
    data = np.array([[float(v) for v in line.split()] for line in lines[first - 1:last]
                     if line.strip()])
    starts = np.array(starts)
    return NistProblem(
        name=path.stem,
        expression=_expression(lines),
        parameter_names=names,
        starts=(starts[:, 0], starts[:, 1]),
        certified=np.array(certified),
        standard_deviations=np.array(deviations),
        residual_sum_of_squares=statistics["Residual Sum of Squares"],
        x=data[:, 1:],
        y=data[:, 0],
        residual_standard_deviation=statistics.get("Residual Standard Deviation", math.nan),
    )


def _expression(lines: list[str]) -> str:
    """The model text after "Model:": from the line starting with "y" (or "log[y]", Nelson)
    to the error term."""
    start = next(i for i, line in enumerate(lines) if line.startswith("Model:"))
    parts, inside = [], False
    for line in lines[start + 1:]:
        text = line.strip()
        if not inside and not _MODEL_LINE.match(text):
            continue
        inside = True
        parts.append(text)
        if text.endswith("+ e") or text.endswith("+  e"):
            break
    expression = " ".join(parts)
    expression = re.sub(r"\s*\+\s*e$", "", expression)
    return re.sub(r"\s+", " ", expression).replace("y  =", "y =").strip()


def log_relative_error(estimate: float, certified: float) -> float:
    """NIST's log relative error: about the number of correct significant digits.

    `-log10(|estimate - certified| / |certified|)` (the absolute error when `certified` is
    0), capped at 15 for an exact match.
    """
    error = abs(estimate - certified)
    if certified != 0:
        error /= abs(certified)
    return 15.0 if error == 0 else min(15.0, -math.log10(error))

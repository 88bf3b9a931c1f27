"""A reader for NIST StRD nonlinear-regression files (`.dat`), and NIST's accuracy measure.

A file states, in its header, the line ranges of its parts ("Starting Values (lines 41 to
42)", "Certified Values (lines 41 to 47)", "Data (lines 61 to 74)"); the parameter lines read
`b1 = start1 start2 certified standard_deviation`, followed by the residual sum of squares
and other certified statistics, and the data columns are `y x`. The NIST files are public
domain (U.S. government work); copies of the sixteen used by the tests are in `nist_data/`.

Example:

    >>> problem = read(DATA / "Misra1a.dat")
    >>> problem.name, problem.parameter_names, problem.x.shape
    ('Misra1a', ['b1', 'b2'], (14, 1))
    >>> problem.expression
    'y = b1*(1-exp[-b2*x])'
    >>> round(log_relative_error(238.94, problem.certified[0]), 2)
    5.05
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re

import numpy as np

__all__ = ["NistProblem", "read", "log_relative_error", "DATA", "PROBLEMS"]

DATA = pathlib.Path(__file__).with_name("nist_data")
PROBLEMS = ["Misra1a", "Misra1b", "Chwirut1", "Chwirut2", "Lanczos3", "Gauss1", "Gauss2",
            "DanWood", "Eckerle4", "Rat42", "Rat43", "Thurber", "MGH09", "MGH10", "BoxBOD",
            "Bennett5"]

_RANGE = re.compile(r"(Starting Values|Certified Values|Data)\s*\(lines\s+(\d+)\s+to\s+(\d+)\)")
_PARAMETER = re.compile(r"^\s*(b\d+)\s*=\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
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
        x: the predictor, shape (n, 1). y: the response, shape (n,).
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
    )


def _expression(lines: list[str]) -> str:
    """The model text after "Model:": from the line starting with "y" to the error term."""
    start = next(i for i, line in enumerate(lines) if line.startswith("Model:"))
    parts, inside = [], False
    for line in lines[start + 1:]:
        text = line.strip()
        if not inside and not text.startswith("y"):
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

"""Checks of `fit_many`'s and `fit_curve`'s arguments that NumPy or the formula parser would
otherwise answer with their own errors: each raises a ValueError naming the argument, the
data set where there is one, what was received and what to do."""

from __future__ import annotations

import ast
from typing import Mapping

import numpy as np

__all__ = ["p0_covers_formula", "same_data_sets", "per_data_set_starts", "starts_within_bounds",
           "finite_data", "data_set_index", "NonFiniteData", "not_input_names",
           "finite_examples"]

_CONSTANTS = ("pi",)


def p0_covers_formula(formula, p0) -> None:
    """A formula string's names that are neither in `p0`, nor inputs (x, x1, ...), nor
    constants: the parser would blame the formula; the likely slip is p0's."""
    if not isinstance(formula, str) or not isinstance(p0, Mapping):
        return
    from graphfit.layers import formula_parser

    try:
        tree = ast.parse(" ".join(formula.splitlines()).strip(), mode="eval")
    except SyntaxError:
        return  # the parser's located message says more
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    names = [node.id for node in ast.walk(tree)
             if isinstance(node, ast.Name) and id(node) not in called]
    missing = sorted({name for name in names if name not in p0 and name not in _CONSTANTS
                      and not formula_parser.INPUT_NAME.match(name)})
    if missing:
        raise ValueError(
            f"p0 lacks a start for {', '.join(map(repr, missing))}, used in the formula "
            f"{formula!r}: add it to p0 (or, for a typo in the formula, fix the name). "
            f"Received: p0 with keys {[str(key) for key in p0]}")


def same_data_sets(x, y, sigma) -> None:
    """With `y` a list of data sets, `x` and `sigma` given as lists need one array per data
    set, each as long as its y."""
    if not isinstance(y, (list, tuple)):
        return
    for what, values in (("x", x), ("sigma", sigma)):
        if not isinstance(values, (list, tuple)) or all(np.ndim(v) == 0 for v in values):
            continue  # an array, or a list of numbers: shared by every data set
        if len(values) != len(y):
            raise ValueError(
                f"{what} as a list needs one array per data set of y ({len(y)} data set(s)). "
                f"Received: {len(values)} arrays")
        for index, (value, row) in enumerate(zip(values, y)):
            want, got = np.shape(row)[:1], np.shape(value)[:1]
            if want != got:
                raise ValueError(
                    f"{what}: data set {index} has {want[0] if want else 0} points in y; "
                    f"its {what} must have as many. Received: {what}[{index}] of shape "
                    f"{np.shape(value)}")


def per_data_set_starts(p0, count: int) -> None:
    """A `p0` value (or a mapping's `value`) given per data set needs one per data set."""
    if not isinstance(p0, Mapping):
        return
    for name, given in p0.items():
        value = given.get("value") if isinstance(given, Mapping) else given
        size = np.size(value)
        if value is not None and size != 1 and np.shape(value) != (count,):
            raise ValueError(
                f"p0[{str(name)!r}]: a start given per data set needs one value per data set "
                f"({count}); or give one number for all. Received: {size} values of shape "
                f"{np.shape(value)}")


def starts_within_bounds(specs, p0, count: int) -> None:
    """Each start inside its parameter's bounds, naming the data set of a start given per
    data set: a varying parameter's strictly inside (its transform reaches a bound only in
    the limit), a fixed one's within them (it keeps its value, which a bound would contradict).
    `p0` is a dict of numbers or `[N]` arrays, or an array `(p,)` / `(N, p)` in the order of
    `specs`; a shape that fits neither is left to the fit's own message."""
    if isinstance(p0, Mapping):
        starts = {name: p0.get(name) for name in (spec.name for spec in specs)}
    else:
        array = np.asarray(p0, np.float64) if p0 is not None else None
        if array is None or array.shape not in ((len(specs),), (count, len(specs))):
            return
        starts = {spec.name: array[..., i] for i, spec in enumerate(specs)}
    for spec in specs:
        given = starts.get(spec.name)
        if given is None or spec.min == -np.inf and spec.max == np.inf:
            continue
        values = np.asarray(given, np.float64).ravel()
        inside = ((values > spec.min) & (values < spec.max) if spec.vary
                  else (values >= spec.min) & (values <= spec.max))
        outside = np.flatnonzero(~inside & ~np.isnan(values))
        if not outside.size:
            continue
        first = int(outside[0])
        where = (f" in data set {first} ({outside.size} of {values.size} data sets)"
                 if values.size > 1 else "")
        bounds = f"[{spec.min:g}, {spec.max:g}]"
        if spec.vary:
            problem = (f"the start {values[first]:g}{where} must lie strictly inside its bounds "
                       f"{bounds} (the transformed parameter reaches a bound only in the limit)")
        else:
            problem = (f"it is fixed (vary: false) at {values[first]:g}{where}, outside its "
                       f"own bounds {bounds}: a fixed parameter keeps its value, so the value "
                       f"must lie within min and max. Move it inside, or change or drop the "
                       f"bounds")
        shown = values.tolist() if values.size <= 10 else f"{values.size} values"
        raise ValueError(f"p0[{spec.name!r}]: {problem}. Received: p0[{spec.name!r}] starts "
                         f"{shown}")


class NonFiniteData(ValueError):
    """`finite_data`'s error: NaN or inf in the data. `where` names the data sets (or, for
    one curve, the points) and what holds them; `str()` adds what to do with `mask=`
    (a recipe, which has no mask, says what to do in its own words)."""

    def __init__(self, where: str, todo: str):
        super().__init__(f"NaN or inf in {where}. {todo[0].upper()}{todo[1:]}.")
        self.where = where


def finite_data(x: np.ndarray, y: np.ndarray, weights: np.ndarray, masked: bool,
                single: bool = False) -> None:
    """NaN or inf in the points that count (all of them without a mask) would end those data
    sets' fits at their starts, as "not finite": refused (`NonFiniteData`), naming the data
    sets (`single`: `fit_curve`'s one curve, naming the points)."""
    if single:
        _finite_points(x[0], y[0], weights[0], masked)
    bad = {}
    for what, values in (("y", y), ("x", x), ("sigma", weights)):
        # sigma arrives as its weights: NaN for a NaN σ, 0 (not refused) for an infinite one
        bad_points = np.isnan(values) if what == "sigma" else ~np.isfinite(values)
        rows = bad_points.reshape(len(values), -1).any(axis=1)
        for index in np.flatnonzero(rows):
            bad.setdefault(int(index), []).append(what)
    if not bad:
        return
    listed = [f"{index} ({', '.join(whats)})" for index, whats in list(bad.items())[:10]]
    more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
    raise NonFiniteData(f"the {'unmasked ' if masked else ''}points of data set(s) "
                        f"{', '.join(listed)}{more}: their fits could not start",
                        _todo(masked))


def _todo(masked: bool) -> str:
    return ("set the mask False at those points too" if masked else
            "pass mask=np.isfinite(y) (for NaN padding or missing values: those points then "
            "weigh zero), or drop the points")


def _finite_points(x, y, weights, masked: bool) -> None:
    """`finite_data` for one curve: x `[m, k]`, y and the weights `[m]`."""
    parts = _bad_points([("y", ~np.isfinite(y)), ("x", ~np.all(np.isfinite(x), -1)),
                         ("sigma", np.isnan(weights))], "point")
    if parts:
        raise NonFiniteData(f"{'; '.join(parts)}{' (unmasked)' if masked else ''}: the fit "
                            f"could not start", _todo(masked))


def _bad_points(checks, unit: str) -> list[str]:
    """`"<what> at <unit>(s) [i, ...]"` for each `(what, bad [m] bool)` with a bad entry."""
    parts = []
    for what, bad_points in checks:
        points = np.flatnonzero(bad_points)
        if points.size:
            more = f" and {points.size - 10} more" if points.size > 10 else ""
            parts.append(f"{what} at {unit}(s) {points[:10].tolist()}{more}")
    return parts


def finite_examples(named, todo: str) -> None:
    """`NonFiniteData` naming the examples (rows) of each `(what, array or None)` that hold
    NaN or inf, with `todo` saying what to do: `fit_report`'s check of a fitted model's
    data, in `finite_data`'s words."""
    checks = []
    for what, values in named:
        if values is None:
            continue
        values = np.asarray(values)
        if values.dtype.kind not in "fc" or values.ndim == 0:
            continue  # not numbers (text inputs), or a scalar: nothing per example
        checks.append((what, ~np.all(np.isfinite(values.reshape(len(values), -1)), -1)))
    parts = _bad_points(checks, "example")
    if parts:
        raise NonFiniteData("; ".join(parts), todo)


def not_input_names(names) -> None:
    """Parameter names that are input names (x, x1, x2, ...) would shadow the data."""
    from graphfit.layers import formula_parser

    inputs = [str(name) for name in names if formula_parser.INPUT_NAME.match(str(name))]
    if inputs:
        raise ValueError(
            f"p0: {', '.join(map(repr, inputs))} cannot name a parameter: x, x1, x2, ... are "
            f"the formula's inputs (the columns of x). Rename the parameter (e.g. x0, xc). "
            f"Received: p0 with keys {[str(name) for name in names]}")


def data_set_index(index, count: int) -> int:
    """`index` as a data set's index, -count <= index < count."""
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise ValueError(f"index must be an int, a data set's row (0 to {count - 1}). "
                         f"Received: {index!r}")
    if not -count <= index < count:
        raise ValueError(f"index {int(index)} is out of range: there are {count} data sets "
                         f"(0 to {count - 1}, or -{count} to -1 from the end)")
    return int(index)

"""A `fit_many:` recipe: one formula fitted to many data sets at once (`fitting.fit_many`).

A different kind of recipe from a trained model's: it has no model, loss, optimizer or
training, only the formula, its starts, the data sets and the fit's settings.

    name: misra1a_many
    fit_many:
      formula: b1*(1-exp(-b2*x))
      params: {b1: 500.0, b2: 1.0e-4}       # the starts, the same for every data set
      # or bounded / fixed, as a Formula's: {b1: {value: 500.0, min: 0}, b2: 1.0e-4}
      data:
        path: curves.csv                     # long form: one row per point
        curve: curve                         # the column naming each data set
        x: x
        y: y

The data file is a CSV in long form (a curve-id column; the points of each curve in file
order; curves of different lengths are padded and masked, each with its own dof) or an .npz
archive (`x` `(m,)`, `(m, k)`, `(N, m)` or `(N, m, k)`,
`y` `(N, m)`, optional `sigma` and `curve` arrays). `graphfit train` writes one row per data
set to `fits.csv` in the run directory (`graphfit.recipes.running.many_fits_run`).
"""

from __future__ import annotations

import os

from graphfit import datasets
from graphfit.recipes.reading.problems import short_repr
from graphfit.recipes.reading.schema import (
    INVALID,
    Boolean,
    Checker,
    Custom,
    Either,
    Field,
    Integer,
    ListOf,
    Nullable,
    Number,
    Section,
    String,
    shown,
)

__all__ = ["MANY_FITS_RECIPE", "check_many_fits_recipe", "varying_parameters"]

_DATA = Section({
    "path": Field(String(), doc="the data file: .csv (long form, a row per point) or .npz"),
    "curve": Field(Nullable(String()), None,
                   "CSV: the column naming each data set (required); npz: an optional array "
                   "of ids, one per data set"),
    "x": Field(Either(String(), ListOf(String(), min_length=1)), "x",
               "the input column or array (a list of CSV columns for x1, x2, ...)"),
    "y": Field(String(), "y", "the measured values' column or array"),
    "sigma": Field(Nullable(String()), None,
                   "a column or array of the standard deviations of y (residuals weighted "
                   "by 1/sigma, as curve_fit's sigma)"),
    "delimiter": Field(String(), ",", "CSV: the column separator"),
})


def _params(value, path, checker):
    if not isinstance(value, dict) or not value:
        checker.report(path, f"must be a mapping of parameter names to starting values, e.g. "
                             f"{{b1: 500.0, b2: 1.0e-4}}, got {shown(value)}")
        return INVALID
    resolved = {}
    for name, start in value.items():
        if not isinstance(name, str) or not name.isidentifier():
            checker.report(path + (name,), f"a parameter name must be an identifier, got "
                                           f"{shown(name)}")
            resolved = INVALID
            continue
        if isinstance(start, dict):  # {value, min, max, vary}, as a Formula's params
            number = _spec(name, start, path + (name,), checker)
        else:
            number = Number().check(start, path + (name,), checker)
        if number is INVALID:
            resolved = INVALID
        elif resolved is not INVALID:
            resolved[name] = number
    return resolved


def _spec(name, given, path, checker):
    """A parameter given as `{value, min, max, vary}` (one start for every data set),
    checked as `layers.Formula` checks it."""
    from graphfit.layers.formula_parameters import ParameterSpec

    if isinstance(given.get("value"), (list, tuple)):
        checker.report(path + ("value",), "fit_many takes one start per parameter for every "
                                          "data set, a number, got a list")
        return INVALID
    try:
        ParameterSpec.of(name, given)
    except ValueError as error:
        checker.report(path, str(error))
        return INVALID
    return dict(given)


_FIT_MANY = Section({
    "formula": Field(String(), doc="the model, e.g. b1*(1-exp(-b2*x)) (the syntax of "
                                   "layers.Formula: x or x1, x2, ... and the parameters)"),
    "params": Field(Custom(_params, "a mapping of parameter names to starts"),
                    doc="{name: start} or {name: {value, min, max, vary}}: the parameters, "
                        "their starts for every data set, bounds and fixed ones"),
    "data": Field(_DATA, doc="the data sets: path, curve, x, y, sigma, delimiter"),
    "absolute_sigma": Field(Boolean(), False, "read sigma as known errors (as curve_fit's "
                                              "absolute_sigma)"),
    "max_steps": Field(Integer(min=1), 1000, "LM steps at most, per data set"),
    "attempts_per_step": Field(Integer(min=1), 10, "damping increases tried per step"),
    "initial_damping": Field(Number(min=0.0, min_open=True), 1e-3, "the starting damping"),
    "ftol": Field(Number(min=0.0, max=1.0, max_open=True), 1e-15, "relative RSS change test"),
    "xtol": Field(Number(min=0.0, max=1.0, max_open=True), 1e-10, "relative step test"),
    "gtol": Field(Number(min=0.0, max=1.0, max_open=True), 0.0, "gradient test (0: off)"),
    "geodesic_acceleration": Field(Boolean(), True, "bend each trial step"),
    "jit_compile": Field(Either(String(("auto",)), Boolean()), "auto",
                         "one XLA program (auto: from 50 000 data values)"),
    "loop": Field(String(("auto", "python", "traced")), "auto",
                  "python: NumPy loop, traced: one traced loop (auto: python for one data "
                  "set)"),
})

MANY_FITS_RECIPE = Section({
    "name": Field(Nullable(String()), None, "the run folder name (default: the file name)"),
    "fit_many": Field(_FIT_MANY, doc="the formula, its starts, the data sets, the settings"),
    "run_dir": Field(Nullable(String()), None, "where the run is written (default "
                                               "runs/<name>/<timestamp>); never overwritten"),
})


def check_many_fits_recipe(checker: Checker, data: dict, default_name: str) -> dict:
    """Checks a `fit_many:` recipe; returns it resolved (problems go to `checker`)."""
    for key in data:
        if key not in MANY_FITS_RECIPE.fields:
            checker.report((key,), f"a fit_many recipe has only the keys "
                                   f"{', '.join(MANY_FITS_RECIPE.fields)}; {short_repr(key)} "
                                   f"belongs to a trained model's recipe: remove it")
    known = {k: v for k, v in data.items() if k in MANY_FITS_RECIPE.fields}
    resolved = MANY_FITS_RECIPE.check(known, (), checker)
    if resolved.get("name") is None:
        resolved["name"] = default_name
    section = resolved.get("fit_many")
    if isinstance(section, dict):
        _check_formula(section, checker)
        if isinstance(section.get("data"), dict):
            _check_file(section["data"], ("fit_many", "data"), checker)
    return resolved


def varying_parameters(params: dict) -> list[str]:
    """The names of the checked `params` that vary (not `vary: false`)."""
    return [name for name, start in params.items()
            if not (isinstance(start, dict) and start.get("vary", True) is False)]


def _check_formula(section: dict, checker: Checker) -> None:
    """The formula parses with the parameters named, and every parameter is used."""
    from graphfit.layers import formula_parser

    expression, params = section["formula"], section["params"]
    if expression is INVALID or params is INVALID:
        return
    try:
        parsed = formula_parser.parse(" ".join(expression.splitlines()), tuple(params))
    except ValueError as error:
        checker.report(("fit_many", "formula"), str(error))
        return
    for name in params:
        if name not in parsed.names:
            checker.report(("fit_many", "params", name), f"the parameter {name!r} is not used "
                                                         f"in the formula {expression!r}: "
                                                         f"remove it")
    if not varying_parameters(params):
        checker.report(("fit_many", "params"), "every parameter is fixed (vary: false): "
                                               "nothing to fit. Let at least one vary")
    columns = max([1] + [int(n[1:]) for n in parsed.inputs if n != "x"])
    data = section.get("data")
    if isinstance(data, dict) and isinstance(data.get("x"), list) \
            and len(data["x"]) != columns:
        checker.report(("fit_many", "data", "x"),
                       f"names {len(data['x'])} column(s) but the formula reads {columns} "
                       f"(x1 ... x{columns}); name one column per input")


def _check_file(data: dict, path: tuple, checker: Checker) -> None:
    """The file exists (path resolved against the recipe's folder) and holds what is named."""
    from graphfit.recipes.reading.data_schema import base_dir, check_names

    if data.get("path") is INVALID:
        return
    full = os.path.abspath(os.path.join(base_dir(path + ("path",), checker),
                                        os.path.expanduser(data["path"])))
    data["path"] = full
    kind = "npz" if full.endswith(".npz") else "csv" if full.endswith((".csv", ".csv.gz")) \
        else None
    if kind is None:
        checker.report(path + ("path",), f"must be a .csv (long form: a row per point and a "
                                         f"curve column) or .npz file, got {short_repr(full)}")
        return
    if kind == "csv" and data.get("curve") is None:
        checker.report(path, "missing required key 'curve' for a CSV file: the column naming "
                             "each data set (the CSV is in long form, one row per point)")
    if not getattr(checker, "data_files", True):
        return
    if not os.path.isfile(full):
        checker.report(path + ("path",), f"file not found: {full} (a relative path is read "
                                         f"from the recipe's folder)")
        return
    try:
        available = (datasets.csv_columns(full, delimiter=data["delimiter"]) if kind == "csv"
                     else datasets.npz_keys(full))
    except (OSError, ValueError) as error:
        checker.report(path + ("path",), f"cannot read {full}: {error}")
        return
    check_names(data, path, checker, available, ("curve", "x", "y", "sigma"),
                "column" if kind == "csv" else "array")

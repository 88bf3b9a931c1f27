"""Running a `fit_many:` recipe: its data sets loaded, fitted at once by `fitting.fit_many`,
one row per data set written to `fits.csv` in a new run directory, with `summary.json`.

It shares nothing with the training loop: the command line sends a recipe with a `fit_many:`
section here (`is_many_fits`) instead of to `training_run.train`.

Example:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from graphfit.recipes import recipe_from_text
    >>> from graphfit.recipes.running import many_fits_run
    >>> folder = tempfile.mkdtemp()
    >>> x = np.linspace(0.0, 4.0, 9)
    >>> np.savez(os.path.join(folder, "curves.npz"), x=x,
    ...          y=np.stack([2.0 * np.exp(-0.5 * x), 3.0 * np.exp(-1.5 * x)]))
    >>> recipe = recipe_from_text(
    ...     "fit_many:\\n  formula: a*exp(-k*x)\\n  params: {a: 1.0, k: 1.0}\\n"
    ...     "  data: {path: curves.npz}\\n", "decay.yaml", base_dir=folder, default_name="decay")
    >>> run = many_fits_run.fit_recipe(recipe, run_dir=os.path.join(folder, "run"))
    >>> run.fits.params.round(6).tolist(), run.curves.ids
    ([[2.0, 0.5], [3.0, 1.5]], ['0', '1'])
    >>> print(open(os.path.join(run.run_dir, "fits.csv")).read().splitlines()[0])
    curve,a,a_stderr,k,k_stderr,rss,converged,reason,steps,evaluations,jacobian_evaluations,points,dof,chi_square,reduced_chi_square,residual_std,r_squared,aic,bic,strong_correlations,at_bound
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import gzip
import json
import math
import os
import time

import numpy as np

from graphfit.recipes.reading.many_fits_schema import varying_parameters
from graphfit.recipes.reading.outline import is_many_fits
from graphfit.recipes.reading.problems import Position, Problem, RecipeError
from graphfit.recipes.reading.recipe import Recipe
from graphfit.recipes.running import many_fits_curves, run_directory

__all__ = ["Curves", "ManyFitsRun", "load_curves", "fit_recipe", "is_many_fits",
           "summary_lines", "saved_summary_lines", "TABLE_FILE", "SUMMARY_FILE", "CURVES_FILE"]

TABLE_FILE = "fits.csv"
SUMMARY_FILE = "summary.json"
CURVES_FILE = "fitted_curve.json"  # the first data sets with their fits (`many_fits_curves`)
_DATA = ("fit_many", "data")
# The fit report's statistics per data set (`ManyFits.statistics`), columns of fits.csv.
_STATISTICS = ("dof", "chi_square", "reduced_chi_square", "residual_std", "r_squared", "aic",
               "bic")


@dataclasses.dataclass
class Curves:
    """The data sets of a `fit_many:` recipe: ids `[N]` (text), x `[N or 1, m(, k)]`,
    y `[N, m]`, sigma `[N, m]` or None, and for data sets of different lengths (a CSV) the
    mask `[N, m]` of their points (False on the padding up to the longest)."""

    ids: list
    x: np.ndarray
    y: np.ndarray
    sigma: np.ndarray | None
    mask: np.ndarray | None = None

    @property
    def points(self) -> str:
        """The points per data set, as text: "14", or "9 to 14" for different lengths."""
        if self.mask is None:
            return str(self.y.shape[1])
        counts = np.count_nonzero(self.mask, axis=1)
        low, high = int(counts.min()), int(counts.max())
        return str(high) if low == high else f"{low} to {high}"


@dataclasses.dataclass
class ManyFitsRun:
    """What a `fit_many:` run produced: its directory, data sets, fits and fitting time."""

    run_dir: str
    curves: Curves
    fits: object  # fitting.ManyFits
    seconds: float


class _DataProblem(ValueError):
    """Bad data, at the `fit_many.data` key named."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def _problem(recipe: Recipe, key: str, message: str) -> RecipeError:
    path = _DATA + ((key,) if key else ())
    return RecipeError([Problem(path, message, recipe.position(path))])


def load_curves(recipe: Recipe) -> Curves:
    """Reads the recipe's data sets, checked (equal lengths, numbers).

    Raises:
        RecipeError: at the `fit_many.data` key to fix.
    """
    data = recipe.config["fit_many"]["data"]
    loader = _load_npz if data["path"].endswith(".npz") else _load_csv
    try:
        curves = loader(data)
    except _DataProblem as error:
        raise _problem(recipe, error.key, str(error)) from None
    except (OSError, ValueError) as error:
        raise _problem(recipe, "path", f"cannot read {data['path']}: {error}") from None
    _check_lengths(recipe, curves)
    return curves


def _check_lengths(recipe: Recipe, curves: Curves) -> None:
    """Every data set has at least as many points as varying parameters, or the first that
    has not is named by its curve id."""
    varying = varying_parameters(recipe.config["fit_many"]["params"])
    counts = (np.count_nonzero(curves.mask, axis=1) if curves.mask is not None
              else np.full(len(curves.ids), curves.y.shape[1]))
    short = np.flatnonzero(counts < len(varying))
    if short.size:
        first = int(short[0])
        more = f" ({short.size - 1} more data set(s) too)" if short.size > 1 else ""
        raise _problem(recipe, "", (
            f"curve {curves.ids[first]!r} has {int(counts[first])} point(s), fewer than the "
            f"{len(varying)} varying parameters {varying}{more}: a fit needs at least as many "
            f"points as unknowns. Give it more points, or delete its rows"))


def _load_npz(data: dict) -> Curves:
    with np.load(data["path"], allow_pickle=False) as archive:
        arrays = {key: archive[data[key]] for key in ("x", "y", "sigma", "curve")
                  if data[key] is not None}
    if isinstance(data["x"], list):
        raise _DataProblem("x", "an .npz file holds x as one array: name it (x: x), with shape "
                              "(m, k) or (N, m, k) for several input columns")
    y = arrays["y"]
    if y.ndim != 2:
        raise _DataProblem("y", f"the array {data['y']!r} must have shape (data sets, points); "
                              f"it has shape {y.shape}")
    ids = arrays.get("curve")
    if ids is not None and ids.shape != (len(y),):
        raise _DataProblem("curve", f"the array {data['curve']!r} must hold one id per data "
                                  f"set, shape ({len(y)},); it has shape {ids.shape}")
    ids = [str(i) for i in (range(len(y)) if ids is None else ids.tolist())]
    x = np.asarray(arrays["x"], np.float64)
    sigma = None if "sigma" not in arrays else np.asarray(arrays["sigma"], np.float64)
    curves = Curves(ids, x, np.asarray(y, np.float64), sigma)
    if sigma is None or _broadcasts(sigma.shape, curves.y.shape):
        _check_arrays(curves, data)  # else the fit names the shapes that do not match
    return curves


def _broadcasts(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _load_csv(data: dict) -> Curves:
    columns = [data["curve"]] + (data["x"] if isinstance(data["x"], list) else [data["x"]])
    columns += [data["y"]] + ([data["sigma"]] if data["sigma"] else [])
    opener = gzip.open if data["path"].endswith(".gz") else open
    rows = collections.OrderedDict()
    with opener(data["path"], "rt", newline="", encoding="utf-8-sig") as text:
        reader = csv.reader(text, delimiter=data["delimiter"])
        header = [name.strip() for name in next(reader)]
        wanted = [header.index(name) for name in columns]
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise _DataProblem("path", f"{data['path']}, line {reader.line_num}: expected "
                                         f"{len(header)} fields as in the header, found "
                                         f"{len(row)}")
            curve = row[wanted[0]].strip()
            values = [_number(row[i], reader.line_num, header[i]) for i in wanted[1:]]
            _check_point(values, columns[1:], data, f"{data['path']}, line {reader.line_num}, "
                                                    f"curve {curve!r}")
            rows.setdefault(curve, []).append(values)
    if not rows:
        raise _DataProblem("path", f"{data['path']} holds no rows of data")
    # Data sets of different lengths are padded to the longest (repeating their last point)
    # and masked: the padding weighs zero in the fit.
    lengths = np.array([len(points) for points in rows.values()])
    longest = int(lengths.max())
    table = np.array([points + points[-1:] * (longest - len(points))
                      for points in rows.values()], np.float64)  # [N, m, columns]
    mask = None if np.all(lengths == longest) else np.arange(longest)[None] < lengths[:, None]
    k = len(columns) - 2 - (1 if data["sigma"] else 0)
    x = table[:, :, :k]
    sigma = table[:, :, -1] if data["sigma"] else None
    return Curves(list(rows), x[..., 0] if k == 1 else x, table[:, :, k], sigma, mask)


def _check_point(values: list, names: list, data: dict, where: str) -> None:
    """One point's values finite, and its sigma positive: a bad row is named (file, line,
    curve) where the data are read, by `graphfit validate` as by `graphfit train`."""
    for value, name in zip(values, names):
        if not math.isfinite(value):
            raise _DataProblem("path", f"{where}: {name} is {value!r}, not a finite number. "
                                       f"Delete the row (in a long-form CSV each curve may "
                                       f"have its own number of points: shorter curves are "
                                       f"padded and masked), or fix the value")
    if data["sigma"] and not values[-1] > 0:
        raise _DataProblem("sigma", f"{where}: sigma ({data['sigma']}) is {values[-1]!r}; "
                                    f"sigma is the standard deviation of y and must be "
                                    f"positive (the residual is divided by it). Fix the value, "
                                    f"or delete the row")


def _check_arrays(curves: Curves, data: dict) -> None:
    """An .npz's values finite and its sigma positive, naming the data set and the point."""
    shape = curves.y.shape
    sigma = None if curves.sigma is None else np.broadcast_to(curves.sigma, shape)
    for name, values in (("y", curves.y), ("x", curves.x), ("sigma", sigma)):
        bad = None if values is None else ~np.isfinite(values)
        if bad is None or not np.any(bad):
            continue
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = (f"at point {index[1]} of data set {index[0]} (curve "
                 f"{curves.ids[index[0]]!r})" if name != "x" else f"at index {list(index)}")
        raise _DataProblem(name, (
            f"{data['path']}: {name} is {float(values[index])!r}, not finite, {where} "
            f"({np.count_nonzero(bad)} such value(s)). An .npz's y (N, m) cannot leave points "
            f"out: fix the values, or write the curves to a long-form CSV (curve, x, y "
            f"columns) and delete those rows"))
    if sigma is not None and np.any(~(sigma > 0)):
        curve, point = (int(i) for i in np.argwhere(~(sigma > 0))[0])
        raise _DataProblem("sigma", (
            f"{data['path']}: sigma is {float(sigma[curve, point])!r} at point {point} of "
            f"data set {curve} (curve {curves.ids[curve]!r}); sigma is the standard "
            f"deviation of y and must be positive (the residual is divided by it)"))


def _number(cell: str, line: int, column: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise _DataProblem("path", f"line {line}, column {column!r}: {cell!r} is not a "
                                 f"number") from None


def _fit(recipe: Recipe, curves: Curves):
    from graphfit import fitting
    from graphfit.fitting.arguments import NonFiniteData

    section = recipe.config["fit_many"]
    settings = {key: section[key] for key in (
        "absolute_sigma", "max_steps", "attempts_per_step", "initial_damping", "ftol", "xtol",
        "gtol", "geodesic_acceleration", "jit_compile", "loop")}
    try:
        return fitting.fit_many(section["formula"], curves.x, curves.y, p0=section["params"],
                                sigma=curves.sigma, mask=curves.mask, **settings)
    except NonFiniteData as error:  # its advice (mask=) is for Python; a recipe has no mask
        raise _problem(recipe, "", (
            f"NaN or inf in {error.where}. Delete those rows from the data file (in a long-form "
            f"CSV each curve may have its own number of points: shorter curves are padded "
            f"and masked), or fix the values; an .npz's y (N, m) cannot leave points out: "
            f"write the curves to a long-form CSV (curve, x, y columns) instead")) from None
    except ValueError as error:  # shapes of x, sigma or y against each other and the formula
        raise _problem(recipe, "", str(error)) from None


def fit_recipe(recipe: Recipe, run_dir: str | None = None, runs_root: str = "runs"
               ) -> ManyFitsRun:
    """Fits a `fit_many:` recipe into a new run directory (as `training_run.train` does for a
    model): recipe.yaml, versions.json, `fits.csv` (one row per data set: its id, each
    parameter and its standard error, RSS (unweighted; the chi_square column is weighted),
    converged, reason, steps, function and Jacobian evaluations, points, the fit
    statistics, parameters at a bound), `summary.json`, and `fitted_curve.json` (the first
    data sets and their fits, which `graphfit plot` draws; none for a formula of several
    input columns).

    Raises:
        RecipeError: for bad data, before the run directory is created.
    """
    curves = load_curves(recipe)
    start = time.perf_counter()
    fits = _fit(recipe, curves)
    seconds = time.perf_counter() - start
    config = recipe.config
    try:
        lock = run_directory.claim_new_run(config["name"], run_dir or config["run_dir"],
                                           runs_root)
    except (ValueError, OSError) as error:
        where = (Position(f"--run-dir {run_dir}", 0, 0) if run_dir
                 else recipe.position(("run_dir",)))
        raise RecipeError([Problem(() if run_dir else ("run_dir",), str(error), where)]) \
            from None
    with lock:
        run = lock.run
        run_directory.write_yaml(os.path.join(run, "recipe.yaml"), config)
        run_directory.write_yaml(os.path.join(run, "overrides.yaml"), list(recipe.overrides))
        run_directory.write_json(os.path.join(run, "versions.json"), run_directory.versions())
        _write_table(os.path.join(run, TABLE_FILE), curves.ids, fits)
        run_directory.write_json(os.path.join(run, SUMMARY_FILE), _summary(curves, fits,
                                                                           seconds))
        shown = many_fits_curves.sample_curves(config["fit_many"]["formula"], curves.ids,
                                               curves.x, curves.y, curves.mask, fits)
        if shown is not None:  # the first curves and their fits, for `graphfit plot`
            run_directory.write_json(os.path.join(run, CURVES_FILE), shown)
    return ManyFitsRun(run, curves, fits, seconds)


def _write_table(path: str, ids: list, fits) -> None:
    names = list(fits.names)
    header = ["curve"] + [f"{n}{suffix}" for n in names for suffix in ("", "_stderr")]
    header += ["rss", "converged", "reason", "steps", "evaluations", "jacobian_evaluations",
               "points", *_STATISTICS, "strong_correlations", "at_bound"]
    statistics = fits.statistics()
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for i, curve in enumerate(ids):
            values = [repr(float(v)) for pair in zip(fits.params[i], fits.standard_errors[i])
                      for v in pair]
            report = [int(statistics["dof"][i])] + [repr(float(statistics[key][i]))
                                                    for key in _STATISTICS[1:]]
            strong = " ".join(f"{a}~{b}:{r:+.4f}" for a, b, r in fits.strong_correlations(i))
            bound = " ".join(f"{n}:{'min' if s == 'at lower bound' else 'max'}"
                             for n, s in zip(names, fits.status[i]) if s.startswith("at "))
            writer.writerow([curve, *values, repr(float(fits.rss[i])),
                             bool(fits.converged[i]), fits.reasons[i], int(fits.steps[i]),
                             int(fits.evaluations[i]), int(fits.jacobian_evaluations[i]),
                             int(fits.points[i]), *report, strong, bound])


def _finite(value: float):
    return float(value) if math.isfinite(value) else None


def _summary(curves: Curves, fits, seconds: float) -> dict:
    converged = fits.converged
    medians = {}
    for j, name in enumerate(fits.names):
        values = fits.params[converged, j]
        errors = fits.standard_errors[converged, j]
        errors = errors[np.isfinite(errors)]  # none where fixed or on a bound
        medians[name] = {"median": _finite(np.median(values)) if len(values) else None,
                         "p5": _finite(np.percentile(values, 5)) if len(values) else None,
                         "p95": _finite(np.percentile(values, 95)) if len(values) else None,
                         "median_stderr": _finite(np.median(errors)) if len(errors) else None}
    return {"curves": len(curves.ids), "points": _range(fits.points),
            "parameters": list(fits.names), "converged": int(np.sum(converged)),
            "reasons": dict(collections.Counter(fits.reasons)), "seconds": seconds,
            "not_converged": [curves.ids[i] for i in np.flatnonzero(~converged)],
            "converged_parameters": medians, **_report_summary(fits)}


def _report_summary(fits) -> dict:
    """The fit reports' statistics over the converged data sets (median, 5% and 95%), and how
    many data sets flag each strongly correlated pair."""
    converged = fits.converged
    statistics = fits.statistics()
    table = {}
    for key in _STATISTICS[1:]:
        values = statistics[key][converged]
        values = values[np.isfinite(values)]
        table[key] = {name: _finite(np.percentile(values, q)) if len(values) else None
                      for name, q in (("median", 50), ("p5", 5), ("p95", 95))}
    pairs = collections.Counter(f"{a}~{b}" for i in np.flatnonzero(converged)
                                for a, b, _ in fits.strong_correlations(i))
    at_bound = {name: int(np.sum(fits.at_bound[:, j])) for j, name in enumerate(fits.names)
                if np.any(fits.at_bound[:, j])}
    return {"dof": _range(fits.dof), "fit_statistics": table,
            "strong_correlations": dict(pairs), "at_bound": at_bound}


def _range(values: np.ndarray):
    """One number when every data set has the same, else `{"min": ..., "max": ...}`."""
    low, high = int(np.min(values)), int(np.max(values))
    return low if low == high else {"min": low, "max": high}


def summary_lines(run: ManyFitsRun) -> list[str]:
    """What `graphfit train` prints of a `fit_many:` run."""
    return _summary_text(_summary(run.curves, run.fits, run.seconds), run.curves.points,
                         run.seconds, run.run_dir)


def saved_summary_lines(run_dir: str) -> list[str] | None:
    """The summary of a finished `fit_many:` run read back from its `summary.json` (what
    `graphfit train` printed), or None where `run_dir` holds none."""
    path = os.path.join(run_dir, SUMMARY_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        summary = json.load(handle)
    points = summary["points"]
    points = (f"{points['min']} to {points['max']}" if isinstance(points, dict)
              else str(points))
    return _summary_text(summary, points, summary["seconds"], run_dir)


def _summary_text(summary: dict, points: str, seconds: float, run_dir: str) -> list[str]:
    reasons = ", ".join(f"{reason} {count}" for reason, count in summary["reasons"].items())
    lines = [f"fitted {summary['curves']} data sets of {points} points in "
             f"{seconds:.2f} s: {summary['converged']} converged ({reasons})"]
    for name, row in summary["converged_parameters"].items():
        if row["median"] is not None:
            lines.append(f"  {name}: median {row['median']:.6g} (5%-95%: {row['p5']:.6g} to "
                         f"{row['p95']:.6g}), median standard error {row['median_stderr']:.3g}"
                         if row["median_stderr"] is not None else
                         f"  {name}: median {row['median']:.6g}")
    missed = summary["not_converged"]
    if missed:
        more = f" and {len(missed) - 5} more" if len(missed) > 5 else ""
        lines.append(f"not converged: {', '.join(map(str, missed[:5]))}{more}")
    lines.append(f"run directory: {run_dir}")
    lines.append(f"results: {os.path.join(run_dir, TABLE_FILE)} (one row per data set)")
    return lines

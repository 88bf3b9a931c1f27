"""`fit_many` and `fit_curve`: a formula fitted to many data sets at once, or to one, with
the batched Levenberg–Marquardt loop (`batched_lm`)."""

from __future__ import annotations

import functools
from typing import Mapping

import numpy as np

from graphfit.core import validation
from graphfit.fitting import arguments, batched_lm, bound_status, python_lm, report
from graphfit.fitting.results import CurveFit, ManyFits, covariances
from graphfit.optimizers.levenberg_marquardt import convergence as lm_convergence

__all__ = ["fit_many", "fit_curve"]


def _formula(formula, p0):
    """(expression, parsed, specs, p0): the parameters' `ParameterSpec`s (the Formula
    layer's: bounds, `vary`) from a `layers.Formula` or an expression with `p0`."""
    from graphfit.layers import Formula
    from graphfit.layers.formula_parameters import ParameterSpec

    if isinstance(formula, Formula):
        expression, specs = formula.expression, tuple(formula.specs.values())
        shared = [spec.name for spec in specs if spec.per_data_set]
        if shared:
            raise ValueError(
                f"fit_curve and fit_many fit one value of each parameter per data set; the "
                f"Formula's {', '.join(map(repr, shared))} {'is' if len(shared) == 1 else 'are'}"
                f" given per data set (a global fit). Fit it as a model "
                f"(gf.Sequential([formula]), LevenbergMarquardt, fit), or pass each data set "
                f"as a row of y. Received: params={dict(formula.params)!r}")
        if p0 is None:
            p0 = {spec.name: spec.value for spec in specs}
    elif isinstance(formula, str):
        expression = " ".join(formula.splitlines()).strip()
        if p0 is None:
            raise ValueError(
                f"p0 is required with a formula given as a string (it names the parameters): "
                f"pass p0={{'b1': 1.0, ...}}, or a layers.Formula. Received: formula="
                f"{formula!r}, p0=None")
        if not isinstance(p0, Mapping):
            raise ValueError(
                f"p0 must be a dict {{name: start}} with a formula given as a string (it "
                f"names the parameters). Received: p0={p0!r}")
        specs, starts = [], {}
        for name, given in p0.items():
            if isinstance(given, Mapping):  # {value, min, max, vary}, as a Formula's params
                spec = ParameterSpec.of(name, {**given, "value": _first(given.get("value"))})
                starts[name] = given["value"]
            else:
                spec, starts[name] = ParameterSpec(name, 0.0), given
            specs.append(spec)
        specs, p0 = tuple(specs), starts
    else:
        raise ValueError(
            f"formula must be an expression string such as 'b1*exp(-b2*x)' or a "
            f"layers.Formula. Received: formula={formula!r}")
    names = tuple(spec.name for spec in specs)
    parsed = _parse(expression, names)
    unused = [n for n in names if n not in parsed.names]
    if unused:
        raise ValueError(f"p0: parameter(s) {unused} not used in {expression!r}: remove them. "
                         f"Received: p0={p0!r}")
    if all(not spec.vary for spec in specs):
        raise ValueError(f"every parameter of {expression!r} is fixed (vary: false): nothing "
                         f"to fit. Let at least one vary.")
    return expression, parsed, specs, p0


@functools.lru_cache(maxsize=64)
def _parse(expression: str, names: tuple):
    """`formula_parser.parse`, once per formula and parameter names (a further fit of the
    same formula skips it; its result is only read)."""
    from graphfit.layers import formula_parser

    return formula_parser.parse(expression, names)


def _first(value):
    """The first start of a mapping's `value` (a number, or an array of one per data set)."""
    array = np.asarray(value, np.float64) if value is not None else None
    return None if array is None else float(array.ravel()[0]) if array.size else value


def _starts(p0, names, count: int) -> np.ndarray:
    """The starts `[N, p]` from a dict of numbers or `[N]` arrays, or an array `[p]`/`[N, p]`."""
    p = len(names)
    if isinstance(p0, Mapping):
        missing = [n for n in names if n not in p0]
        if missing or len(p0) != p:
            raise ValueError(f"p0 must give a start for each of {list(names)}. Received: "
                             f"p0 with keys {list(p0)}")
        columns = [np.broadcast_to(np.asarray(p0[n], np.float64), (count,)) for n in names]
        starts = np.stack(columns, -1)
    else:
        starts = np.asarray(p0, np.float64)
        if starts.shape not in ((p,), (count, p)):
            raise ValueError(f"p0 must have shape ({p},) or ({count}, {p}) for parameters "
                             f"{list(names)} and {count} data sets. Received: shape "
                             f"{starts.shape}")
        starts = np.broadcast_to(starts, (count, p))
    if not np.all(np.isfinite(starts)):
        raise ValueError("p0 must be finite; received NaN or inf starts.")
    return np.array(starts)


def _ragged(x, y, sigma):
    """Curves of different lengths (`y` a list of 1-D arrays, `x` and `sigma` lists of
    matching arrays, or one array `x` shared up to each curve's length) padded to the
    longest: `(x, y, sigma, mask)`, the mask False on the padding."""
    rows = [np.asarray(row, np.float64) for row in y]
    if any(row.ndim != 1 or row.size == 0 for row in rows):
        raise ValueError(f"y as a list holds one 1-D array per data set. Received: arrays of "
                         f"shapes {[row.shape for row in rows]}")
    lengths = [row.size for row in rows]
    m = max(lengths)

    def padded(values, what, fill):
        if values is None or not isinstance(values, (list, tuple)):
            return values
        if len(values) != len(rows):
            raise ValueError(f"{what} as a list needs one array per data set of y ("
                             f"{len(rows)}). Received: {len(values)}")
        out = []
        for value, n in zip(values, lengths):
            value = np.asarray(value, np.float64)
            if value.shape[:1] != (n,):
                raise ValueError(f"{what}: each data set's array must have as many points "
                                 f"as its y ({n}). Received: shape {value.shape}")
            pad = np.repeat(value[:1] * 0 + fill if fill is not None else value[-1:],
                            m - n, axis=0)
            out.append(np.concatenate([value, pad]))
        return np.stack(out)

    mask = np.arange(m)[None] < np.array(lengths)[:, None]
    return padded(x, "x", None), padded(rows, "y", 0.0), padded(sigma, "sigma", 1.0), mask


def _masked(x, y, weights, mask):
    """Points where `mask` is False weigh zero, and read y = 0 and x of the curve's first
    point (so that NaN padding never reaches the formula)."""
    first = np.argmax(mask, axis=1)
    stand_in = np.take_along_axis(x, first[:, None, None], axis=1)
    x = np.where(mask[:, :, None], x, stand_in)
    return x, np.where(mask, y, 0.0), np.where(mask, weights, 0.0)


def _data(x, y, sigma, columns: int, single: bool, mask=None):
    """x `[N, m, k]`, y `[N, m]`, the weights 1/σ `[N, m]` and the points per data set
    `[N]`, checked (padded points, `mask` False, weigh zero)."""
    if not single and isinstance(y, (list, tuple)) and len(
            {np.shape(row) for row in y}) > 1:
        if mask is not None:
            raise ValueError("mask is for y given as one padded array; y as a list of data "
                             "sets of different lengths needs no mask.")
        x, y, sigma, mask = _ragged(x, y, sigma)
        if np.ndim(x) == 1 or (columns > 1 and np.ndim(x) == 2):  # one x, cut per curve
            x = np.broadcast_to(np.asarray(x, np.float64)[None], (len(y),) + np.shape(x))
    y = np.asarray(y, np.float64)
    given_x, given_y = np.shape(x), y.shape  # for messages: the shapes as passed
    if single:
        y = y[None] if y.ndim == 1 else y
        mask = None if mask is None else _mask(mask, y[0], given_y)[None]
    if y.ndim != 2 or y.shape[1] == 0:
        want = "(points,)" if single else "(data sets, points)"
        raise ValueError(f"y must have shape {want}. Received: y of shape {given_y}")
    count, m = y.shape
    x = np.asarray(x, np.float64)
    if columns == 1 and x.ndim == 2 and x.shape == (m, 1) and m > 1:
        x = x[None]  # one column (m, 1), shared
    elif columns == 1 and x.ndim in (1, 2):
        x = x.reshape((1,) + x.shape)[..., None] if x.ndim == 1 else x[:, :, None]
    elif columns > 1 and x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[1:] != (m, columns) or x.shape[0] not in (1, count):
        shapes = (f"({m},)" if columns == 1 else f"({m}, {columns})") if single else (
            f"({m},) shared by every data set or ({count}, {m}), one row per data set"
            if columns == 1 else
            f"({m}, {columns}) shared by every data set or ({count}, {m}, {columns})")
        raise ValueError(f"x must have shape {shapes}, to match y of shape {given_y} (the "
                         f"formula reads {columns} input column(s)). Received: x of shape "
                         f"{given_x}")
    x = np.broadcast_to(x, (count, m, columns))
    weights = np.ones_like(y)
    if sigma is not None:
        sigma = np.asarray(sigma, np.float64)
        try:
            sigma = np.broadcast_to(sigma, y.shape)
        except ValueError:
            raise ValueError(f"sigma must broadcast to y's shape {given_y}. Received: sigma "
                             f"of shape {sigma.shape}") from None
        if mask is not None:
            sigma = np.where(_mask(mask, y, given_y), sigma, 1.0)
        bad = ~(sigma > 0)
        if np.any(bad):
            where = np.argwhere(bad)[0]
            place = (f"point {where[-1]}" if len(sigma) == 1 else
                     f"data set {where[0]}, point {where[-1]}")
            raise ValueError(f"sigma must be positive (standard deviations of y); received "
                             f"{float(sigma[tuple(where)]):g} at {place} ({np.count_nonzero(bad)} "
                             f"such value(s)). Mask such points (mask=) or give their sigma.")
        weights = 1.0 / sigma
    if mask is None:
        return x, y, weights, np.full(count, m)
    mask = _mask(mask, y, given_y)
    x, y, weights = _masked(x, y, weights, mask)
    return x, y, weights, np.count_nonzero(mask, axis=1)


def _mask(mask, y, given):
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != y.shape:
        raise ValueError(f"mask must be a bool array of y's shape {given} (False: a padded "
                         f"point, weighing zero). Received: {mask.dtype} array of shape "
                         f"{mask.shape}")
    return mask


def fit_many(formula, x, y, p0=None, sigma=None, absolute_sigma: bool = False,
             max_steps: int = 1000, attempts_per_step: int = 10,
             initial_damping: float = 1e-3, ftol: float = 1e-15, xtol: float = 1e-10,
             gtol: float = 0.0, geodesic_acceleration: bool = True,
             jit_compile: bool | str = "auto", mask=None, loop: str = "auto") -> ManyFits:
    """Fits one formula to N independent data sets at once, each with its own
    Levenberg–Marquardt state (damping, acceptance, convergence), in float64.

    The same rules and defaults as `optimizers.LevenbergMarquardt` on a float64 model,
    vectorised over the data sets (docs/guides/levenberg_marquardt.md, "Many fits at once"): a fit
    that has converged stops moving while the others go on, and a data set whose model turns
    NaN or inf ends with reason "not finite" without touching the others (NaN or inf in the
    data themselves is refused: mask those points). The traced loop is cached
    per formula: a second call with new data (any N, any number of points) does not trace.

    Bounded and fixed parameters (a Formula's `min`, `max`, `vary: false`, or the same keys
    in `p0`: `{"b1": {"value": 500, "min": 0}}`) behave as in a fitted Formula model: the
    fit runs on the layer's internal (sigmoid/softplus) values, the standard errors are
    those of the bounded values, and a parameter that ends on its bound is reported as such
    per data set (`ManyFits.status`), without a standard error, as `fit_report` does.

    Args:
        formula: an expression string (parameters named by `p0`) or a `layers.Formula`
            (its `params` are the default starts).
        x: the inputs: `(m,)` or `(m, k)` shared by every data set, or `(N, m)` /
            `(N, m, k)`, one row per data set (`x1 ... xk` name the k columns); with `y` a
            list, a list of arrays of the same lengths (or one x as long as the longest).
        y: `(N, m)`: one data set per row; or a list of 1-D arrays, data sets of different
            lengths (padded to the longest; the padding weighs zero and each data set's
            dof counts its own points).
        p0: the starts: `{name: value or (N,) array}` (or `{name: {"value": ..., "min":
            ..., "max": ..., "vary": False}}`), or an array `(p,)` / `(N, p)` in the order
            of the Formula's params. A fixed parameter's value may differ per data set.
        sigma: the standard deviations of y (broadcast to `(N, m)`), or None; the residuals
            are weighted by 1/σ, as in SciPy's `curve_fit`.
        absolute_sigma: as in `curve_fit`: True reads σ as known errors (covariance
            `(JᵀJ)⁻¹`), False scales it by the reduced χ² (`RSS / (m − p)`).
        max_steps, attempts_per_step, initial_damping, ftol, xtol, gtol: as for
            `LevenbergMarquardt` (max_steps plays `fit`'s epochs on a full batch).
        geodesic_acceleration: bend each trial step (True, the default for float64 models).
        jit_compile: run the whole fit as one XLA program: True, False, or "auto" (the
            default): XLA from `batched_lm.XLA_VALUES` (50 000) data values on. XLA compiles
            once per shape of the data (2-3 s on 2 CPU cores) and then runs 3-5 times faster
            than the traced loop (docs/benchmarks/performance.md, "Small fits and many fits").
        mask: `(N, m)` bool, False for a padded point (it weighs zero and may hold NaN: pass
            `mask=np.isfinite(y)` for NaN-padded curves), or None (every point counts).
        loop: "auto" (the default): one data set runs in the Python loop of
            `fitting.python_lm`, with the formula evaluated in NumPy (no trace: Misra1a's
            first fit in a process costs about 0.01 s of CPU instead of 0.5 s, a further
            one 3 ms instead of 6.5 ms), more in the traced loop (`batched_lm`: one call
            for all data sets, faster from two on after its first call); "python" or
            "traced" force either (the same algorithm; results agree to rounding). XLA
            (`jit_compile`) is the traced loop's.

    Returns:
        `ManyFits`: parameters, standard errors, covariances, `JᵀJ`, χ² (`chi_square`,
        weighted by 1/σ²) and RSS (`rss`, unweighted), reasons, steps, function and Jacobian
        evaluations (`evaluations`, `jacobian_evaluations`).

    Raises:
        ValueError: for a bad argument, naming it (and the data set) and what was received
            (the checks: `fitting.arguments`), NaN or inf in points that are not masked
            included.
    """
    expression, specs, p0, data = _checked(formula, x, y, p0, sigma, mask, single=False)
    validation.one_of("jit_compile", jit_compile, (True, False, "auto"))
    validation.one_of("loop", loop, python_lm.LOOPS)
    return _fit(expression, specs, p0, data, absolute_sigma, _settings(
        max_steps, attempts_per_step, initial_damping, ftol, xtol, gtol,
        geodesic_acceleration), jit_compile, loop)


def _checked(formula, x, y, p0, sigma, mask, single: bool):
    """`fit_many`'s and `fit_curve`'s checks of the formula, p0 and the data (`arguments`):
    `(expression, specs, p0, data)` (`_formula`, `_data`)."""
    if isinstance(formula, str) and isinstance(p0, Mapping):
        arguments.not_input_names(p0)
    arguments.p0_covers_formula(formula, p0)
    if not single:
        arguments.same_data_sets(x, y, sigma)
    expression, parsed, specs, p0 = _formula(formula, p0)
    data = _data(x, y, sigma, _columns(parsed), single=single, mask=mask)
    arguments.finite_data(*data[:3], masked=mask is not None, single=single)
    arguments.per_data_set_starts(p0, len(data[1]))
    arguments.starts_within_bounds(specs, p0, len(data[1]))
    return expression, specs, p0, data


def fit_curve(formula, x, y, p0=None, sigma=None, absolute_sigma: bool = False,
              mask=None, **settings) -> CurveFit:
    """Fits a formula to one data set: `fit_many` with N = 1, its one `CurveFit`.

    Fast for small problems: it runs in the Python loop of `fitting.python_lm` (`loop`,
    as for `fit_many`), which evaluates the formula in NumPy and traces nothing (TensorFlow
    only for a trial whose values overflow), against 0.4 s of tracing for the whole traced
    loop. Misra1a (14 points): a first fit in a process about 0.01 s of CPU, a further fit
    3 ms, 6x SciPy's `curve_fit` (docs/benchmarks/performance.md, "NumPy's evaluation");
    to fit many curves, `fit_many` fits them in one call.

    Jacobians (in both loops, and in a Formula model's LevenbergMarquardt fit) take the
    chain rule's limit where an infinite slope meets a zero inner derivative: a NaN entry at
    a point where the model is finite is 0 (`sqrt(D*x)` in D at x = 0); a Jacobian that is
    still ±inf or NaN at the fit's point stops the fit at once ("not finite", naming the
    point and its x), and a trial point with one is rejected.

    Args:
        formula, p0, sigma, absolute_sigma, settings: as for `fit_many` (`jit_compile`
            defaults to False here: one curve's fit takes milliseconds, XLA's compile
            seconds; `loop` to "auto", the Python loop).
        x: `(m,)` or `(m, k)`. y: `(m,)`.
        mask: `(m,)` bool, False for a point that weighs zero (it may hold NaN: pass
            `mask=np.isfinite(y)` for missing values), or None (every point counts).

    Example:

        >>> import numpy as np
        >>> from graphfit import fitting
        >>> x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
        >>> fit = fitting.fit_curve("a + b*x", x, 1.0 + 2.0 * x, p0={"a": 0.0, "b": 0.0})
        >>> {k: round(v, 9) for k, v in fit.values.items()}, fit.converged
        ({'a': 1.0, 'b': 2.0}, True)
    """
    known = ("max_steps", "attempts_per_step", "initial_damping", "ftol", "xtol", "gtol",
             "geodesic_acceleration", "jit_compile", "loop")
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ValueError(f"fit_curve: unknown setting(s) {unknown}; the settings are "
                         f"{', '.join(known)}.")
    if np.ndim(y) != 1:
        raise ValueError(f"y must have shape (points,) for fit_curve (fit_many fits several "
                         f"data sets). Received: y of shape {np.shape(y)}")
    expression, specs, p0, data = _checked(formula, x, y, p0, sigma, mask, single=True)
    if not isinstance(p0, Mapping):
        p0 = np.asarray(p0, np.float64).reshape(1, -1)
    jit_compile = settings.pop("jit_compile", False)
    validation.one_of("jit_compile", jit_compile, (True, False, "auto"))
    loop = settings.pop("loop", "auto")
    validation.one_of("loop", loop, python_lm.LOOPS)
    return _fit(expression, specs, p0, data, absolute_sigma,
                _settings(**settings), jit_compile, loop).curve(0)


def _columns(parsed) -> int:
    return max([1] + [int(n[1:]) for n in parsed.inputs if n != "x"])


def _settings(max_steps=1000, attempts_per_step=10, initial_damping=1e-3, ftol=1e-15,
              xtol=1e-10, gtol=0.0, geodesic_acceleration=True) -> batched_lm.Settings:
    validation.one_of("geodesic_acceleration", geodesic_acceleration, (True, False))
    for name, value in (("ftol", ftol), ("xtol", xtol), ("gtol", gtol)):
        validation.number_in_range(name, value, 0.0, 1.0, include_high=False)
    return batched_lm.Settings(
        validation.positive_int("max_steps", max_steps),
        validation.positive_int("attempts_per_step", attempts_per_step),
        validation.positive_float("initial_damping", initial_damping),
        float(ftol), float(xtol), float(gtol), geodesic_acceleration)


def _fit(expression, specs, p0, data, absolute_sigma, settings, jit_compile,
         loop) -> ManyFits:
    x, y, weights, points = data
    names = tuple(spec.name for spec in specs)
    vary = np.array([spec.vary for spec in specs])
    short = np.flatnonzero(points < np.count_nonzero(vary))
    if short.size:
        raise ValueError(f"each data set needs at least as many points as varying parameters "
                         f"({np.count_nonzero(vary)}: {[n for n, v in zip(names, vary) if v]}). "
                         f"Received: {points[short[0]]} points in data set {short[0]}"
                         f"{f' (and {short.size - 1} more)' if short.size > 1 else ''}")
    if not isinstance(absolute_sigma, (bool, np.bool_)):
        raise ValueError(f"absolute_sigma must be True or False. Received: {absolute_sigma!r}")
    starts = _starts(p0, names, len(y))
    varying = [spec for spec in specs if spec.vary]
    internal = np.stack([_internal(spec, starts[:, i]) for i, spec in enumerate(specs)
                         if spec.vary], -1)
    arguments = (expression, specs, internal, starts[:, ~vary], x, y, weights, settings)
    if python_lm.uses_python_loop(loop, jit_compile, *y.shape):
        result = python_lm.fit_curves(*arguments)
    else:
        result = batched_lm.run_fit(*arguments, jit_compile)
    params = starts.copy()
    params[:, vary] = np.stack([spec.external(u) for spec, u in
                                zip(varying, result.params.T)], -1)
    # JᵀJ of the bounded values: the internal one over d value / d internal value (zero on a
    # bound, where the parameter is not free and the entry unused).
    slopes = np.stack([spec.derivative(u) for spec, u in zip(varying, result.params.T)], -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(slopes != 0, 1.0 / slopes, 0.0)
    jtj = np.zeros((len(y), len(specs), len(specs)))
    jtj[:, vary[:, None] & vary[None, :]] = (
        result.jtj * scale[:, :, None] * scale[:, None, :]).reshape(len(y), -1)
    with np.errstate(over="ignore"):  # inf: a fit stopped as not finite says why (_details)
        chi_square = np.sum(np.square(result.residuals), -1)  # the residuals are r/σ
    status = _statuses(params, specs, vary, jtj, chi_square, points, absolute_sigma)
    free = status == "varied"
    dof = points - np.count_nonzero(free, axis=1)
    cov = covariances(jtj, chi_square, dof, bool(absolute_sigma), free)
    errors = np.sqrt(np.abs(np.diagonal(cov, axis1=1, axis2=2)))
    # Where the covariance is defined, an inf error is a parameter the data do not determine
    # (`covariances`' pseudo-inverse), as the report names it.
    defined = np.all(np.isfinite(jtj), axis=(1, 2)) & np.isfinite(chi_square) & (
        (dof > 0) | bool(absolute_sigma))
    status = np.where(free & defined[:, None] & np.isinf(errors), "undetermined",
                      status).astype(object)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        plain = np.where(weights > 0, result.residuals / weights, 0.0)
        rss = np.sum(np.square(plain), -1)
    return ManyFits(names=names, params=params, standard_errors=errors,
                    covariance=cov, jtj=jtj, rss=rss, dof=dof,
                    reason_codes=result.reason, steps=result.steps,
                    evaluations=result.nfev, chi_square=chi_square,
                    total=report.total_sum_of_squares(y, weights ** 2),
                    absolute_sigma=bool(absolute_sigma), points=points, status=status,
                    jacobian_evaluations=result.njev,
                    bounds=(tuple(s.min for s in specs), tuple(s.max for s in specs)),
                    details=_details(expression, specs, result, starts[:, ~vary], x),
                    weighted=np.any((weights != 0) & (weights != 1), axis=1))


def _statuses(params, specs, vary, jtj, chi_square, points, absolute_sigma) -> np.ndarray:
    """`bound_status.parameter_status` `[N, p]`; for a data set with a parameter near a bound,
    against the standard errors of its varying parameters all taken as free."""
    lows, highs = [s.min for s in specs], [s.max for s in specs]
    near = bound_status.parameter_status(params, lows, highs, vary)
    rows = np.any((near != "varied") & (near != "fixed"), axis=1)
    if not np.any(rows):
        return near
    free = np.broadcast_to(vary, near.shape)[rows]
    cov = covariances(jtj[rows], chi_square[rows], points[rows] - np.count_nonzero(vary),
                      bool(absolute_sigma), free)
    errors = np.sqrt(np.abs(np.diagonal(cov, axis1=1, axis2=2)))
    status = near.copy()
    status[rows] = bound_status.parameter_status(params[rows], lows, highs, vary, errors)
    return status


def _details(expression, specs, result, fixed, x) -> tuple:
    """Per data set, a fuller reason for a fit stopped as not finite with finite residuals:
    a Jacobian that is ±inf (or NaN) at a point, or residuals whose sum of squares
    overflows; "" elsewhere."""
    from graphfit.fitting import numpy_trial

    details = [""] * len(result.reason)
    for index in np.flatnonzero(result.reason == lm_convergence.NOT_FINITE):
        r = result.residuals[index]
        if not np.all(np.isfinite(r)):
            # The data are finite (checked first) and no step is taken to a non-finite
            # point: the model itself is not finite at the start.
            bad = np.flatnonzero(~np.isfinite(r))
            at = x[index, int(bad[0])]
            details[index] = (
                f"not finite: the model is inf or NaN at the start, at point {int(bad[0])} "
                f"(x = {float(at[0]) if at.size == 1 else at.tolist()!r}"
                f"{f', and {bad.size - 1} more point(s)' if bad.size > 1 else ''}): start "
                f"where the formula is finite on the data (an exp(k*x) overflows for "
                f"k*x above about 709)")
            continue
        with np.errstate(all="ignore"):
            curve = numpy_trial.NumpyCurve(expression, specs, fixed[index], x[index],
                                           np.zeros(len(r)), np.ones(len(r)))
            jac = curve.linearize(result.params[index])[1]
        bad = np.flatnonzero(~np.all(np.isfinite(jac), axis=-1))
        if bad.size:
            point = int(bad[0])
            at = x[index, point]
            details[index] = (
                f"not finite: the Jacobian is inf or NaN at point {point} (x = "
                f"{float(at[0]) if at.size == 1 else at.tolist()!r}"
                f"{f', and {bad.size - 1} more point(s)' if bad.size > 1 else ''}), where "
                f"the model has no finite slope in its parameters: start elsewhere, or "
                f"drop (or mask) the point")
        elif not np.isfinite(np.sum(np.square(r))):
            details[index] = (
                "not finite: the residuals' sum of squares overflows at the start (the "
                "model is finite, ‖r‖² is not): pick a start nearer the data, or rescale "
                "y (and sigma)")
    return tuple(details)


def _internal(spec, starts: np.ndarray) -> np.ndarray:
    """A bounded parameter's starts (strictly inside its bounds) as internal values, those
    next to a two-sided bound moved off it (`ParameterSpec.internal_start`)."""
    outside = ~((starts > spec.min) & (starts < spec.max))
    if spec.bounded and np.any(outside):
        raise ValueError(f"p0: the starts of {spec.name!r} must lie strictly inside its bounds "
                         f"[{spec.min:g}, {spec.max:g}] (the transformed parameter reaches a "
                         f"bound only in the limit). Received: {starts[outside][:3].tolist()}")
    return spec.internal_start(starts)

"""`fit_many` and `fit_curve`: a formula fitted to many data sets at once, or to one, with
the batched Levenberg–Marquardt loop (`batched_lm`)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from graphfit.core import validation
from graphfit.fitting import batched_lm, report
from graphfit.fitting.results import CurveFit, ManyFits, covariances

__all__ = ["fit_many", "fit_curve"]


def _formula(formula, p0):
    """(expression, names, starts as given) from a `layers.Formula` or an expression."""
    from graphfit.layers import Formula, formula_parser

    if isinstance(formula, Formula):
        expression, names = formula.expression, tuple(formula.params)
        special = [name for name, spec in formula.specs.items()
                   if spec.bounded or not spec.vary or spec.per_data_set]
        if special:
            raise ValueError(
                f"fit_curve and fit_many fit free scalar parameters only; the Formula's "
                f"{', '.join(map(repr, special))} {'is' if len(special) == 1 else 'are'} "
                f"bounded, fixed or given per data set. Fit it as a model "
                f"(gf.Sequential([formula]), LevenbergMarquardt, fit), which honours them. "
                f"Received: params={dict(formula.params)!r}")
        if p0 is None:
            p0 = dict(formula.params)
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
        names = tuple(p0)
    else:
        raise ValueError(
            f"formula must be an expression string such as 'b1*exp(-b2*x)' or a "
            f"layers.Formula. Received: formula={formula!r}")
    parsed = formula_parser.parse(expression, names)
    unused = [n for n in names if n not in parsed.names]
    if unused:
        raise ValueError(f"p0: parameter(s) {unused} not used in {expression!r}: remove them. "
                         f"Received: p0={p0!r}")
    return expression, names, parsed, p0


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


def _data(x, y, sigma, columns: int, single: bool):
    """x `[N, m, k]`, y `[N, m]` and the weights 1/σ `[N, m]`, checked."""
    y = np.asarray(y, np.float64)
    if single:
        y = y[None] if y.ndim == 1 else y
    if y.ndim != 2 or y.shape[1] == 0:
        want = "(points,)" if single else "(data sets, points)"
        raise ValueError(f"y must have shape {want}. Received: y of shape {y.shape}")
    count, m = y.shape
    x = np.asarray(x, np.float64)
    if columns == 1 and x.ndim == 2 and x.shape == (m, 1) and m > 1:
        x = x[None]  # one column (m, 1), shared
    elif columns == 1 and x.ndim in (1, 2):
        x = x.reshape((1,) + x.shape)[..., None] if x.ndim == 1 else x[:, :, None]
    elif columns > 1 and x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[1:] != (m, columns) or x.shape[0] not in (1, count):
        shapes = (f"({m},) shared by every data set or ({count}, {m}), one row per data set"
                  if columns == 1 else
                  f"({m}, {columns}) shared by every data set or ({count}, {m}, {columns})")
        raise ValueError(f"x must have shape {shapes}, to match y of shape {y.shape} (the "
                         f"formula reads {columns} input column(s)). Received: x of shape "
                         f"{np.shape(x)}")
    x = np.broadcast_to(x, (count, m, columns))
    weights = np.ones_like(y)
    if sigma is not None:
        sigma = np.asarray(sigma, np.float64)
        try:
            sigma = np.broadcast_to(sigma, y.shape)
        except ValueError:
            raise ValueError(f"sigma must broadcast to y's shape {y.shape}. Received: sigma "
                             f"of shape {sigma.shape}") from None
        if np.any(~(sigma > 0)):
            raise ValueError("sigma must be positive (standard deviations of y); received "
                             "zeros, negatives or NaN.")
        weights = 1.0 / sigma
    return x, y, weights


def fit_many(formula, x, y, p0=None, sigma=None, absolute_sigma: bool = False,
             max_steps: int = 1000, attempts_per_step: int = 10,
             initial_damping: float = 1e-3, ftol: float = 1e-15, xtol: float = 1e-10,
             gtol: float = 0.0, geodesic_acceleration: bool = True,
             jit_compile: bool | str = "auto") -> ManyFits:
    """Fits one formula to N independent data sets at once, each with its own
    Levenberg–Marquardt state (damping, acceptance, convergence), in float64.

    The same rules and defaults as `optimizers.LevenbergMarquardt` on a float64 model,
    vectorised over the data sets (docs/guides/levenberg_marquardt.md, "Many fits at once"): a fit
    that has converged stops moving while the others go on, and a data set with NaN or inf
    ends with reason "not finite" without touching the others. The traced loop is cached
    per formula: a second call with new data (any N, any number of points) does not trace.

    Args:
        formula: an expression string (parameters named by `p0`) or a `layers.Formula`
            (its `params` are the default starts).
        x: the inputs: `(m,)` or `(m, k)` shared by every data set, or `(N, m)` /
            `(N, m, k)`, one row per data set (`x1 ... xk` name the k columns).
        y: `(N, m)`: one data set per row.
        p0: the starts: `{name: value or (N,) array}`, or an array `(p,)` / `(N, p)` in the
            order of the Formula's params.
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

    Returns:
        `ManyFits`: parameters, standard errors, covariances, `JᵀJ`, RSS, reasons, steps.

    Raises:
        ValueError: for a bad argument, naming it and what was received.
    """
    expression, names, parsed, p0 = _formula(formula, p0)
    columns = _columns(parsed)
    x, y, weights = _data(x, y, sigma, columns, single=False)
    validation.one_of("jit_compile", jit_compile, (True, False, "auto"))
    return _fit(expression, names, p0, x, y, weights, absolute_sigma, _settings(
        max_steps, attempts_per_step, initial_damping, ftol, xtol, gtol,
        geodesic_acceleration), jit_compile)


def fit_curve(formula, x, y, p0=None, sigma=None, absolute_sigma: bool = False,
              **settings) -> CurveFit:
    """Fits a formula to one data set: `fit_many` with N = 1, its one `CurveFit`.

    Fast for small problems: the traced loop is cached per formula, so a further fit of
    the same formula on new data costs the arithmetic and one call (docs/benchmarks/performance.md).

    Args:
        formula, p0, sigma, absolute_sigma, settings: as for `fit_many` (`jit_compile`
            defaults to False here: one curve's fit takes milliseconds, XLA's compile
            seconds).
        x: `(m,)` or `(m, k)`. y: `(m,)`.

    Example:

        >>> import numpy as np
        >>> from graphfit import fitting
        >>> x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
        >>> fit = fitting.fit_curve("a + b*x", x, 1.0 + 2.0 * x, p0={"a": 0.0, "b": 0.0})
        >>> {k: round(v, 9) for k, v in fit.values.items()}, fit.converged
        ({'a': 1.0, 'b': 2.0}, True)
    """
    expression, names, parsed, p0 = _formula(formula, p0)
    columns = _columns(parsed)
    if np.ndim(y) != 1:
        raise ValueError(f"y must have shape (points,) for fit_curve (fit_many fits several "
                         f"data sets). Received: y of shape {np.shape(y)}")
    x = np.asarray(x, np.float64)[None]
    x, y, weights = _data(x, y, sigma, columns, single=True)
    if not isinstance(p0, Mapping):
        p0 = np.asarray(p0, np.float64).reshape(1, -1)
    known = ("max_steps", "attempts_per_step", "initial_damping", "ftol", "xtol", "gtol",
             "geodesic_acceleration", "jit_compile")
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ValueError(f"fit_curve: unknown setting(s) {unknown}; the settings are "
                         f"{', '.join(known)}.")
    jit_compile = settings.pop("jit_compile", False)
    validation.one_of("jit_compile", jit_compile, (True, False, "auto"))
    return _fit(expression, names, p0, x, y, weights, absolute_sigma,
                _settings(**settings), jit_compile).curve(0)


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


def _fit(expression, names, p0, x, y, weights, absolute_sigma, settings,
         jit_compile) -> ManyFits:
    count, m = y.shape
    if m < len(names):
        raise ValueError(f"each data set needs at least as many points as parameters "
                         f"({len(names)}: {list(names)}). Received: {m} points")
    if not isinstance(absolute_sigma, (bool, np.bool_)):
        raise ValueError(f"absolute_sigma must be True or False. Received: {absolute_sigma!r}")
    starts = _starts(p0, names, count)
    result = batched_lm.run_fit(expression, names, starts, x, y, weights, settings,
                                jit_compile)
    dof = m - len(names)
    cov = covariances(result.jtj, result.rss, dof, bool(absolute_sigma))
    errors = np.sqrt(np.abs(np.diagonal(cov, axis1=1, axis2=2)))
    return ManyFits(names=names, params=result.params, standard_errors=errors,
                    covariance=cov, jtj=result.jtj, rss=result.rss, dof=dof,
                    reason_codes=result.reason, steps=result.steps,
                    evaluations=result.evaluations, plain_rss=result.plain_rss,
                    total=report.total_sum_of_squares(y, weights ** 2),
                    absolute_sigma=bool(absolute_sigma))


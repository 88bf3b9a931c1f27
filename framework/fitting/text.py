"""The fit report as text (lmfit's layout: statistics, variables, correlations).

Example:

    >>> format_value(238.9421291, 2.70700752)
    '238.942129'
"""

from __future__ import annotations

import math

__all__ = ["format_report", "format_value", "MAX_PARAMETER_LINES"]

# Models with more parameters list only the first ones (and every flagged one).
MAX_PARAMETER_LINES = 60


def format_value(value: float, stderr: float | None = None) -> str:
    """A value to the digits that matter: 9 significant digits (lmfit shows as many)."""
    if value is None or not math.isfinite(value):
        return str(value)
    return f"{value:.9g}"


def _number(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return str(value)
    return f"{value:.8g}"


def _parameter_line(p, width: int) -> str:
    head = f"    {p.name + ':':<{width + 1}} {format_value(p.value):>16}"
    if p.stderr is not None:
        relative = p.relative_error
        share = f" ({100 * relative:.2f}%)" if relative is not None else ""
        head += f" +/- {p.stderr:.8g}{share}"
    elif p.status == "varied":
        head += " +/- n/a"
    if p.status != "varied":
        head += f"  [{p.status}]"
    bounds = []
    if p.min is not None:
        bounds.append(f"min={p.min:g}")
    if p.max is not None:
        bounds.append(f"max={p.max:g}")
    if bounds:
        head += " (" + ", ".join(bounds) + ")"
    return head


def format_report(report) -> str:
    """The report as lines of text."""
    s, fit = report.statistics, report.fit
    lines = ["[[Fit Statistics]]"]
    if fit.get("optimizer"):
        lines.append(f"    # fitting method   = {fit['optimizer']}")
    if fit.get("function_evaluations") is not None:
        lines.append(f"    # function evals   = {fit['function_evaluations']}")
    if fit.get("jacobian_evaluations") is not None:
        lines.append(f"    # Jacobian evals   = {fit['jacobian_evaluations']}")
    if fit.get("steps") is not None:  # optimizer updates (an LM step or an Adam step)
        lines.append(f"    # steps            = {fit['steps']}")
    lines += [f"    # data points      = {s['points']}",
              f"    # variables        = {s['varying_parameters']}",
              f"    chi-square         = {_number(s['chi_square'])}",
              f"    reduced chi-square = {_number(s['reduced_chi_square'])}",
              f"    residual std       = {_number(s['residual_std'])}",
              f"    RSS                = {_number(s['rss'])}",
              f"    Akaike info crit   = {_number(s['aic'])}",
              f"    Bayesian info crit = {_number(s['bic'])}",
              f"    R-squared          = {_number(s['r_squared'])}"]
    if fit.get("stop_reason"):
        lines.append(f"    stopped: {fit['stop_reason']}")
    sigma = "absolute (weights are 1/σ²)" if report.absolute_sigma else "scaled by reduced χ²"
    lines.append(f"[[Variables]] (standard errors {sigma})")
    width = max((len(p.name) for p in report.parameters), default=4)
    shown = [p for i, p in enumerate(report.parameters)
             if i < MAX_PARAMETER_LINES or p.status != "varied"]
    lines += [_parameter_line(p, min(width, 40)) for p in shown]
    if len(shown) < len(report.parameters):
        lines.append(f"    ... {len(report.parameters) - len(shown)} more parameters "
                     f"(fit_report.json lists them all)")
    if report.strong_correlations:
        lines.append(f"[[Correlations]] (|r| > {report.strong_threshold:g}: strongly "
                     f"correlated pairs)")
        ordered = sorted(report.strong_correlations, key=lambda c: -abs(c[2]))
        lines += [f"    C({a}, {b}) = {r:+.4f}" for a, b, r in ordered[:MAX_PARAMETER_LINES]]
    for entry in report.data_sets:
        lines.append(f"[[Data set {entry['data_set']}]] points={entry['points']}, "
                     f"chi-square={_number(entry['chi_square'])}, "
                     f"R-squared={_number(entry['r_squared'])}")
    lines += [f"[[Note]] {note}" for note in report.notes]
    return "\n".join(lines)

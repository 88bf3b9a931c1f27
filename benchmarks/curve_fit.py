"""Standard errors on NIST StRD: graphfit's fit report against SciPy's curve_fit and lmfit.

    python benchmarks/curve_fit.py [--all]

The 16 NIST nonlinear problems the tests fit (`--all`: the 27), each from both of NIST's
starts, at default settings: graphfit (a float64 `layers.Formula`, `LevenbergMarquardt()`,
full batch, then `model.fit_report`), SciPy's `curve_fit(f, x, y, p0=start)` and, when
installed, lmfit's `minimize` (leastsq, its default). For each: the digits of agreement (NIST's log
relative error, LRE) of the standard errors (the smallest over the parameters) and of the
residual standard deviation with NIST's certified values, and of the parameters themselves.
"fail" is a fit that raised or gave no standard errors. A fit reaching 4 digits on both counts
is a pass. Not a test: the numbers depend on the machine's rounding.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tests.optimizers.levenberg_marquardt import nist  # noqa: E402

_NUMPY = {"exp": np.exp, "cos": np.cos, "sin": np.sin, "arctan": np.arctan, "log": np.log,
          "pi": np.pi}


def _numpy_model(problem):
    """f(x, *b) for SciPy and lmfit: the trusted constant expression of `nist.FORMULAS`."""
    names, expression = problem.parameter_names, nist.FORMULAS[problem.name]

    def f(x, *b):
        scope = dict(_NUMPY, **dict(zip(names, b)))
        columns = np.atleast_2d(x.T) if x.ndim == 2 else x[None]
        scope.update({"x": columns[0]} if len(columns) == 1 else
                     {f"x{i + 1}": c for i, c in enumerate(columns)})
        return eval(expression, {"__builtins__": {}}, scope)
    return f


def _digits(errors, residual_std, values, problem):
    if errors is None or any(e is None or not np.isfinite(e) for e in errors):
        return None
    return (min(nist.log_relative_error(e, c) for e, c in
                zip(errors, problem.standard_deviations)),
            nist.log_relative_error(residual_std, problem.residual_standard_deviation),
            min(nist.log_relative_error(v, c) for v, c in zip(values, problem.certified)))


class _Graphfit:
    """One compiled model per problem, shared by its two starts (as the tests do)."""

    def __init__(self, problem):
        import graphfit as gf
        from graphfit import layers, optimizers

        self.formula = layers.Formula(
            nist.FORMULAS[problem.name], dtype="float64",
            params=dict(zip(problem.parameter_names, map(float, problem.starts[0]))))
        self.model = gf.Sequential([self.formula], input_shape=(problem.x.shape[1],),
                                   dtype="float64")
        self.model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")

    def fit(self, problem, start):
        self.formula.set_values(dict(zip(problem.parameter_names, map(float, start))))
        self.model.optimizer.reset_state()
        self.model.fit(problem.x, problem.response[:, None], batch_size=None, epochs=2000,
                       verbose=0)
        report = self.model.fit_report(problem.x, problem.response)
        return ([p.stderr for p in report.parameters], report.statistics["residual_std"],
                [p.value for p in report.parameters])


def _scipy(problem, start):
    from scipy.optimize import curve_fit

    f = _numpy_model(problem)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values, covariance = curve_fit(f, problem.x, problem.response, p0=list(start))
    residuals = problem.response - f(problem.x, *values)
    dof = len(problem.response) - len(values)
    return (list(np.sqrt(np.diag(covariance))), math.sqrt(residuals @ residuals / dof),
            list(values))


def _lmfit(problem, start):
    import lmfit

    f = _numpy_model(problem)
    names = problem.parameter_names
    parameters = lmfit.Parameters()
    for name, value in zip(names, start):
        parameters.add(name, value=float(value))

    def residuals(params):
        return f(problem.x, *[params[n].value for n in names]) - problem.response

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = lmfit.minimize(residuals, parameters)  # leastsq, lmfit's default
    return ([result.params[n].stderr for n in names], math.sqrt(result.redchi),
            [result.params[n].value for n in names])


def _cell(digits) -> str:
    if digits is None:
        return "   fail       "
    return f"{digits[0]:5.1f} {digits[1]:5.1f} {digits[2]:4.1f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--all", action="store_true", help="the 27 problems, not the 16")
    args = parser.parse_args(argv)
    try:
        import scipy  # noqa: F401
        has_scipy = True
    except ImportError:
        has_scipy = False
    try:
        import lmfit  # noqa: F401
        has_lmfit = True
    except ImportError:
        has_lmfit = False
    names = nist.PROBLEMS + (nist.MORE_PROBLEMS if args.all else [])
    print("Digits of agreement with NIST's certified values (LRE): SE = the smallest over the "
          "standard errors, RSD = residual standard deviation, b = the smallest over the "
          "parameters")
    print(f"{'problem':<9} {'start':>5} | {'graphfit SE RSD b':>17} | {'SciPy SE RSD b':>17} | "
          f"{'lmfit SE RSD b':>17}")
    passes = {"graphfit": 0, "scipy": 0, "lmfit": 0}
    started = time.perf_counter()
    for name in names:
        problem = nist.read(nist.DATA / f"{name}.dat")
        ours = _Graphfit(problem)
        for number, start in enumerate(problem.starts, 1):
            cells = {}
            for key, available, fit in (("graphfit", True, ours.fit),
                                        ("scipy", has_scipy, _scipy),
                                        ("lmfit", has_lmfit, _lmfit)):
                if not available:
                    cells[key] = "  not installed  "
                    continue
                try:
                    digits = _digits(*fit(problem, start), problem)
                except Exception:  # a failed fit is a result here
                    digits = None
                passes[key] += digits is not None and min(digits[:2]) >= 4.0
                cells[key] = _cell(digits)
            print(f"{name:<9} {number:>5} | {cells['graphfit']:>17} | {cells['scipy']:>17} | "
                  f"{cells['lmfit']:>17}")
    runs, seconds = 2 * len(names), time.perf_counter() - started
    print(f"\nstandard errors and residual std to >= 4 digits: graphfit {passes['graphfit']}"
          f"/{runs}, SciPy {passes['scipy'] if has_scipy else '-'}/{runs}, lmfit "
          f"{passes['lmfit'] if has_lmfit else '-'}/{runs}  ({seconds:.0f} s)")


if __name__ == "__main__":
    main()

"""NIST StRD nonlinear regression: LevenbergMarquardt reproduces the certified values.

Each problem's model is a tiny `gf.Layer` with its parameters as float64 variables, fitted
full-batch with the default optimizer settings from both of NIST's starting points; `fit`
stops by itself on convergence. Every certified parameter and the residual sum of squares
must be reproduced to at least 6 significant digits (NIST's log relative error, LRE), and
the fit report's (`graphfit.fitting`) standard errors and residual standard deviation the
certified ones to at least 4 (`benchmarks/curve_fit.py` prints the digits reached, against
SciPy and lmfit).

The 11 other NIST problems (`nist.MORE_PROBLEMS`) are fitted only by the benchmark
(`benchmarks/lm_nist.py`); here their data files and the `nist.FORMULAS` of all 27, which the
benchmark fits, are checked against the certified residual sum of squares, without a fit.
"""

import doctest

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from tests.optimizers.levenberg_marquardt import nist


def _misra1a(b, x):
    return b[0] * (1 - tf.exp(-b[1] * x))


def _misra1b(b, x):
    return b[0] * (1 - (1 + b[1] * x / 2) ** (-2))


def _chwirut(b, x):
    return tf.exp(-b[0] * x) / (b[1] + b[2] * x)


def _lanczos(b, x):
    return b[0] * tf.exp(-b[1] * x) + b[2] * tf.exp(-b[3] * x) + b[4] * tf.exp(-b[5] * x)


def _gauss(b, x):
    return (b[0] * tf.exp(-b[1] * x) + b[2] * tf.exp(-((x - b[3]) ** 2) / b[4] ** 2)
            + b[5] * tf.exp(-((x - b[6]) ** 2) / b[7] ** 2))


def _danwood(b, x):
    return b[0] * x ** b[1]


def _eckerle4(b, x):
    return (b[0] / b[1]) * tf.exp(-0.5 * ((x - b[2]) / b[1]) ** 2)


def _rat42(b, x):
    return b[0] / (1 + tf.exp(b[1] - b[2] * x))


def _rat43(b, x):
    return b[0] / ((1 + tf.exp(b[1] - b[2] * x)) ** (1 / b[3]))


def _thurber(b, x):
    return ((b[0] + b[1] * x + b[2] * x ** 2 + b[3] * x ** 3)
            / (1 + b[4] * x + b[5] * x ** 2 + b[6] * x ** 3))


def _mgh09(b, x):
    return b[0] * (x ** 2 + x * b[1]) / (x ** 2 + x * b[2] + b[3])


def _mgh10(b, x):
    return b[0] * tf.exp(b[1] / (x + b[2]))


def _bennett5(b, x):
    return b[0] * (b[1] + x) ** (-1 / b[2])


MODELS = {"Misra1a": _misra1a, "Misra1b": _misra1b, "Chwirut1": _chwirut,
          "Chwirut2": _chwirut, "Lanczos3": _lanczos, "Gauss1": _gauss, "Gauss2": _gauss,
          "DanWood": _danwood, "Eckerle4": _eckerle4, "Rat42": _rat42, "Rat43": _rat43,
          "Thurber": _thurber, "MGH09": _mgh09, "MGH10": _mgh10, "BoxBOD": _misra1a,
          "Bennett5": _bennett5}

# Known failures at default settings, each with its reason (strict: a pass is reported).
# None since geodesic acceleration and the running scale's memory: MGH10 from start 1 follows
# its curved valley (b1 down to 1e-53 and back) in 729 steps.
KNOWN_FAILURES: dict[tuple[str, int], str] = {}


class NistCurve(gf.Layer):
    """y = fn(b, x), with b1, b2, ... as trainable variables."""

    def __init__(self, fn, start, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn
        self.start = [float(value) for value in start]

    def build(self, input_shape):
        self.b = [self.add_weight(f"b{i + 1}", (), initializer="zeros")
                  for i in range(len(self.start))]
        for variable, value in zip(self.b, self.start):
            variable.assign(value)

    def call(self, x, training=False):
        return self.fn(self.b, x)


def test_reader_parses_every_problem():
    # (observations, parameters), as each file's header states them.
    sizes = {"Misra1a": (14, 2), "Misra1b": (14, 2), "Chwirut1": (214, 3), "Chwirut2": (54, 3),
             "Lanczos3": (24, 6), "Gauss1": (250, 8), "Gauss2": (250, 8), "DanWood": (6, 2),
             "Eckerle4": (35, 3), "Rat42": (9, 3), "Rat43": (15, 4), "Thurber": (37, 7),
             "MGH09": (11, 4), "MGH10": (16, 3), "BoxBOD": (6, 2), "Bennett5": (154, 3),
             "Misra1c": (14, 2), "Misra1d": (14, 2), "Lanczos1": (24, 6), "Lanczos2": (24, 6),
             "Gauss3": (250, 8), "Kirby2": (151, 5), "Hahn1": (236, 7), "MGH17": (33, 5),
             "Roszman1": (25, 4), "ENSO": (168, 9), "Nelson": (128, 3)}
    assert sorted(nist.PROBLEMS + nist.MORE_PROBLEMS) == sorted(sizes) == sorted(nist.FORMULAS)
    assert sorted(path.stem for path in nist.DATA.glob("*.dat")) == sorted(sizes)
    for name in sizes:
        problem = nist.read(nist.DATA / f"{name}.dat")
        assert (len(problem.y), len(problem.certified)) == sizes[name]
        assert problem.x.shape == (len(problem.y), 2 if name == "Nelson" else 1)
        assert len(problem.starts[0]) == len(problem.starts[1]) == len(problem.certified)
        assert problem.log_response == (name == "Nelson")
    misra = nist.read(nist.DATA / "Misra1a.dat")
    assert misra.starts[1].tolist() == [250.0, 0.0005]
    assert misra.certified.tolist() == [2.3894212918e02, 5.5015643181e-04]
    assert misra.standard_deviations.tolist() == [2.7070075241e00, 7.2668688436e-06]
    assert misra.residual_sum_of_squares == 1.2455138894e-01
    assert (misra.y[0], misra.x[-1, 0]) == (10.07, 760.0)
    gauss = nist.read(nist.DATA / "Gauss1.dat")
    assert gauss.expression == ("y = b1*exp( -b2*x ) + b3*exp( -(x-b4)**2 / b5**2 ) "
                                "+ b6*exp( -(x-b7)**2 / b8**2 )")
    nelson = nist.read(nist.DATA / "Nelson.dat")
    assert nelson.expression == "log[y] = b1 - b2*x1 * exp[-b3*x2]"
    assert (nelson.y[-1], *nelson.x[-1]) == (1.2, 64.0, 275.0)
    assert nelson.response[-1] == np.log(1.2)
    assert nist.read(nist.DATA / "Roszman1.dat").expression == (
        "y = b1 - b2*x - arctan[b3/(x-b4)]/pi")  # not the line "pi = 3.14159..." before it


def test_log_relative_error():
    assert doctest.testmod(nist).failed == 0
    assert nist.log_relative_error(1.0000001, 1.0) == pytest.approx(7.0, abs=1e-6)
    assert nist.log_relative_error(2.0, 2.0) == 15.0
    assert nist.log_relative_error(1e-3, 0.0) == pytest.approx(3.0)


_NUMPY = {"exp": np.exp, "cos": np.cos, "sin": np.sin, "arctan": np.arctan}


def _numpy_rss(problem, parameters, dtype) -> float:
    """The RSS of `nist.FORMULAS[name]` evaluated by NumPy in `dtype` (a second evaluator)."""
    scope = {**_NUMPY, "pi": dtype("3.14159265358979323846264338327950")}
    scope.update({n: dtype(v) for n, v in zip(problem.parameter_names, parameters)})
    columns = problem.x.astype(dtype).T
    scope.update({"x": columns[0]} if len(columns) == 1 else
                 {f"x{i + 1}": column for i, column in enumerate(columns)})
    response = problem.y.astype(dtype)
    response = np.log(response) if problem.log_response else response
    # A trusted constant expression of nist.FORMULAS, in NumPy's arithmetic.
    fitted = eval(nist.FORMULAS[problem.name], {"__builtins__": {}}, scope)
    return float(np.sum((fitted - response) ** 2))


def _printed_parameters_resolve(problem) -> bool:
    """Whether NIST's certified parameters, printed to 11 significant digits, can reproduce
    the certified RSS to 6 digits. At the minimum the RSS grows by ‖J·δ‖² for a parameter
    error δ; rounding to 11 digits (relative 5e-12) moves the fitted values by about
    5e-12·|y|, so the RSS by about (5e-12)²·Σy², which must stay below 1e-6 of the RSS."""
    return problem.residual_sum_of_squares >= 1e6 * (5e-12) ** 2 * np.sum(problem.response ** 2)


@pytest.mark.parametrize("name", nist.PROBLEMS + nist.MORE_PROBLEMS)
def test_formula_at_certified_parameters_gives_certified_rss(name):
    """Checks the data files and the benchmark's formulas: `layers.Formula` (float64) at the
    certified parameters gives the certified RSS (11 digits on all but Lanczos1, 10.3 on
    Lanczos2), and agrees with NumPy's evaluation of the same expression in extended
    precision (where the platform has it), so the formula is read as NumPy reads it."""
    problem = nist.read(nist.DATA / f"{name}.dat")
    formula = layers.Formula(
        nist.FORMULAS[name], params=dict(zip(problem.parameter_names, problem.certified)),
        dtype="float64")
    rss = float(np.sum((formula(problem.x).numpy()[:, 0] - problem.response) ** 2))
    extended = _numpy_rss(problem, problem.certified, np.longdouble)
    # Lanczos1's RSS at the printed parameters is 4e-21, from residuals of 4e-11 whose
    # float64 rounding (about 1e-16) leaves 5.6 digits; every other problem agrees to 11.
    assert nist.log_relative_error(rss, extended) >= 5.0
    certified = problem.residual_sum_of_squares
    if _printed_parameters_resolve(problem):
        assert nist.log_relative_error(rss, certified) >= 6.0, (rss, certified)
    else:
        # Lanczos1 (certified RSS 1.4e-25, residuals of 8.9e-14 from rounding the data to 13
        # digits): the printed parameters give 4.0e-21, in float64 and in extended precision
        # alike, so no one can check that RSS from them; fits reach its parameters to 10.5
        # digits (the printed 11) and its RSS to about 3 (benchmarks/lm_nist.py, ‡).
        assert name == "Lanczos1"
        assert rss > 1e4 * certified and extended > 1e4 * certified


def _fit(problem, model, start):
    """Fits from `start` with the optimizer's state as new; returns (parameters, rss, epochs,
    the fit report)."""
    layer = model.layers[0]
    for variable, value in zip(layer.b, start):
        variable.assign(value)
    model.optimizer.reset_state()  # as a new LevenbergMarquardt()
    history = model.fit(problem.x, problem.y[:, None], batch_size=None, epochs=1500, verbose=0)
    assert model.stop_reason.startswith("LevenbergMarquardt converged"), model.stop_reason
    estimate = np.array([float(b) for b in layer.b])
    # The curve at the estimate, eagerly: no predict function to trace.
    fitted = layer.fn(layer.b, tf.constant(problem.x, tf.float64)).numpy()[:, 0]
    rss = float(np.sum((fitted - problem.y) ** 2))
    return estimate, rss, len(history.epoch), model.fit_report(problem.x, problem.y)


_COMPILED = {}


def _compiled(name):
    """The problem and a compiled model for it (tracing dominates): one model per formula and
    number of observations, shared by the two starts of a problem and by problems of the
    same formula and size (Gauss1 and Gauss2: 250 points each), as `_fit` sets every
    parameter and resets the optimizer's state before each fit."""
    problem = nist.read(nist.DATA / f"{name}.dat")
    key = (MODELS[name], len(problem.y))
    if key not in _COMPILED:
        model = gf.Sequential([NistCurve(MODELS[name], problem.starts[0])], input_shape=(1,),
                              dtype="float64")
        model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
        _COMPILED[key] = model
    return problem, _COMPILED[key]


@pytest.mark.parametrize("name, start", [
    pytest.param(name, start, id=f"{name}-start{start + 1}",
                 marks=[pytest.mark.xfail(reason=KNOWN_FAILURES[name, start], strict=True)]
                 if (name, start) in KNOWN_FAILURES else [])
    for name in nist.PROBLEMS for start in (0, 1)])
def test_certified_values(name, start):
    problem, model = _compiled(name)
    estimate, rss, epochs, report = _fit(problem, model, problem.starts[start])
    digits = [nist.log_relative_error(e, c) for e, c in zip(estimate, problem.certified)]
    rss_digits = nist.log_relative_error(rss, problem.residual_sum_of_squares)
    assert min(digits) >= 6.0 and rss_digits >= 6.0, (
        f"{name} from {problem.starts[start]}: LRE {np.round(digits, 2)}, RSS LRE "
        f"{rss_digits:.2f} after {epochs} epochs")
    # The fit report at the solution: NIST's certified standard deviations and residual
    # standard deviation, to 4 significant digits at least.
    assert [p.name.rsplit("/", 1)[-1] for p in report.parameters] == problem.parameter_names
    errors = [p.stderr for p in report.parameters]
    error_digits = [nist.log_relative_error(e, c)
                    for e, c in zip(errors, problem.standard_deviations)]
    deviation_digits = nist.log_relative_error(report.statistics["residual_std"],
                                               problem.residual_standard_deviation)
    assert min(error_digits) >= 4.0 and deviation_digits >= 4.0, (
        f"{name} from start {start + 1}: standard errors' LRE {np.round(error_digits, 2)}, "
        f"residual standard deviation's {deviation_digits:.2f}")
    assert report.dof == len(problem.y) - len(problem.certified)


def test_misra1a_with_xla_matches():
    problem = nist.read(nist.DATA / "Misra1a.dat")
    model = gf.Sequential([NistCurve(_misra1a, problem.starts[0])], input_shape=(1,),
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=True)
    estimate, rss, _, _ = _fit(problem, model, problem.starts[0])
    assert min(nist.log_relative_error(e, c)
               for e, c in zip(estimate, problem.certified)) >= 6.0

"""NIST StRD nonlinear regression: LevenbergMarquardt reproduces the certified values.

Each problem's model is a tiny `gf.Layer` with its parameters as float64 variables, fitted
full-batch with the default optimizer settings from both of NIST's starting points; `fit`
stops by itself on convergence. Every certified parameter and the residual sum of squares
must be reproduced to at least 6 significant digits (NIST's log relative error, LRE).
"""

import doctest

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import optimizers
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


MODELS = {"Misra1a": _misra1a, "Misra1b": _misra1b, "Chwirut1": _chwirut,
          "Chwirut2": _chwirut, "Lanczos3": _lanczos, "Gauss1": _gauss, "Gauss2": _gauss,
          "DanWood": _danwood}


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
    sizes = {"Misra1a": (14, 2), "Misra1b": (14, 2), "Chwirut1": (214, 3), "Chwirut2": (54, 3),
             "Lanczos3": (24, 6), "Gauss1": (250, 8), "Gauss2": (250, 8), "DanWood": (6, 2)}
    for name in nist.PROBLEMS:
        problem = nist.read(nist.DATA / f"{name}.dat")
        assert (len(problem.y), len(problem.certified)) == sizes[name]
        assert problem.x.shape == (len(problem.y), 1)
        assert len(problem.starts[0]) == len(problem.starts[1]) == len(problem.certified)
    misra = nist.read(nist.DATA / "Misra1a.dat")
    assert misra.starts[1].tolist() == [250.0, 0.0005]
    assert misra.certified.tolist() == [2.3894212918e02, 5.5015643181e-04]
    assert misra.standard_deviations.tolist() == [2.7070075241e00, 7.2668688436e-06]
    assert misra.residual_sum_of_squares == 1.2455138894e-01
    assert (misra.y[0], misra.x[-1, 0]) == (10.07, 760.0)
    gauss = nist.read(nist.DATA / "Gauss1.dat")
    assert gauss.expression == ("y = b1*exp( -b2*x ) + b3*exp( -(x-b4)**2 / b5**2 ) "
                                "+ b6*exp( -(x-b7)**2 / b8**2 )")


def test_log_relative_error():
    assert doctest.testmod(nist).failed == 0
    assert nist.log_relative_error(1.0000001, 1.0) == pytest.approx(7.0, abs=1e-6)
    assert nist.log_relative_error(2.0, 2.0) == 15.0
    assert nist.log_relative_error(1e-3, 0.0) == pytest.approx(3.0)


def _fit(problem, model, start):
    """Fits from `start` with the optimizer's state as new; returns (parameters, rss, epochs)."""
    layer = model.layers[0]
    for variable, value in zip(layer.b, start):
        variable.assign(value)
    optimizer = model.optimizer
    optimizer.damping_value.assign(-1.0)  # as a new LevenbergMarquardt(): λ set by step 1
    optimizer._growth.assign(2.0)
    history = model.fit(problem.x, problem.y[:, None], batch_size=None, epochs=500, verbose=0)
    assert model.stop_reason.startswith("LevenbergMarquardt converged"), model.stop_reason
    estimate = np.array([float(b) for b in layer.b])
    rss = float(np.sum((model.predict(problem.x, verbose=0)[:, 0] - problem.y) ** 2))
    return estimate, rss, len(history.epoch)


@pytest.mark.parametrize("name", nist.PROBLEMS)
def test_certified_values_from_both_starts(name):
    problem = nist.read(nist.DATA / f"{name}.dat")
    layer = NistCurve(MODELS[name], problem.starts[0])
    model = gf.Sequential([layer], input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    for start in problem.starts:
        estimate, rss, epochs = _fit(problem, model, start)
        digits = [nist.log_relative_error(e, c) for e, c in zip(estimate, problem.certified)]
        rss_digits = nist.log_relative_error(rss, problem.residual_sum_of_squares)
        assert min(digits) >= 6.0 and rss_digits >= 6.0, (
            f"{name} from {start}: LRE {np.round(digits, 2)}, RSS LRE {rss_digits:.2f} after "
            f"{epochs} epochs")


def test_misra1a_with_xla_matches():
    problem = nist.read(nist.DATA / "Misra1a.dat")
    model = gf.Sequential([NistCurve(_misra1a, problem.starts[0])], input_shape=(1,),
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=True)
    estimate, rss, _ = _fit(problem, model, problem.starts[0])
    assert min(nist.log_relative_error(e, c)
               for e, c in zip(estimate, problem.certified)) >= 6.0

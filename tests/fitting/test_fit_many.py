"""`fitting.fit_many` and `fitting.fit_curve`: the batched Levenberg–Marquardt fits.

The reference is SciPy's `curve_fit` (per curve, in a loop) and NIST's certified values; the
batched loop must agree with both, let a converged curve stop while the others go on, and
keep a curve whose model overflows from touching the others.
"""

import numpy as np
import pytest
from scipy.optimize import curve_fit

from graphfit import fitting, layers
from graphfit.fitting import batched_lm
from graphfit.layers.formula_parameters import ParameterSpec
from tests.optimizers.levenberg_marquardt import nist

MISRA = "b1*(1-exp(-b2*x))"


def _misra(x, b1, b2):
    return b1 * (1 - np.exp(-b2 * x))


@pytest.fixture(scope="module")
def noisy_curves():
    """300 noisy Misra1a-like curves on Misra1a's x, each with its own b1, b2 and noise."""
    problem = nist.read(nist.DATA / "Misra1a.dat")
    x = problem.x[:, 0]
    rng = np.random.default_rng(0)
    count = 300
    truth = np.stack([rng.uniform(150, 350, count), rng.uniform(3e-4, 9e-4, count)], -1)
    clean = _misra(x[None], truth[:, :1], truth[:, 1:])
    y = clean * (1 + 0.01 * rng.standard_normal(clean.shape))
    fits = fitting.fit_many(MISRA, x, y, p0={"b1": 500.0, "b2": 1e-4})
    return x, y, fits


def test_batched_fits_equal_scipy_curve_fit_per_curve(noisy_curves):
    x, y, fits = noisy_curves
    assert fits.converged.all(), fits.reasons
    for i in range(len(y)):
        params, covariance = curve_fit(_misra, x, y[i], p0=[500.0, 1e-4], xtol=1e-14,
                                       ftol=1e-14, gtol=0, maxfev=10000)
        np.testing.assert_allclose(fits.params[i], params, rtol=1e-6)
        np.testing.assert_allclose(fits.standard_errors[i], np.sqrt(np.diag(covariance)),
                                   rtol=1e-5)
        residuals = y[i] - _misra(x, *params)
        np.testing.assert_allclose(fits.rss[i], residuals @ residuals, rtol=1e-9)
    assert np.all(fits.dof == 12) and fits.covariance.shape == (300, 2, 2)
    assert fits.curve(7).values == {"b1": fits.params[7, 0], "b2": fits.params[7, 1]}


def test_weighted_fits_equal_scipy_with_sigma_both_ways(noisy_curves):
    x, y, _ = noisy_curves
    sigma = 0.5 + x / x.max()
    for absolute in (False, True):
        fits = fitting.fit_many(MISRA, x, y[:20], p0={"b1": 500.0, "b2": 1e-4}, sigma=sigma,
                                absolute_sigma=absolute)
        for i in range(20):
            params, covariance = curve_fit(_misra, x, y[i], p0=[500.0, 1e-4], sigma=sigma,
                                           absolute_sigma=absolute, xtol=1e-14, ftol=1e-14)
            np.testing.assert_allclose(fits.params[i], params, rtol=1e-6)
            np.testing.assert_allclose(fits.covariance[i], covariance, rtol=1e-5)


@pytest.mark.parametrize("name", ["Misra1a", "MGH10", "Eckerle4", "BoxBOD"])
def test_nist_certified_values_from_both_starts_in_one_call(name):
    # Both starts of a problem are two data sets of one call. MGH10 from start 1 (b1 down to
    # 1e-53 and back) takes 729 steps, as LevenbergMarquardt in model.fit does.
    problem = nist.read(nist.DATA / f"{name}.dat")
    starts = dict(zip(problem.parameter_names, np.stack(problem.starts).T))
    fits = fitting.fit_many(nist.FORMULAS[name], problem.x, np.stack([problem.response] * 2),
                            p0=starts, max_steps=2000)
    assert fits.converged.all(), fits.reasons
    for start in range(2):
        for value, certified, error, deviation in zip(
                fits.params[start], problem.certified, fits.standard_errors[start],
                problem.standard_deviations):
            assert nist.log_relative_error(value, certified) >= 6.0, (start, value, certified)
            assert nist.log_relative_error(error, deviation) >= 6.0, (start, error, deviation)
        assert nist.log_relative_error(fits.rss[start], problem.residual_sum_of_squares) >= 6.0


def test_a_converged_curve_stops_moving_while_the_others_go_on():
    x = np.linspace(0.0, 4.0, 30)
    exact = 2.0 * np.exp(-0.7 * x)
    far = 5.0 * np.exp(-3.0 * x) + 0.01 * np.sin(7 * x)
    starts = {"a": np.array([2.0, 1.0]), "k": np.array([0.7, 0.1])}
    together = fitting.fit_many("a*exp(-k*x)", x, np.stack([exact, far]), p0=starts)
    alone = fitting.fit_many("a*exp(-k*x)", x, exact[None], p0={"a": 2.0, "k": 0.7})
    assert together.steps[0] < together.steps[1], together.steps
    assert together.evaluations[0] < together.evaluations[1]
    # The early curve's result is the one it reaches alone, bit for bit: it did not move
    # during the other's later steps.
    np.testing.assert_array_equal(together.params[0], alone.params[0])
    assert together.converged.all()


def test_a_curve_whose_model_overflows_is_reported_without_spoiling_the_others(noisy_curves):
    x, y, fits = noisy_curves
    # NaN in the data is refused (tests/fitting/test_fit_many_arguments.py); a model that
    # overflows at the start (exp(-b2 x) at x = -1e7) ends that curve's fit alone.
    xs = np.repeat(x[None], 5, axis=0)
    xs[2, 3] = -1e7
    out = fitting.fit_many(MISRA, xs, y[:5], p0={"b1": 500.0, "b2": 1e-4}, loop="traced")
    assert out.reason_codes[2] == 6 and not out.converged[2]
    assert out.reasons[2].startswith("not finite: the model is inf or NaN at the start, at "
                                     "point 3 (x = -10000000.0)"), out.reasons[2]
    assert out.converged[[0, 1, 3, 4]].all()
    np.testing.assert_allclose(out.params[[0, 1, 3, 4]], fits.params[[0, 1, 3, 4]],
                               rtol=1e-12)
    assert not np.isfinite(out.rss[2]) and np.all(np.isfinite(out.rss[[0, 1, 3, 4]]))


def test_further_fits_of_a_formula_reuse_one_trace(noisy_curves):
    x, y, _ = noisy_curves
    specs = (ParameterSpec("b1", 0.0), ParameterSpec("b2", 0.0))
    function = batched_lm.fit_function(MISRA, batched_lm.trace_key(specs), True, False)
    before = function.experimental_get_tracing_count()
    assert before == 1  # the fixture's fits
    fitting.fit_many(MISRA, x[:10], y[:3, :10] * 1.01, p0={"b1": 300.0, "b2": 5e-4},
                     loop="traced")
    curve = fitting.fit_curve(layers.Formula(MISRA, params={"b1": 300.0, "b2": 5e-4}),
                              x, y[0], max_steps=50, loop="traced")
    assert function.experimental_get_tracing_count() == before  # other N, m and settings
    assert curve.converged and curve.steps <= 50
    assert set(curve.standard_errors) == {"b1", "b2"}


def test_several_input_columns_and_per_curve_inputs():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (4, 25, 2))
    y = 1.5 * x[..., 0] - 0.5 * x[..., 1] ** 2
    fits = fitting.fit_many("a*x1 + c*x2**2", x, y, p0={"a": 1.0, "c": 1.0})
    np.testing.assert_allclose(fits.params, np.tile([1.5, -0.5], (4, 1)), rtol=1e-9)
    line = fitting.fit_many("a + b*x", np.arange(5.0)[None].repeat(2, 0),
                            np.array([[1, 3, 5, 7, 9.0], [0, 1, 2, 3, 4.0]]),
                            p0={"a": 0.0, "b": 0.0})
    np.testing.assert_allclose(line.params, [[1.0, 2.0], [0.0, 1.0]], atol=1e-9)


@pytest.mark.parametrize("call, match", [
    (lambda: fitting.fit_many(MISRA, np.ones(3), np.ones((2, 3))), "p0 is required"),
    (lambda: fitting.fit_many(3, np.ones(3), np.ones((2, 3)), p0={}), "formula must be"),
    (lambda: fitting.fit_many(MISRA, np.ones(4), np.ones((2, 3)), p0={"b1": 1, "b2": 1}),
     "x must have shape"),
    (lambda: fitting.fit_many(MISRA, np.ones(3), np.ones(3), p0={"b1": 1, "b2": 1}),
     "y must have shape"),
    (lambda: fitting.fit_many(MISRA, np.ones(3), np.ones((2, 3)), p0={"b1": 1}),
     "p0 lacks a start for 'b2'.*keys \\['b1'\\]"),
    (lambda: fitting.fit_many(layers.Formula(MISRA, params={"b1": 1, "b2": 1}), np.ones(3),
                              np.ones((2, 3)), p0={"b1": 1}), "p0 must give a start"),
    (lambda: fitting.fit_many(MISRA, np.ones(3), np.ones((2, 3)), p0={"b1": np.nan, "b2": 1}),
     "p0 must be finite"),
    (lambda: fitting.fit_many(MISRA, np.ones(3), np.ones((2, 3)), p0={"b1": 1, "b2": 1},
                              sigma=np.zeros(3)), "sigma must be positive"),
    (lambda: fitting.fit_many(MISRA, np.ones(1), np.ones((2, 1)), p0={"b1": 1, "b2": 1}),
     "at least as many points"),
    (lambda: fitting.fit_many(MISRA, np.ones(3), np.ones((2, 3)), p0={"b1": 1, "b2": 1},
                              max_steps=0), "max_steps"),
    (lambda: fitting.fit_curve(MISRA, np.ones(3), np.ones(3), p0={"b1": 1, "b2": 1},
                               max_epochs=3), "unknown setting"),
    (lambda: fitting.fit_many("b1*exp(-c*x)", np.ones(3), np.ones((2, 3)),
                              p0={"b1": 1, "b2": 1}), "p0 lacks a start for 'c'"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()

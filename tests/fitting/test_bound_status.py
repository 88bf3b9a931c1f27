"""Which parameters a fit reports on a bound: near it in the bounds' scale and within a
fraction of its standard error (`bound_status.BOUND_ERROR_FRACTION`), so an optimum inside the
bounds keeps its standard error however small it is next to the bounds' scale.

Reference: SciPy's `curve_fit` on the same data without bounds (the optimum lies inside
them), and a bound that holds its parameter (the unbounded optimum lies beyond it).
"""

import numpy as np
import pytest
from scipy.optimize import curve_fit

import graphfit as gf
from graphfit import fitting, layers, optimizers
from graphfit.fitting import bound_status


def _decay(x, a, k):
    return a * np.exp(-k * x)


def _case(which):
    rng = np.random.default_rng(0)
    if which == "small rate, min 0":  # k = 5e-8 lies within 1e-7·max(1, |0|) of its bound
        x = np.linspace(0, 5e7, 40)
        return x, 2.0 * np.exp(-5e-8 * x) + rng.normal(0, 0.01, 40), {"min": 0.0}, 1e-8
    x = np.linspace(0, 100, 40)  # k = 0.05 lies within 1e-7·(max − min) of min
    return x, 3.0 * np.exp(-0.05 * x) + rng.normal(0, 0.01, 40), {"min": 0.0, "max": 1e6}, 0.1


@pytest.mark.parametrize("which", ["small rate, min 0", "wide bounds"])
def test_an_optimum_inside_the_bounds_is_varied_with_scipys_errors(which):
    x, y, bounds, start = _case(which)
    values, cov = curve_fit(_decay, x, y, p0=[1.0, start])
    p0 = {"a": 1.0, "k": {"value": start, **bounds}}
    fit = fitting.fit_curve("a*exp(-k*x)", x, y, p0=p0)
    assert fit.status == {"a": "varied", "k": "varied"} and fit.dof == 38
    np.testing.assert_allclose(list(fit.values.values()), values, rtol=1e-6)
    np.testing.assert_allclose(list(fit.standard_errors.values()), np.sqrt(np.diag(cov)),
                               rtol=1e-5)
    many = fitting.fit_many("a*exp(-k*x)", x, np.stack([y, y]), p0=p0, loop="traced")
    assert (many.status == "varied").all()
    np.testing.assert_allclose(many.standard_errors, np.sqrt(np.diag(cov))[None].repeat(2, 0),
                               rtol=1e-5)


def test_the_model_report_keeps_an_inner_optimum_near_a_wide_bound_varied():
    x, y, bounds, start = _case("wide bounds")
    values, cov = curve_fit(_decay, x, y, p0=[1.0, start])
    formula = layers.Formula("a*exp(-k*x)", params={"a": 1.0, "k": {"value": start, **bounds}})
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(x, y, batch_size=None, epochs=100, verbose=0)
    fitted = model.fit_report(x, y)
    assert [p.status for p in fitted.parameters] == ["varied", "varied"]
    np.testing.assert_allclose([p.stderr for p in fitted.parameters], np.sqrt(np.diag(cov)),
                               rtol=1e-5)
    assert fitted.statistics["dof"] == 38


def test_a_bound_that_holds_its_parameter_is_still_reported():
    # The unbounded optimum has c = -0.2: c >= 0 ends 1e-17 from its bound, far below its
    # free standard error, and both loops report it there.
    x = np.linspace(0.0, 4.0, 20)
    y = 3.0 * np.exp(-1.1 * x) - 0.2 + 0.01 * np.random.default_rng(5).standard_normal(20)
    fit = fitting.fit_curve("a*exp(-k*x) + c", x, y,
                            p0={"a": 1.0, "k": 0.3, "c": {"value": 0.05, "min": 0.0}})
    assert fit.status == {"a": "varied", "k": "varied", "c": "at lower bound"}
    assert np.isnan(fit.standard_errors["c"]) and fit.dof == 18


def test_the_error_fraction_decides_only_near_a_bound():
    values = np.array([[5e-8, 1e-17, 0.5]])
    lows, highs, vary = [0.0, 0.0, 0.0], [np.inf, np.inf, 1.0], [True, True, True]
    assert bound_status.parameter_status(values, lows, highs, vary).tolist() == [
        ["at lower bound", "at lower bound", "varied"]]
    errors = np.array([[1.5e-10, 5e-3, 1e9]])
    assert bound_status.parameter_status(values, lows, highs, vary, errors).tolist() == [
        ["varied", "at lower bound", "varied"]]
    unknown = np.array([[np.inf, np.nan, 0.0]])  # no error: the distance alone decides
    assert bound_status.parameter_status(values, lows, highs, vary, unknown).tolist() == [
        ["at lower bound", "at lower bound", "varied"]]

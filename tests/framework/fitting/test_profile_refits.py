"""The re-fits behind profile intervals (`fitting.profile_refits`): `fit_curve`'s Python loop
for a float64 Formula, the traced `model.fit` for what `fit_curve` does not take; weights,
zero weights and a formula with nothing left to fit, against closed-form re-fits."""

import re

import numpy as np
import pytest

import graphfit as gf
from graphfit import layers
from graphfit.fitting import intervals, profile_refits

X = np.linspace(0.0, 4.0, 15)
SIGMA = 0.02 + 0.03 * X / 4.0
Y = 3.0 * np.exp(-0.8 * X) + SIGMA * np.random.default_rng(4).normal(0.0, 1.0, X.size)


def _built(expression, params, dtype="float64", columns=1):
    formula = layers.Formula(expression, params=params, dtype=dtype)
    gf.Sequential([formula], input_shape=(columns,), dtype=dtype)  # builds its variables
    return formula


def test_a_weighted_refit_leaves_zero_weight_points_out_in_both_kinds_of_refit():
    # Point 4 is an outlier with weight 0: the re-fit of a with k held at 0.7 is the weighted
    # least squares over the other points (closed form: the model is linear in a).
    y = Y.copy()
    y[4] = 50.0
    weights = 1.0 / SIGMA ** 2
    weights[4] = 0.0
    shape = np.exp(-0.7 * X)
    kept = weights > 0
    a = np.sum((weights * shape * y)[kept]) / np.sum((weights * shape * shape)[kept])
    expected = float(np.sum((weights * (a * shape - y) ** 2)[kept]))
    formula = _built("a*exp(-k*x)", {"a": 1.0, "k": 0.3})
    curve = profile_refits.held_refits(formula, "k", X, y, weights, epochs=500)
    assert isinstance(curve, profile_refits.CurveRefits)
    refit = curve.chi_square(0.7)
    assert refit.converged, refit.reason
    assert refit.chi_square == pytest.approx(expected, rel=1e-9), "fit_curve's re-fit"
    assert curve.starts.by_held[0.7]["a"] == pytest.approx(a, rel=1e-7)
    traced = profile_refits.ModelRefits(formula, "k", X, y, weights, epochs=500).chi_square(0.7)
    assert traced.converged, traced.reason
    assert traced.chi_square == pytest.approx(expected, rel=1e-9), "the traced re-fit"


def test_a_refit_that_runs_out_of_steps_has_not_converged():
    formula = _built("a*exp(-k*x)", {"a": 1.0, "k": 0.3})
    refit = profile_refits.CurveRefits(formula, "k", X, Y, None, epochs=1).chi_square(0.7)
    assert not refit.converged and refit.reason == "max_steps reached"


def test_held_refits_picks_the_traced_fit_where_fit_curve_cannot_refit():
    # A global fit (a per data set: fit_curve takes one value per parameter) and a float32
    # Formula (a float64 re-fit would undercut its χ² by rounding) keep model.fit.
    inputs = np.stack([X, np.repeat([0.0, 1.0, 2.0], 5)], 1)
    global_fit = _built("a*exp(-k*x1)", {"a": [1.0, 2.0, 3.0], "k": 0.3}, columns=2)
    single = _built("a*exp(-k*x)", {"a": 1.0, "k": 0.3}, dtype="float32")
    for formula, x in ((global_fit, inputs), (single, X)):
        refits = profile_refits.held_refits(formula, "k", x, Y, None, epochs=10)
        assert isinstance(refits, profile_refits.ModelRefits), formula.params


@pytest.mark.parametrize("weights, shown", [(-np.ones(X.size), "values from -1 to -1"),
                                            (np.ones(3), "shape (3,)")])
def test_sample_weights_that_fit_could_not_have_used_are_refused(weights, shown):
    formula = _built("a*exp(-k*x)", {"a": 1.0, "k": 0.3})
    with pytest.raises(ValueError, match=re.escape("one weight >= 0 per point of y (15)") + ".*"
                       + re.escape(shown)):
        profile_refits.CurveRefits(formula, "k", X, Y, weights, epochs=10)


def test_a_one_parameter_profile_is_its_chi_square_and_for_a_line_the_linear_interval():
    # y = a·x: nothing is left to re-fit with a held, and χ²(a) is a parabola, so the
    # profile interval is â ± t·stderr exactly (F(1, dof) = t²).
    formula = _built("a*x", {"a": 1.0})
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    formula.set_values({"a": float(X @ Y / (X @ X))})  # the least-squares a
    report = model.fit_report(X, Y)
    found = intervals.profile_intervals(model, X, Y, report=report)
    assert found["a"] == pytest.approx(intervals.linear_intervals(report)["a"], rel=1e-9)

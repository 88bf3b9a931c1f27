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


def test_a_profile_next_to_a_two_sided_bound_ends_where_the_exact_profile_crosses():
    # b ≤ 0.298 (its optimum 0.2948 lies inside) or ≤ 0.29 (the fit ends on the bound): the
    # re-fits of b end on the bound as a moves out, and the next re-fit started one float
    # inside it, where the sigmoid's slope is about 1e-16: it stopped at once on ftol, and
    # a's lower end came out 5.0892 instead of 5.0225 with no warning. The reference: the
    # profile χ² by SciPy's bounded 1-D minimisation over b, which must cross the threshold
    # at each end.
    from scipy import optimize

    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 10.0, 40)
    y = 5.0 * np.exp(0.3 * x) * (1.0 + 0.02 * rng.standard_normal(40))

    def profile(a, b_max):
        best = optimize.minimize_scalar(lambda b: np.sum((a * np.exp(b * x) - y) ** 2),
                                        bounds=(0.0, b_max), method="bounded",
                                        options={"xatol": 1e-13})
        return best.fun

    for b_max in (0.298, 0.29):
        formula = layers.Formula("a*exp(b*x)", params={"a": 1.0, "b": {
            "value": 0.25, "min": 0.0, "max": b_max}}, dtype="float64")
        model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
        model.compile(optimizer="LevenbergMarquardt", loss="mse")
        model.fit(x[:, None], y[:, None], batch_size=None, epochs=500, verbose=0)
        report = model.fit_report(x[:, None], y[:, None])
        chi_min = report.statistics["chi_square"]
        threshold = intervals.f_threshold(chi_min, report.dof, 0.95)
        low, high = intervals.profile_intervals(model, x[:, None], y[:, None], names=["a"],
                                                report=report)["a"]
        for end in (low, high):  # sqrt(Δχ²) to the profile's tolerance (1e-6) and more
            np.testing.assert_allclose(np.sqrt(profile(end, b_max) - chi_min),
                                       np.sqrt(threshold - chi_min), rtol=1e-5,
                                       err_msg=f"b ≤ {b_max}: a's end {end}")


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-5), ("float32", 1e-3)])
def test_a_profile_with_another_parameter_on_a_one_sided_bound_lets_it_come_off(dtype, rtol):
    # c >= 0 ends on its bound; profiling k, the re-fits started c one float inside (5e-324,
    # where the softplus's slope is the gap) and left it there, so k's upper end was the
    # profile's with c held at 0 and below: 0.7016 where it is 0.7050 (44 % of the half
    # width short); 0.7031 by the traced re-fits of a float32 Formula. The reference: the
    # profile χ² by SciPy's bounded least_squares, a and c free, c >= 0, at each end
    # graphfit gives, against graphfit's own threshold.
    from scipy import optimize

    rng = np.random.default_rng(5)
    x = np.linspace(0.0, 5.0, 30)
    y = 2.0 * np.exp(-0.7 * x) + 0.003 + rng.normal(0.0, 0.01, 30)

    def profile(k):
        best = optimize.least_squares(lambda q: q[0] * np.exp(-k * x) + q[1] - y, [2.0, 0.01],
                                      bounds=([-np.inf, 0.0], np.inf), xtol=1e-15, ftol=1e-15)
        return 2.0 * best.cost

    formula = layers.Formula("a*exp(-k*x) + c", params={
        "a": 1.0, "k": 0.3, "c": {"value": 0.1, "min": 0.0}}, dtype=dtype)
    model = gf.Sequential([formula], input_shape=(1,), dtype=dtype)
    model.compile(optimizer="LevenbergMarquardt", loss="mse")
    model.fit(x[:, None], y[:, None], batch_size=None, epochs=500, verbose=0)
    report = model.fit_report(x[:, None], y[:, None])
    assert report.parameters[2].status == "at lower bound"
    chi_min = report.statistics["chi_square"]
    threshold = intervals.f_threshold(chi_min, report.dof, 0.95)
    low, high = intervals.profile_intervals(model, x[:, None], y[:, None], names=["k"],
                                            report=report)["k"]
    assert high > 0.704  # c comes off its bound on this side
    for end in (low, high):
        np.testing.assert_allclose(np.sqrt(profile(end) - chi_min),
                                   np.sqrt(threshold - chi_min), rtol=rtol,
                                   err_msg=f"k's end {end}")


def test_a_fit_without_degrees_of_freedom_has_no_profile_and_says_why():
    # 3 points, 3 parameters: the F-test threshold divides by dof = 0 (a bare
    # ZeroDivisionError before); a clear ValueError now, and no linear interval either.
    x, y = np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.5, 3.2])
    formula = layers.Formula("a + b*x + c*x**2", params={"a": 0.0, "b": 0.0, "c": 0.0},
                             dtype="float64")
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    model.compile(optimizer="LevenbergMarquardt", loss="mse")
    model.fit(x[:, None], y[:, None], batch_size=None, epochs=50, verbose=0)
    with pytest.raises(ValueError, match=r"3 points for 3 varied parameters \(dof 0\)"):
        intervals.profile_intervals(model, x[:, None], y[:, None])
    assert intervals.linear_intervals(model.fit_report(x[:, None], y[:, None]))["a"] is None
    assert np.isnan(intervals.f_threshold(1.0, 0, 0.95))

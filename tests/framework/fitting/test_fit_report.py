"""Fit reports, intervals, bands, bounds, fixed parameters and global fits, against SciPy.

Each model is fitted once (module fixtures); SciPy's `curve_fit` and `least_squares` on the
same data are the references. NIST's certified standard errors are checked in
tests/optimizers/levenberg_marquardt/test_nist.py, on the fits that test already makes.
"""

import json
import math

import numpy as np
import pytest
from scipy import optimize, stats

import graphfit as gf
from graphfit import fitting, layers, optimizers
from graphfit.fitting import intervals

X = np.linspace(0.0, 4.0, 25)
SIGMA = 0.02 + 0.03 * X / 4.0  # heteroscedastic: a weighted fit differs from an unweighted one
NOISE = np.random.default_rng(3).normal(0.0, 1.0, X.size)
Y = 3.0 * np.exp(-0.8 * X) + 0.2 + SIGMA * NOISE


def _fitted(params, x=X, y=Y, sample_weight=None, expression="a*exp(-k*x) + c"):
    formula = layers.Formula(expression, params=params, dtype="float64")
    model = gf.Sequential([formula], input_shape=(np.shape(x)[1] if np.ndim(x) == 2 else 1,),
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(x, y, sample_weight=sample_weight, batch_size=None, epochs=300, verbose=0)
    assert model.stop_reason.startswith("LevenbergMarquardt converged"), model.stop_reason
    return model, formula


@pytest.fixture(scope="module")
def weighted():
    return _fitted({"a": 1.0, "k": 0.3, "c": 0.0}, sample_weight=1.0 / SIGMA ** 2)


def _curve(x, a, k, c):
    return a * np.exp(-k * x) + c


@pytest.mark.parametrize("absolute_sigma", [False, True])
def test_weighted_fit_matches_scipy_curve_fit(weighted, absolute_sigma):
    model, formula = weighted
    values, covariance = optimize.curve_fit(_curve, X, Y, p0=[1.0, 0.3, 0.0], sigma=SIGMA,
                                            absolute_sigma=absolute_sigma)
    report = model.fit_report(X, Y, sample_weight=1.0 / SIGMA ** 2,
                              absolute_sigma=absolute_sigma)
    assert [p.name for p in report.parameters] == ["a", "k", "c"]
    np.testing.assert_allclose([p.value for p in report.parameters], values, rtol=1e-7)
    np.testing.assert_allclose(report.covariance, covariance, rtol=1e-5)
    np.testing.assert_allclose([p.stderr for p in report.parameters],
                               np.sqrt(np.diag(covariance)), rtol=1e-6)
    # χ² and the statistics lmfit prints, from their definitions.
    chi_square = float(np.sum(((Y - _curve(X, *values)) / SIGMA) ** 2))
    s = report.statistics
    assert (s["points"], s["varying_parameters"], s["dof"]) == (25, 3, 22)
    assert s["chi_square"] == pytest.approx(chi_square, rel=1e-9)
    assert s["reduced_chi_square"] == pytest.approx(chi_square / 22, rel=1e-9)
    assert s["aic"] == pytest.approx(25 * math.log(chi_square / 25) + 6, rel=1e-9)
    assert s["bic"] == pytest.approx(25 * math.log(chi_square / 25) + 3 * math.log(25),
                                     rel=1e-9)
    w = 1 / SIGMA ** 2
    mean = np.sum(w * Y) / np.sum(w)
    assert s["r_squared"] == pytest.approx(1 - chi_square / np.sum(w * (Y - mean) ** 2))
    correlation = covariance / np.outer(np.sqrt(np.diag(covariance)),
                                        np.sqrt(np.diag(covariance)))
    np.testing.assert_allclose(report.correlation, correlation, atol=1e-6)
    assert report.strong_correlations == [
        (a, b, pytest.approx(correlation[i, j], abs=1e-6)) for i, a in enumerate("akc")
        for j, b in enumerate("akc") if j > i and abs(correlation[i, j]) > 0.9]
    assert report.fit["optimizer"] == "LevenbergMarquardt" and report.fit["steps"] > 0
    assert "converged" in report.fit["stop_reason"]
    text = str(report)
    assert "[[Variables]]" in text and "reduced chi-square" in text and "a:" in text
    assert json.loads(report.to_json())["parameters"][1]["name"] == "k"


def test_linear_intervals_and_bands_by_the_delta_method(weighted):
    model, _ = weighted
    report = model.fit_report(X, Y, sample_weight=1.0 / SIGMA ** 2)
    t = stats.t.ppf(0.975, 22)
    for p, (low, high) in zip(report.parameters, intervals.linear_intervals(report).values()):
        assert (low, high) == pytest.approx((p.value - t * p.stderr, p.value + t * p.stderr))
    grid = np.array([0.0, 1.5, 4.0])
    values = [p.value for p in report.parameters]
    # ∂f/∂(a, k, c) by hand at the grid
    gradient = np.stack([np.exp(-values[1] * grid), -values[0] * grid *
                         np.exp(-values[1] * grid), np.ones_like(grid)], axis=1)
    half = t * np.sqrt(np.einsum("ij,jk,ik->i", gradient, report.covariance, gradient))
    fit, low, high = intervals.band(model, report, grid)
    np.testing.assert_allclose(fit, _curve(grid, *values), rtol=1e-12)
    np.testing.assert_allclose(high - fit, half, rtol=1e-6)
    np.testing.assert_allclose(fit - low, half, rtol=1e-6)
    # A weighted fit's prediction band: the new measurement's σ at each x, in σ units
    # scaled by s² (the delta method by hand: Var = g C gᵀ + s² σ₀²).
    new_sigma = 0.02 + 0.03 * grid / 4.0
    _, low, high = intervals.band(model, report, grid, prediction=True, sigma=new_sigma)
    s2 = report.statistics["reduced_chi_square"]
    np.testing.assert_allclose(high - fit, t * np.sqrt(half ** 2 / t ** 2 + s2 * new_sigma ** 2),
                               rtol=1e-6)
    # The half-width is in y units: about t·σ₀ (s ≈ 1 for these data), not t·s.
    assert np.all(high - fit < 3 * new_sigma + half)
    with pytest.raises(ValueError, match="weighted fit needs sigma="):
        intervals.band(model, report, grid, prediction=True)
    with pytest.raises(ValueError, match="one per example of x"):
        intervals.band(model, report, grid, prediction=True, sigma=[0.1, 0.2])
    with pytest.raises(ValueError, match="positive and finite"):
        intervals.band(model, report, grid, prediction=True, sigma=[0.1, 0.0, 0.1])
    absolute = model.fit_report(X, Y, sample_weight=1.0 / SIGMA ** 2, absolute_sigma=True)
    fit, low, high = intervals.band(model, absolute, grid, prediction=True, sigma=0.05)
    _, confidence, _ = intervals.band(model, absolute, grid)
    np.testing.assert_allclose(high - fit, t * np.sqrt(((fit - confidence) / t) ** 2 + 0.05 ** 2),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="level must be a probability"):
        intervals.linear_intervals(report, level=95)


def test_profile_intervals_match_a_brute_force_grid_of_refits():
    x = np.linspace(0.0, 4.0, 12)
    y = 3.0 * np.exp(-0.8 * x) + np.random.default_rng(0).normal(0.0, 0.08, x.size)
    model, _ = _fitted({"a": 1.0, "k": 0.3}, x, y, expression="a*exp(-k*x)")
    report = model.fit_report(x, y)
    found = intervals.profile_intervals(model, x, y, level=0.95, report=report)
    chi_min = report.statistics["chi_square"]
    threshold = chi_min * (1 + stats.f.ppf(0.95, 1, 10) / 10)  # lmfit's F-test, nfix=1
    best = report.values()

    def profile(name, value):  # re-fit the other parameter with SciPy
        other = "k" if name == "a" else "a"

        def residuals(p):
            a, k = (value, p[0]) if name == "a" else (p[0], value)
            return a * np.exp(-k * x) - y
        fit = optimize.least_squares(residuals, [best[other]], method="lm", xtol=1e-15,
                                     ftol=1e-15)
        return 2 * fit.cost

    for name, (low, high) in found.items():
        linear_low, linear_high = intervals.linear_intervals(report)[name]
        width = linear_high - linear_low
        grid = np.linspace(linear_low - width / 2, linear_high + width / 2, 201)
        chi = np.array([profile(name, v) for v in grid])
        left, right = grid < best[name], grid > best[name]
        brute_low = np.interp(threshold, chi[left][::-1], grid[left][::-1])
        brute_high = np.interp(threshold, chi[right], grid[right])
        assert (low, high) == pytest.approx((brute_low, brute_high), abs=1e-4 * width)
        # the profile interval is not the linear one: the model is curved
        assert abs(low - linear_low) > 1e-3 * width


def _profile_reference(chi_square, report, name, level=0.95):
    """The ends where `chi_square(value)` (an exact re-fit) crosses the F-test threshold,
    by brentq, and the linear interval's width."""
    threshold = intervals.f_threshold(report.statistics["chi_square"], report.dof, level)
    low, high = intervals.linear_intervals(report, level)[name]
    width, best = high - low, report[name].value
    ends = [optimize.brentq(lambda v: chi_square(v) - threshold, a, b, xtol=1e-14)
            for a, b in ((low - width, best), (best, high + width))]
    return tuple(ends), width


def test_profile_intervals_of_a_weighted_fit_match_exact_refits(weighted):
    model, _ = weighted
    report = model.fit_report(X, Y, sample_weight=1.0 / SIGMA ** 2)

    def chi_square(k):  # a and c re-fitted in closed form (linear in them), weighted by 1/σ
        basis = np.stack([np.exp(-k * X), np.ones_like(X)], 1) / SIGMA[:, None]
        p, *_ = np.linalg.lstsq(basis, Y / SIGMA, rcond=None)
        return float(np.sum((basis @ p - Y / SIGMA) ** 2))
    expected, width = _profile_reference(chi_square, report, "k")
    found = intervals.profile_intervals(model, X, Y, sample_weight=1.0 / SIGMA ** 2,
                                        names=["k"], report=report)
    assert found["k"] == pytest.approx(expected, abs=1e-6 * width), "weighted re-fits"


def test_bounded_parameter_ends_on_its_bound_and_a_fixed_one_stays():
    # Unbounded, a is about 3.0: with max 2.5 the fit ends on the bound; c stays at 0.1.
    model, formula = _fitted({"a": {"value": 1.0, "max": 2.5}, "k": 0.3,
                              "c": {"value": 0.1, "vary": False}})
    assert [v.name.split("/")[-1] for v in model.trainable_variables] == ["a:0", "k:0"]
    values = formula.values()
    assert values["a"] == pytest.approx(2.5, abs=1e-9) and values["c"] == 0.1
    # The other parameter as SciPy fits it with a and c held there.
    k = optimize.least_squares(lambda p: _curve(X, 2.5, p[0], 0.1) - Y, [0.3], xtol=1e-15,
                               ftol=1e-15).x[0]
    assert values["k"] == pytest.approx(k, rel=1e-8)
    report = model.fit_report(X, Y)
    assert [(p.name, p.status) for p in report.parameters] == [
        ("a", "at upper bound"), ("k", "varied"), ("c", "fixed")]
    assert report["a"].stderr is None and report["c"].stderr is None
    assert report["a"].max == 2.5 and report.statistics["varying_parameters"] == 1
    _, covariance = optimize.curve_fit(lambda x, k: _curve(x, 2.5, k, 0.1), X, Y, p0=[k])
    assert report["k"].stderr == pytest.approx(math.sqrt(covariance[0, 0]), rel=1e-5)
    assert "at upper bound" in str(report) and "fixed" in str(report)
    # k's profile: each re-fit keeps a <= 2.5 and c at 0.1; a re-fitted in closed form,
    # clipped to its bound, is the reference. a starts on its bound, 2.5 exactly (as a fit
    # that ends there to rounding leaves it), where fit_curve takes no start.
    formula.set_values({"a": 2.5})
    assert formula.values()["a"] == 2.5

    def chi_square(k):
        shape = np.exp(-k * X)
        a = min((shape @ (Y - 0.1)) / (shape @ shape), 2.5)
        return float(np.sum((a * shape + 0.1 - Y) ** 2))
    expected, width = _profile_reference(chi_square, report, "k")
    found = intervals.profile_intervals(model, X, Y, report=report)
    assert list(found) == ["k"]
    assert found["k"] == pytest.approx(expected, abs=1e-6 * width), "re-fits beside a bound"


def test_global_fit_with_a_shared_parameter_matches_scipy():
    sets = np.repeat([0, 1, 2], 15)
    x = np.tile(np.linspace(0.0, 5.0, 15), 3)
    amplitudes = np.array([1.0, 2.0, 3.5])
    y = amplitudes[sets] * np.exp(-0.65 * x) + np.random.default_rng(5).normal(0, 0.03, x.size)
    inputs = np.stack([x, sets], axis=1)
    model, formula = _fitted({"a": [1.0, 1.0, 1.0], "k": {"value": 0.3, "min": 0.0}},
                             inputs, y, expression="a*exp(-k*x1)")
    assert formula.data_sets == 3

    def stacked(data, a0, a1, a2, k):
        xs, ss = data
        return np.array([a0, a1, a2])[ss.astype(int)] * np.exp(-k * xs)
    values, covariance = optimize.curve_fit(stacked, (x, sets), y, p0=[1, 1, 1, 0.3])
    report = model.fit_report(inputs, y)
    assert [p.name for p in report.parameters] == ["a[0]", "a[1]", "a[2]", "k"]
    assert [p.data_set for p in report.parameters] == [0, 1, 2, None]
    np.testing.assert_allclose([p.value for p in report.parameters], values, rtol=1e-7)
    # k is bounded (min 0) but inside: its standard error is mapped back to k's units
    np.testing.assert_allclose([p.stderr for p in report.parameters],
                               np.sqrt(np.diag(covariance)), rtol=1e-5)
    assert [entry["points"] for entry in report.data_sets] == [15, 15, 15]
    assert report.data_sets[1]["parameters"] == ["a[1]", "k"]
    total = sum(entry["chi_square"] for entry in report.data_sets)
    assert total == pytest.approx(report.statistics["chi_square"])
    assert "[[Data set 2]]" in str(report)


def test_undetermined_parameters_are_named_instead_of_nonsense_errors():
    formula = layers.Formula("a*b*exp(-k*x)", params={"a": 2.0, "b": 1.5, "k": 0.8},
                             dtype="float64")
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    report = fitting.fit_report(model, X, 3.0 * np.exp(-0.8 * X) + 0.01 * NOISE)
    assert report.undetermined == [["a", "b"]]
    assert report["a"].status == report["b"].status == "undetermined"
    assert report["a"].stderr is None and report["k"].stderr is not None
    assert "do not determine a and b (only a combination of them)" in str(report)


@pytest.mark.parametrize("params, match", [
    ({"a": {"value": 1.0, "mni": 0}, "k": 1.0}, "unknown: 'mni'"),
    ({"a": {"min": 0}, "k": 1.0}, "value is missing"),
    ({"a": {"value": 1.0, "min": 2.0, "max": 1.0}, "k": 1.0}, "needs min < max"),
    ({"a": {"value": 3.0, "max": 2.0}, "k": 1.0}, "strictly inside its bounds"),
    ({"a": {"value": 1.0, "vary": "no"}, "k": 1.0}, "vary of 'a' must be true or false"),
    ({"a": [1.0, 2.0], "k": [1.0]}, "the same number"),
    ({"a": [], "k": 1.0}, "empty list"),
])
def test_bad_parameter_specs_are_refused(params, match):
    with pytest.raises(ValueError, match=match):
        layers.Formula("a*exp(-k*x)", params=params)


def test_set_values_and_config_round_trip():
    formula = layers.Formula("a*exp(-k*x)", params={"a": {"value": 1.0, "min": 0.0,
                                                          "max": 4.0}, "k": [0.1, 0.2]},
                             dtype="float64")
    assert formula.params == {"a": {"value": 1.0, "min": 0.0, "max": 4.0}, "k": [0.1, 0.2]}
    formula(np.array([[0.0, 0.0], [1.0, 1.0]]))
    values = formula.values()
    assert values["a"] == pytest.approx(1.0) and values["k"] == pytest.approx([0.1, 0.2])
    formula.set_values({"a": 3.5, "k": [0.3, 0.4]})
    assert formula.values()["a"] == pytest.approx(3.5, rel=1e-12)
    with pytest.raises(ValueError, match="must lie in its bounds"):
        formula.set_values({"a": 5.0})
    with pytest.raises(ValueError, match="takes a list of 2 numbers"):
        formula.set_values({"k": 0.3})
    clone = layers.Formula.from_config(formula.get_config())
    assert clone.params == formula.params


def test_fit_many_refuses_global_formulas():
    # Bounded and fixed parameters are fitted (tests/fitting/test_fit_many_bounds.py); a
    # parameter given per data set of a global fit is not.
    formula = layers.Formula("a*exp(-k*x)", params={"a": 1.0, "k": [0.3, 0.4]})
    with pytest.raises(ValueError, match="'k' is given per data set"):
        fitting.fit_curve(formula, X, Y)

"""`fitting.fit_many` with bounded and fixed parameters, data sets of different lengths, and
its counts of function and Jacobian evaluations.

References: each data set fitted alone by `fit_curve` (the batched loop must not let one data
set's bounds, fixed values or padding touch another's), a bounded `Formula` model fitted by
`LevenbergMarquardt` and reported by `fit_report` (the single-fit path whose transform and
report `fit_many` reuses), and evaluation counts by hand.
"""

import numpy as np
import pytest

import graphfit as gf
from graphfit import fitting, layers, optimizers
from graphfit.fitting import batched_lm
from graphfit.layers.formula_parameters import ParameterSpec

DECAY = "a*exp(-k*x) + c"
X = np.linspace(0.0, 4.0, 20)
# k <= 0.5 with c fixed: the first two data sets' unbounded optima (k = 0.8, 1.1) lie beyond
# the bound, the last two's (0.3, 0.2) inside.
TRUTH = [(2.0, 0.8, 0.1), (3.0, 1.1, -0.2), (1.5, 0.3, 0.0), (2.5, 0.2, 0.3)]
PARAMS = {"a": {"value": 1.0, "min": 0.0}, "k": {"value": 0.3, "min": 0.0, "max": 0.5},
          "c": {"value": 0.0, "vary": False}}


def _data():
    rng = np.random.default_rng(5)
    y = np.stack([a * np.exp(-k * X) + c for a, k, c in TRUTH])
    return y + 0.01 * rng.standard_normal(y.shape)


@pytest.fixture(scope="module")
def bounded():
    y = _data()
    formula = layers.Formula(DECAY, params=PARAMS)
    c = np.array([t[2] for t in TRUTH])  # the fixed c, one value per data set
    # The traced loop (four curves would take the Python loop, tests/fitting/test_python_loop.py).
    fits = fitting.fit_many(formula, X, y, p0={"a": 1.0, "k": 0.3, "c": c}, loop="traced")
    return y, c, fits


def test_bounds_and_fixed_equal_each_data_set_fitted_alone(bounded):
    y, c, fits = bounded
    assert fits.converged.all(), fits.reasons
    assert fits.status[:, 1].tolist() == ["at upper bound", "at upper bound", "varied",
                                          "varied"]
    assert (fits.status[:, 2] == "fixed").all() and (fits.status[:, 0] == "varied").all()
    np.testing.assert_array_equal(fits.params[:, 2], c)  # a fixed parameter does not move
    assert np.isnan(fits.standard_errors[:, 2]).all()
    assert np.isnan(fits.standard_errors[:2, 1]).all()  # on its bound: no standard error
    assert fits.dof.tolist() == [19, 19, 18, 18]  # points minus the free parameters
    for i in range(len(y)):
        params = {"a": 1.0, "k": PARAMS["k"], "c": {"value": c[i], "vary": False}}
        alone = fitting.fit_curve(DECAY, X, y[i], p0={**params, "a": PARAMS["a"]})
        np.testing.assert_allclose(fits.params[i], list(alone.values.values()), rtol=1e-6)
        np.testing.assert_allclose(fits.standard_errors[i],
                                   list(alone.standard_errors.values()), rtol=1e-6)
        assert alone.status == dict(zip(fits.names, fits.status[i])) and alone.dof == \
            fits.dof[i]
    np.testing.assert_allclose(fits.params[:2, 1], 0.5, rtol=1e-6)


def test_the_report_per_data_set_equals_fit_report_of_a_bounded_formula_model(bounded):
    # The single-fit path: a Formula model with the same bounds, fitted by LevenbergMarquardt.
    y, c, fits = bounded
    i = 0
    formula = layers.Formula(DECAY, params={**PARAMS, "c": {"value": c[i], "vary": False}},
                             dtype="float64")
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(X, y[i], batch_size=None, epochs=200, verbose=0)
    single = fitting.fit_report(model, X, y[i])
    many = fits.report(i)
    assert [p.status for p in many.parameters] == [p.status for p in single.parameters] == \
        ["varied", "at upper bound", "fixed"]
    np.testing.assert_allclose([p.value for p in many.parameters],
                               [p.value for p in single.parameters], rtol=1e-6)
    assert many.parameters[1].stderr is None and many.parameters[2].stderr is None
    np.testing.assert_allclose(many.parameters[0].stderr, single.parameters[0].stderr,
                               rtol=1e-5)
    for key in ("points", "varying_parameters", "dof"):
        assert many.statistics[key] == single.statistics[key]
    np.testing.assert_allclose(many.statistics["chi_square"], single.statistics["chi_square"],
                               rtol=1e-8)
    assert "[at upper bound] (min=0, max=0.5)" in str(many)


@pytest.mark.parametrize("loop", ["python", "traced"])
def test_different_lengths_equal_each_data_set_fitted_alone(loop):
    rng = np.random.default_rng(2)
    lengths = (9, 14, 20)
    xs = [np.linspace(0.0, 4.0, n) for n in lengths]
    ys = [a * np.exp(-k * x) + 0.01 * rng.standard_normal(x.shape)
          for x, (a, k) in zip(xs, ((2.0, 0.5), (3.0, 1.5), (1.0, 0.2)))]
    start = {"a": 1.0, "k": 1.0}
    fits = fitting.fit_many("a*exp(-k*x)", xs, ys, p0=start, loop=loop)
    # The same as one NaN-padded array and its mask.
    padded_x = np.stack([np.pad(x, (0, 20 - len(x)), constant_values=np.nan) for x in xs])
    padded_y = np.stack([np.pad(y, (0, 20 - len(y)), constant_values=np.nan) for y in ys])
    masked = fitting.fit_many("a*exp(-k*x)", padded_x, padded_y, p0=start,
                              mask=np.isfinite(padded_y), loop=loop)
    assert fits.points.tolist() == list(lengths) and fits.dof.tolist() == [7, 12, 18]
    for i, (x, y) in enumerate(zip(xs, ys)):
        alone = fitting.fit_curve("a*exp(-k*x)", x, y, p0=start, loop=loop)
        for out in (fits, masked):
            np.testing.assert_allclose(out.params[i], list(alone.values.values()), rtol=1e-9)
            np.testing.assert_allclose(out.standard_errors[i],
                                       list(alone.standard_errors.values()), rtol=1e-8)
            np.testing.assert_allclose(out.rss[i], alone.rss, rtol=1e-9)
            assert out.report(i).statistics["points"] == lengths[i]
    statistics = fits.statistics()
    assert statistics["dof"].tolist() == [7, 12, 18] and np.isfinite(statistics["aic"]).all()


def test_function_and_jacobian_evaluations_are_counted_by_hand():
    x = np.linspace(0.0, 4.0, 12)
    y = np.stack([2.0 * np.exp(-0.5 * x), 3.0 * np.exp(-1.5 * x)])
    start = {"a": 1.0, "k": 1.0}
    # One trial (one step of one attempt): the start's residuals and Jacobian, the trial
    # point's residuals and Jacobian (one backward pass) and, with geodesic acceleration,
    # the residuals on both sides of the step (SciPy's nfev and njev).
    for steps, geodesic, nfev, njev in ((1, True, 1 + 3, 2), (1, False, 1 + 1, 2),
                                        (3, True, 1 + 3 * 3, 4), (3, False, 1 + 3, 4)):
        fits = fitting.fit_many("a*exp(-k*x)", x, y, p0=start, max_steps=steps,
                                attempts_per_step=1, geodesic_acceleration=geodesic)
        assert fits.evaluations.tolist() == [nfev, nfev], (steps, geodesic)
        assert fits.jacobian_evaluations.tolist() == [njev, njev]
    fits = fitting.fit_many("a*exp(-k*x)", x, y, p0=start)
    trials = fits.jacobian_evaluations - 1
    assert (fits.evaluations == 1 + 3 * trials).all() and (trials >= fits.steps).all()
    report = fits.report(0)
    assert report.fit["function_evaluations"] == fits.evaluations[0]
    assert f"# function evals   = {fits.evaluations[0]}" in str(report)
    assert f"# Jacobian evals   = {fits.jacobian_evaluations[0]}" in str(report)


def test_no_retrace_for_new_data_lengths_starts_or_fixed_values(bounded):
    y, c, _ = bounded
    specs = tuple(ParameterSpec.of(name, given) for name, given in PARAMS.items())
    function = batched_lm.fit_function(DECAY, batched_lm.trace_key(specs), True, False)
    before = function.experimental_get_tracing_count()
    formula = layers.Formula(DECAY, params=PARAMS)
    fitting.fit_many(formula, X[:12], y[:3, :12] * 1.01, p0={"a": 2.0, "k": 0.2, "c": 0.5},
                     loop="traced")
    fitting.fit_many(formula, [X[:9], X], [y[0, :9], y[1]], max_steps=20, loop="traced")
    fitting.fit_curve(formula, X, y[2], loop="traced")
    assert function.experimental_get_tracing_count() == before == 1


@pytest.mark.parametrize("call, match", [
    (lambda: fitting.fit_many("a*exp(-k*x)", X, _data(),
                              p0={"a": 1.0, "k": {"value": 0.7, "max": 0.5}}),
     "strictly inside its bounds"),
    (lambda: fitting.fit_many(layers.Formula(DECAY, params=PARAMS), X, _data(),
                              p0={"a": 1.0, "k": np.array([0.1, 0.2, 0.6, 0.3]), "c": 0.0}),
     r"p0\['k'\]: the start 0.6 in data set 2 \(1 of 4 data sets\) must lie strictly inside "
     r"its bounds \[0, 0.5\]"),
    (lambda: fitting.fit_many("a*x", X, _data(), p0={"a": {"value": 1.0, "vary": False}}),
     "nothing to fit"),
    (lambda: fitting.fit_many("a*x", X, _data(), p0={"a": 1.0}, mask=np.ones(3, bool)),
     "mask must be a bool array"),
    (lambda: fitting.fit_many("a*x", [X, X[:3]], [X, X[:4]], p0={"a": 1.0}),
     r"x: data set 1 has 4 points in y; its x must have as many"),
])
def test_bad_bounds_fixed_and_masks_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_start_one_float_inside_a_two_sided_bound_still_moves():
    # One float below max the sigmoid's slope is about 1e-16·(max − min): the fit stopped at
    # once on ftol with b still on its bound (χ² 43.87 where the bounded optimum has 39.10).
    # A start that close begins sqrt(ε)·(max − min) inside now, in both loops.
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 10.0, 40)
    y = 5.0 * np.exp(0.3 * x) * (1.0 + 0.02 * rng.standard_normal(40))
    best = minimize_scalar(lambda b: np.sum((y - 5.0886 * np.exp(b * x)) ** 2),
                           bounds=(0.0, 0.298), method="bounded", options={"xatol": 1e-14})
    for loop in ("python", "traced"):
        fit = fitting.fit_curve("a*exp(b*x)", x, y, loop=loop, p0={
            "a": {"value": 5.0886, "vary": False},
            "b": {"value": np.nextafter(0.298, 0.0), "min": 0.0, "max": 0.298}})
        assert fit.converged, (loop, fit.reason)
        np.testing.assert_allclose(fit.values["b"], best.x, rtol=1e-7)
        np.testing.assert_allclose(fit.chi_square, best.fun, rtol=1e-9)


def test_a_formula_layer_started_next_to_a_bound_starts_off_it_as_fit_curve_does():
    # The layer's variable starts by fit_curve's rule (ParameterSpec.internal_start): one
    # float inside, dp/du was about 1e-16·(max − min) and Adam (its epsilon 1e-7 dwarfs such
    # a gradient) left b where it began; sqrt(ε)·(max − min) inside, it comes off.
    x = np.linspace(0.0, 10.0, 40)
    y = 5.0 * np.exp(0.25 * x)
    formula = layers.Formula("a*exp(b*x)", params={
        "a": {"value": 5.0, "vary": False},
        "b": {"value": np.nextafter(0.298, 0.0), "min": 0.0, "max": 0.298}}, dtype="float64")
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    margin = np.sqrt(np.finfo(np.float64).eps) * 0.298
    np.testing.assert_allclose(formula.values()["b"], 0.298 - margin, rtol=1e-15)
    model.compile(optimizer=optimizers.Adam(0.1), loss="mse")
    model.fit(x, y, batch_size=None, epochs=100, verbose=0)
    assert formula.values()["b"] < 0.298 - 1e3 * margin

"""`fit_curve`'s and `fit_many`'s reports against `model.fit_report` on the same data: a
degenerate model (only a·b is determined) names its undetermined parameters and keeps the
others' standard errors in both; `rss` is the unweighted sum everywhere and `chi_square` the
weighted one; `CurveFit.report()` is `ManyFits.report(i)`."""

import csv
import os

import numpy as np
import pytest

import graphfit as gf
from graphfit import fitting, layers, optimizers
from graphfit.recipes.reading.recipe import recipe_from_text
from graphfit.recipes.running import many_fits_run

X = np.linspace(0.0, 4.0, 30)
Y = 3.0 * np.exp(-0.8 * X) + np.random.default_rng(1).normal(0.0, 0.02, X.size)
DEGENERATE = "a*b*exp(-k*x)"


def _model_report(values, y=Y, sample_weight=None):
    formula = layers.Formula(DEGENERATE, params=values, dtype="float64")
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    return model.fit_report(X, y, sample_weight=sample_weight)


def test_degenerate_model_keeps_the_determined_standard_errors():
    fit = fitting.fit_curve(DEGENERATE, X, Y, p0={"a": 1.0, "b": 1.0, "k": 0.5})
    single = _model_report(fit.values)
    assert single.undetermined == [["a", "b"]]
    # k's standard error by hand, from the two-parameter model A·exp(-k x) that
    # a·b·exp(-k x) really is (A = a·b), with fit_report's dof: N − 3 (a and b both vary).
    a_times_b, k = fit.values["a"] * fit.values["b"], fit.values["k"]
    jacobian = np.stack([np.exp(-k * X), -a_times_b * X * np.exp(-k * X)], 1)
    residuals = Y - a_times_b * np.exp(-k * X)
    s2 = residuals @ residuals / (X.size - 3)
    k_error = np.sqrt(s2 * np.linalg.inv(jacobian.T @ jacobian)[1, 1])
    assert single["k"].stderr == pytest.approx(k_error, rel=1e-6)
    assert fit.standard_errors["k"] == pytest.approx(k_error, rel=1e-6)
    assert np.isinf(fit.standard_errors["a"]) and np.isinf(fit.standard_errors["b"])
    # The statuses say what the report says; a and b still count in the dof.
    assert fit.status == {"a": "undetermined", "b": "undetermined", "k": "varied"}
    assert fit.dof == X.size - 3
    assert np.all(np.isinf(fit.covariance[:2, :2])) and np.isfinite(fit.covariance[2, 2])
    for report in (fit.report(), fitting.fit_many(
            DEGENERATE, X, np.stack([Y, Y]), p0={"a": 1.0, "b": 1.0, "k": 0.5}).report(1)):
        assert report.undetermined == [["a", "b"]]
        assert report["a"].status == report["b"].status == "undetermined"
        assert report["a"].stderr is None and report["b"].stderr is None
        assert report["k"].stderr == pytest.approx(single["k"].stderr, rel=1e-6)
        assert report.free == ["k"] and report["k"].status == "varied"
        assert "do not determine a and b (only a combination of them)" in str(report)
    many = fitting.fit_many(DEGENERATE, X, np.stack([Y, 2.0 * Y]),
                            p0={"a": 1.0, "b": 1.0, "k": 0.5})
    assert np.isinf(many.standard_errors[:, :2]).all()
    assert (many.status[:, :2] == "undetermined").all() and many.free.all()
    assert many.statistics()["varying_parameters"].tolist() == [3, 3]
    np.testing.assert_allclose(many.standard_errors[0, 2], k_error, rtol=1e-6)
    assert np.isfinite(many.standard_errors[1, 2])


def test_rss_is_unweighted_and_chi_square_weighted_everywhere(tmp_path):
    sigma = np.where(X < 2.0, 0.01, 0.1)
    fit = fitting.fit_curve("a*exp(-k*x)", X, Y, p0={"a": 1.0, "k": 0.5}, sigma=sigma)
    residuals = Y - fit.values["a"] * np.exp(-fit.values["k"] * X)
    rss, chi_square = residuals @ residuals, np.sum((residuals / sigma) ** 2)
    assert fit.rss == pytest.approx(rss, rel=1e-9)
    assert fit.chi_square == pytest.approx(chi_square, rel=1e-9)
    report = fit.report()
    assert report.statistics["rss"] == pytest.approx(rss, rel=1e-9)
    assert report.statistics["chi_square"] == pytest.approx(chi_square, rel=1e-9)
    many = fitting.fit_many("a*exp(-k*x)", X, Y[None], p0={"a": 1.0, "k": 0.5},
                            sigma=sigma[None])
    assert many.rss[0] == pytest.approx(rss, rel=1e-9) == many.statistics()["rss"][0]
    assert many.chi_square[0] == pytest.approx(chi_square, rel=1e-9)
    assert many.statistics()["chi_square"][0] == pytest.approx(chi_square, rel=1e-9)
    assert many.plain_rss[0] == many.rss[0]  # the former name

    np.savez(tmp_path / "curves.npz", x=X, y=Y[None], sigma=sigma[None])
    recipe = recipe_from_text(
        "fit_many:\n  formula: a*exp(-k*x)\n  params: {a: 1.0, k: 0.5}\n"
        "  data: {path: curves.npz, sigma: sigma}\n", "decay.yaml", base_dir=str(tmp_path),
        default_name="decay")
    run = many_fits_run.fit_recipe(recipe, run_dir=str(tmp_path / "run"))
    with open(os.path.join(run.run_dir, "fits.csv"), encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    assert float(row["rss"]) == pytest.approx(rss, rel=1e-8)
    assert float(row["chi_square"]) == pytest.approx(chi_square, rel=1e-8)


def test_a_curve_fit_built_by_hand_has_no_report():
    fit = fitting.fit_curve("a + b*x", X, 1.0 + 2.0 * X, p0={"a": 0.0, "b": 0.0})
    bare = fitting.CurveFit(fit.values, fit.standard_errors, fit.covariance, fit.rss, True,
                            "ftol", 1, 1, 1)
    with pytest.raises(ValueError, match="built by hand"):
        bare.report()

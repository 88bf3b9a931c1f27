"""`fit_report` refuses NaN or inf data as `fit_curve` does (`NonFiniteData`, naming the
examples), and its text says what it counts: steps without claiming Jacobian evaluations for
an optimizer that evaluates none, and the correlation threshold's value."""

import numpy as np
import pytest

import graphfit as gf
from graphfit import fitting, layers, optimizers
from graphfit.fitting.arguments import NonFiniteData

X = np.linspace(0.0, 5.0, 20)
Y = 2.0 * np.exp(-0.7 * X) + 0.1 + 0.01 * np.sin(9.0 * X)


@pytest.fixture(scope="module")
def model():
    model = gf.Sequential([layers.Formula("a*exp(-k*x) + c",
                                          params={"a": 1.0, "k": 0.5, "c": 0.0})],
                          input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(X, Y, batch_size=None, epochs=50, verbose=0)
    return model


@pytest.mark.parametrize("what, at, value", [("y", 4, np.nan), ("x", 2, np.inf),
                                             ("sample_weight", 7, np.nan),
                                             ("sample_weight", 0, np.inf)])
def test_non_finite_data_is_refused_naming_the_examples(model, what, at, value):
    data = {"x": X.copy(), "y": Y.copy(), "sample_weight": np.ones_like(X)}
    data[what][at] = value
    with pytest.raises(NonFiniteData, match=rf"NaN or inf in {what} at example\(s\) \[{at}\]"):
        model.fit_report(data["x"], data["y"], sample_weight=data["sample_weight"])
    # fit_curve names the same point in the same words (its unit is a point).
    if what != "sample_weight":
        with pytest.raises(NonFiniteData, match=rf"{what} at point\(s\) \[{at}\]"):
            fitting.fit_curve("a*exp(-k*x) + c", data["x"], data["y"],
                              p0={"a": 1.0, "k": 0.5, "c": 0.0})


def test_the_report_prints_the_correlation_threshold(model):
    report = model.fit_report(X, Y)
    assert report.to_dict()["strong_threshold"] == 0.9
    assert "no degrees of freedom" not in str(report)
    for threshold in (0.5, 0.55):
        loose = fitting.fit_report(model, X, Y, strong_correlation=threshold)
        assert loose.strong_correlations and all(
            abs(r) > threshold for _, _, r in loose.strong_correlations)
        assert f"[[Correlations]] (|r| > {threshold:g}: strongly correlated pairs)" in str(loose)


def test_an_adam_report_claims_no_jacobian_evaluations():
    model = gf.Sequential([layers.Formula("a*exp(-k*x)", params={"a": 1.0, "k": 0.3})],
                          input_shape=(1,), dtype="float64")
    model.compile(optimizer="adam", loss="mse")
    model.fit(X, Y, batch_size=None, epochs=20, verbose=0)
    text = str(model.fit_report(X, Y))
    assert "    # steps            = 20\n" in text + "\n"
    assert "Jacobian" not in text and "function evals" not in text

"""Profile intervals where the profile does not cross the F-test threshold: NaN ends, never a
finite end from a re-fit that failed far out; and a re-fit that finds a χ² below the fit's
warns that the fit was not at its minimum, naming the value, instead of clamping, and leaves
every end NaN. SciPy re-fits (the other parameter by `curve_fit`, or in closed form) are the
reference."""

import math
import re
import warnings

import numpy as np
import pytest
from scipy import optimize

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.fitting import intervals


def _fitted(expression, params, x, y):
    model = gf.Sequential([layers.Formula(expression, params=params, dtype="float64")],
                          input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(x, y, batch_size=None, epochs=300, verbose=0)
    return model


def _profile(model, x, y, name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = intervals.profile_intervals(model, x, y, names=[name])[name]
    return found, [str(w.message) for w in caught if "profile_intervals" in str(w.message)]


def test_a_saturation_fit_off_its_minimum_warns_and_gives_no_ends():
    # Data only in the linear part of a(1 − exp(−b x)): only a·b is determined, and LM stops
    # far out along the valley (a ≈ 1e6), not at the minimum (which has a < 0).
    rng = np.random.default_rng(2)
    for _ in range(3):
        rng.normal(0.0, 0.01, 30)
    x = np.linspace(0.01, 0.3, 15)
    y = 10.0 * (1.0 - np.exp(-0.05 * x)) + rng.normal(0.0, 0.002, 15)
    model = _fitted("a*(1-exp(-b*x))", {"a": 5.0, "b": 0.1}, x, y)
    report = model.fit_report(x, y)
    chi_min = report.statistics["chi_square"]
    best = report.values()
    (low, high), messages = _profile(model, x, y, "a")
    assert math.isnan(low) and math.isnan(high)  # not the finite ±1e13 of failed re-fits
    # The first re-fit below χ²_min ends the search: no end on either side of any parameter
    # is measured from the right χ² (b's, searched after a's, is NaN too).
    assert len(messages) == 1
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        both = intervals.profile_intervals(model, x, y)
    assert all(math.isnan(end) for ends in both.values() for end in ends)
    for message in messages:
        assert "below the fit's χ²" in message and "not at its minimum" in message
        held = float(re.search(r"a held at (\S+) reaches", message).group(1))
        # SciPy's re-fit of b with a held there agrees: below χ²_min. With the exact
        # Jacobian: out there (a ~ 1e12, b·x ~ 1e-13) 1 − exp(−b·x) keeps 3 digits, χ²(b) is
        # a staircase, and curve_fit's finite differences can stall a step above the minimum.
        b, _ = optimize.curve_fit(lambda t, b, a=held: a * (1 - np.exp(-b * t)), x, y,
                                  p0=[best["a"] * best["b"] / held],
                                  jac=lambda t, b, a=held: (a * t * np.exp(-b * t))[:, None])
        chi = float(np.sum((y - held * (1 - np.exp(-b[0] * x))) ** 2))
        assert chi < chi_min
        reported = float(re.search(r"reaches χ² = (\S+),", message).group(1))
        assert reported == pytest.approx(chi, rel=1e-5)


def test_a_profile_that_never_crosses_gives_nan_ends():
    # A decay far slower than the data's range: 1/t is near 0 within the noise, so no t
    # (of either sign) is excluded: the profile of t stays under the threshold.
    x = np.linspace(0.0, 1.0, 20)
    y = np.exp(-x / 300.0) + np.random.default_rng(5).normal(0.0, 0.01, 20)
    model = _fitted("c*exp(-x/t)", {"c": 1.0, "t": 10.0}, x, y)
    report = model.fit_report(x, y)
    (low, high), messages = _profile(model, x, y, "t")
    assert math.isnan(low) and math.isnan(high) and messages == []
    threshold = intervals.f_threshold(report.statistics["chi_square"], report.dof, 0.95)
    # SciPy's side of it: c in closed form at each t, out to the search's last doubling.
    t, step = report["t"].value, intervals.t_quantile(0.95, report.dof) * report["t"].stderr
    for held in t + np.outer([-1.0, 1.0], step * 2.0 ** np.arange(30)).ravel():
        shape = np.exp(-x / held)
        c = (shape @ y) / (shape @ shape)
        assert np.sum((y - c * shape) ** 2) < threshold

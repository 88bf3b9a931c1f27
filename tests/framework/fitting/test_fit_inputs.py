"""Bad inputs of curve fits refused before any step, naming what is wrong: a global fit's
data-set column (an index outside 0..n-1, or not a whole number), a fixed parameter outside
its own bounds, and a start per data set outside the bounds (naming the data set)."""

import numpy as np
import pytest

import graphfit as gf
from graphfit import fitting, layers, optimizers

T = np.tile(np.linspace(0.0, 5.0, 10), 3)
SETS = np.repeat([0.0, 1.0, 2.0], 10)
Y = np.repeat([1.0, 2.0, 3.0], 10) * np.exp(-0.6 * T) + 0.1


def _global_model(values=(1.0, 1.0, 1.0)):
    formula = layers.Formula("a*exp(-k*x1) + c", params={"a": list(values), "k": 0.3,
                                                         "c": 0.0}, dtype="float64")
    model = gf.Sequential([formula], dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    return model, formula


@pytest.mark.parametrize("sets, row, shown", [
    (SETS + 1.0, 20, "[0, 3]"),                      # counted from 1: row 20 holds 3
    (np.where(np.arange(30) == 7, -1.0, SETS), 7, "[3.8888889, -1]"),
    (np.where(np.arange(30) == 25, 1.9999999, SETS), 25, "[2.7777778, 1.9999999]"),
])
def test_model_fit_refuses_a_bad_data_set_column_before_any_step(sets, row, shown):
    model, formula = _global_model()
    x = np.stack([T, sets], 1)
    with pytest.raises(gf.DataCheckError) as caught:
        model.fit(x, Y[:, None], batch_size=None, epochs=3, verbose=0)
    message = str(caught.value)
    assert "must hold whole numbers from 0 to 2, since params give 3 values per data set (a)" \
        in message
    assert f"row {row} fails it alone: x[{row}] = {shown}" in message
    # Nothing was fitted: the variables hold their starts.
    assert formula.values() == {"a": [1.0, 1.0, 1.0], "k": 0.3, "c": 0.0}


def test_per_data_set_lists_shorter_than_the_data_sets_are_refused():
    model, _ = _global_model(values=(1.0, 1.0))  # two values, three data sets (0, 1, 2)
    with pytest.raises(gf.DataCheckError, match=r"whole numbers from 0 to 1, since params "
                                                r"give 2 values.*row 20 fails it alone: "
                                                r"x\[20\] = \[0, 2\]"):
        model.fit(np.stack([T, SETS], 1), Y[:, None], batch_size=None, epochs=1, verbose=0)


def test_fit_report_refuses_a_bad_data_set_column_naming_row_and_value():
    model, formula = _global_model()
    x = np.stack([T, SETS], 1)
    model.fit(x, Y[:, None], batch_size=None, epochs=20, verbose=0)
    assert formula.data_set_index(x).tolist() == SETS.astype(int).tolist()
    x[12, 1] = 2.5
    x[14, 1] = 3.0
    with pytest.raises(ValueError, match=r"row 12 of the inputs holds 2.5 in the data-set "
                                         r"column \(2 row\(s\) out of 30 do\); the data-set "
                                         r"column .* from 0 to 2"):
        model.fit_report(x, Y[:, None])


def test_a_fixed_parameter_outside_its_bounds_is_refused():
    with pytest.raises(ValueError, match=r"'k' is fixed \(vary: false\) at 3, outside its own "
                                         r"bounds \[0, 1\]"):
        layers.Formula("a*exp(-k*x)", params={"a": 1.0, "k": {"value": 3.0, "min": 0.0,
                                                               "max": 1.0, "vary": False}})
    # On a bound is allowed (a fixed value sits where it is put) and reported as fixed.
    formula = layers.Formula("a*exp(-k*x)", params={
        "a": 1.0, "k": {"value": 1.0, "min": 0.0, "max": 1.0, "vary": False}}, dtype="float64")
    formula(np.zeros((2, 1)))
    with pytest.raises(ValueError, match=r"'k' must lie in its bounds \[0, 1\]"):
        formula.set_values({"k": 1.5})
    with pytest.raises(ValueError, match=r"'c' is fixed \(vary: false\) at 5, outside its "
                                         r"own bounds \[-inf, 1\]"):
        fitting.fit_curve("a*exp(-k*x)+c", T[:10], Y[:10],
                          p0={"a": 1.0, "k": 0.3, "c": {"value": 5.0, "max": 1.0,
                                                        "vary": False}})


def test_fit_many_names_the_data_set_of_a_start_outside_the_bounds():
    curves = np.stack([a * np.exp(-0.5 * T[:10]) + 0.1 for a in (1.0, 2.0, 3.0)])
    with pytest.raises(ValueError, match=r"p0\['k'\]: the start 0.6 in data set 1 \(1 of 3 "
                                         r"data sets\) must lie strictly inside its bounds "
                                         r"\[-inf, 0.5\]"):
        fitting.fit_many("a*exp(-k*x)+c", T[:10], curves,
                         p0={"a": 1.0, "k": {"value": np.array([0.3, 0.6, 0.4]), "max": 0.5},
                             "c": 0.0})
    with pytest.raises(ValueError, match=r"p0\['c'\]: it is fixed \(vary: false\) at 5 in "
                                         r"data set 2 \(1 of 3 data sets\), outside its own "
                                         r"bounds \[-inf, 1\]"):
        fitting.fit_many("a*exp(-k*x)+c", T[:10], curves,
                         p0={"a": 1.0, "k": 0.3, "c": {"value": np.array([0.1, 0.2, 5.0]),
                                                       "max": 1.0, "vary": False}})
    # A Formula's bounds hold for starts given as an array (N, p) too.
    formula = layers.Formula("a*exp(-k*x)+c", params={
        "a": 1.0, "k": 0.3, "c": {"value": 0.1, "max": 1.0, "vary": False}})
    starts = np.array([[1.0, 0.3, 0.1], [2.0, 0.3, 0.1], [3.0, 0.3, 2.0]])
    with pytest.raises(ValueError, match=r"fixed \(vary: false\) at 2 in data set 2"):
        fitting.fit_many(formula, T[:10], curves, p0=starts)
    fits = fitting.fit_many(formula, T[:10], curves, p0=starts[:2].tolist() + [[3.0, 0.3, 0.1]])
    np.testing.assert_allclose(fits.params[:, :2], [[1.0, 0.5], [2.0, 0.5], [3.0, 0.5]],
                               rtol=1e-7)

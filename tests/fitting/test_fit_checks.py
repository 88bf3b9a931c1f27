"""fit_curve's and fit_many's edges: a Jacobian with an infinite slope times a zero inner
derivative (`sqrt(D*x)` at x = 0: the chain rule's limit 0, in NumPy's forward mode, in the
traced loop's backward pass and in the Formula layer's `example_jacobian` hook alike), a
genuinely infinite Jacobian (the fit stops at once, naming the point), and the argument
checks fit_curve shares with fit_many (`fitting.arguments`), each message with the shapes
the user passed. SciPy's `curve_fit` is the reference for the fits."""

import warnings

import numpy as np
import pytest
import tensorflow as tf
from scipy.optimize import curve_fit

from graphfit import cli, fitting, layers
from graphfit.layers.formula_numpy import NumpyFormula

T = np.linspace(0.0, 10.0, 11)  # includes t = 0
Y = np.sqrt(4 * 0.7 * T) + 0.2 + 0.01 * np.random.default_rng(0).standard_normal(11)
X = np.linspace(0.0, 5.0, 30)
DECAY = 2.4 * np.exp(-0.8 * X)


@pytest.mark.parametrize("expression, params", [
    ("sqrt(4*D*x) + c", {"D": 0.7, "c": 0.2}),
    ("a*(b*x)**0.5 + c", {"a": 2.0, "b": 3.0, "c": 1.0}),
    ("a*abs(b*x)**c", {"a": 2.0, "b": 3.0, "c": 0.5}),
    ("a*log(1 + sqrt(b*x))", {"a": 2.0, "b": 3.0}),
    ("a*x/sqrt(b*x + x)", {"a": 2.0, "b": 3.0}),  # value NaN (0/0) at 0
])
def test_numpy_and_tensorflow_jacobians_agree_where_a_slope_is_infinite(expression, params):
    x = np.array([0.0, 0.5, 2.0])
    names = tuple(params)
    value, jac = NumpyFormula(expression, names).linearize({**params, "x": x}, names)
    layer = layers.Formula(expression, params=params, dtype="float64")
    layer(x)
    hook = layer.example_jacobian(tf.constant(x), layer.trainable_variables)
    tf_jac = np.concatenate([part.numpy()[:, 0, :] for part in hook], -1)
    # Where the value is finite (a NaN value's row is NaN in TensorFlow, and unused).
    finite = np.isfinite(value)
    np.testing.assert_allclose(jac[finite], tf_jac[finite], rtol=1e-12)
    assert np.isfinite(jac[finite]).all()
    # The limit the zero row stands for: one-sided differences at x = 0 shrink to it.
    if finite[0]:
        for i, name in enumerate(names):
            if name != "c":
                assert jac[0, i] == 0.0


@pytest.mark.parametrize("loop", ["python", "traced"])
def test_a_fit_through_x_0_of_sqrt_moves_and_matches_curve_fit(loop):
    popt, pcov = curve_fit(lambda t, D, c: np.sqrt(4 * D * t) + c, T, Y, p0=(1, 0))
    fit = fitting.fit_curve("sqrt(4*D*x) + c", T, Y, p0={"D": 1.0, "c": 0.0}, loop=loop)
    assert fit.converged and fit.steps < 30, (fit.reason, fit.steps)
    np.testing.assert_allclose([fit.values["D"], fit.values["c"]], popt, rtol=1e-7)
    np.testing.assert_allclose([fit.standard_errors["D"], fit.standard_errors["c"]],
                               np.sqrt(np.diag(pcov)), rtol=1e-4)


def test_the_loops_agree_on_power_forms_through_0():
    x = np.linspace(0, 4, 21)
    y = 2 * (3 * x) ** 0.5 + 1 + 0.01 * np.random.default_rng(1).standard_normal(21)
    fits = [fitting.fit_curve("a*(b*x)**0.5+c", x, y, p0={"a": 1.0, "b": 1.0, "c": 0.0},
                              loop=loop) for loop in ("python", "traced")]
    assert all(f.converged for f in fits), [f.reason for f in fits]
    # a and b enter only as a·√b: the fit's a√b and c agree with SciPy's.
    popt, _ = curve_fit(lambda x, a, b, c: a * (b * x) ** 0.5 + c, x, y, p0=(1, 1, 0))
    for fit in fits:
        np.testing.assert_allclose(fit.values["a"] * np.sqrt(fit.values["b"]),
                                   popt[0] * np.sqrt(popt[1]), rtol=1e-7)
        np.testing.assert_allclose(fit.values["c"], popt[2], rtol=1e-7)


@pytest.mark.parametrize("loop", ["python", "traced"])
def test_an_infinite_jacobian_at_the_start_stops_at_once_naming_the_point(loop):
    x = np.linspace(0.0, 3.0, 7)
    y = 2.0 * np.sqrt(x + 0.5)
    # d/dc of a*sqrt(x - c) at x = c = 0 is -inf: the model is finite, its slope is not.
    fit = fitting.fit_curve("a*sqrt(x - c)", x, y, p0={"a": 1.0, "c": 0.0}, loop=loop)
    assert fit.reason_code == 6 and fit.steps <= 1 and fit.evaluations <= 4, (
        fit.steps, fit.evaluations)
    assert fit.reason.startswith("not finite: the Jacobian is inf or NaN at point 0 (x = 0.0)")
    assert fit.values == {"a": 1.0, "c": 0.0}


def test_a_start_whose_squared_residuals_overflow_says_so():
    x = np.linspace(0, 10, 20)
    y = 1e-3 * np.exp(0.5 * x)
    fit = fitting.fit_curve("a*exp(b*x)", x, y, p0={"a": 1.0, "b": 60.0}, loop="python")
    assert not fit.converged
    assert "residuals' sum of squares overflows at the start" in fit.reason
    assert "pick a start nearer the data, or rescale" in fit.reason


@pytest.mark.parametrize("loop", ["python", "traced"])
def test_a_start_where_the_model_overflows_names_the_point_without_numpy_warnings(loop):
    x = np.linspace(0.0, 10.0, 20)
    y = 2.0 * np.exp(0.3 * x) + 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "overflow encountered in square" from NumPy
        fit = fitting.fit_curve("a*exp(k*x) + c", x, y, p0={"a": 1.0, "k": 100.0, "c": 0.0},
                                loop=loop)
    assert fit.reason_code == 6 and not fit.converged
    assert fit.reason.startswith("not finite: the model is inf or NaN at the start, at point "
                                 "14 (x = 7.368421052631579, and 5 more point(s))"), fit.reason


def _raises(match, call, **kwargs):
    with pytest.raises(ValueError, match=match):
        call(**kwargs)


def test_fit_curve_runs_fit_many_s_checks_with_the_shapes_passed():
    base = {"formula": "a*exp(-k*x)", "p0": {"a": 1.0, "k": 0.3}}
    nan_y = DECAY.copy()
    nan_y[-1] = np.nan
    _raises(r"NaN or inf in y at point\(s\) \[29\].*Pass mask=np.isfinite\(y\)",
            fitting.fit_curve, x=X, y=nan_y, **base)
    _raises(r"NaN or inf in x at point\(s\) \[29\]", fitting.fit_curve,
            x=np.r_[X[:-1], np.inf], y=DECAY, **base)
    _raises(r"NaN or inf in the points of data set\(s\) 0 \(x\)", fitting.fit_many,
            x=np.r_[X[:-1], np.inf], y=DECAY[None], **base)
    _raises(r"p0 lacks a start for 'k'", fitting.fit_curve, formula="a*exp(-k*x)", x=X,
            y=DECAY, p0={"a": 1.0})
    _raises(r"x must have shape \(30,\), to match y of shape \(30,\).*Received: x of shape "
            r"\(29,\)", fitting.fit_curve, x=X[:-1], y=DECAY, **base)
    _raises(r"x must have shape \(30,\) shared .* to match y of shape \(1, 30\).*Received: x "
            r"of shape \(29,\)", fitting.fit_many, x=X[:-1], y=DECAY[None], **base)
    _raises(r"x must have shape \(30, 2\).*Received: x of shape \(30,\)", fitting.fit_curve,
            formula="a*x1+b*x2", x=X, y=DECAY, p0={"a": 1.0, "b": 0.3})
    _raises(r"sigma must broadcast to y's shape \(30,\)", fitting.fit_curve, x=X, y=DECAY,
            sigma=[0.01] * 29, **base)
    zero = np.full(30, 0.01)
    zero[[7, 9]] = 0.0
    _raises(r"sigma must be positive .*received 0 at point 7 \(2 such", fitting.fit_curve,
            x=X, y=DECAY, sigma=zero, **base)
    _raises(r"received -0.5 at data set 1, point 4 \(1 such", fitting.fit_many, x=X,
            y=np.stack([DECAY, DECAY]), sigma=np.where(np.arange(60).reshape(2, 30) == 34,
                                                        -0.5, 0.01), **base)
    _raises(r"mask must be a bool array of y's shape \(30,\)", fitting.fit_curve, x=X,
            y=DECAY, mask=np.ones(29, bool), **base)
    for name in ("x", "x2"):
        _raises(rf"p0: '{name}' cannot name a parameter: x, x1, x2, ... are the formula's "
                r"inputs", fitting.fit_curve, formula=f"a*exp(-{name}*x)", x=X, y=DECAY,
                p0={"a": 1.0, name: 0.3})
    _raises(r"invalid syntax.*write only its right-hand side, the model, as "
            r"'a\*exp\(-k\*x\)'", fitting.fit_curve, formula="y = a*exp(-k*x)", x=X,
            y=DECAY, p0={"a": 1.0, "k": 0.3})


def test_fit_curve_s_mask_leaves_the_points_out():
    y = DECAY + 0.01 * np.random.default_rng(2).standard_normal(30)
    holed = y.copy()
    holed[[3, 17]] = np.nan
    keep = np.isfinite(holed)
    masked = fitting.fit_curve("a*exp(-k*x)", X, holed, p0={"a": 1.0, "k": 0.3}, mask=keep)
    dropped = fitting.fit_curve("a*exp(-k*x)", X[keep], y[keep], p0={"a": 1.0, "k": 0.3})
    assert masked.converged and masked.dof == dropped.dof == 26
    np.testing.assert_allclose(list(masked.values.values()), list(dropped.values.values()),
                               rtol=1e-9)
    np.testing.assert_allclose(list(masked.standard_errors.values()),
                               list(dropped.standard_errors.values()), rtol=1e-7)


def test_a_recipe_with_nan_rows_is_told_what_a_recipe_can_do(tmp_path, capsys):
    (tmp_path / "c.csv").write_text("id,t,v\na,1,2\na,2,nan\na,3,1\nb,1,2\nb,2,1\nb,3,0.5\n")
    path = tmp_path / "nan.yaml"
    path.write_text("fit_many:\n  formula: a*exp(-k*x)\n  params: {a: 1.0, k: 1.0}\n"
                    "  data: {path: c.csv, curve: id, x: t, y: v}\n")
    assert cli.main(["train", str(path), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    # Named where the data are read (graphfit validate says the same): file, line, curve.
    assert "c.csv, line 3, curve 'a': v is nan, not a finite number. Delete the row" in err
    assert "mask=" not in err


def test_a_formula_model_fitted_by_levenberg_marquardt_agrees_through_x_0():
    import graphfit as gf
    from graphfit import optimizers

    model = gf.Sequential([layers.Formula("sqrt(4*D*x) + c", params={"D": 1.0, "c": 0.0},
                                          dtype="float64")], input_shape=(1,),
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(T[:, None], Y[:, None], batch_size=11, epochs=10, verbose=0, shuffle=False)
    fit = fitting.fit_curve("sqrt(4*D*x) + c", T, Y, p0={"D": 1.0, "c": 0.0})
    values = model.layers[0].values()
    # model.fit's LevenbergMarquardt stops on its own tests at fit_curve's optimum: in a
    # float64 model (a float32 one computes the loss in float32 and stops ~1e-4 short, with
    # a warning).
    np.testing.assert_allclose([values["D"], values["c"]], [fit.values["D"], fit.values["c"]],
                               rtol=1e-6)

"""The Python loop's NumPy evaluation of a formula (`layers.formula_numpy`,
`fitting.numpy_trial`) against TensorFlow's (`batched_lm.trial_function`, the reference).

Values and Jacobians (forward mode against a backward pass) on formulas that use every
function and operator of the parser's whitelist, with bounded and fixed parameters, at points
where the rules' edges show (`abs` at 0, `x**p` at x = 0, powers of a parameter); a whole
trial with geodesic acceleration; central differences; then whole fits of NIST problems from
both starts against the Python loop with TensorFlow's trials (`python_lm.EVALUATION`), to the
tolerances of tests/fitting/test_python_loop.py (the two round elementary functions
differently in the last bit: where a fit's last trials compare reductions at float64's
resolution, which trial ends it is rounding's choice).
"""

import numpy as np
import pytest
import tensorflow as tf

from graphfit import fitting
from graphfit.fitting import batched_lm, numpy_trial, python_lm
from graphfit.layers import formula_numpy, formula_parser
from graphfit.layers.formula_parameters import ParameterSpec
from tests.optimizers.levenberg_marquardt import nist

# (formula, {name: (internal value, spec keywords)}, x columns): every function, operator,
# constant and parameter kind. x holds 0 (x**c's slope in c is 0 there, (a*x)**2.5's in a
# too), and a*x − 1 is exactly 0 at x = 2 (abs's slope 0 there, as sign(0)).
_X = np.array([0.0, 0.25, 0.5, 1.0, 2.0, 3.0])
CASES = [
    ("a*exp(-k*x) + c", {"a": (0.3, {"min": 0.0}), "k": (-0.4, {"min": 0.0, "max": 0.5}),
                         "c": (0.1, {"vary": False})}, _X),
    ("b1*log(b2*x + 1) + sqrt(b3 + x**2)/b4 - +b5",
     {"b1": (1.5, {}), "b2": (0.7, {"max": 2.0}), "b3": (2.0, {}), "b4": (-1.3, {}),
      "b5": (0.2, {})}, _X),
    ("a*sin(w*x + p) + b*cos(w*x) - tan(c*x)/2",
     {"a": (1.2, {}), "w": (0.9, {}), "p": (0.3, {"vary": False}), "b": (-0.4, {}),
      "c": (0.2, {})}, _X),
    ("arctan(a*x) + atan(b*x**2) - tanh(c*x)*pi + a**x",
     {"a": (0.8, {"min": -1.0, "max": 3.0}), "b": (-0.6, {}), "c": (1.7, {})}, _X),
    ("abs(a*x - 1) + (a*x)**2.5 + x**c + x**3 - (b*x)**2 + 2**b",
     {"a": (0.5, {}), "b": (1.1, {}), "c": (1.3, {})}, _X),
    ("b1*x1 + b2*x2**2 / (1 + exp(-b3*x1*x2)) + -b4",
     {"b1": (0.5, {}), "b2": (-0.25, {}), "b3": (40.0, {"min": 1.0}), "b4": (3.0, {})},
     np.stack([_X, np.cos(_X)], -1)),
]


def _setup(expression, given, x):
    specs = tuple(ParameterSpec(name, 0.0, **keywords) for name, (_, keywords) in given.items())
    params = np.array([u for u, keywords in given.values() if keywords.get("vary", True)])
    fixed = np.array([u for u, keywords in given.values() if not keywords.get("vary", True)])
    x = x.reshape(len(x), -1)
    y = np.sin(np.arange(len(x), dtype=np.float64))
    weights = 1.0 + 0.5 * np.cos(np.arange(len(x)))
    curve = numpy_trial.NumpyCurve(expression, specs, fixed, x, y, weights)
    return specs, params, fixed, x, y, weights, curve


def _tensorflow_trial(expression, specs, params, fixed, x, y, weights, delta=None,
                      inverse=None, r=None, jac=None):
    """`trial_function`'s (point, r, J, loss, JᵀJ, Jᵀr): at `params` without `delta`."""
    p, m = len(params), len(y)
    within = delta is not None
    delta = np.zeros(p) if delta is None else delta
    inverse = np.zeros((p, p)) if inverse is None else inverse
    r = np.zeros(m) if r is None else r
    jac = np.zeros((m, p)) if jac is None else jac
    vectors = np.concatenate([params, delta, np.ones(p), [float(within)], inverse.ravel()])
    function = batched_lm.trial_function(expression, batched_lm.trace_key(specs), True)
    out = function.call_flat(*[tf.constant(np.asarray(v)[None], tf.float64) for v in (
        vectors, r, jac, fixed, x, y, weights)])
    return [t.numpy()[0] for t in out]


@pytest.mark.parametrize("expression, given, x", CASES, ids=[c[0] for c in CASES])
def test_values_and_jacobian_as_tensorflows(expression, given, x):
    specs, params, fixed, x, y, weights, curve = _setup(expression, given, x)
    r, jac = curve.linearize(params)
    _, r_tf, jac_tf, *_ = _tensorflow_trial(expression, specs, params, fixed, x, y, weights)
    np.testing.assert_allclose(r, r_tf, rtol=1e-12, atol=1e-13)
    scale = np.max(np.abs(jac_tf), axis=0)  # per column: the parameters' scales differ
    np.testing.assert_allclose(jac / scale, jac_tf / scale, rtol=0, atol=1e-12)
    assert np.all(scale > 0)
    # A whole trial with geodesic acceleration (the two extra points) as the trial function's.
    p = len(params)
    delta = 0.01 * np.cos(np.arange(p) + 1.0)
    a = jac.T @ jac
    inverse = -np.linalg.inv(a + 0.1 * np.diag(np.diagonal(a)))
    mine = curve.trial(params, delta, np.ones(p), True, inverse, r, jac)
    theirs = _tensorflow_trial(expression, specs, params, fixed, x, y, weights, delta,
                               inverse, r, jac)
    # The acceleration bent the step (not at abs's kink, where it is too large).
    assert np.array_equal(mine[0], params + delta) == ("abs" in expression)
    for ours, reference in zip([*mine[:3], *mine[3]], theirs):
        np.testing.assert_allclose(ours, reference, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("expression, given, x", CASES[:1] + CASES[3:4] + CASES[5:],
                         ids=lambda c: c if isinstance(c, str) else "")
def test_jacobian_by_central_differences(expression, given, x):
    _, params, _, _, _, _, curve = _setup(expression, given, x)
    _, jac = curve.linearize(params)
    h = 1e-6 * np.maximum(1.0, np.abs(params))
    steps = np.diag(h)
    differences = (curve.residuals(params + steps) - curve.residuals(params - steps)).T / (
        2.0 * h)
    np.testing.assert_allclose(jac, differences, rtol=1e-6, atol=1e-7)


def test_edges_as_tensorflows_gradients():
    """Slopes at the edges of the rules (abs at 0, x**c and (b*x)**2.5 at x = 0, b**x at
    x = 0), value for value with TensorFlow's; where an infinite slope meets a zero inner
    derivative (sqrt(b*x) at x = 0: inf·0) both take the chain rule's limit, 0 (forward mode
    by its zero derivative, the backward pass by `formula_parser.zero_nan_slopes`), and the
    trial is NumPy's."""
    x = np.array([[0.0], [1.0], [4.0]])
    y, weights = np.zeros(3), np.ones(3)
    specs = (ParameterSpec("a", 0.0), ParameterSpec("b", 0.0), ParameterSpec("c", 0.0))
    params = np.array([0.0, 2.0, 1.3])
    for expression, edge in (("abs(a) + x**c + (b*x)**2.5 + b**x + b**0.5 - +a", True),
                             ("sqrt(b*x) + a + c", False)):
        curve = numpy_trial.NumpyCurve(expression, specs, np.zeros(0), x, y, weights)
        with np.errstate(invalid="ignore", divide="ignore"):  # as python_lm evaluates
            r, jac = curve.linearize(params)
            trial = curve.trial(params, np.zeros(3), np.ones(3), False, None, r, jac)
        _, r_tf, jac_tf, *_ = _tensorflow_trial(expression, specs, params, np.zeros(0), x,
                                                y, weights)
        np.testing.assert_allclose(r, r_tf, rtol=1e-14)
        assert np.isfinite(jac).all() and np.isfinite(jac_tf).all()
        np.testing.assert_allclose(jac, jac_tf, rtol=1e-14)
        assert trial is not None
        if edge:
            assert jac[0, 0] == -1.0 and jac[0, 2] == 0.0  # abs at 0: -a's only; x**c
        else:
            np.testing.assert_array_equal(jac_tf[0], [1.0, 0.0, 1.0])


def test_operations_must_cover_the_whitelist():
    with pytest.raises(ValueError, match="functions must name exactly"):
        formula_parser.Operations(functions={"exp": np.exp}, binary=formula_numpy.VALUES.binary,
                                  unary=formula_numpy.VALUES.unary,
                                  constant=formula_numpy.VALUES.constant)


def _fits(monkeypatch, evaluation, *args, **kwargs):
    monkeypatch.setattr(python_lm, "EVALUATION", evaluation)
    return fitting.fit_many(*args, loop="python", **kwargs)


# rtol and whether the counts are the same: MGH10 (729 steps from start 1), ENSO (sin, cos,
# pi; 9 parameters) and Chwirut2 step for step; the others end a trial or a step apart.
@pytest.mark.parametrize("name, rtol, counts", [
    ("MGH10", 1e-8, True), ("ENSO", 1e-8, True), ("Chwirut2", 1e-8, True),
    ("Misra1a", 1e-8, False), ("DanWood", 1e-8, False), ("Roszman1", 1e-7, False),
    ("Nelson", 1e-6, False)])
def test_nist_fits_as_with_tensorflows_trials(monkeypatch, name, rtol, counts):
    problem = nist.read(nist.DATA / f"{name}.dat")
    starts = dict(zip(problem.parameter_names, np.stack(problem.starts).T))
    data = (nist.FORMULAS[name], problem.x, np.stack([problem.response] * 2))
    tensorflow = _fits(monkeypatch, "tensorflow", *data, p0=starts, max_steps=2000)
    numpy = _fits(monkeypatch, "numpy", *data, p0=starts, max_steps=2000)
    np.testing.assert_allclose(numpy.params, tensorflow.params, rtol=rtol, atol=0)
    np.testing.assert_allclose(numpy.rss, tensorflow.rss, rtol=1e-10)
    np.testing.assert_allclose(numpy.standard_errors, tensorflow.standard_errors, rtol=1e-5)
    assert numpy.converged.all(), numpy.reasons
    if counts:
        np.testing.assert_array_equal(numpy.steps, tensorflow.steps)
        np.testing.assert_array_equal(numpy.evaluations, tensorflow.evaluations)
        np.testing.assert_array_equal(numpy.jacobian_evaluations,
                                      tensorflow.jacobian_evaluations)
        assert numpy.reasons == tensorflow.reasons
    else:
        assert np.all(np.abs(numpy.steps - tensorflow.steps) <= 2), (numpy.steps,
                                                                    tensorflow.steps)
    # nfev counts 3 per trial (geodesic acceleration's two points), njev 1, both 1 at the start.
    np.testing.assert_array_equal(numpy.evaluations - 1, 3 * (numpy.jacobian_evaluations - 1))
    for start in range(2):
        for value, certified in zip(numpy.params[start], problem.certified):
            assert nist.log_relative_error(value, certified) >= 6.0, (start, value, certified)


def test_bounds_fixed_values_plain_steps_and_non_finite_trials(monkeypatch):
    x = np.linspace(0.0, 4.0, 20)
    rng = np.random.default_rng(5)
    y = np.stack([a * np.exp(-k * x) + c for a, k, c in [(2.0, 0.8, 0.1), (2.5, 0.2, 0.3)]])
    y = y + 0.01 * rng.standard_normal(y.shape)
    xs = np.stack([x, x])
    xs[1, 3] = -1e7  # the second curve's model overflows: TensorFlow evaluates its trials
    p0 = {"a": {"value": 1.0, "min": 0.0}, "k": {"value": 0.3, "min": 0.0, "max": 0.5},
          "c": {"value": np.array([0.1, 0.3]), "vary": False}}
    for geodesic in (True, False):
        fits = [_fits(monkeypatch, evaluation, "a*exp(-k*x) + c", xs, y, p0=p0,
                      geodesic_acceleration=geodesic) for evaluation in ("tensorflow", "numpy")]
        np.testing.assert_allclose(fits[1].params, fits[0].params, rtol=1e-8)
        for counts in ("steps", "evaluations", "jacobian_evaluations"):
            np.testing.assert_array_equal(getattr(fits[1], counts), getattr(fits[0], counts))
        assert fits[1].reasons == fits[0].reasons
        assert fits[1].status[0, 1] == "at upper bound"
        assert fits[1].reasons[1].startswith("not finite")

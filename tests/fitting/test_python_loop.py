"""The Python loop of small fits (`fitting.python_lm`) against the traced loop (`batched_lm`).

Both run the same Levenberg–Marquardt rules and constants; only the arithmetic differs
(NumPy's LAPACK against TensorFlow's kernels, and the Python loop evaluates the formula in
NumPy: tests/fitting/test_numpy_formula.py compares that with TensorFlow's evaluation). The
reference is the traced loop on the same data and starts: the same steps, evaluation counts
and reasons where the whole fit stays above rounding (MGH10's 729 steps, Eckerle4, the small
problems below), and the same parameters to rounding where the last trials compare
reductions at float64's resolution (then which trial meets ftol or xtol first is rounding's
choice, as it is for the traced loop itself between N = 1 and N = 2). All sixteen NIST
problems from both starts were compared once (docs/benchmarks/performance.md, "The Python
loop"); a representative subset runs here.
"""

import numpy as np
import pytest

from graphfit import fitting
from graphfit.fitting import batched_lm, python_lm
from tests.optimizers.levenberg_marquardt import nist


def _both(formula, x, y, **kwargs):
    return [fitting.fit_many(formula, x, y, loop=loop, **kwargs)
            for loop in ("traced", "python")]


def _assert_same(traced, python, rtol=1e-8, counts=True):
    np.testing.assert_allclose(python.params, traced.params, rtol=rtol, atol=0)
    np.testing.assert_allclose(python.rss, traced.rss, rtol=1e-10)
    np.testing.assert_allclose(python.standard_errors, traced.standard_errors, rtol=1e-5)
    if counts:
        np.testing.assert_array_equal(python.steps, traced.steps)
        np.testing.assert_array_equal(python.evaluations, traced.evaluations)
        np.testing.assert_array_equal(python.jacobian_evaluations,
                                      traced.jacobian_evaluations)
        # The same test ends both; in the last trial, at rounding, ftol may join xtol in one
        # of them ("ftol and xtol": Eckerle4 from start 1 with NumPy's evaluation).
        assert all(p in t or t in p for p, t in zip(python.reasons, traced.reasons)), (
            python.reasons, traced.reasons)
    else:  # the last steps, at rounding level: a step or two either way
        assert np.all(np.abs(python.steps - traced.steps) <= 2), (python.steps, traced.steps)
        assert python.converged.all() and traced.converged.all()


# MGH10: 729 steps from start 1 (b1 down to 1e-53 and back), step for step; Eckerle4: a
# start far out; BoxBOD: steps past MAX_RELATIVE_STEP, the endgame at rounding; MGH09: a
# start 1e4 times the answer, the worst agreement of the sixteen problems' parameters.
@pytest.mark.parametrize("name, rtol, counts", [
    ("MGH10", 1e-8, True), ("Eckerle4", 1e-8, True), ("BoxBOD", 1e-7, False),
    ("MGH09", 1e-6, False)])
def test_nist_from_both_starts_as_the_traced_loop(name, rtol, counts):
    problem = nist.read(nist.DATA / f"{name}.dat")
    starts = dict(zip(problem.parameter_names, np.stack(problem.starts).T))
    traced, python = _both(nist.FORMULAS[name], problem.x, np.stack([problem.response] * 2),
                           p0=starts, max_steps=2000)
    _assert_same(traced, python, rtol, counts)
    assert python.converged.all(), python.reasons
    for start in range(2):
        for value, certified in zip(python.params[start], problem.certified):
            assert nist.log_relative_error(value, certified) >= 6.0, (start, value, certified)


def test_bounds_fixed_values_and_plain_steps_as_the_traced_loop():
    x = np.linspace(0.0, 4.0, 20)
    rng = np.random.default_rng(5)
    y = np.stack([a * np.exp(-k * x) + c for a, k, c in [(2.0, 0.8, 0.1), (2.5, 0.2, 0.3)]])
    y = y + 0.01 * rng.standard_normal(y.shape)
    p0 = {"a": {"value": 1.0, "min": 0.0}, "k": {"value": 0.3, "min": 0.0, "max": 0.5},
          "c": {"value": np.array([0.1, 0.3]), "vary": False}}
    for geodesic in (True, False):
        traced, python = _both("a*exp(-k*x) + c", x, y, p0=p0,
                               geodesic_acceleration=geodesic)
        _assert_same(traced, python)
    # The first data set's k ends on its bound in both.
    assert python.status[0, 1] == traced.status[0, 1] == "at upper bound"


def test_a_non_finite_curve_and_attempts_per_step_as_the_traced_loop():
    x = np.linspace(0.0, 3.0, 15)
    noise = 0.01 * np.random.default_rng(3).standard_normal(x.shape)
    y = np.stack([2.0 * np.exp(-0.7 * x) + noise] * 2)
    xs = np.stack([x, x])
    xs[1, 3] = -1e7  # NaN data is refused (test_fit_many_arguments): a model that overflows
    traced, python = _both("a*exp(-k*x)", xs, y, p0={"a": 1.0, "k": 0.1},
                           attempts_per_step=3, ftol=1e-12)
    _assert_same(traced, python)
    assert python.reasons[1].startswith("not finite")


def test_infinite_slopes_at_x_0_as_the_traced_loop():
    """sqrt(4*D*x) through x = 0 (the slope's 0·inf taken as 0 by both) and a*sqrt(x - c)
    from c = 0 (d/dc = -inf at x = 0: both stop at once, naming the point)."""
    t = np.linspace(0.0, 10.0, 11)
    y = np.sqrt(2.8 * t) + 0.2 + 0.01 * np.cos(7.0 * t)
    traced, python = _both("sqrt(4*D*x) + c", t, y[None], p0={"D": 1.0, "c": 0.0})
    _assert_same(traced, python)
    assert traced.converged.all()
    traced, python = _both("a*sqrt(x - c)", t, y[None], p0={"a": 1.0, "c": 0.0})
    _assert_same(traced, python, rtol=0)
    assert traced.reasons == python.reasons and "at point 0 (x = 0.0)" in traced.reasons[0]
    assert traced.steps.tolist() == [1]


def test_fit_curve_chooses_the_python_loop_and_either_can_be_forced():
    assert python_lm.uses_python_loop("auto", False, 1, 14)
    assert python_lm.uses_python_loop("auto", "auto", python_lm.PYTHON_LOOP_CURVES, 100)
    assert not python_lm.uses_python_loop("auto", "auto", python_lm.PYTHON_LOOP_CURVES + 1, 14)
    assert not python_lm.uses_python_loop("auto", True, 1, 14)  # XLA: the traced loop
    assert not python_lm.uses_python_loop("traced", False, 1, 14)
    assert python_lm.uses_python_loop("python", "auto", 10_000, 14)
    x = np.linspace(0.0, 3.0, 15)
    batched_lm.fit_function.cache_clear()
    fit = fitting.fit_curve("a*exp(-k*x)", x, 2.0 * np.exp(-0.7 * x), p0={"a": 1.0, "k": 0.1})
    assert fit.converged and batched_lm.fit_function.cache_info().currsize == 0
    np.testing.assert_allclose([fit.values["a"], fit.values["k"]], [2.0, 0.7], rtol=1e-10)


@pytest.mark.parametrize("call, match", [
    (lambda: fitting.fit_curve("a*x", [1.0, 2.0], [1.0, 2.0], p0={"a": 1.0}, loop="numpy"),
     "loop must be"),
    (lambda: fitting.fit_many("a*x", [1.0, 2.0], [[1.0, 2.0]], p0={"a": 1.0}, loop="python",
                              jit_compile=True), "loop='python'.*jit_compile=False"),
])
def test_bad_loop_settings_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()

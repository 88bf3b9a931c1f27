"""The pure functions of a Levenberg–Marquardt step, on hand-computed values and tiny problems."""

import numpy as np
import pytest
import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import convergence as lm_convergence
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import trial as lm_trial
from graphfit.optimizers.levenberg_marquardt import update as lm_update
from graphfit.optimizers.levenberg_marquardt.convergence import (
    FTOL,
    FTOL_AND_XTOL,
    NOT_CONVERGED,
    NOT_FINITE,
    STALLED,
    XTOL,
)

EPS = float(np.finfo(np.float64).eps)
A = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])  # residuals r(x) = A x − y: m = 3, n = 2
Y = np.array([1.0, -2.0, 0.5])


def _c(value, dtype=tf.float64):
    return tf.constant(value, dtype)


def _quadratic_system(x0, damping="marquardt"):
    """The linearization of ‖A x − y‖² at x0 (exact: the residuals are linear)."""
    r0 = A @ x0 - Y
    diag = _c(np.diag(A.T @ A))
    d = lm_damping.scaling(diag, damping, EPS)
    system = lm_damping.ScaledSystem(_c(A.T @ A), _c(A.T @ r0), tf.zeros(2, tf.float64), d,
                                     tf.constant(False))
    return system, diag, d, float(r0 @ r0)


# ---------------------------------------------------------------------------- update


def test_gain_ratio_is_one_on_a_quadratic_and_zero_without_a_prediction():
    x0 = np.array([0.3, -0.7])
    system, _, _, f0 = _quadratic_system(x0)
    for lam in (1e-6, 0.1, 10.0):
        delta, _ = system.solve(_c(lam))
        r_new = A @ (x0 + delta.numpy()) - Y
        actual = f0 - r_new @ r_new
        gain = lm_update.gain_ratio(_c(actual), system.predicted_reduction(delta, _c(lam)))
        assert abs(float(gain) - 1.0) < 1e-10
    assert float(lm_update.gain_ratio(_c(-2.0), _c(4.0))) == -0.5
    assert float(lm_update.gain_ratio(_c(3.0), _c(0.0))) == 0.0
    assert float(lm_update.gain_ratio(_c(3.0), _c(-1.0))) == 0.0


@pytest.mark.parametrize("finite, f_new, actual, gain, expected", [
    (True, 1.0, 0.5, 0.9, True),
    (True, 1.0, 0.5, lm_update.ACCEPT, False),  # the gain must exceed ACCEPT
    (True, 1.0, 0.0, 0.9, False),  # no reduction
    (True, float("nan"), 0.5, 0.9, False),
    (False, 1.0, 0.5, 0.9, False),
])
def test_step_accepted(finite, f_new, actual, gain, expected):
    accepted = lm_update.step_accepted(tf.constant(finite), _c(f_new), _c(actual), _c(gain))
    assert bool(accepted) is expected


def test_step_accepted_needs_the_step_within_its_bound():
    args = (tf.constant(True), _c(1.0), _c(0.5), _c(0.9))
    assert bool(lm_update.step_accepted(*args, tf.constant(True)))
    assert not bool(lm_update.step_accepted(*args, tf.constant(False)))


def test_step_within_bound_is_relative_to_the_scaled_point():
    bound = lm_update.MAX_RELATIVE_STEP
    within = lm_update.step_within_bound
    assert bool(within(_c(bound * 2.0), _c(2.0)))  # exactly at the bound: kept
    assert not bool(within(_c(bound * 2.0 * (1 + 1e-12)), _c(2.0)))
    assert bool(within(_c(1e30), _c(0.0)))  # at x = 0 there is no scale to bound by


def test_running_scale_keeps_the_largest_diagonal_seen():
    scale = tf.zeros(3, tf.float64)
    for diag in ([4.0, 1.0, 0.0], [2.0, 3.0, 0.0], [1e-9, 1e-9, 5.0]):
        scale = lm_damping.running_scale(scale, _c(diag))
    assert scale.numpy().tolist() == [4.0, 3.0, 5.0]
    # A column that collapsed (1e-9 against 4) keeps its damping: D is the running max.
    d = lm_damping.scaling(scale, "marquardt", EPS)
    assert d.numpy().tolist() == [4.0, 3.0, 5.0]


def test_running_scale_with_a_memory_keeps_the_largest_recent_diagonal():
    scale = tf.zeros(3, tf.float64)
    for diag in ([4.0, 1.0, 0.0], [2.0, 3.0, 0.0], [1e-9, 1e-9, 5.0]):
        scale = lm_damping.running_scale(scale, _c(diag), lm_damping.SCALE_MEMORY)
    # By hand, with SCALE_MEMORY = 0.5: [4, 1, 0] -> [max(2, 2), max(0.5, 3), 0] = [2, 3, 0]
    # -> [max(1, 1e-9), max(1.5, 1e-9), 5]: a column that collapsed keeps half its damping
    # per step instead of dropping to 1e-9 at once.
    assert lm_damping.SCALE_MEMORY == 0.5
    assert scale.numpy().tolist() == [1.0, 1.5, 5.0]


def test_scaling_floors_only_columns_without_effect():
    # A column 1e-40 of the largest (a parameter in small units, MGH10's b2 beside a b1 of
    # 1e-13) keeps its own scale; a zero column gets a positive floor, 1e-300 of the largest.
    d = lm_damping.scaling(_c([1e40, 1.0, 0.0]), "marquardt", EPS).numpy()
    assert d[0] == 1e40 and d[1] == 1.0 and d[2] == pytest.approx(1e-260, rel=1e-12)
    assert lm_damping.scaling(_c([0.0, 0.0]), "marquardt", EPS).numpy().tolist() == [1e-300] * 2
    assert lm_damping.scaling(_c([3.0, 0.0]), "identity", EPS).numpy().tolist() == [1.0, 1.0]


def test_damping_range_and_starting_damping():
    diag = _c([4.0, 1.0])
    marquardt = lm_update.damping_range(diag, lm_damping.scaling(diag, "marquardt", EPS), 2)
    identity = lm_update.damping_range(diag, tf.ones(2, tf.float64), 2)
    assert float(marquardt.scale) == 1.0 and float(identity.scale) == 4.0
    assert float(identity.floor) == 2 * EPS * 4.0
    assert float(identity.top) == lm_damping.MAX_DAMPING * 4.0
    start = lm_update.starting_damping
    assert float(start(_c(-1.0), 1e-3, identity)) == pytest.approx(4e-3, rel=1e-15)  # τ·scale
    assert float(start(_c(0.25), 1e-3, identity)) == 0.25  # the previous step's λ
    assert float(start(_c(1e30), 1e-3, identity)) == float(identity.top)
    assert float(start(_c(0.0), 1e-3, identity)) == float(identity.floor)


def test_next_damping_follows_nielsen_by_hand():
    limits = lm_update.DampingRange(_c(1.0), _c(1e-9), _c(100.0))
    step = lm_update.next_damping
    yes, no = tf.constant(True), tf.constant(False)
    # Accepted: λ·max(1/3, 1 − (2ρ−1)³), ν back to 2.
    for gain, factor in ((1.0, 1 / 3), (0.5, 1.0), (0.75, 1 - 0.5**3), (0.25, 1 + 0.5**3)):
        lam, nu = step(_c(3.0), _c(8.0), _c(gain), yes, limits)
        assert float(lam) == pytest.approx(3.0 * factor, rel=1e-15) and float(nu) == 2.0
    # Rejected twice from λ = 1, ν = 2: λ = 2, ν = 4, then λ = 8, ν = 8.
    lam, nu = step(_c(1.0), _c(2.0), _c(-1.0), no, limits)
    assert (float(lam), float(nu)) == (2.0, 4.0)
    lam, nu = step(lam, nu, _c(-1.0), no, limits)
    assert (float(lam), float(nu)) == (8.0, 8.0)
    # Clipped to [floor, top].
    assert float(step(_c(60.0), _c(2.0), _c(0.0), no, limits)[0]) == 100.0
    assert float(step(_c(1e-9), _c(2.0), _c(1.0), yes, limits)[0]) == 1e-9


@pytest.mark.parametrize("m", [3, 1])  # overdetermined, then m < n
def test_linearize_gives_the_normal_equations_of_a_linear_model(m):
    a, y = A[:m], Y[:m]
    w = tf.Variable([0.3, -0.7], dtype=tf.float64)

    def rows_for(part):
        rows = tf.linalg.matvec(part["a"], w) - part["y"]
        return rows, tf.stop_gradient(rows)

    data = {"a": _c(a), "y": _c(y)}
    with tf.GradientTape() as tape:
        rows, _ = rows_for(data)
        loss = tf.reduce_sum(tf.square(rows))
    gradients = tape.gradient(loss, [w])
    linear = lm_update.linearize(rows_for, data, tf.constant(m), m, [w], "reverse", gradients)
    r0 = a @ w.numpy() - y
    np.testing.assert_allclose(linear.b, a.T @ r0, rtol=1e-14)
    np.testing.assert_allclose(linear.diag, np.diag(a.T @ a), rtol=1e-14)
    assert bool(linear.under) is (m < 2)
    if m < 2:  # J itself, with zero rows up to n; ρ the residuals, padded
        np.testing.assert_array_equal(linear.matrix, np.vstack([a, np.zeros((2 - m, 2))]))
        np.testing.assert_allclose(linear.rho, np.concatenate([r0, np.zeros(2 - m)]))
    else:
        np.testing.assert_allclose(linear.matrix, a.T @ a, rtol=1e-14)
        np.testing.assert_array_equal(linear.rho, 0.0)


# ----------------------------------------------------------------------- convergence


def test_convergence_tests_floor_the_tolerances_at_eps():
    tests = lm_convergence.convergence_tests(_c([4.0, 9.0]), _c([1.0, 1.0]), 0.0, 1e-3, EPS)
    assert tests.ftol == EPS and tests.xtol == 1e-3
    np.testing.assert_allclose(tests.column_norms, [2.0, 3.0])
    assert float(tests.x_norm) == pytest.approx(np.sqrt(13.0), rel=1e-15)


@pytest.mark.parametrize("f_new, predicted, gain, delta, finite, stalled, expected", [
    (1.0 - 1e-12, 1e-12, 1.0, [1.0, 0.0], True, False, FTOL),
    (0.5, 0.5, 1.0, [1e-12, 0.0], True, False, XTOL),
    (1.0 - 1e-12, 1e-12, 1.0, [1e-12, 0.0], True, False, FTOL_AND_XTOL),
    (1.0 - 1e-12, 1e-12, 2.5, [1.0, 0.0], True, False, NOT_CONVERGED),  # gain above 2
    (1.0 - 1e-12, 1e-3, 1e-9, [1.0, 0.0], True, False, NOT_CONVERGED),  # predicted too large
    (0.5, 0.5, 1.0, [1.0, 0.0], True, False, NOT_CONVERGED),
    (0.5, 0.5, 1.0, [1.0, 0.0], True, True, STALLED),
    (1.0 - 1e-12, 1e-12, 1.0, [1.0, 0.0], True, True, FTOL),  # a test met beats STALLED
    (1.0, 0.0, 0.0, [0.0, 0.0], False, False, NOT_CONVERGED),  # no finite step
    # A step past the bound (not evaluated: no reduction measured) with a negative prediction
    # (rounding, below JᵀJ's resolution): a float32 fit read it as converged (a review).
    (1.0, -6.6e8, 0.0, [8.7e7, 0.0], False, False, NOT_CONVERGED),
    (1.0, -1e-3, 0.0, [1.0, 0.0], True, False, NOT_CONVERGED),  # negative prediction
])
def test_convergence_code(f_new, predicted, gain, delta, finite, stalled, expected):
    tests = lm_convergence.ConvergenceTests(1e-10, 1e-10, _c([1.0, 1.0]), _c(1.0))
    code = lm_convergence.convergence_code(tests, _c(1.0), _c(f_new), _c(predicted), _c(gain),
                                           _c(delta), tf.constant(finite), tf.constant(stalled))
    assert int(code) == expected


@pytest.mark.parametrize("f0, f_new, delta, finite, stalled, expected", [
    (np.nan, np.nan, [0.0, 0.0], False, True, NOT_FINITE),  # the stall of a NaN loss
    (np.inf, np.inf, [0.0, 0.0], False, True, NOT_FINITE),
    (np.nan, 0.5, [1e-12, 0.0], True, False, NOT_FINITE),  # a tiny step is not convergence
    (np.nan, np.nan, [0.0, 0.0], False, False, NOT_CONVERGED),  # no stop: the trials go on
    (1.0, np.nan, [1.0, 0.0], True, True, STALLED),  # a finite start: an ordinary stall
])
def test_a_non_finite_loss_never_reads_as_converged_or_stalled(f0, f_new, delta, finite,
                                                                stalled, expected):
    tests = lm_convergence.ConvergenceTests(1e-10, 1e-10, _c([1.0, 1.0]), _c(1.0))
    code = lm_convergence.convergence_code(tests, _c(f0), _c(f_new), _c(0.5), _c(1.0),
                                           _c(delta), tf.constant(finite), tf.constant(stalled))
    assert int(code) == expected


@pytest.mark.parametrize("case", ["nan label", "nan label, XLA", "nan label, batches of 10",
                                  "inf loss, float64"])
def test_a_fit_from_a_non_finite_loss_stops_saying_so(case):
    # NaN labels pass fit's check only with check_finite=False; an output bias of 1e160 gives
    # finite residuals whose squares overflow. Under XLA a NaN once read as the gradient test
    # met (its reduce_max skips NaN); with batches, one NaN batch grew λ until the next batch
    # "converged" (a review).
    import graphfit as gf

    dtype = "float64" if "float64" in case else "float32"
    x = np.linspace(-1, 1, 40)[:, None].astype(dtype)
    y = np.sinc(3 * x).astype(dtype)
    if "nan" in case:
        y[5] = np.nan
    model = gf.Sequential([gf.layers.Dense(4, activation="tanh"), gf.layers.Dense(1)],
                          input_shape=(1,), dtype=dtype)
    model.compile(gf.optimizers.LevenbergMarquardt(), "mse", jit_compile="XLA" in case)
    if "inf" in case:
        model.layers[-1].weights[-1].assign([1e160])
    history = model.fit(x, y, batch_size=10 if "batches" in case else 40, epochs=5, verbose=0,
                        check_finite=False)
    assert len(history.history["loss"]) == 1  # it stopped in its first epoch
    assert "started from a NaN or inf loss" in history.stop_reason, history.stop_reason
    assert "converged" not in history.stop_reason


@pytest.mark.parametrize("f0, b, diag", [
    (np.inf, [1.0, 0.0], [1.0, 1.0]),  # an overflowing sum of finite residuals: cosines 0
    (4.0, [np.nan, 0.0], [1.0, 1.0]),
    (4.0, [np.nan, np.nan], [np.nan, np.nan]),  # NaN columns of J (once read as zero columns)
])
def test_the_gradient_test_never_holds_for_a_non_finite_system(f0, b, diag):
    assert not bool(lm_convergence.gradient_converged(_c(b), _c(diag), _c(f0), 0.5))
    under_xla = tf.function(lm_convergence.gradient_converged, jit_compile=True)
    assert not bool(under_xla(_c(b), _c(diag), _c(f0), 0.5))


def test_gradient_converged_compares_the_largest_cosine():
    # b = Jᵀr = [1, 0], unit columns, ‖r‖ = 2: cosines [0.5, 0].
    b, diag, f0 = _c([1.0, 0.0]), _c([1.0, 1.0]), _c(4.0)
    assert not bool(lm_convergence.gradient_converged(b, diag, f0, 0.4))
    assert bool(lm_convergence.gradient_converged(b, diag, f0, 0.5))
    assert bool(lm_convergence.gradient_converged(_c([0.0, 0.0]), diag, f0, 0.0))
    # A zero column has no cosine (not a division by zero).
    assert bool(lm_convergence.gradient_converged(_c([0.0, 1.0]), _c([1.0, 0.0]), f0, 0.0))


# ----------------------------------------------------------------------------- trial


def _trial_problem(x0, *, penalty=0.0, limits=None, dtype=tf.float64):
    """A TrialProblem for ‖A x − y‖² (+ penalty·‖x − x0‖⁴, which the model does not see),
    with a counter of evaluations and the points they ran at."""
    x = tf.Variable(x0, dtype=dtype)
    system, diag, d, f0 = _quadratic_system(np.asarray(x0, np.float64))
    steps = lm_trial.variable_steps([x])
    seen = []

    def evaluate():
        if tf.executing_eagerly():
            seen.append(x.numpy().copy())
        r = tf.linalg.matvec(_c(A), tf.cast(x, tf.float64)) - _c(Y)
        step = tf.cast(x, tf.float64) - _c(x0)
        return [tf.reduce_sum(r * r) + penalty * tf.reduce_sum(step * step) ** 2]

    limits = limits or lm_update.damping_range(diag, d, 2)
    tests = lm_convergence.convergence_tests(diag, steps.x0, 1e-10, 1e-10, EPS)
    problem = lm_trial.TrialProblem(system, steps.assign, evaluate, steps.restore, _c(f0),
                                    limits, tests)
    return problem, x, seen, f0


def test_trial_loop_accepts_the_first_step_on_a_convex_quadratic():
    x0 = [0.3, -0.7]
    problem, x, seen, f0 = _trial_problem(x0)
    lam = _c(1e-3)
    result = lm_trial.trial_loop(problem, lam, _c(2.0), [_c(f0)], 10)
    delta, _ = problem.system.solve(lam)
    assert len(seen) == 1  # one evaluation: the first trial was kept
    np.testing.assert_array_equal(x.numpy(), x0 + delta.numpy())
    r = A @ x.numpy() - Y
    assert float(result.values[0]) == pytest.approx(r @ r, rel=1e-14)
    # gain = 1 on a quadratic: λ/3, ν = 2.
    assert float(result.damping) == pytest.approx(1e-3 / 3, rel=1e-12)
    assert float(result.growth) == 2.0 and int(result.code) == NOT_CONVERGED


def test_a_rejected_trial_restores_the_variables_bit_for_bit():
    x0 = np.array([0.1, 0.2], np.float32)  # float32: x0 + δ − δ would not give x0 back
    problem, x, seen, f0 = _trial_problem(x0, penalty=1e6, dtype=tf.float32)
    one = lm_trial.attempt(problem, _c(1e-6), _c(2.0), [_c(f0)])
    assert not bool(one.accepted) and len(seen) == 1
    assert not np.array_equal(seen[0], x0)  # the trial did move the variables
    assert float(one.values[0]) == f0  # the starting loss is kept
    assert (float(one.damping), float(one.growth)) == (2e-6, 4.0)
    # The loop puts them back after its last trial, rejected here.
    rejected = lm_trial.trial_loop(problem, _c(1e-6), _c(2.0), [_c(f0)], 1)
    assert len(seen) == 2 and float(rejected.values[0]) == f0
    np.testing.assert_array_equal(x.numpy(), x0)
    seen.clear()
    # The loop grows λ until a trial is short enough for the penalty, and keeps that one.
    result = lm_trial.trial_loop(problem, _c(1e-6), _c(2.0), [_c(f0)], 40)
    assert 2 < len(seen) < 40 and float(result.values[0]) < f0
    np.testing.assert_array_equal(x.numpy(), seen[-1])


def test_trial_loop_stops_on_xtol_at_the_minimum_and_stalls_at_the_top():
    x_min = np.linalg.lstsq(A, Y, rcond=None)[0]
    problem, x, seen, f0 = _trial_problem(x_min)
    result = lm_trial.trial_loop(problem, _c(1e-3), _c(2.0), [_c(f0)], 10)
    assert int(result.code) in (XTOL, FTOL_AND_XTOL) and len(seen) <= 1
    # From x0 = 0 (‖S x‖ = 0, so no xtol) with λ at its top and every trial worse: STALLED.
    top = lm_update.DampingRange(_c(1.0), _c(1e-9), _c(1e4))
    problem, x, seen, f0 = _trial_problem([0.0, 0.0], penalty=1e20, limits=top)
    result = lm_trial.trial_loop(problem, _c(1e4), _c(2.0), [_c(f0)], 10)
    assert int(result.code) == STALLED and len(seen) == 1
    np.testing.assert_array_equal(x.numpy(), [0.0, 0.0])


def test_a_step_past_the_bound_is_rejected_without_evaluating_it():
    # At x0 = (1e-3, 0) the least-squares step is about 1000 ‖S x0‖ long: far past the bound.
    x0 = [1e-3, 0.0]
    problem, x, seen, f0 = _trial_problem(x0)
    one = lm_trial.attempt(problem, _c(1e-9), _c(2.0), [_c(f0)])
    # Not tried: the variables never visit it (the start is evaluated in its place).
    assert not bool(one.accepted) and all(np.array_equal(v, x0) for v in seen)
    np.testing.assert_array_equal(x.numpy(), x0)
    seen.clear()
    assert (float(one.damping), float(one.growth)) == (2e-9, 4.0)
    # The loop grows λ until the step is within MAX_RELATIVE_STEP · ‖S x0‖, and keeps it.
    result = lm_trial.trial_loop(problem, _c(1e-9), _c(2.0), [_c(f0)], 40)
    s = problem.tests.column_norms.numpy()
    step = np.linalg.norm(s * (x.numpy() - x0))
    assert 0 < step <= lm_update.MAX_RELATIVE_STEP * np.linalg.norm(s * x0)
    assert float(result.values[0]) < f0  # only the kept trial moved the variables
    assert all(np.array_equal(v, x0) for v in seen[:-1]) and not np.array_equal(seen[-1], x0)


def test_trial_loop_in_a_tf_function_matches_eager():
    x0 = [0.3, -0.7]
    problem, x, _, f0 = _trial_problem(x0, penalty=10.0)
    eager = lm_trial.trial_loop(problem, _c(0.01), _c(2.0), [_c(f0)], 10)
    x_eager = x.numpy().copy()
    x.assign(x0)
    graph = tf.function(lambda: lm_trial.trial_loop(problem, _c(0.01), _c(2.0), [_c(f0)], 10))()
    np.testing.assert_array_equal(x.numpy(), x_eager)
    for a, b in zip(eager[:3], graph[:3]):
        assert float(a) == float(b)


# ------------------------------------------------------------------------ optimizer state


def test_the_optimizer_keeps_the_running_scale_and_checkpoints_it(tmp_path):
    import graphfit as gf
    from graphfit import layers, optimizers

    # y = a·x + b under MSE: the rows are (ŷ − y)/√m, so diag(JᵀJ) = [mean(x²), 1] at every
    # point, and the running maximum is that.
    x = np.linspace(-1, 1, 20)[:, None]
    model = gf.Sequential([layers.Dense(1)], input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    model.fit(x, 2 * x + 1 + 0.1 * np.sin(7 * x), batch_size=None, epochs=2, verbose=0)
    scale = model.optimizer.damping_scale
    np.testing.assert_allclose(scale.numpy(), [np.mean(x ** 2), 1.0], rtol=1e-12)
    path = tf.train.Checkpoint(optimizer=model.optimizer).save(str(tmp_path / "ckpt"))
    fresh = optimizers.LevenbergMarquardt()
    tf.train.Checkpoint(optimizer=fresh).restore(path).assert_existing_objects_matched()
    # Created by `build`, the variable takes the saved value then (deferred restore).
    fresh.build(model.trainable_variables)
    np.testing.assert_array_equal(fresh.damping_scale.numpy(), scale.numpy())
    fresh.reset_state()  # a new start: no scale, no λ
    assert not fresh.damping_scale.numpy().any() and float(fresh.damping_value) == -1.0


# ----------------------------------------------------------------- overflowed derivatives


def test_a_non_finite_system_solves_to_nan_instead_of_raising():
    matrix = np.array([[np.nan, 1.0], [1.0, 2.0]])
    system = lm_damping.ScaledSystem(_c(matrix), _c([1.0, 1.0]), tf.zeros(2, tf.float64),
                                     _c([1.0, 1.0]), tf.constant(False))
    delta, used_cholesky = system.solve(_c(1e-3))  # eigh would raise on the NaN
    assert not bool(used_cholesky) and not np.isfinite(delta.numpy()).any()
    kept = lm_damping.running_scale(_c([4.0, 1.0]), _c([np.nan, 3.0]))
    assert kept.numpy().tolist() == [4.0, 3.0]  # a NaN diagonal does not stick


def test_a_float32_start_whose_derivatives_overflow_still_fits():
    import graphfit as gf
    from graphfit import layers, optimizers

    # exp(−k(x − x0)) reaches e⁹⁰ at this start: the loss is finite (L/(1+inf) = 0), but
    # dŷ/dk = inf/inf = NaN in float32; counted as the zero it tends to, the fit proceeds.
    x = np.linspace(0, 10, 60, dtype=np.float32)[:, None]
    y = (10 / (1 + np.exp(-1.5 * (x - 4)))).astype(np.float32)
    curve = layers.Formula("L/(1+exp(-k*(x-x0)))", params={"L": 1.0, "k": 10.0, "x0": 9.0})
    model = gf.Sequential([curve], dtype="float32")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    model.fit(x, y, batch_size=None, epochs=100, verbose=0)
    values = curve.values()
    np.testing.assert_allclose([values["L"], values["k"], values["x0"]], [10.0, 1.5, 4.0],
                               rtol=1e-5)


def test_freezing_and_unfreezing_reuses_the_scale_of_each_parameter_count():
    import graphfit as gf
    from graphfit import layers, optimizers

    x = np.random.default_rng(0).normal(size=(30, 2))
    model = gf.Sequential([layers.Dense(3, activation="tanh"), layers.Dense(1)],
                          input_shape=(2,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    model.fit(x, np.sin(x[:, :1]), batch_size=None, epochs=1, verbose=0)
    full = model.optimizer.damping_scale  # n = 13
    model.layers[0].trainable = False
    model.fit(x, np.sin(x[:, :1]), batch_size=None, epochs=1, verbose=0)
    assert model.optimizer.damping_scale.shape == (4,)
    model.layers[0].trainable = True
    model.fit(x, np.sin(x[:, :1]), batch_size=None, epochs=1, verbose=0)
    assert model.optimizer.damping_scale is full
    assert sum("damping_scale" in v.name for v in model.optimizer.variables) == 2


# ------------------------------------------------------------ JᵀJ rounded in float32


def test_below_float32_resolution_the_solve_never_tries_a_failing_cholesky(monkeypatch):
    # JᵀJ of a rank-deficient J (two equal columns) as float32 sums give it: positive
    # semi-definite only to float32's rounding (here a symmetric perturbation of that size).
    # At the float64 damping floor Cholesky fails on it, and TensorFlow logs a warning each
    # time (near a minimum of a float32 model, on most trials); below the float32
    # resolution the solve goes straight to the eigen path instead.
    rng = np.random.default_rng(0)
    c = rng.normal(size=(200, 3))
    c = np.concatenate([c, c[:, :1]], axis=1)
    n, eps32 = 4, float(np.finfo(np.float32).eps)
    noise = rng.uniform(-0.2, 0.2, size=(n, n)) * eps32
    matrix = c.T @ c + (noise + noise.T) * np.sqrt(np.outer(*[np.diag(c.T @ c)] * 2))
    b = c.T @ rng.normal(size=200)
    d = np.diag(matrix)
    p = matrix / np.sqrt(np.outer(d, d))  # Marquardt's scaling: unit diagonal, scale 1
    floor64, resolution = n * EPS, n * eps32
    assert np.linalg.eigvalsh(p).min() < -floor64  # the premise: indefinite by rounding
    factors = []
    cholesky = tf.linalg.cholesky
    monkeypatch.setattr(tf.linalg, "cholesky",
                        lambda m: factors.append(cholesky(m)) or factors[-1])
    system = lm_damping.ScaledSystem(_c(matrix), _c(b), tf.zeros(n, tf.float64), _c(d),
                                     tf.constant(False), resolution)
    values, vectors = np.linalg.eigh(p)
    for lam, expect_cholesky in ((floor64, False), (10 * resolution, True)):
        delta, used_cholesky = system.solve(_c(lam))
        assert bool(used_cholesky) == expect_cholesky
        u = vectors @ ((vectors.T @ (-b / np.sqrt(d))) / (np.maximum(values, 0) + lam))
        np.testing.assert_allclose(delta.numpy(), u / np.sqrt(d), rtol=1e-6)
    assert len(factors) == 2 and all(np.isfinite(f.numpy()).all() for f in factors)
    # Without the resolution (the float64 model's case), the first solve's Cholesky fails.
    plain = lm_damping.ScaledSystem(_c(matrix), _c(b), tf.zeros(n, tf.float64), _c(d),
                                    tf.constant(False))
    assert not bool(plain.solve(_c(floor64))[1]) and not np.isfinite(factors[-1].numpy()).all()


def test_column_resolutions_shift_each_column_and_cholesky_solves_below_the_resolution():
    # A float64 JᵀJ with D unlike diag(A): P's diagonal is (1, 1/4, 1, 1e-18), the last
    # column's curvature far below its running scale. With column resolutions n·ε·P_jj,
    # each column is shifted by max(λ, n·ε·P_jj) and Cholesky solves at every λ:
    # δ = −D^-½ (P + diag(shift))⁻¹ D^-½ b, and the prediction uses the damping matrix D·shift.
    # With one resolution (the float32 case) λ below it goes to the eigen solve at λ, which
    # cannot resolve the last column (its eigenvalue is below eigh's rounding of P).
    rng = np.random.default_rng(3)
    c = rng.normal(size=(30, 4))
    matrix, b = c.T @ c, c.T @ rng.normal(size=30)
    n = 4
    d = np.diag(matrix) * np.array([1.0, 4.0, 1.0, 1e18])
    p = matrix / np.sqrt(np.outer(d, d))
    resolution = n * EPS * np.diag(p).max()
    columns = n * EPS * np.diag(matrix) / d
    system = lm_damping.ScaledSystem(_c(matrix), _c(b), tf.zeros(n, tf.float64), _c(d),
                                     tf.constant(False), resolution,
                                     column_resolution=_c(columns))
    gauss_newton = -np.linalg.solve(matrix, b)
    for lam in (lm_damping.least_damping(_c(np.diag(matrix) / d), n * EPS).numpy(),
                0.01 * resolution, 10 * resolution, 1e-3):
        shift = np.maximum(lam, columns)
        delta, used_cholesky = system.solve(_c(lam))
        assert bool(used_cholesky), lam
        u = np.linalg.solve(p + np.diag(shift), -b / np.sqrt(d))
        np.testing.assert_allclose(delta.numpy(), u / np.sqrt(d), rtol=1e-8)
        predicted = delta.numpy() @ matrix @ delta.numpy() + 2.0 * np.sum(
            shift * d * delta.numpy() ** 2)
        np.testing.assert_allclose(float(system.predicted_reduction(delta, _c(lam))),
                                   predicted, rtol=1e-9)
    # At λ's floor the step is Gauss–Newton's to rounding, the last column included; with
    # one resolution the least λ, the resolution, damps that column about 900-fold
    # (λ·D_33 = 4ε·1e18·A_33).
    floor = lm_damping.least_damping(_c(np.diag(matrix) / d), n * EPS)
    delta, _ = system.solve(floor)
    np.testing.assert_allclose(delta.numpy(), gauss_newton, rtol=1e-6)
    uniform = lm_damping.ScaledSystem(_c(matrix), _c(b), tf.zeros(n, tf.float64), _c(d),
                                      tf.constant(False), resolution)
    delta, _ = uniform.solve(_c(resolution))
    assert abs(delta.numpy()[3]) < 0.01 * abs(gauss_newton[3])


def test_the_least_damping_is_where_lambda_stops_shifting_any_column():
    # λ's floor is n·ε times the smallest positive diag(A)/D (the largest where none is);
    # the optimizer's with column resolutions (float64), n·ε₆₄·scale without (float32, cg).
    ratios = _c([[1.0, 1e-16, 0.5], [0.0, 0.25, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(lm_damping.least_damping(ratios, 3 * EPS).numpy(),
                               [3 * EPS * 1e-16, 3 * EPS * 0.25, 0.0], rtol=1e-15)
    diag, d = _c([1.0, 1e-16]), _c([1.0, 1.0])
    assert float(lm_update.damping_range(diag, d, 2).floor) == 2 * EPS
    assert float(lm_update.damping_range(diag, d, 2, EPS).floor) == pytest.approx(
        2 * EPS * 1e-16, rel=1e-12)


def test_the_decomposition_below_resolution_is_computed_once_per_step(monkeypatch):
    # With the step's first λ given, the eigendecomposition runs once, before the trials,
    # when that λ is below the resolution; each trial below it gives the per-trial result.
    # Above the resolution nothing is decomposed, and a Cholesky that still fails (an
    # overflowed JᵀJ) solves to NaN, which the trial rejects.
    rng = np.random.default_rng(1)
    c = rng.normal(size=(50, 3))
    c = np.concatenate([c, c[:, :1]], axis=1)  # rank-deficient: P is singular
    matrix, b, d, n = c.T @ c, c.T @ rng.normal(size=50), np.diag(c.T @ c), 4
    resolution = n * float(np.finfo(np.float32).eps)
    calls = []
    eigh = tf.linalg.eigh
    monkeypatch.setattr(tf.linalg, "eigh", lambda m: calls.append(1) or eigh(m))

    def system(first):
        return lm_damping.ScaledSystem(_c(matrix), _c(b), tf.zeros(n, tf.float64), _c(d),
                                       tf.constant(False), resolution, first)

    per_trial = system(None)
    once = system(_c(1e-3 * resolution))
    assert len(calls) == 1
    for lam in (1e-3 * resolution, 1e-2 * resolution, 0.5 * resolution):
        expected, _ = per_trial.solve(_c(lam))
        delta, used_cholesky = once.solve(_c(lam))
        assert not bool(used_cholesky)
        np.testing.assert_allclose(delta, expected, rtol=1e-12)
    assert len(calls) == 4  # three for the per-trial system, one for the whole step
    above = system(_c(lm_damping.EIGEN_MARGIN * resolution))
    assert len(calls) == 4
    assert bool(above.solve(_c(lm_damping.EIGEN_MARGIN * resolution))[1])
    # Indefinite beyond the resolution (rounding over many rows): a Cholesky that fails
    # within the margin still gets the eigen solve, from the step's one decomposition.
    values, vectors = np.linalg.eigh(matrix / np.sqrt(np.outer(d, d)))
    values[0] = -5 * resolution  # P + 3·resolution·I is indefinite
    indefinite = (vectors * values) @ vectors.T * np.sqrt(np.outer(d, d))
    lam = _c(3 * resolution)
    expected, _ = lm_damping.ScaledSystem(_c(indefinite), _c(b), tf.zeros(n, tf.float64),
                                          _c(d), tf.constant(False), resolution).solve(lam)
    delta, used_cholesky = lm_damping.ScaledSystem(
        _c(indefinite), _c(b), tf.zeros(n, tf.float64), _c(d), tf.constant(False), resolution,
        lam).solve(lam)
    assert not bool(used_cholesky) and np.isfinite(expected.numpy()).all()
    np.testing.assert_allclose(delta, expected, rtol=1e-10)
    overflowed = lm_damping.ScaledSystem(
        _c(np.where(np.eye(n) > 0, np.inf, matrix)), _c(b), tf.zeros(n, tf.float64),
        _c(np.full(n, 1.0)), tf.constant(False), resolution, _c(10 * resolution))
    delta, used_cholesky = overflowed.solve(_c(10 * resolution))
    assert not bool(used_cholesky) and np.isnan(delta.numpy()).all()

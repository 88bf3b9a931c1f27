"""Geodesic acceleration: the second-order correction of each trial, checked against NumPy.

A float64 curve y = b0 · exp(b1 · x) fitted with mean squared error: one `fit` step from a
start whose first trial is accepted must land on x + δ + a/2 computed by hand (δ the damped
Gauss–Newton step, a = −(JᵀJ + λD)⁻¹ Jᵀ r_vv with r_vv the central second difference along
δ); on x + δ with the acceleration off, and on x + δ when the correction is too large.
"""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import geodesic
from graphfit.training.input_checks import OptimizerMismatch

X = np.linspace(0.0, 2.0, 9)
Y = 1.5 * np.exp(0.8 * X) + 0.05 * np.cos(7 * X)  # not exactly the model: r ≠ 0 at the fit
START = np.array([1.0, 1.1])


FAR = np.array([1.0, 2.0])  # its first correction is 2.5 times the step: too large


def _residuals(b):
    return b[0] * np.exp(b[1] * X) - Y


def _jacobian(b):
    e = np.exp(b[1] * X)
    return np.stack([e, b[0] * X * e], 1)


def _hand_step(accelerate: bool, start=START):
    """The first trial by hand: λ = τ = 1e-3 in units of diag(JᵀJ), D = diag(JᵀJ)."""
    j, r = _jacobian(start), _residuals(start)
    a_mat, d = j.T @ j, np.diag(j.T @ j)
    shifted = a_mat + 1e-3 * np.diag(d)
    delta = np.linalg.solve(shifted, -j.T @ r)
    if not accelerate:
        return delta, None
    h = geodesic.STEP
    second = (_residuals(start + h * delta) - 2 * r + _residuals(start - h * delta)) / h**2
    acceleration = np.linalg.solve(shifted, -j.T @ second)
    return delta + 0.5 * acceleration, (acceleration, delta, d)


def _ratio(acceleration, delta, d):
    return 2 * np.linalg.norm(np.sqrt(d) * acceleration) / np.linalg.norm(np.sqrt(d) * delta)


def _one_step(start=START, **kwargs):
    model = gf.Sequential([layers.Formula("b0 * exp(b1 * x)",
                                          params={"b0": start[0], "b1": start[1]})],
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(**kwargs), loss="mse",
                  jit_compile=False)
    model.fit(X[:, None], Y[:, None], batch_size=None, epochs=1, verbose=0)
    values = model.layers[0].values()
    return np.array([values["b0"], values["b1"]]), model.optimizer


def test_a_float64_step_is_bent_by_the_acceleration_computed_by_hand():
    step, (acceleration, delta, d) = _hand_step(accelerate=True)
    # The scenario: the correction is real but within Transtrum's bound, so it is kept.
    assert 0.01 < _ratio(acceleration, delta, d) < geodesic.ALPHA
    after, optimizer = _one_step()  # "auto": float64 and mean squared error
    np.testing.assert_allclose(after, START + step, rtol=1e-10)
    assert abs(after - (START + delta)).max() > 1e-4  # not the plain step


def test_without_acceleration_the_step_is_the_damped_gauss_newton_step():
    delta, _ = _hand_step(accelerate=False)
    after, _ = _one_step(geodesic_acceleration=False)
    np.testing.assert_allclose(after, START + delta, rtol=1e-10)


def test_a_correction_larger_than_the_bound_leaves_the_plain_step():
    _, (acceleration, delta, d) = _hand_step(accelerate=True, start=FAR)
    assert _ratio(acceleration, delta, d) > 2 * geodesic.ALPHA  # the scenario
    after, optimizer = _one_step(start=FAR)
    # Not rejected (λ would have grown and the point stayed): the plain step, taken.
    np.testing.assert_allclose(after, FAR + delta, rtol=1e-10)
    assert float(optimizer.damping_value) < 1e-3


def test_acceleration_product_matches_the_analytic_second_derivative():
    # r = b0·exp(b1·x): along v, r_vv = 2·v0·v1·x·e + b0·v1²·x²·e; central differences are
    # off by O(h²) of the fourth derivative, well below 1e-3 relative here.
    b = tf.Variable(START, dtype=tf.float64)
    start = tf.constant(START)
    x = tf.constant(X)
    direction = np.array([0.2, -0.3])
    product = geodesic.acceleration_product(
        lambda: b[0] * tf.exp(b[1] * x), [b], lambda step: b.assign(start + step),
        tf.constant(direction)).numpy()
    e = np.exp(START[1] * X)
    second = 2 * direction[0] * direction[1] * X * e + START[0] * direction[1] ** 2 * X**2 * e
    np.testing.assert_allclose(product, _jacobian(START).T @ second, rtol=1e-3)
    np.testing.assert_array_equal(b.numpy(), START)  # left at the start, bit for bit


def test_the_acceleration_bound_rejects_a_large_correction():
    d = tf.ones([2], tf.float64)
    delta = tf.constant([1.0, 0.0], tf.float64)
    assert bool(geodesic.acceptable(tf.constant([0.375, 0.0], tf.float64), delta, d))
    assert not bool(geodesic.acceptable(tf.constant([0.376, 0.0], tf.float64), delta, d))


def test_geodesic_acceleration_argument_is_checked():
    with pytest.raises(ValueError, match="geodesic_acceleration"):
        optimizers.LevenbergMarquardt(geodesic_acceleration="yes")
    config = optimizers.LevenbergMarquardt(geodesic_acceleration=False).get_config()
    assert config["geodesic_acceleration"] is False
    assert optimizers.LevenbergMarquardt.from_config(config).geodesic_acceleration is False


@pytest.mark.parametrize("loss, solver", [("sparse_categorical_crossentropy", "direct"),
                                          ("mse", "cg")])
def test_forcing_it_where_it_cannot_apply_is_refused_before_the_first_step(loss, solver):
    # Refused when fit prepares (as `graphfit validate` does), not when the step is traced.
    model = gf.Sequential([layers.Dense(3)], input_shape=(2,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(geodesic_acceleration=True,
                                                          solver=solver),
                  loss=loss, jit_compile=False)
    x = np.random.default_rng(0).normal(size=(12, 2))
    y = np.arange(12) % 3 if loss != "mse" else np.zeros((12, 3))
    with pytest.raises(OptimizerMismatch, match=f"sum of squared residuals.*solver='{solver}'"):
        model.fit(x, y, batch_size=None, epochs=1, verbose=0)
    assert model.compile_state.steps.tracing_counts().get("train_step", 0) == 0


def test_fewer_rows_than_parameters_take_the_plain_steps_bit_for_bit():
    # m = 2 rows < n = 3 parameters: the m × m form has no right-hand side for the
    # correction, so "auto" must be False exactly (no memory in the scale either).
    x, y = np.array([[0.0], [1.5]]), np.array([[0.4], [0.9]])
    runs = []
    for setting in ("auto", False):
        model = gf.Sequential([layers.Formula("b0 / (1 + exp(-b1 * (x - b2)))",
                                              params={"b0": 1.0, "b1": 1.0, "b2": 0.5})],
                              dtype="float64")
        model.compile(optimizer=optimizers.LevenbergMarquardt(geodesic_acceleration=setting),
                      loss="mse", jit_compile=False)
        steps = []
        for _ in range(4):
            model.fit(x, y, batch_size=None, epochs=1, verbose=0)
            steps.append((model.get_weights(), model.optimizer.damping_scale.numpy()))
        runs.append(steps)
    for (w_auto, s_auto), (w_plain, s_plain) in zip(*runs):
        assert all(np.array_equal(a, b) for a, b in zip(w_auto, w_plain))
        np.testing.assert_array_equal(s_auto, s_plain)
    assert not np.array_equal(runs[0][0][0][0], runs[0][-1][0][0])  # it moved


class _ScaleAfterEachStep(gf.callbacks.Callback):
    def __init__(self, scale, fail=False):
        super().__init__()
        self.scale, self.fail, self.seen = scale, fail, []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(self.scale.numpy().copy())
        if self.fail:
            raise RuntimeError("a callback failed")


@pytest.mark.parametrize("wrapped", [False, True], ids=["lm", "loss_scale_optimizer"])
def test_the_scale_forgets_once_per_pass_over_the_data_in_fit_and_per_step_outside(wrapped):
    # With the acceleration the running scale halves its memory once per pass over the
    # training data: 9 examples in batches of 3 make each step multiply the earlier maximum
    # by 0.5 ** (1/3), whatever steps_per_epoch says. A dataset of unknown length, and a
    # step outside fit (the public train_step, also after a fit that failed), halve it per
    # step. The earlier maximum is set far above any diag(JᵀJ), so the new scale is that
    # product alone. A LossScaleOptimizer passes the count on.
    model = gf.Sequential([layers.Formula("b0 * exp(b1 * x)",
                                          params={"b0": START[0], "b1": START[1]})],
                          dtype="float64")
    lm = optimizers.LevenbergMarquardt()
    model.compile(optimizer=optimizers.LossScaleOptimizer(lm) if wrapped else lm, loss="mse",
                  jit_compile=False, steps_per_execution=1)
    x, y = X[:, None], Y[:, None]
    model.fit(x, y, batch_size=None, epochs=1, verbose=0)  # builds
    scale = lm.damping_scale
    far_above = scale.numpy() * 1e12

    def first_step_of(data, **kwargs):
        # The tiny steps may meet xtol: the next step's start would test that code again
        # with the scale's memory at 0 (`convergence.deferred`); reset_state forgets it.
        lm.reset_state()
        scale.assign(far_above)
        spy = _ScaleAfterEachStep(scale)
        model.fit(*data, epochs=1, shuffle=False, verbose=0, callbacks=[spy], **kwargs)
        return spy.seen[0]  # (the tiny steps may meet xtol: a fit can stop after one)

    np.testing.assert_allclose(first_step_of((x, y), batch_size=3, steps_per_epoch=1),
                               0.5 ** (1 / 3) * far_above, rtol=1e-12)
    unknown_length = tf.data.Dataset.from_tensor_slices((x, y)).filter(
        lambda *_: True).batch(3)
    assert int(unknown_length.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    np.testing.assert_allclose(first_step_of((unknown_length,)), 0.5 * far_above, rtol=1e-12)

    with pytest.raises(RuntimeError, match="a callback failed"):
        model.fit(x, y, batch_size=3, epochs=1, verbose=0,
                  callbacks=[_ScaleAfterEachStep(scale, fail=True)])
    lm.reset_state()
    scale.assign(far_above)
    model.train_step((tf.constant(x[:3]), tf.constant(y[:3])))
    np.testing.assert_allclose(scale.numpy(), 0.5 * far_above, rtol=1e-12)


def test_the_memory_per_step_follows_the_steps_per_pass():
    # StepBatch.steps_per_pass: None outside fit, 0 for data of unknown length: one pass a step.
    for steps, memory in ((None, 0.5), (0, 0.5), (1, 0.5), (4, 0.5 ** 0.25)):
        given = None if steps is None else tf.constant(steps, tf.int64)
        assert float(lm_damping.scale_memory(given)) == pytest.approx(memory, rel=1e-15)

"""LevenbergMarquardt(solver="cg"): matrix-free products, PCG, and the same step contract as the
direct solver (steps, damping, rejected trials), past the direct solver's parameter limit."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.optimizers.levenberg_marquardt import conjugate_gradient as lm_cg
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import matrix_free as lm_matrix_free

RNG = np.random.default_rng(7)
# CG run to convergence, on the exact diag(JᵀJ)
TIGHT = {"cg_iterations": 300, "cg_tolerance": 1e-13, "cg_diagonal_probes": None}


def _linear_rows(x):
    """Residual rows `C x` of a chunk (Jacobian C at every x)."""
    return lambda part: (tf.linalg.matvec(part["c"], x), tf.zeros([0], tf.float64))


def _linear_products(c, chunk):
    """Products for residual rows `C x`, in chunks of `chunk` rows."""
    x = tf.Variable(RNG.normal(size=c.shape[1]))
    c = tf.constant(c)
    return lm_matrix_free.Products(_linear_rows(x), {"c": c}, tf.shape(c)[0], chunk, [x]), x


# ------------------------------------------------------------------------ the pieces


def test_products_are_the_jacobian_products():
    c = RNG.normal(size=(23, 9))
    products, x = _linear_products(c, chunk=5)  # 5 chunks, the last overlapping
    v = RNG.normal(size=9)
    np.testing.assert_allclose(products.gauss_newton(tf.constant(v)), c.T @ (c @ v), rtol=1e-12)
    np.testing.assert_allclose(products.curvature(tf.constant(v)), np.sum((c @ v) ** 2),
                               rtol=1e-12)
    exact = lm_matrix_free.exact_diagonal(_linear_rows(x), {"c": tf.constant(c)},
                                          tf.constant(23), 4, products.variables, "reverse")
    np.testing.assert_allclose(exact, np.sum(c**2, axis=0), rtol=1e-12)
    # Rademacher probes: an unbiased estimate (about 14 % relative spread with 100 probes).
    probes = products.diagonal_probes(100, tf.constant(1)).numpy()
    np.testing.assert_allclose(probes, np.sum(c**2, axis=0), rtol=0.5)
    assert not np.allclose(probes, np.sum(c**2, axis=0), rtol=1e-6)


def test_pcg_solves_a_positive_definite_system():
    a = RNG.normal(size=(30, 12))
    m = a.T @ a + 0.1 * np.eye(12)
    rhs = RNG.normal(size=12)
    out = lm_cg.pcg(lambda p: tf.linalg.matvec(tf.constant(m), p), tf.constant(rhs),
                    tf.constant(np.diag(m)), 100, 1e-13)
    np.testing.assert_allclose(out.x, np.linalg.solve(m, rhs), rtol=1e-9)
    assert int(out.iterations) <= 14 and float(out.residual) <= 1e-13
    short = lm_cg.pcg(lambda p: tf.linalg.matvec(tf.constant(m), p), tf.constant(rhs),
                      tf.constant(np.diag(m)), 3, 1e-13)
    assert int(short.iterations) == 3 and float(short.residual) > 1e-6


@pytest.mark.parametrize("rows", [40, 6])  # over- and underdetermined (n = 15)
def test_cg_step_equals_the_direct_step(rows):
    c = RNG.normal(size=(rows, 15)) * np.linspace(0.2, 5.0, 15)  # unequal column scales
    rho = RNG.normal(size=rows)
    products, _ = _linear_products(c, chunk=16)
    diag = np.sum(c**2, axis=0)
    d = lm_damping.scaling(tf.constant(diag), "marquardt", 2.2e-16)
    b = c.T @ rho
    linear = lm_matrix_free.MatrixFreeLinearization(products, tf.constant(b), tf.constant(diag),
                                                    tf.constant(False))
    direct = lm_damping.ScaledSystem(tf.constant(c.T @ c), tf.constant(b),
                                     tf.zeros(15, tf.float64), d, tf.constant(False))
    start = tf.Variable(np.zeros(15))
    for value in (1e-3, 0.3, 10.0):
        lam = tf.constant(value, tf.float64)
        expected = np.linalg.solve(c.T @ c + value * np.diag(d.numpy()), -b)
        want = direct.solve(lam)[0].numpy()
        np.testing.assert_allclose(want, expected, atol=1e-8 * np.abs(expected).max())
        for warm in (None, start):  # cold, and warm-started from the previous λ's δ
            cg = lm_cg.MatrixFreeSystem(linear, d, 300, 1e-13, warm)
            delta, ok = cg.solve(lam)
            assert bool(ok)
            np.testing.assert_allclose(delta, want, rtol=0, atol=1e-8)
            predicted = cg.predicted_reduction(delta, lam)
            np.testing.assert_allclose(
                predicted, direct.predicted_reduction(tf.constant(want), lam),
                rtol=1e-9)
    # An inexact δ: the predicted reduction of the quadratic model itself, not the identity.
    cg = lm_cg.MatrixFreeSystem(linear, d, 2, 1e-13)
    lam = tf.constant(1e-3, tf.float64)
    delta, ok = cg.solve(lam)
    delta = delta.numpy()
    assert not bool(ok)
    np.testing.assert_allclose(cg.predicted_reduction(tf.constant(delta), lam),
                               -2 * b @ delta - np.sum((c @ delta) ** 2), rtol=1e-10)


# ------------------------------------------------------------------------ inside fit


def _mlp_run(solver, loss="mse", epochs=3, **kwargs):
    """The optimizer's variable names, then (λ, whether the variables stayed bit for bit, the
    weights) after each of `epochs` full-batch one-step epochs."""
    x = np.random.default_rng(0).normal(size=(40, 2))  # the same data for every run
    if loss == "mse":
        y, units = np.sin(3 * x[:, :1]) * np.cos(2 * x[:, 1:]), 1
        loss = "mse"
    else:
        y, units = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0.5).astype("int32"), 3
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    gf.set_seed(3)
    model = gf.Sequential([layers.Dense(6, activation="tanh"), layers.Dense(units)],
                          input_shape=(2,), dtype="float64")
    opt = optimizers.LevenbergMarquardt(solver=solver, **kwargs)
    model.compile(optimizer=opt, loss=loss, jit_compile=False)
    out = [[v.name for v in opt.variables]]  # (filled below: the variables exist after a step)
    for _ in range(epochs):
        before = [w.copy() for w in model.get_weights()]
        model.fit(x, y, batch_size=None, epochs=1, verbose=0)
        after = model.get_weights()
        out.append((float(opt.damping_value.numpy()),
                    all(np.array_equal(a, b) for a, b in zip(before, after)),
                    np.concatenate([w.ravel() for w in after])))
    out[0] = [v.name for v in opt.variables]
    return out



@pytest.fixture(scope="module")
def rejections():
    """λ starting at 1e-5 with one trial per step: five rejected steps, then an accepted one.
    Plain steps: geodesic acceleration, which "auto" adds to the float64 direct solver, has
    no counterpart in cg."""
    settings = {"initial_damping": 1e-5, "attempts_per_step": 1, "epochs": 6,
                "geodesic_acceleration": False, **TIGHT}
    # "auto" with n = 25 > max_parameters = 20 is the cg solver (checked below).
    return {"direct": _mlp_run("auto", **settings),
            "cg": _mlp_run("auto", max_parameters=20, **settings)}


def test_damping_and_rejections_follow_the_direct_solver(rejections):
    direct, cg = rejections["direct"][1:], rejections["cg"][1:]
    kept = [unchanged for _, unchanged, _ in direct]
    assert kept == [True] * 5 + [False]  # the scenario: rejections, then progress
    assert [unchanged for _, unchanged, _ in cg] == kept  # rejected: bit for bit, as direct
    np.testing.assert_allclose([lam for lam, _, _ in cg], [lam for lam, _, _ in direct],
                               rtol=1e-7)
    # The first accepted step is the direct step (from the same point).
    np.testing.assert_allclose(cg[5][2], direct[5][2], rtol=0, atol=1e-8)


def test_cross_entropy_steps_follow_the_direct_solver():
    direct = _mlp_run("direct", loss="sparse", epochs=2)
    cg = _mlp_run("cg", loss="sparse", epochs=2, **TIGHT)
    np.testing.assert_allclose(cg[1][2], direct[1][2], rtol=0, atol=1e-8)
    np.testing.assert_allclose(cg[2][2], direct[2][2], rtol=0, atol=1e-6)
    np.testing.assert_allclose([r[0] for r in cg[1:]], [r[0] for r in direct[1:]], rtol=1e-7)
    assert not cg[1][1]  # it moved


def test_auto_is_direct_up_to_max_parameters_and_cg_above(rejections):
    # The cg solver keeps its warm start in a variable; the direct one has none.
    assert any("cg_start" in name for name in rejections["cg"][0])
    assert not any("cg_start" in name for name in rejections["direct"][0])
    assert lm_cg.resolve_solver("auto", 25, 25) == "direct"
    assert lm_cg.resolve_solver("auto", 26, 25) == "cg"
    assert lm_cg.resolve_solver("direct", 10**6, 25) == "direct"


def test_a_model_past_the_wall_trains_with_cg():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(96, 250)).astype("float32")
    y = np.tanh(x[:, :3].sum(axis=1, keepdims=True)).astype("float32")

    def model_with(optimizer):
        gf.set_seed(0)
        model = gf.Sequential([layers.Dense(400, activation="tanh"), layers.Dense(1)],
                              input_shape=(250,))
        model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
        return model

    model = model_with(optimizers.LevenbergMarquardt(solver="direct"))
    assert model.count_params() == 100_801
    with pytest.raises(ValueError, match=r"n=100801 .*81286732808 bytes \(75\.70 GiB\).*"
                                         r"solver='cg'"):
        model.fit(x, y, batch_size=None, epochs=1, verbose=0)
    model = model_with(optimizers.LevenbergMarquardt(cg_iterations=10))  # "auto": cg
    losses = model.fit(x, y, batch_size=None, epochs=4, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]


# ------------------------------------------------------------------------ arguments


@pytest.mark.parametrize("argument, value, message", [
    ("solver", "qr", "solver must be 'auto', 'direct' or 'cg'"),
    ("cg_iterations", 0, "cg_iterations must be a positive integer"),
    ("cg_iterations", 2.5, "cg_iterations must be a positive integer"),
    ("cg_tolerance", 1.0, r"cg_tolerance must be a float in \[0, 1\)"),
    ("cg_tolerance", -1e-3, r"cg_tolerance must be a float in \[0, 1\)"),
    ("cg_diagonal_probes", 0, "cg_diagonal_probes must be a positive integer or None"),
])
def test_bad_cg_arguments_are_clear_errors(argument, value, message):
    with pytest.raises(ValueError, match=message) as error:
        optimizers.LevenbergMarquardt(**{argument: value})
    assert f"Received: {argument}={value!r}" in str(error.value)


def test_cg_arguments_round_trip_through_the_config():
    opt = optimizers.LevenbergMarquardt(solver="cg", cg_iterations=7, cg_tolerance=1e-6,
                                        cg_diagonal_probes=3)
    config = opt.get_config()
    assert {k: config[k] for k in ("solver", "cg_iterations", "cg_tolerance",
                                   "cg_diagonal_probes")} == {
        "solver": "cg", "cg_iterations": 7, "cg_tolerance": 1e-6, "cg_diagonal_probes": 3}
    assert optimizers.LevenbergMarquardt(**config).get_config() == config
    assert optimizers.LevenbergMarquardt().get_config()["solver"] == "auto"


class _SignFlip(gf.Layer):
    """A layer whose `call` branches on a tensor (AutoGraph makes it a tf.cond)."""

    def call(self, x, training=False):
        if tf.reduce_sum(x) > 0:
            y = 2.0 * x
        else:
            y = -x
        return y


def test_cg_trains_a_layer_that_branches_on_a_tensor():
    # Nesting the JVP's ForwardAccumulator in the VJP's tape fails to trace through a
    # tf.cond; the products run the two passes one after the other.
    x = np.random.default_rng(0).normal(size=(40, 3))
    gf.set_seed(0)
    model = gf.Sequential([layers.Dense(4, activation="tanh"), _SignFlip(), layers.Dense(1)],
                          input_shape=(3,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(solver="cg"), loss="mse",
                  jit_compile=False)
    history = model.fit(x, x[:, :1] ** 2, batch_size=None, epochs=3, verbose=0)
    # A hard target for this net; the preconditioner's random probes follow the samples'
    # order, and so does the path: 2.57 → 2.09 in the samples' own order.
    assert history.history["loss"][-1] < 0.9 * history.history["loss"][0], history.history


@pytest.mark.parametrize("solver, max_parameters, lean", [
    ("direct", 5000, True), ("auto", 5000, True), ("auto", 2, False), ("cg", 5000, False)])
def test_grappler_runs_one_round_for_the_direct_solvers_small_steps_only(solver, max_parameters,
                                                                         lean):
    optimizer = optimizers.LevenbergMarquardt(solver=solver, max_parameters=max_parameters)
    optimizer.build([tf.Variable(np.zeros(3, np.float32))])
    expected = {"meta_optimizer_iterations": "ONE", "memory_optimization": "NO_MEM_OPT"}
    assert optimizer.graph_rewrites == (expected if lean else None)
    # LossScaleOptimizer passes its inner optimizer's on.
    assert optimizers.LossScaleOptimizer(optimizer).graph_rewrites == optimizer.graph_rewrites


@pytest.mark.parametrize("solver, max_parameters, built, refused", [
    ("cg", 5000, False, "solver='cg'\\) does not run under a tf.distribute strategy yet"),
    ("auto", 2, True, "solver='auto'\\) chooses the cg solver for n=3 > max_parameters=2"),
    ("auto", 2, False, None),  # n is not known before build: the step's trace refuses it
    ("direct", 2, True, None)])
def test_cg_under_a_strategy_is_refused_before_the_first_step(solver, max_parameters, built,
                                                               refused):
    # fit (and `graphfit validate`) call check_training before any step: a recipe with
    # distribute and solver cg stops there, with its position, not at the first step.
    optimizer = optimizers.LevenbergMarquardt(solver=solver, max_parameters=max_parameters)
    if built:
        optimizer.build([tf.Variable(np.zeros(3, np.float32))])
    losses = {"output": keras.losses.MeanSquaredError()}
    optimizer.check_training(losses, distributed=False)  # one device: always fine
    if refused is None:
        optimizer.check_training(losses, distributed=True)
    else:
        with pytest.raises(ValueError, match=refused):
            optimizer.check_training(losses, distributed=True)

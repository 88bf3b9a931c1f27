"""LevenbergMarquardt: residual scaling, Jacobians, the damped step, hooks, convergence."""

import types

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.core import update_hooks
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt import residuals as lm_residuals
from graphfit.optimizers.levenberg_marquardt.forward_values import examples_independent
from graphfit.optimizers.levenberg_marquardt.optimizer import LevenbergMarquardt
from graphfit.training.losses import LossSet

RNG = np.random.default_rng(0)


def _lm(**kwargs):
    return LevenbergMarquardt(**kwargs)


def _flat(variables):
    return np.concatenate([np.ravel(v.numpy()) for v in variables])


# ------------------------------------------------------------------------ construction


@pytest.mark.parametrize("argument, value, message", [
    ("damping", "levenberg", "damping must be 'marquardt' or 'identity'"),
    ("initial_damping", 0.0, "initial_damping must be a positive float"),
    ("attempts_per_step", 0, "attempts_per_step must be a positive integer"),
    ("ftol", -1e-3, "ftol must be a float in [0, 1)"),
    ("xtol", float("nan"), "xtol must be a float in [0, 1)"),
    ("gtol", True, "gtol must be a float in [0, 1)"),
    ("jacobian_mode", "central",
     "jacobian_mode must be 'auto', 'forward', 'reverse' or 'per_example'"),
    ("jacobian_chunk_size", 2.5, "jacobian_chunk_size must be a positive integer or None"),
    ("max_parameters", -5, "max_parameters must be a positive integer"),
])
def test_bad_arguments_raise_keras_style(argument, value, message):
    with pytest.raises(ValueError) as error:
        _lm(**{argument: value})
    assert message in str(error.value) and f"Received: {argument}={value!r}" in str(error.value)


def test_config_round_trip_and_recipe_name():
    optimizer = _lm(damping="identity", attempts_per_step=4, ftol=1e-9, jacobian_chunk_size=32)
    config = optimizer.get_config()
    again = LevenbergMarquardt.from_config(config)
    assert again.get_config() == config
    from_recipe = optimizers.get({"type": "LevenbergMarquardt", "gtol": 1e-12})
    assert isinstance(from_recipe, LevenbergMarquardt) and from_recipe.gtol == 1e-12
    assert optimizers.serialize(optimizer)["type"] == "LevenbergMarquardt"


def test_state_variables_exist_before_the_first_step_and_are_in_the_collection():
    optimizer = _lm()
    names = [v.name.split("/")[-1] for v in optimizer.variables]
    assert {"damping:0", "damping_growth:0", "converged:0", "convergence_reason:0"} <= set(names)
    assert optimizer.stop_reason() is None


def test_no_state_variable_is_int32():
    # TensorFlow keeps int32 variables in host memory: an XLA step on a GPU cannot read or
    # write them ("Trying to access resource ... located in device CPU:0 from device GPU:0").
    optimizer = _lm()
    int32 = [v.name for v in optimizer.variables if v.dtype == tf.int32]
    assert not int32, f"int32 state variables, out of reach of an XLA step on a GPU: {int32}"
    assert optimizer.convergence_reason.dtype == tf.int64


# ------------------------------------------------------------------------ residual rows


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "mean_with_sample_weight"])
@pytest.mark.parametrize("weighted", [False, True])
def test_squared_residuals_are_exactly_the_mean_squared_error(reduction, weighted):
    y_true = tf.constant(RNG.normal(size=(6, 3)))
    y_pred = tf.constant(RNG.normal(size=(6, 3)))
    weights = tf.constant(RNG.uniform(0.1, 2.0, size=(6,))) if weighted else None
    loss = keras.losses.MeanSquaredError(reduction=reduction, dtype="float64")
    element = lm_residuals.element_weights(loss, y_true, y_pred, weights)
    rows, rho = lm_residuals.loss_rows(loss, y_true, y_pred, element)
    np.testing.assert_allclose(float(tf.reduce_sum(tf.square(rho))),
                               float(loss(y_true, y_pred, sample_weight=weights)), rtol=1e-14)
    np.testing.assert_array_equal(rows.numpy(), rho.numpy())


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "mean_with_sample_weight"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unweighted_element_weights_equal_the_probes_bit_for_bit(monkeypatch, reduction, dtype):
    """Without sample weights the weights are written in closed form (no probe and tape in
    the step); they must be the probe's gradient exactly, on a batch of unknown size."""
    losses = [keras.losses.MeanSquaredError(reduction=reduction, dtype=dtype),
              optimizers.ResidualLoss(lambda y, p: p - y, reduction=reduction, dtype=dtype)]
    spec = tf.TensorSpec([None, 3], dtype)

    @tf.function(input_signature=[spec, spec])
    def weights(y_true, y_pred):
        with tf.name_scope("step"):  # the probe's scope ("__reduction_probe") is no root one
            return [lm_residuals.element_weights(loss, y_true, y_pred, None) for loss in losses]

    y_true, y_pred = (tf.constant(RNG.normal(size=(7, 3)), dtype) for _ in range(2))
    closed = [w.numpy() for w in weights(y_true, y_pred)]
    monkeypatch.setattr(lm_residuals, "_unweighted_reduction", lambda *args: None)
    weights = tf.function(weights.python_function, input_signature=[spec, spec])
    probed = [w.numpy() for w in weights(y_true, y_pred)]
    for got, want in zip(closed, probed):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_rank_one_labels_against_column_predictions_match_keras():
    y_true = tf.constant(RNG.normal(size=(5,)))
    y_pred = tf.constant(RNG.normal(size=(5, 1)))
    loss = keras.losses.MeanSquaredError(dtype="float64")
    element = lm_residuals.element_weights(loss, y_true, y_pred, None)
    _, rho = lm_residuals.loss_rows(loss, y_true, y_pred, element)
    np.testing.assert_allclose(float(tf.reduce_sum(rho**2)), float(loss(y_true, y_pred)),
                               rtol=1e-14)


CROSS_ENTROPIES = {
    "sparse_logits": (keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      lambda: RNG.integers(0, 4, size=(5,))),
    "categorical_logits": (keras.losses.CategoricalCrossentropy(from_logits=True,
                                                                label_smoothing=0.1),
                           lambda: np.eye(4)[RNG.integers(0, 4, size=(5,))]),
    "binary_logits": (keras.losses.BinaryCrossentropy(from_logits=True),
                      lambda: RNG.integers(0, 2, size=(5, 4)).astype(float)),
    "binary_probabilities": (keras.losses.BinaryCrossentropy(),
                             lambda: RNG.integers(0, 2, size=(5, 4)).astype(float)),
}


@pytest.mark.parametrize("name", sorted(CROSS_ENTROPIES))
def test_cross_entropy_rows_give_the_gradient_and_the_gauss_newton_matrix(name):
    """With the model's output itself as the parameters, Cᵀρ = ½∇f and CᵀC = ½ ∇²f."""
    loss, labels = CROSS_ENTROPIES[name]
    loss = type(loss).from_config({**loss.get_config(), "dtype": "float64"})
    y_true = tf.constant(labels())
    if name == "binary_probabilities":
        z = tf.Variable(RNG.uniform(0.05, 0.95, size=(5, 4)))
    else:
        z = tf.Variable(RNG.normal(size=(5, 4)))
    weights = tf.constant(RNG.uniform(0.5, 2.0, size=(5,)))
    element = lm_residuals.element_weights(loss, y_true, z, weights)
    with tf.GradientTape(persistent=True) as outer:
        with tf.GradientTape() as inner:
            value = loss(y_true, z, sample_weight=weights)
        gradient = tf.reshape(inner.gradient(value, z), [-1])
    hessian = tf.reshape(outer.jacobian(gradient, z), [20, 20])
    with tf.GradientTape() as tape:
        rows, rho = lm_residuals.loss_rows(loss, y_true, z, element)
        rows = tf.reshape(rows, [-1])
    c = tf.reshape(tape.jacobian(rows, z), [-1, 20])
    rho = tf.reshape(rho, [-1])
    np.testing.assert_allclose(tf.linalg.matvec(c, rho, transpose_a=True), 0.5 * gradient,
                               atol=1e-12)
    np.testing.assert_allclose(tf.matmul(c, c, transpose_a=True), 0.5 * hessian, atol=1e-12)


def test_residual_loss_is_a_mean_of_summed_squares():
    loss = optimizers.ResidualLoss(lambda y, p: (p - y) * tf.constant([1.0, 2.0], p.dtype),
                                   dtype="float64")
    y_true, y_pred = tf.zeros((3, 2), tf.float64), tf.ones((3, 2), tf.float64)
    assert float(loss(y_true, y_pred)) == pytest.approx(5.0)
    element = lm_residuals.element_weights(loss, y_true, y_pred, None)
    _, rho = lm_residuals.loss_rows(loss, y_true, y_pred, element)
    assert float(tf.reduce_sum(rho**2)) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="fn must be a callable"):
        optimizers.ResidualLoss("mse")
    assert loss.get_config()["mixes_examples"] is False
    again = optimizers.ResidualLoss.from_config({**loss.get_config(), "mixes_examples": True})
    assert again.mixes_examples is True and again.fn is loss.fn


# ------------------------------------------------------------------------ Jacobians


def _small_model(dtype="float64"):
    model = gf.Sequential([layers.Dense(3, activation="tanh"), layers.Dense(2)],
                          input_shape=(4,), dtype=dtype)
    model.build()
    return model


def test_jacobian_matches_central_differences_and_modes_agree():
    model = _small_model()
    x = tf.constant(RNG.normal(size=(5, 4)))
    variables = model.trainable_variables

    def rows_fn():
        out = tf.reshape(model(x), [-1])
        return out, tf.stop_gradient(out)

    reverse, _ = lm_jacobian.jacobian(rows_fn, variables, "reverse")
    forward, _ = lm_jacobian.jacobian(rows_fn, variables, "forward")
    np.testing.assert_allclose(forward, reverse, rtol=1e-12, atol=1e-14)
    per_example, rho = lm_jacobian.per_example_jacobian(
        lambda part: (tf.reshape(model(part), [-1]), tf.reshape(model(part), [-1])), x,
        variables)
    np.testing.assert_allclose(per_example, reverse, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rho, rows_fn()[1], rtol=1e-14)
    # One row per example takes the plain-gradient path instead of a nested pfor.
    single = gf.Sequential([layers.Dense(3, activation="tanh"), layers.Dense(1)],
                           input_shape=(4,), dtype="float64")
    single.build()

    def single_rows(part):
        out = tf.reshape(single(part), [-1])
        return out, tf.stop_gradient(out)

    one_row, _ = lm_jacobian.per_example_jacobian(single_rows, x, single.trainable_variables)
    whole, _ = lm_jacobian.jacobian(lambda: single_rows(x), single.trainable_variables,
                                    "reverse")
    assert one_row.shape == (5, 19)
    np.testing.assert_allclose(one_row, whole, rtol=1e-12, atol=1e-14)
    base = _flat(variables)
    sizes = [int(np.prod(v.shape)) for v in variables]
    numeric = np.zeros(reverse.shape)
    h = 1e-6
    for j in range(base.size):
        values = []
        for sign in (1, -1):
            point = base.copy()
            point[j] += sign * h
            for v, piece in zip(variables, np.split(point, np.cumsum(sizes)[:-1])):
                v.assign(piece.reshape(v.shape))
            values.append(rows_fn()[0].numpy())
        numeric[:, j] = (values[0] - values[1]) / (2 * h)
    np.testing.assert_allclose(reverse, numeric, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("mode", ["forward", "reverse", "per_example"])
@pytest.mark.parametrize("examples", [15, 7])
def test_chunked_normal_equations_equal_the_whole_batch(mode, examples):
    model = _small_model()  # 23 parameters; 2 rows per example
    x = tf.constant(RNG.normal(size=(examples, 4)))
    w = tf.constant(RNG.uniform(0.5, 1.5, size=(examples, 2)))

    def rows_for(part):
        out = tf.sqrt(part["w"]) * model(part["x"])
        return tf.reshape(out, [-1]), tf.reshape(tf.stop_gradient(out), [-1])

    data = {"x": x, "w": w}
    count = tf.constant(examples)
    whole = lm_jacobian.normal_equations(rows_for, data, count, examples,
                                         model.trainable_variables, mode, tf.float64)
    chunked = lm_jacobian.normal_equations(rows_for, data, count, 4,  # the last chunk overlaps
                                           model.trainable_variables, mode, tf.float64)
    assert bool(whole[4]) == (2 * examples < 23) and not bool(chunked[4])
    matrix = whole[0].numpy()
    if bool(whole[4]):  # underdetermined: C itself, padded with zero rows
        np.testing.assert_array_equal(matrix[2 * examples:], 0.0)
        np.testing.assert_allclose(whole[3][:2 * examples], tf.reshape(rows_for(data)[1], [-1]))
        matrix = matrix.T @ matrix
    np.testing.assert_allclose(matrix, chunked[0], rtol=1e-12, atol=1e-13)
    for a, b in zip(whole[1:3], chunked[1:3]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_auto_mode_goes_per_example_unless_a_layer_or_the_loss_mixes_the_examples():
    mse = LossSet("mse")
    mse.build(None, tf.float64)

    def mode_of(model, rows_per_example=1, loss_set=mse):
        independent = examples_independent(model, loss_set)
        return lm_jacobian.choose_mode("auto", 23, rows_per_example, independent)

    plain = _small_model()
    norm = layers.BatchNormalization()
    with_norm = gf.Sequential([layers.Dense(3), norm, layers.Dense(1)], input_shape=(2,))
    keras_norm = gf.Sequential([layers.KerasLayer(keras.layers.BatchNormalization())],
                               input_shape=(2,))
    assert mode_of(plain) == "per_example"
    assert mode_of(plain, rows_per_example=24) == "forward"  # more rows than parameters
    assert mode_of(with_norm) == mode_of(keras_norm) == "reverse"
    norm.trainable = False  # frozen: moving statistics, examples independent again
    assert mode_of(with_norm) == "per_example"
    centred = LossSet(optimizers.ResidualLoss(
        lambda y, p: (p - y) - tf.reduce_mean(p - y), mixes_examples=True))
    centred.build(None, tf.float64)
    assert mode_of(plain, loss_set=centred) == "reverse"
    assert lm_jacobian.choose_mode("forward", 23, 1, True) == "forward"


def test_batch_norm_model_fits_with_the_chunked_reverse_jacobian():
    """Per example, batch normalization would see batches of one (all zeros out): the auto
    mode keeps whole chunks, and the fit reaches the same loss as forced reverse mode."""
    x = RNG.normal(size=(64, 2))
    y = np.sin(x[:, :1]) + x[:, 1:] ** 2
    losses = {}
    for mode in ("auto", "reverse"):
        gf.set_seed(1)
        model = gf.Sequential([layers.Dense(6, activation="tanh"), layers.BatchNormalization(),
                               layers.Dense(1)], input_shape=(2,), dtype="float64")
        model.compile(optimizer=_lm(jacobian_mode=mode), loss="mse", jit_compile=False)
        losses[mode] = model.fit(x, y, batch_size=None, epochs=10, verbose=0).history["loss"]
    assert losses["auto"] == losses["reverse"]
    assert losses["auto"][-1] < 0.1 * losses["auto"][0]
    model.compile(optimizer=_lm(jacobian_mode="per_example"), loss="mse", jit_compile=False)
    with pytest.warns(UserWarning, match="mixes the examples of a batch"):
        model.fit(x, y, batch_size=None, epochs=1, verbose=0)


def test_too_many_parameters_is_a_clear_error():
    with pytest.raises(ValueError) as error:
        lm_jacobian.check_parameter_count(6000, 5000)
    message = str(error.value)
    assert "n=6000" in message and "max_parameters=5000" in message
    assert str(6000 * 6000 * 8) in message and "0.27 GiB" in message


# ------------------------------------------------------------------------ the damped step


def test_underdetermined_system_gives_the_normal_equations_step():
    c = RNG.normal(size=(4, 9))
    rho = RNG.normal(size=(4,))
    diag = np.sum(c**2, axis=0)
    d = lm_damping.scaling(tf.constant(diag), "marquardt", 1e-16)
    padded_c = np.vstack([c, np.zeros((5, 9))])
    padded_rho = np.concatenate([rho, np.zeros(5)])
    wide = lm_damping.ScaledSystem(tf.constant(padded_c), tf.constant(c.T @ rho),
                                   tf.constant(padded_rho), d, tf.constant(True))
    tall = lm_damping.ScaledSystem(tf.constant(c.T @ c), tf.constant(c.T @ rho),
                                   tf.zeros(9, tf.float64), d, tf.constant(False))
    for lam in (1e-6, 0.1, 10.0):
        expected = -np.linalg.solve(c.T @ c + lam * np.diag(d.numpy()), c.T @ rho)
        np.testing.assert_allclose(wide.solve(tf.constant(lam, tf.float64))[0], expected,
                                   rtol=1e-8)
        np.testing.assert_allclose(tall.solve(tf.constant(lam, tf.float64))[0], expected,
                                   rtol=1e-8)
        delta = tf.constant(expected)
        predicted = float(wide.predicted_reduction(delta, lam))
        # f − q(δ) = ‖ρ‖² − ‖ρ + Cδ‖².
        assert predicted == pytest.approx(rho @ rho - np.sum((rho + c @ expected) ** 2))


def test_indefinite_matrix_falls_back_to_the_eigendecomposition():
    a = np.array([[1.0, 2.0], [2.0, 1.0]])  # indefinite: Cholesky of a + 1e-3 I fails
    system = lm_damping.ScaledSystem(tf.constant(a), tf.constant([1.0, 0.0], tf.float64),
                                     tf.zeros(2, tf.float64), tf.ones(2, tf.float64),
                                     tf.constant(False))
    delta, used_cholesky = system.solve(tf.constant(1e-3, tf.float64))
    values, vectors = np.linalg.eigh(a)
    expected = -(vectors @ ((vectors.T @ [1.0, 0.0]) / (np.maximum(values, 0) + 1e-3)))
    assert not bool(used_cholesky)
    np.testing.assert_allclose(delta, expected, rtol=1e-10)


def test_nielsen_update():
    lam, nu = tf.constant(1.0, tf.float64), tf.constant(4.0, tf.float64)
    new, growth = lm_damping.nielsen_update(lam, nu, tf.constant(1.0, tf.float64), True)
    assert (float(new), float(growth)) == (pytest.approx(1 / 3), 2.0)
    new, growth = lm_damping.nielsen_update(lam, nu, tf.constant(0.5, tf.float64), True)
    assert (float(new), float(growth)) == (1.0, 2.0)
    new, growth = lm_damping.nielsen_update(lam, nu, tf.constant(-1.0, tf.float64), False)
    assert (float(new), float(growth)) == (4.0, 8.0)


class Exponential(gf.Layer):
    """y = exp(w x) with a scalar w."""

    def __init__(self, w, **kwargs):
        super().__init__(**kwargs)
        self.initial = float(w)

    def build(self, input_shape):
        self.w = self.add_weight("w", (), initializer=keras.initializers.Constant(self.initial))

    def call(self, x, training=False):
        return tf.exp(self.w * x)


def test_a_rejected_step_leaves_the_variables_bit_for_bit_at_the_accepted_point():
    # From w = -3 towards exp(2x), the undamped Gauss–Newton step overshoots so far that the
    # loss grows: every trial of the step fails.
    x = np.array([[1.0], [2.0], [3.0]])
    model = gf.Sequential([Exponential(-3.0)], input_shape=(1,), dtype="float64")
    optimizer = _lm(initial_damping=1e-12, attempts_per_step=2)
    model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
    before = model.layers[0].w.numpy().copy()
    history = model.fit(x, np.exp(2 * x), batch_size=None, epochs=1, verbose=0)
    after = model.layers[0].w.numpy()
    assert after.tobytes() == before.tobytes()
    assert int(optimizer.iterations) == 1
    # The loss reported is that of the starting point, and λ grew twice (ν = 2, then 4).
    assert history.history["loss"][0] == pytest.approx(np.mean((np.exp(-3 * x) - np.exp(2 * x))
                                                               ** 2), rel=1e-12)
    scale_lambda = float(optimizer.damping_value)
    assert float(optimizer._growth) == 8.0 and scale_lambda > 0
    # λ keeps growing over the next steps until a trial is accepted, and the loss falls.
    history = model.fit(x, np.exp(2 * x), batch_size=None, epochs=10, verbose=0)
    assert model.layers[0].w.numpy() > before
    assert history.history["loss"][-1] < history.history["loss"][0]


class HookProbe(gf.Layer):
    """Counts its training forward passes through a hook, and records the weight each pass
    saw: the update hooks of the accepted point's forward pass must run, once per step."""

    def build(self, input_shape):
        self.w = self.add_weight("w", (input_shape[-1],), initializer="ones")
        self.count = self.add_weight("count", (), trainable=False)
        self.w_seen = self.add_weight("w_seen", (input_shape[-1],), trainable=False)

    def call(self, x, training=False):
        if training:
            self.add_update(self.count, self.count + 1.0)
            self.add_update(self.w_seen, tf.identity(self.w))
        return x * self.w


def test_update_hooks_run_once_per_step_with_the_accepted_forward_pass():
    x = RNG.normal(size=(40, 3)) + 1.0
    y = np.sin(x @ np.array([[1.0], [-2.0], [0.5]]))
    probe = HookProbe()
    norm = layers.BatchNormalization(momentum=0.5)
    model = gf.Sequential([norm, probe, layers.Dense(4, activation="tanh"), layers.Dense(1)],
                          input_shape=(3,), dtype="float64")
    optimizer = _lm(initial_damping=1e-9)  # small λ: some trials fail and are retried
    model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
    model.fit(x, y, batch_size=None, epochs=5, verbose=0)
    steps = int(optimizer.iterations)
    assert probe.count.numpy() == steps == 5
    # The hooks' values come from the forward pass at the point each step ended on.
    np.testing.assert_array_equal(probe.w_seen.numpy(), probe.w.numpy())
    # The batch-norm input is the data itself: after 5 steps with momentum 0.5 the moving mean
    # is (1 - 0.5**5) times the batch mean, which holds only if it moved exactly once a step.
    np.testing.assert_allclose(norm.moving_mean.numpy(), (1 - 0.5**5) * x.mean(axis=0),
                               rtol=1e-12)


def test_underdetermined_fit_interpolates():
    x = RNG.normal(size=(4, 3))
    y = RNG.normal(size=(4, 1))
    model = gf.Sequential([layers.Dense(8, activation="tanh"), layers.Dense(1)],
                          input_shape=(3,), dtype="float64")  # 41 parameters, 4 residuals
    model.compile(optimizer=_lm(), loss="mse", jit_compile=False)
    history = model.fit(x, y, batch_size=None, epochs=40, verbose=0)
    assert history.history["loss"][-1] < 1e-20
    assert model.stop_reason.startswith("LevenbergMarquardt converged")


# ------------------------------------------------------------------------ convergence


def test_convergence_stops_fit_and_says_why():
    x = np.linspace(-1, 1, 30)[:, None]
    y = 3 * x - 1 + 0.01 * np.sin(20 * x)
    model = gf.Sequential([layers.Dense(1)], input_shape=(1,), dtype="float64")
    model.compile(optimizer=_lm(), loss="mse", jit_compile=False)
    history = model.fit(x, y, batch_size=None, epochs=100, verbose=0)
    assert len(history.epoch) < 10
    assert model.stop_reason.startswith("LevenbergMarquardt converged: ")
    assert history.stop_reason == model.stop_reason
    expected = np.linalg.lstsq(np.hstack([x, np.ones_like(x)]), y, rcond=None)[0].ravel()
    np.testing.assert_allclose(np.concatenate([w.ravel() for w in model.get_weights()]),
                               expected, rtol=1e-9)
    # Reading the reason re-armed the optimizer: a new fit runs (and stops at once: its
    # first step's trial meets xtol, the second step's start confirms it,
    # `convergence.deferred`).
    assert not bool(model.optimizer.converged.numpy())
    again = model.fit(x, y, batch_size=None, epochs=100, verbose=0)
    assert len(again.epoch) == 2 and again.stop_reason.startswith("LevenbergMarquardt")


def test_the_stop_message_names_the_tolerance_that_applied_in_float32():
    x = np.linspace(-1, 1, 30, dtype="float32")[:, None]
    y = 3 * x - 1 + 0.01 * np.sin(20 * x)
    model = gf.Sequential([layers.Dense(1)], input_shape=(1,))
    model.compile(optimizer=_lm(), loss="mse", jit_compile=False)
    model.fit(x, y, batch_size=None, epochs=100, verbose=0)
    # ftol=1e-15 and xtol=1e-10 act as float32's machine epsilon, and the message says so.
    eps = f"{np.finfo(np.float32).eps:g}"
    assert f"loss below ftol={eps} (ftol=1e-15 is below float32 precision)" in \
        model.stop_reason, model.stop_reason


def test_weighted_residual_loss_gives_weighted_least_squares():
    x = np.linspace(0, 2, 20)[:, None]
    y = 1.5 * x + 0.3 + 0.05 * np.cos(7 * x)
    sigma = 0.1 + x
    loss = optimizers.ResidualLoss(lambda y_true, y_pred: (y_pred - y_true[:, :1])
                                   / y_true[:, 1:])
    model = gf.Sequential([layers.Dense(1)], input_shape=(1,), dtype="float64")
    model.compile(optimizer=_lm(), loss=loss, jit_compile=False)
    model.fit(x, np.hstack([y, sigma]), batch_size=None, epochs=50, verbose=0)
    design = np.hstack([x, np.ones_like(x)]) / sigma
    expected = np.linalg.lstsq(design, y / sigma, rcond=None)[0].ravel()
    np.testing.assert_allclose(np.concatenate([w.ravel() for w in model.get_weights()]),
                               expected, rtol=1e-9)


def test_unsupported_loss_and_missing_batch_are_clear_errors():
    model = gf.Sequential([layers.Dense(1)], input_shape=(1,))
    model.compile(optimizer=_lm(), loss="mae", jit_compile=False)
    with pytest.raises(ValueError, match="cannot write the loss 'mean_absolute_error'"):
        model.fit(np.ones((4, 1)), np.ones((4, 1)), epochs=1, verbose=0)
    classes = gf.Sequential([layers.Dense(3)], input_shape=(1,))
    classes.compile(optimizer=_lm(), jit_compile=False, loss=keras.losses.
                    SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    with pytest.raises(ValueError, match="ignore_class=0: give the examples of that class "
                                         "sample_weight 0 instead"):
        classes.fit(np.ones((4, 1)), np.array([0, 1, 2, 1]), epochs=1, verbose=0)
    w = tf.Variable(1.0)
    with pytest.raises(ValueError, match="needs the model's residuals"):
        _lm().minimize(lambda: (w * w, None), [w])


# ------------------------------------------------------------------------ training


def test_float32_mlp_with_xla_and_sample_weights_fits_a_curve():
    x = np.linspace(-1, 1, 200, dtype="float32")[:, None]
    y = np.sinc(3 * x).astype("float32")
    weights = np.where(x[:, 0] > 0, 2.0, 1.0).astype("float32")
    model = gf.Sequential([layers.Dense(10, activation="tanh"), layers.Dense(1)],
                          input_shape=(1,))
    model.compile(optimizer=_lm(jacobian_chunk_size=64), loss="mse", jit_compile=True)
    history = model.fit(x, y, sample_weight=weights, batch_size=100, epochs=30, verbose=0)
    assert history.history["loss"][-1] < 1e-4 < history.history["loss"][0]


def test_digits_classification_with_the_generalized_gauss_newton_matrix():
    x, y = gf.datasets.load_digits()
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    model = gf.Sequential([layers.Dense(16, activation="tanh"), layers.Dense(10)],
                          input_shape=(64,))  # 1210 parameters, float32
    model.compile(optimizer=_lm(),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)
    # 5 full-batch steps reach 97 % held out, as 10 do (from the test seed): each step of
    # the 13,000-row Jacobian costs seconds of CPU.
    model.fit(x[:1300], y[:1300], batch_size=None, epochs=5, verbose=0)
    accuracy = model.evaluate(x[1300:], y[1300:], verbose=0, return_dict=True)["accuracy"]
    assert accuracy >= 0.95


def test_binary_and_probability_outputs_train():
    x = np.random.default_rng(5).normal(size=(120, 2))  # its own data: not the test order's
    labels = (x[:, :1] * x[:, 1:] > 0).astype("float64")
    for loss, activation, target in [
        (keras.losses.BinaryCrossentropy(from_logits=True), None, labels),
        (keras.losses.CategoricalCrossentropy(), "softmax", np.hstack([labels, 1 - labels])),
    ]:
        gf.set_seed(0)
        model = gf.Sequential([layers.Dense(8, activation="tanh"),
                               layers.Dense(target.shape[1], activation=activation)],
                              input_shape=(2,), dtype="float64")
        model.compile(optimizer=_lm(), loss=loss, metrics=["accuracy"], jit_compile=False)
        history = model.fit(x, target, batch_size=None, epochs=15, verbose=0)
        assert history.history["loss"][-1] < 0.3 * history.history["loss"][0]


def test_extra_collector_around_minimize_sees_only_the_returned_pending_updates():
    # The training step applies what minimize returns; nothing leaks to an outer collector.
    x = tf.constant(RNG.normal(size=(6, 3)))
    probe = HookProbe()
    model = gf.Sequential([probe, layers.Dense(1)], input_shape=(3,), dtype="float64")
    model.compile(optimizer=_lm(), loss="mse", jit_compile=False)
    model.fit(x.numpy(), np.ones((6, 1)), batch_size=None, epochs=1, verbose=0)
    with update_hooks.collect_updates() as outer:
        model.fit(x.numpy(), np.ones((6, 1)), batch_size=None, epochs=1, verbose=0)
    assert outer == [] and probe.count.numpy() == 2


def test_several_outputs_with_loss_weights():
    x = RNG.normal(size=(30, 2))
    targets = {"a": x @ np.array([[1.0], [2.0]]) + 0.1 * np.sin(5 * x[:, :1]),
               "b": np.eye(3)[RNG.integers(0, 3, size=30)]}
    model = gf.GraphModel(
        inputs={"x": (2,)},
        nodes=[gf.Node(layers.Dense(1, name="a"), "x"), gf.Node(layers.Dense(3, name="b"), "x")],
        outputs=["a", "b"], dtype="float64")
    losses = {"a": "mse", "b": keras.losses.CategoricalCrossentropy(from_logits=True)}
    model.compile(optimizer=_lm(), loss=losses, loss_weights={"a": 1.0, "b": 4.0},
                  jit_compile=False)
    # The rows of both outputs, each scaled by √weight: ‖ρ_a‖² is the weighted mse term.
    loss_set = LossSet(losses, {"a": 1.0, "b": 4.0})
    loss_set.build(["a", "b"], tf.float64)
    y_pred = model(tf.constant(x), training=True)
    batch = types.SimpleNamespace(model=model, loss_set=loss_set, x=tf.constant(x),
                                  y={k: tf.constant(v) for k, v in targets.items()},
                                  sample_weight=None)
    data, rows_for, per_example = lm_residuals.batch_rows(batch, y_pred)
    assert per_example == 4
    _, rho = rows_for(data)
    rho = tf.reshape(rho, [30, 4]).numpy()
    _, per_output = loss_set(batch.y, y_pred)
    np.testing.assert_allclose(np.sum(rho[:, 0] ** 2), float(per_output["a"]), rtol=1e-13)
    history = model.fit(x, targets, batch_size=None, epochs=30, verbose=0)
    loss = np.array(history.history["loss"])
    # The total loss never rises (beyond float64 rounding of the same sum at the same point).
    assert np.all(np.diff(loss) <= 1e-14 * loss[:-1])
    expected = np.linalg.lstsq(np.hstack([x, np.ones((30, 1))]), targets["a"], rcond=None)[0]
    head = model.get_layer("a")
    np.testing.assert_allclose(np.concatenate([head.kernel.numpy().ravel(), head.bias.numpy()]),
                               expected.ravel(), rtol=1e-8)


def test_damping_state_is_checkpointed(tmp_path):
    x = np.linspace(-1, 1, 20)[:, None]
    model = gf.Sequential([layers.Dense(3, activation="tanh"), layers.Dense(1)],
                          input_shape=(1,), dtype="float64")
    model.compile(optimizer=_lm(), loss="mse", jit_compile=False)
    model.fit(x, np.sin(3 * x), batch_size=None, epochs=3, verbose=0)
    optimizer = model.optimizer
    saved = (float(optimizer.damping_value), float(optimizer._growth))
    assert saved[0] > 0
    path = tf.train.Checkpoint(optimizer=optimizer).save(str(tmp_path / "ckpt"))
    fresh = _lm()
    tf.train.Checkpoint(optimizer=fresh).restore(path).assert_existing_objects_matched()
    assert (float(fresh.damping_value), float(fresh._growth)) == saved


def test_auto_jit_leaves_xla_off_for_lm_on_cpu():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("on a GPU jit_compile='auto' keeps XLA for LM")
    x = np.linspace(-1, 1, 8)[:, None]
    for optimizer, expected in ((_lm(), False), (optimizers.SGD(0.1), True)):
        model = gf.Sequential([layers.Dense(1)], input_shape=(1,))
        model.compile(optimizer=optimizer, loss="mse")  # jit_compile="auto"
        model.fit(x, x, batch_size=None, epochs=1, verbose=0)
        assert model.compile_state.jit_compile is expected


def test_an_eager_step_equals_the_graph_step_and_logs_no_pfor_retracing():
    import logging

    x = np.linspace(-1, 1, 40)[:, None]
    y = np.sinc(3 * x)
    logged = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: logged.append(record.getMessage())
    weights = {}
    for eager in (False, True):
        gf.set_seed(0)
        model = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(1)],
                              input_shape=(1,), dtype="float64")
        model.compile(optimizer=_lm(), loss="mse", run_eagerly=eager, jit_compile=False)
        tf.get_logger().addHandler(handler)
        try:
            model.fit(x, y, batch_size=10, epochs=2, verbose=0)  # 8 steps: pfor warns at 5
        finally:
            tf.get_logger().removeHandler(handler)
        weights[eager] = model.get_weights()
    for eager_w, graph_w in zip(weights[True], weights[False]):
        np.testing.assert_allclose(eager_w, graph_w, rtol=1e-9, atol=1e-12)
    assert not [m for m in logged if "retracing" in m], logged


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "loss_scaled"])
def test_a_negative_sample_weight_is_refused_before_the_first_step(wrapped):
    # sqrt(w)·r is NaN for w < 0: every step would fail and report "no step reduces the loss".
    model = _small_model()
    optimizer = _lm()
    model.compile(optimizer=optimizers.LossScaleOptimizer(optimizer) if wrapped else optimizer,
                  loss="mse")
    x, y = RNG.normal(size=(6, 4)), RNG.normal(size=(6, 2))
    weights = np.ones(6)
    weights[4] = -0.5
    before = model.get_weights()
    with pytest.raises(ValueError, match=r"LevenbergMarquardt needs sample_weight >= 0 .* 1 "
                                         r"weight\(s\) are negative, such as -0.5 at index 4"):
        model.fit(x, y, sample_weight=weights, epochs=1, verbose=0)
    for a, b in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    model.fit(x, y, sample_weight=np.abs(weights), epochs=1, verbose=0)  # zero and up: fine

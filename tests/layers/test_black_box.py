"""BlackBox: NumPy functions as layers, with gradient estimators checked against autograd.

Every estimate is compared with the vector-Jacobian product that autograd gives for a
TensorFlow twin of the same function.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.testing import run_layer_test

RNG = np.random.default_rng(0)
A = RNG.normal(size=(3, 50, 50)) / 10  # quadratic forms, one per output
B = RNG.normal(size=(3, 50))
W = RNG.normal(size=(50, 3)) / 3
V = RNG.normal(size=(50, 3)) / 3


def quadratic(x, ops=np):
    d = x.shape[-1]
    return ops.einsum("bi,kij,bj->bk", x, A[:, :d, :d], x) + x @ B[:, :d].T


def smooth(x, ops=np):
    d = x.shape[-1]
    return ops.tanh(x @ W[:d]) + 0.5 * ops.sin(x @ V[:d])


def _twin(function):
    return lambda x: function(x, ops=tf.experimental.numpy)


def _true_vjp(function, x0, g):
    x = tf.constant(x0[None])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = _twin(function)(x)
    return tape.gradient(y, x, output_gradients=tf.constant(g[None])).numpy()[0]


def _estimates(box, x0, g, copies):
    """One backward pass on `copies` copies of x0: independent estimates, one per copy."""
    x = tf.constant(np.tile(x0, (copies, 1)))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = box(x)
    return tape.gradient(y, x, output_gradients=tf.constant(np.tile(g, (copies, 1)))).numpy()


def _point(d, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=d) / 2, rng.normal(size=3)


@pytest.mark.parametrize("function", [quadratic, smooth])
@pytest.mark.parametrize("d", [1, 10, 50])
@pytest.mark.parametrize("estimator", ["spsa", "antithetic"])
def test_random_estimators_are_unbiased_within_three_standard_errors(function, d, estimator):
    x0, g = _point(d)
    box = layers.BlackBox(function, (3,), estimator=estimator, num_samples=2, sigma=1e-3,
                          seed=d, dtype="float64")
    copies = 2000
    estimates = _estimates(box, x0, g, copies)
    true = _true_vjp(function, x0, g)
    error = estimates.mean(axis=0) - true
    standard_error = estimates.std(axis=0, ddof=1) / np.sqrt(copies)
    floor = 1e-6 * (1 + np.linalg.norm(true))  # O(sigma^2) bias; d=1 spsa has no variance
    assert np.linalg.norm(error) <= 3 * np.sqrt((standard_error ** 2).sum()) + floor
    assert np.all(np.abs(error) <= 4.5 * standard_error + floor)  # and no component far off
    assert box.function_calls == 1 + 2 * 2


@pytest.mark.parametrize("estimator", ["spsa", "antithetic"])
@pytest.mark.parametrize("function", [quadratic, smooth])
def test_error_halves_when_num_samples_quadruples(estimator, function):
    x0, g = _point(10, seed=2)
    true = _true_vjp(function, x0, g)
    rms = []
    for num_samples in (1, 4, 16):
        box = layers.BlackBox(function, (3,), estimator=estimator, num_samples=num_samples,
                              sigma=1e-3, seed=5, dtype="float64")
        rms.append(np.sqrt(((_estimates(box, x0, g, 500) - true) ** 2).mean()))
    ratios = [rms[1] / rms[0], rms[2] / rms[1]]
    assert all(0.4 < r < 0.62 for r in ratios), (rms, ratios)  # theory: 1/2


@pytest.mark.parametrize("function", [quadratic, smooth])
@pytest.mark.parametrize("d", [1, 10, 50])
@pytest.mark.parametrize("vectorized", [True, False])
def test_central_differences_match_autograd(function, d, vectorized):
    x0, g = _point(d, seed=3)
    per_example = (lambda x: function(x[None])[0]) if not vectorized else function
    box = layers.BlackBox(per_example, (3,), estimator="central", sigma=1e-4, dtype="float64",
                          vectorized=vectorized)
    estimates = _estimates(box, x0, g, 3)
    true = _true_vjp(function, x0, g)
    for estimate in estimates:
        np.testing.assert_allclose(estimate, true, rtol=1e-4, atol=1e-6 * np.abs(true).max())
    per_batch = 1 if vectorized else 3
    assert box.function_calls == per_batch * (1 + 2 * d)


def cubic(u):
    return u + 0.1 * u ** 3


class CubicTwin(gf.Layer):
    def call(self, u, training=False):
        return u + 0.1 * u ** 3


def _fit_through(last, epochs):
    gf.set_seed(3)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(64, 3)).astype("float32")
    w_true = rng.normal(size=(3, 2)).astype("float32")
    y = cubic(x @ w_true).astype("float32")
    dense = layers.Dense(2, use_bias=False, kernel_initializer="zeros")
    model = gf.Sequential([dense, last])
    model.compile(optimizers.SGD(0.05), "mse", jit_compile="auto")
    history = model.fit(x, y, batch_size=64, epochs=epochs, shuffle=False, verbose=0)
    return dense.kernel.numpy(), w_true, history


@pytest.mark.parametrize("estimator, tolerance", [("central", 1e-4), ("spsa", 2e-2),
                                                  ("antithetic", 2e-2)])
def test_sgd_through_a_black_box_reaches_the_differentiable_twins_solution(estimator,
                                                                          tolerance):
    twin_kernel, w_true, _ = _fit_through(CubicTwin(), 300)
    np.testing.assert_allclose(twin_kernel, w_true, atol=1e-3)  # the twin solves it
    box = layers.BlackBox(cubic, (2,), estimator=estimator, num_samples=8, sigma=1e-2, seed=0)
    kernel, _, history = _fit_through(box, 300)
    np.testing.assert_allclose(kernel, twin_kernel, atol=tolerance)
    assert np.isfinite(history.history["loss"]).all()


def test_function_calls_count_every_call():
    x = tf.ones((5, 3))
    for vectorized, per_batch in ((True, 1), (False, 5)):
        box = layers.BlackBox(np.sin, (3,), estimator="spsa", num_samples=4, seed=0,
                              vectorized=vectorized)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = box(x)
        assert box.function_calls == per_batch * 1
        tape.gradient(y, x)
        assert box.function_calls == per_batch * (1 + 2 * 4)
        box(x)
        assert box.function_calls == per_batch * (2 + 2 * 4)
    straight = layers.BlackBox(np.round, (3,), estimator="straight_through")
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = straight(x * 0.7)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), np.full((5, 3), 0.7, "float32"))
    assert straight.function_calls == 1


def _gradient(box, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = box(x)
    return tape.gradient(y, x).numpy()


def test_seeded_estimators_are_reproducible_and_resume_from_checkpoints(tmp_path):
    x = tf.constant(np.random.default_rng(5).normal(size=(4, 6)), tf.float32)
    first, same, other = (layers.BlackBox(np.tanh, (6,), seed=s) for s in (11, 11, 12))
    np.testing.assert_array_equal(_gradient(first, x), _gradient(same, x))
    assert not np.array_equal(_gradient(first, x), _gradient(other, x))
    model = gf.Sequential([first])
    model.build((None, 6))
    path = model.save_weights(os.path.join(tmp_path, "weights"))
    calls = first.function_calls
    following = [_gradient(first, x) for _ in range(2)]
    assert not np.array_equal(following[0], following[1])  # the generator moves on
    model.load_weights(path)
    assert first.function_calls == calls
    np.testing.assert_array_equal(_gradient(first, x), following[0])
    restored = gf.Sequential([layers.BlackBox(np.tanh, (6,), seed=99)])
    restored.build((None, 6))
    restored.load_weights(path)  # another seed: the checkpoint's state wins
    np.testing.assert_array_equal(_gradient(restored.layers[0], x), following[0])


def _returns(value):
    return lambda x: value


@pytest.mark.parametrize("function, message", [
    (lambda x: x[:, :1], r"returned an array of shape \(4, 1\).*expected shape \(4, 2\)"),
    (lambda x: x * np.nan, r"8 non-finite value\(s\) \(NaN or inf\)"),
    (lambda x: 1 / 0, r"raised ZeroDivisionError: division by zero"),
    (_returns(None), r"must return a NumPy array.*returned a NoneType"),
    (_returns("abc"), r"must return a NumPy array.*returned a str"),
    (_returns(np.array([["a", "b"]] * 4)), r"must return a NumPy array.*dtype <U1"),
])
def test_bad_functions_give_clear_errors_naming_the_layer(function, message):
    box = layers.BlackBox(function, (2,), name="plant")
    with pytest.raises(ValueError, match="BlackBox 'plant': its function.*" + message):
        box(tf.ones((4, 2)))


def test_bad_results_stop_fit_with_the_layers_message():
    model = gf.Sequential([layers.Dense(2), layers.BlackBox(lambda x: x * np.inf, (2,),
                                                            name="plant")])
    model.compile("sgd", "mse")
    x = np.ones((4, 2), "float32")
    # The layer's own ValueError, not TensorFlow's "Graph execution error" around it.
    with pytest.raises(ValueError, match=r"^BlackBox 'plant'.*non-finite") as caught:
        model.fit(x, x, verbose=0)
    assert not isinstance(caught.value, tf.errors.OpError)
    with pytest.raises(ValueError, match=r"^BlackBox 'plant'.*non-finite"):
        model.predict(x, verbose=0)


def test_jit_auto_fits_without_xla_and_jit_true_names_the_layer():
    x = np.random.default_rng(6).normal(size=(16, 3)).astype("float32")
    model = gf.Sequential([layers.Dense(2), layers.BlackBox(np.tanh, (2,), name="plant")])
    model.compile("adam", "mse", jit_compile="auto")
    history = model.fit(x, np.tanh(x[:, :2]), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert model.compile_state.jit_compile is False
    assert model.layers[1].function_calls > 0
    model.compile("adam", "mse", jit_compile=True)
    with pytest.raises(ValueError, match=r"'plant' \(BlackBox\) cannot be XLA-compiled"):
        model.fit(x, np.tanh(x[:, :2]), verbose=0)


@pytest.mark.parametrize("kwargs", [
    {"function": "numpy:tanh", "output_shape": (4,), "seed": 3},
    {"function": "numpy:sin", "output_shape": [4], "estimator": "central",
     "vectorized": False},
])
def test_layer_contract(kwargs):
    data = np.random.default_rng(7).normal(size=(3, 4)).astype("float32")
    function = getattr(np, kwargs["function"].split(":")[1])
    run_layer_test(layers.BlackBox, kwargs, data, (3, 4), 0, 0, run_xla=False,
                   reference=lambda layer, x: function(x))


def test_config_names_module_functions_and_refuses_lambdas():
    box = layers.BlackBox(cubic, (2,), estimator="antithetic", num_samples=3, seed=1)
    config = box.get_config()
    assert config["function"] == f"{__name__}:cubic"
    clone = layers.BlackBox.from_config(config)
    assert clone.function is cubic and clone.get_config() == config
    with pytest.raises(ValueError, match="BlackBox 'anon'.*top level of a module"):
        layers.BlackBox(lambda x: x, (2,), name="anon").get_config()


@pytest.mark.parametrize("kwargs, message", [
    ({"output_shape": (0,)}, "output_shape must be the shape of one example's output"),
    ({"output_shape": "2"}, "output_shape must be"),
    ({"estimator": "adjoint"}, "estimator must be 'spsa', 'central', 'antithetic'"),
    ({"surrogate_units": 0}, "surrogate_units must be a positive integer"),
    ({"surrogate_exploration": -0.1}, "surrogate_exploration must be a finite number >= 0"),
    ({"num_samples": 0}, "num_samples must be a positive integer"),
    ({"sigma": 0.0}, "sigma must be a positive float"),
    ({"seed": "a"}, "seed must be an integer or None"),
    ({"output_dtype": "int32"}, "output_dtype must be a floating dtype"),
    ({"vectorized": "yes"}, "vectorized must be True or False"),
    ({"function": 3}, "function must be a callable or a reference"),
    ({"function": "numpy:no_such_function"}, "has no attribute 'no_such_function'"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        layers.BlackBox(**{"function": np.tanh, "output_shape": (2,), **kwargs})


def test_straight_through_needs_matching_shapes_at_build():
    box = layers.BlackBox(lambda x: x[:, :2], (2,), estimator="straight_through", name="q")
    with pytest.raises(ValueError, match=r"BlackBox 'q'.*input shape is \(3,\).*\(2,\)"):
        box(tf.ones((4, 3)))


def test_fit_shows_the_running_count_of_calls_in_the_epoch_logs():
    plant = layers.BlackBox(np.tanh, output_shape=(2,), estimator="spsa", num_samples=2,
                            seed=0, name="plant")
    model = gf.Sequential([layers.Dense(2), plant])
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).normal(size=(8, 2)).astype("float32")
    with pytest.warns(UserWarning, match="runs without XLA.*'plant' \\(BlackBox\\)"):
        history = model.fit(x, x, batch_size=8, epochs=2, verbose=0)
    # One batch per epoch: a forward call and 2 x num_samples estimator calls each.
    assert history.history["plant_function_calls"] == [5, 10]
    assert plant.function_calls == 10


def test_flops_say_the_black_box_is_not_counted():
    model = gf.Sequential([layers.Dense(2), layers.BlackBox(np.tanh, output_shape=(2,), seed=0)])
    model.compile(optimizer="sgd", loss="mse")
    model.build((None, 2))
    counts = model.flops(batch_size=4)
    assert counts["uncounted_ops"]["forward"] == {"PyFunc": 1}
    assert any("as in a BlackBox layer" in note for note in counts["notes"])


@pytest.fixture(scope="module")
def taught_surrogate():
    """A surrogate of `smooth` (d=3) taught over a spread of inputs, as fit_surrogate does."""
    box = layers.BlackBox(smooth, (3,), estimator="surrogate", seed=0, name="twin")
    inputs = np.random.default_rng(2).normal(size=(1024, 3)).astype("float32")
    error = box.fit_surrogate(inputs, epochs=15, batch_size=128)
    return box, (error, box.function_calls)


def test_surrogate_forward_is_f_and_backward_its_own_jacobian(taught_surrogate):
    box, _ = taught_surrogate
    x0, g = _point(3, seed=4)
    x = tf.constant((np.tile(x0, (5, 1)) * np.arange(5)[:, None] / 4).astype("float32"))
    upstream = tf.constant(np.tile(g, (5, 1)).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = box(x)
    np.testing.assert_allclose(y.numpy(), smooth(x.numpy()), rtol=1e-6)  # F itself, not s
    grad = tape.gradient(y, x, output_gradients=upstream).numpy()
    with tf.GradientTape() as tape:
        tape.watch(x)
        s = box.surrogate(x)
    np.testing.assert_allclose(grad, tape.gradient(s, x, output_gradients=upstream), 1e-6)


def test_taught_surrogate_learns_f_and_its_gradient(taught_surrogate):
    box, (error, calls) = taught_surrogate
    assert error < 0.05
    assert calls == 8  # one call per batch of the inputs; later epochs reuse the pairs
    for seed in range(3):
        x0, g = _point(3, seed=seed + 10)
        x = tf.constant(x0[None].astype("float32"))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = box(x)
        estimate = tape.gradient(y, x, output_gradients=tf.constant(g[None], tf.float32))
        truth = _true_vjp(smooth, x0, g)
        assert np.linalg.norm(estimate[0] - truth) < 0.15 * np.linalg.norm(truth)


def test_surrogate_learns_only_through_update_hooks_and_is_checkpointed(tmp_path):
    from graphfit.core import update_hooks

    box = layers.BlackBox(np.sin, (2,), estimator="surrogate", seed=1, name="twin")
    x = tf.constant(np.random.default_rng(0).normal(size=(16, 2)).astype("float32"))
    box(x)  # built; inference never teaches
    before = [w.numpy().copy() for w in box.non_trainable_weights]
    box(x, training=False)
    with update_hooks.collect_updates() as pending:
        box(x, training=True)  # collected, not applied
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, box.non_trainable_weights))
    assert len(pending) > 0 and box.trainable_weights == []
    update_hooks.apply_updates(pending)
    assert float(box.surrogate.updates.numpy()) == 8  # surrogate_updates_per_step Adam steps
    assert box.epoch_counters()["twin_surrogate_error"] == box.surrogate_error != 1.0
    taught = [w.numpy().copy() for w in box.non_trainable_weights]
    checkpoint = tf.train.Checkpoint(box=box)
    path = checkpoint.write(str(tmp_path / "ckpt"))
    box(x, training=True)
    checkpoint.read(path).assert_consumed()
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(taught, box.non_trainable_weights))


def test_fit_surrogate_needs_the_surrogate_estimator():
    with pytest.raises(ValueError, match="BlackBox 'p': fit_surrogate needs estimator="):
        layers.BlackBox(np.sin, (2,), name="p").fit_surrogate(np.zeros((4, 2)))

"""GradientHook: identity forward; backward, the gradient scaled, clipped or mapped by fn.

Gradients are compared with an independent GradientTape on the same layers without the hook.
"""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.layers import user_functions
from graphfit.testing import run_layer_test

X = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
Y = np.random.default_rng(1).normal(size=(8, 2)).astype("float32")


def halve(gradient):
    """A module-level fn, so that configs can name it."""
    return gradient / 2.0


def _layers():
    first, second = layers.Dense(5, activation="tanh"), layers.Dense(2)
    second(first(X))  # built: both runs below share the same weights
    return first, second


def _gradients(first, second, hook=None):
    """Gradients of an MSE loss with respect to both layers' weights and the input."""
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        hidden = first(x)
        hidden = hidden if hook is None else hook(hidden)
        loss = tf.reduce_mean((second(hidden) - Y) ** 2)
    variables = first.trainable_variables + second.trainable_variables
    grads = tape.gradient(loss, [x] + variables)
    return [g.numpy() for g in grads], loss.numpy()


@pytest.mark.parametrize("kwargs", [{"scale": 0.5}, {"clip_norm": 1.0, "scale": -1.0},
                                    {"fn": "tests.layers.test_gradient_hook:halve"}])
def test_layer_contract(kwargs):
    layer = run_layer_test(layers.GradientHook, kwargs, X, (8, 3), 0, 0,
                           reference=lambda layer, x: x)
    assert layer.get_config()["name"] == layer.name


def test_scale_zero_freezes_everything_upstream_exactly():
    first, second = _layers()
    plain, plain_loss = _gradients(first, second)
    hooked, hooked_loss = _gradients(first, second, layers.GradientHook(scale=0.0))
    assert hooked_loss == plain_loss  # the forward pass is the identity
    for g in hooked[:3]:  # input, first kernel, first bias: exactly zero
        assert np.all(g == 0.0)
    assert np.abs(plain[1]).max() > 0
    for g, p in zip(hooked[3:], plain[3:]):  # downstream: untouched
        np.testing.assert_array_equal(g, p)


def test_scale_two_doubles_upstream_gradients_exactly():
    first, second = _layers()
    plain, _ = _gradients(first, second)
    hooked, _ = _gradients(first, second, layers.GradientHook(scale=2.0))
    for g, p in zip(hooked[:3], plain[:3]):
        np.testing.assert_array_equal(g, 2.0 * p)  # a power of two scales exactly
    for g, p in zip(hooked[3:], plain[3:]):
        np.testing.assert_array_equal(g, p)


def test_clip_norm_caps_the_norm_and_keeps_the_direction():
    x = tf.constant(X)
    upstream = tf.constant(np.random.default_rng(2).normal(size=(8, 3)).astype("float32") * 10)
    for clip_norm in (0.5, 1e6):
        hook = layers.GradientHook(clip_norm=clip_norm)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(hook(x) * upstream)
        grad = tape.gradient(loss, x).numpy()
        expected = upstream.numpy() * min(1.0, clip_norm / np.linalg.norm(upstream.numpy()))
        np.testing.assert_allclose(grad, expected, rtol=1e-6)
        assert np.linalg.norm(grad) <= clip_norm * (1 + 1e-6)


def test_fn_maps_the_gradient_and_must_keep_its_shape():
    x = tf.constant(X)
    hook = layers.GradientHook(fn=lambda g: tf.clip_by_value(g, -0.1, 0.1))
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(hook(x) * tf.constant(X))
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), np.clip(X, -0.1, 0.1))
    bad = layers.GradientHook(fn=lambda g: tf.reduce_sum(g, axis=0), name="bad_hook")
    with pytest.raises(ValueError, match=r"GradientHook 'bad_hook'.*shape \(8, 3\).*\(3,\)"):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(bad(x))
        tape.gradient(loss, x)


def test_config_names_module_functions_and_refuses_lambdas():
    hook = layers.GradientHook(fn=halve)
    reference = user_functions.reference_of(halve)
    assert hook.get_config()["fn"] == reference
    assert layers.GradientHook.from_config(hook.get_config()).fn is halve
    with pytest.raises(ValueError, match="GradientHook 'anon'.*top level of a module"):
        layers.GradientHook(fn=lambda g: g, name="anon").get_config()


@pytest.mark.parametrize("kwargs, message", [
    ({}, "needs a transformation"),
    ({"fn": halve, "scale": 2.0}, "either fn, or scale"),
    ({"scale": float("nan")}, "scale must be a finite number"),
    ({"clip_norm": -1.0}, "clip_norm must be a positive float"),
    ({"fn": "no_such_module_xyz:f"}, "does not import"),
    ({"fn": 3}, "fn must be a callable or a reference"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        layers.GradientHook(**kwargs)


@pytest.mark.parametrize("jit_compile", ["auto", True])
def test_fit_with_a_zero_hook_trains_only_downstream(jit_compile):
    first = layers.Dense(4, activation="tanh")
    model = gf.Sequential([first, layers.GradientHook(scale=0.0), layers.Dense(2)])
    model.compile(optimizers.SGD(0.1), "mse", jit_compile=jit_compile)
    model.build((None, 3))
    before = model.get_weights()
    history = model.fit(X, Y, epochs=3, batch_size=4, verbose=0)
    after = model.get_weights()
    assert np.isfinite(history.history["loss"]).all()
    for b, a in zip(before[:2], after[:2]):  # upstream of the hook: frozen
        np.testing.assert_array_equal(a, b)
    assert any(np.abs(a - b).max() > 0 for b, a in zip(before[2:], after[2:]))
    assert model.compile_state.jit_compile is True  # the hook compiles with XLA


def test_fit_with_a_doubling_hook_equals_doubled_learning_rate_upstream():
    """SGD through scale=2 moves the upstream layer as a twice larger step would."""
    def run(scale, lr_factor):
        gf.set_seed(7)
        hook = [layers.GradientHook(scale=scale)] if scale is not None else []
        model = gf.Sequential([layers.Dense(4, activation="tanh"), *hook, layers.Dense(2)])
        model.build((None, 3))
        first = model.get_weights()
        model.compile(optimizers.SGD(0.05 * lr_factor), "mse", jit_compile=False)
        model.fit(X, Y, epochs=1, batch_size=8, shuffle=False, verbose=0)
        return [w - f for w, f in zip(model.get_weights(), first)]

    hooked, plain = run(2.0, 1.0), run(None, 1.0)
    np.testing.assert_allclose(hooked[0], 2.0 * plain[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(hooked[2], plain[2], rtol=1e-5, atol=1e-7)

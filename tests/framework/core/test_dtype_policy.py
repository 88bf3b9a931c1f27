"""Dtype policies (issue 19): what computes in 16 bits, what stays float32, and parity with
Keras's own mixed policy."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers


def _classification_data(samples=192, features=12, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, features)).astype("float32")
    teacher = rng.standard_normal((features, classes)).astype("float32")
    return x, np.argmax(x @ teacher, axis=1).astype("int32")


# ------------------------------------------------------------------------------ the policy
@pytest.mark.parametrize("value, compute, variable", [
    ("float32", "float32", "float32"),
    ("float64", "float64", "float64"),
    ("mixed_bfloat16", "bfloat16", "float32"),
    ("mixed_float16", "float16", "float32"),
    (tf.float64, "float64", "float64"),
    (np.float32, "float32", "float32"),
    (keras.DTypePolicy("mixed_bfloat16"), "bfloat16", "float32"),
])
def test_policy_from_names_dtypes_and_keras_policies(value, compute, variable):
    policy = gf.dtype_policy(value)
    assert (policy.compute_dtype.name, policy.variable_dtype.name) == (compute, variable)
    assert policy.is_mixed == (compute != variable)
    assert policy.needs_loss_scaling == (compute == "float16")


@pytest.mark.parametrize("value, says", [
    ("bfloat16", "use 'mixed_bfloat16'"),
    ("float16", "use 'mixed_float16'"),
    ("mixed_int8", "Received: dtype_policy='mixed_int8'"),
    (3, "must be one of 'float32', 'float64', 'mixed_bfloat16', 'mixed_float16'"),
])
def test_unknown_or_16_bit_variable_policies_are_refused(value, says):
    with pytest.raises(ValueError, match="dtype_policy must be one of") as caught:
        gf.dtype_policy(value)
    assert says in str(caught.value)


# ------------------------------------------------------------------------------ layers
def test_a_mixed_layer_computes_in_bfloat16_on_float32_variables():
    layer = layers.Dense(4, dtype="mixed_bfloat16")
    out = layer(tf.ones((2, 3)))
    assert out.dtype == tf.bfloat16
    assert (layer.dtype, layer.compute_dtype, layer.variable_dtype) == (
        tf.float32, tf.bfloat16, tf.float32)
    assert {v.dtype for v in layer.variables} == {tf.float32}
    # The gradient reaches the float32 kernel through the cast.
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.cast(layer(tf.ones((2, 3))), tf.float32))
    assert tape.gradient(loss, layer.kernel).dtype == tf.float32
    config = layer.get_config()
    assert config["dtype"] == "mixed_bfloat16"
    assert layers.Dense.from_config(config).dtype_policy.name == "mixed_bfloat16"


def test_softmax_and_normalization_statistics_stay_float32():
    x = tf.random.stateless_normal((16, 6), seed=[1, 2]) * 30.0 + 100.0
    x = tf.cast(tf.cast(x, tf.bfloat16), tf.float32)  # the same inputs for both policies
    softmax = layers.Dense(5, activation="softmax", dtype="mixed_bfloat16")
    assert softmax(x).dtype == tf.float32
    assert layers.Activation("softmax", dtype="mixed_bfloat16")(x).dtype == tf.float32
    assert layers.Activation("relu", dtype="mixed_bfloat16")(x).dtype == tf.bfloat16
    for norm in (layers.BatchNormalization(dtype="mixed_bfloat16"),
                 layers.LayerNormalization(dtype="mixed_bfloat16")):
        reference = type(norm)()  # float32
        out = norm(x, training=True)
        assert out.dtype == tf.bfloat16
        # Statistics in float32: the only error left is the final rounding to bfloat16
        # (relative 2**-8); 16-bit moments of values near 100 would be far off.
        np.testing.assert_allclose(tf.cast(out, tf.float32), reference(x, training=True),
                                   rtol=2 ** -7, atol=2 ** -7)


def test_a_layer_mixing_a_float32_variable_into_bfloat16_says_how_to_fix_it():
    class Careless(gf.Layer):
        def build(self, input_shape):
            self.scale = self.add_weight("scale", (input_shape[-1],), initializer="ones")

        def call(self, x, training=False):
            return x * self.scale  # not x * self.compute_value(self.scale)

    with pytest.raises(TypeError, match=r"self.compute_value\(variable\).*dtype='float32'"):
        Careless(dtype="mixed_bfloat16")(tf.ones((1, 3)))
    model = gf.Sequential([Careless()], input_shape=(3,))
    model.compile(optimizer="sgd", loss="mse", dtype_policy="mixed_bfloat16")
    with pytest.raises(TypeError, match="'careless.*' \\(Careless\\) computes in bfloat16"):
        model.fit(np.ones((4, 3)), np.ones((4, 3)), verbose=0)
    assert Careless()(tf.ones((1, 3))).dtype == tf.float32  # fine without a mixed policy


# ------------------------------------------------------------------------------ models
@pytest.fixture(scope="module")
def mixed_fit():
    """A classifier with batch norm and a ClassMeans, trained under mixed_bfloat16."""
    x, y = _classification_data()
    gf.set_seed(0)
    model = gf.Sequential(
        [layers.Dense(16, activation="relu"), layers.BatchNormalization(),
         layers.ClassMeans(3), layers.Dense(3)], input_shape=(12,))
    model.compile(optimizer=optimizers.Adam(0.01), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  dtype_policy="mixed_bfloat16")
    history = model.fit(x, y, epochs=4, batch_size=32, verbose=0)
    return model, history


def test_variables_slots_hook_state_loss_and_metrics_stay_float32(mixed_fit):
    model, history = mixed_fit
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert all(layer.compute_dtype == tf.bfloat16 for layer in model.layers)
    # (the learning rate and ClassMeans's spread total are float64 under every policy)
    floating = [v for v in model.variables + model.optimizer.variables if v.dtype.is_floating
                and "learning_rate" not in v.name and "spread_total" not in v.name]
    assert floating and {v.dtype for v in floating} == {tf.float32}, floating
    hooked = {hook.variable.name for hook in model.update_ops}
    assert any("moving_mean" in name for name in hooked)
    assert any("means" in name for name in hooked)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert model.predict(np.zeros((2, 12), "float32"), verbose=0).dtype == "bfloat16"
    # The moving statistics moved (hooks ran) and hold float32 values.
    bn = model.layers[1]
    assert np.any(bn.moving_mean.numpy() != 0.0)


def test_compile_switches_a_built_model_between_float32_and_mixed_and_refuses_float64():
    model = gf.Sequential([layers.Dense(3)], input_shape=(4,))
    model.compile(optimizer="sgd", loss="mse", dtype_policy="mixed_bfloat16")
    assert model.layers[0].compute_dtype == tf.bfloat16
    model.compile(optimizer="sgd", loss="mse", dtype_policy="float32")
    assert model.layers[0].compute_dtype == tf.float32
    with pytest.raises(ValueError, match="built with float32 variables.*dtype='float64'"):
        model.compile(optimizer="sgd", loss="mse", dtype_policy="float64")
    unbuilt = gf.Sequential([layers.Dense(3)])
    unbuilt.compile(optimizer="sgd", loss="mse", dtype_policy="float64")
    unbuilt.fit(np.ones((4, 4)), np.ones((4, 3)), verbose=0)
    assert unbuilt.layers[0].kernel.dtype == tf.float64
    keeps_own = gf.Sequential([layers.Dense(3, dtype="float32"), layers.Dense(2)],
                              input_shape=(4,))
    keeps_own.compile(optimizer="sgd", loss="mse", dtype_policy="mixed_bfloat16")
    assert [layer.compute_dtype for layer in keeps_own.layers] == [tf.float32, tf.bfloat16]


def test_mixed_bfloat16_training_tracks_float32_on_a_small_problem():
    x, y = _classification_data(samples=384, seed=1)
    results = {}
    for policy in ("float32", "mixed_bfloat16"):
        gf.set_seed(3)
        model = gf.Sequential([layers.Dense(32, activation="relu"), layers.Dense(3)],
                              input_shape=(12,))
        model.compile(optimizer=optimizers.SGD(0.05, momentum=0.9), metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      dtype_policy=policy)
        history = model.fit(x, y, epochs=8, batch_size=32, verbose=0, shuffle=False)
        results[policy] = (history.history["loss"][-1], history.history["accuracy"][-1],
                           model.get_weights())
    (loss32, acc32, w32), (loss16, acc16, w16) = results["float32"], results["mixed_bfloat16"]
    # Stated tolerance: after 96 steps the loss within 20 % and accuracy within 3 points;
    # the weights drift by bfloat16's rounding (8 bits), not more.
    assert abs(loss16 - loss32) <= 0.2 * loss32
    assert abs(acc16 - acc32) <= 0.03
    drift = max(np.abs(a - b).max() / (np.abs(a).max() + 1e-6) for a, b in zip(w32, w16))
    assert 0.0 < drift < 0.1


def _keras_and_graphfit_after_three_steps(policy, x, y):
    gf.set_seed(5)
    model = gf.Sequential([layers.Dense(16, activation="relu"), layers.Dense(3)],
                          input_shape=(12,))
    initial = model.get_weights()
    keras_policy = keras.DTypePolicy(policy)
    reference = keras.Sequential([keras.Input((12,)),
                                  keras.layers.Dense(16, activation="relu", dtype=keras_policy),
                                  keras.layers.Dense(3, dtype=keras_policy)])
    reference.set_weights(initial)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimizers.SGD(0.1, momentum=0.9), loss=loss, jit_compile=False,
                  dtype_policy=policy)
    reference.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss=loss,
                      jit_compile=False)
    ours = model.fit(x, y, epochs=1, batch_size=32, shuffle=False, verbose=0)
    theirs = reference.fit(x, y, epochs=1, batch_size=32, shuffle=False, verbose=0)
    return (model, ours.history["loss"]), (reference, theirs.history["loss"]), initial


def _distance(a, b) -> float:
    return max(float(np.abs(u - v).max()) for u, v in zip(a, b))


def test_a_mixed_step_matches_keras_mixed_bfloat16():
    x, y = _classification_data(samples=96, seed=2)
    (model, ours), (reference, theirs), initial = _keras_and_graphfit_after_three_steps(
        "mixed_bfloat16", x, y)
    _, (reference32, _), _ = _keras_and_graphfit_after_three_steps("float32", x, y)
    np.testing.assert_allclose(ours, theirs, rtol=1e-3)
    assert model.get_weights()[0].dtype == np.float32
    # Keras sums a bias gradient over the batch in another order: a few bfloat16 ulps apart
    # (2**-8 relative), against ~5x that between Keras's own mixed and float32 runs.
    to_keras_mixed = _distance(model.get_weights(), reference.get_weights())
    mixed_vs_float32 = _distance(reference.get_weights(), reference32.get_weights())
    assert _distance(model.get_weights(), initial) > 20 * to_keras_mixed  # the steps moved it
    assert to_keras_mixed < 0.5 * mixed_vs_float32
    np.testing.assert_allclose(model.predict(x[:8], verbose=0).astype("float32"),
                               reference.predict(x[:8], verbose=0).astype("float32"),
                               rtol=2e-2, atol=2e-2)


def test_mixed_float16_scales_the_loss_and_skips_a_step_whose_float16_gradients_overflow():
    x, y = _classification_data(samples=64)
    gf.set_seed(0)
    model = gf.Sequential([layers.Dense(16, activation="relu"), layers.BatchNormalization(),
                           layers.Dense(3)], input_shape=(12,))
    model.compile(optimizer=optimizers.SGD(0.01, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  dtype_policy="mixed_float16")
    assert isinstance(model.optimizer, optimizers.LossScaleOptimizer)
    assert model.layers[0].compute_dtype == tf.float16
    before = [v.numpy() for v in model.variables]
    # Sample weights of 1000: d(loss)/d(logits) times the scale 2**15 is far above float16's
    # 65504, so the scaled float16 backward pass overflows and the step must be skipped.
    model.fit(x, y, sample_weight=np.full(64, 1000.0, "float32"), epochs=1, batch_size=64,
              verbose=0)
    assert float(model.optimizer.loss_scale.numpy()) == 2.0 ** 14
    assert int(model.optimizer.iterations.numpy()) == 0
    for variable, value in zip(model.variables, before):  # weights and moving statistics
        np.testing.assert_array_equal(variable.numpy(), value, err_msg=variable.name)
    assert all(not np.any(slot.numpy()) for slot in model.optimizer.variables
               if "momentum" in slot.name)
    history = model.fit(x, y, epochs=3, batch_size=16, verbose=0)  # ordinary inputs: trains
    assert int(model.optimizer.iterations.numpy()) == 12
    assert history.history["loss"][-1] < history.history["loss"][0]

"""KerasLayer: Keras layers inside graphfit: collections, gradients, update-hook timing,
freezing, checkpoints, config, dtype casting, XLA flags."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from graphfit.core import update_hooks
from graphfit.testing import copy_weights_to_keras, run_layer_test

X = (np.random.default_rng(0).normal(size=(8, 3)) * 2 + 1).astype("float32")


def _close(a, b, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=atol)


def test_wrapped_dense_collections_and_gradients():
    # The contract of a wrapped Dense runs from graphfit.testing's examples (test_conformance).
    adapter = layers.KerasLayer(keras.layers.Dense(4, activation="tanh"))
    adapter(X)
    dense = adapter.keras_layer
    assert all(isinstance(v, tf.Variable) for v in adapter.variables)
    assert [id(v) for v in adapter.trainable_variables] == [id(w.value) for w in dense.weights]
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(adapter(x) ** 2)
    grads = tape.gradient(loss, adapter.trainable_variables)
    kernel, bias = (v.numpy() for v in adapter.trainable_variables)
    h = np.tanh(X @ kernel + bias)
    delta = 2 * h * (1 - h**2)  # hand-computed backpropagation
    _close(grads[0].numpy(), X.T @ delta, atol=1e-5)
    _close(grads[1].numpy(), delta.sum(0), atol=1e-5)


def test_wrapped_batch_normalization_contract():
    adapter = run_layer_test(
        layers.KerasLayer,
        {"layer": keras.layers.BatchNormalization(momentum=0.9)},
        X,
        (8, 3),
        2,
        2,
        expected_hooks=2,
        reference=keras.layers.BatchNormalization(momentum=0.9),
    )
    assert [v.name.split("/")[-1] for v in adapter.variables] == [
        "gamma:0", "beta:0", "moving_mean:0", "moving_variance:0"
    ]


def _bn_pair():
    adapter = layers.KerasLayer(keras.layers.BatchNormalization(momentum=0.8))
    adapter(X)
    twin = keras.layers.BatchNormalization(momentum=0.8)
    copy_weights_to_keras(adapter, twin, X)
    return adapter, twin


def test_keras_state_updates_are_collected_not_applied_then_match_keras():
    adapter, twin = _bn_pair()
    moving = adapter.keras_layer.moving_mean
    with update_hooks.collect_updates() as pending:
        adapter(X, training=True)
    assert [p.hook.variable for p in pending] == adapter.non_trainable_variables
    np.testing.assert_array_equal(moving.numpy(), np.zeros(3))  # not applied on the spot
    update_hooks.apply_updates(pending)
    twin(X, training=True)
    for ours, theirs in zip(adapter.variables, twin.weights):
        _close(ours.numpy(), theirs.numpy())


def test_keras_state_updates_apply_immediately_when_eager_without_collector():
    adapter, twin = _bn_pair()
    for i in range(3):
        x = X * (i + 1)
        _close(adapter(x, training=True), twin(x, training=True), atol=1e-5)
        _close(adapter.keras_layer.moving_mean.numpy(), twin.moving_mean.numpy())
    assert np.abs(twin.moving_mean.numpy()).min() > 0.1


def test_frozen_adapter_freezes_the_keras_layer():
    adapter, _ = _bn_pair()
    adapter.trainable = False
    assert adapter.keras_layer.trainable is False
    assert adapter.trainable_variables == [] and len(adapter.non_trainable_variables) == 4
    with update_hooks.collect_updates() as pending:
        training = adapter(X, training=True)
    assert pending == []
    _close(training, adapter(X))  # Keras 3: a frozen BatchNormalization runs in inference mode
    adapter.trainable = True
    assert adapter.keras_layer.trainable and len(adapter.trainable_variables) == 2
    frozen = layers.KerasLayer(keras.layers.Dense(2), trainable=False)
    assert frozen.keras_layer.trainable is False


def test_checkpoint_round_trip(tmp_path):
    adapter, _ = _bn_pair()
    adapter(X, training=True)
    saved = [v.numpy() for v in adapter.variables]
    path = tf.train.Checkpoint(model=adapter).write(str(tmp_path / "ckpt"))
    for v in adapter.variables:
        v.assign(tf.zeros_like(v))
    tf.train.Checkpoint(model=adapter).read(path).assert_consumed()
    for before, v in zip(saved, adapter.variables):
        np.testing.assert_array_equal(v.numpy(), before)


def test_config_round_trip_rebuilds_the_keras_layer():
    adapter = layers.KerasLayer(keras.layers.BatchNormalization(momentum=0.7), name="bn")
    config = adapter.get_config()
    assert config["layer"]["class_name"] == "BatchNormalization"
    clone = layers.KerasLayer.from_config(config)
    assert isinstance(clone.keras_layer, keras.layers.BatchNormalization)
    assert clone.keras_layer.momentum == 0.7 and clone.name == "bn"
    assert clone.keras_layer is not adapter.keras_layer


def test_seed_state_of_keras_dropout_moves_through_hooks():
    adapter = layers.KerasLayer(keras.layers.Dropout(0.5, seed=1))
    adapter(X)
    [seed] = adapter.non_trainable_variables
    start = seed.numpy()
    with update_hooks.collect_updates() as pending:
        first = adapter(X, training=True).numpy()
    assert [p.hook.variable for p in pending] == [seed]
    np.testing.assert_array_equal(seed.numpy(), start)
    # Same state, same mask: trial passes inside one training step see one mask.
    with update_hooks.collect_updates():
        np.testing.assert_array_equal(adapter(X, training=True).numpy(), first)
    adapter(X, training=True)  # eager, no collector: the seed advances
    assert not np.array_equal(seed.numpy(), start)
    assert not np.array_equal(adapter(X, training=True).numpy(), first)


def test_training_passed_only_when_accepted_and_dtypes_cast():
    activation = layers.KerasLayer(keras.layers.Activation("relu"))
    _close(activation(X, training=True), np.maximum(X, 0))
    wide = layers.KerasLayer(keras.layers.Dense(2, dtype="float64"))
    out = wide(X)
    assert out.dtype == tf.float32 and wide.keras_layer.compute_dtype == "float64"
    embedding = layers.KerasLayer(keras.layers.Embedding(5, 2))
    assert embedding(np.array([[1, 4]])).shape == (1, 2, 2)  # integer inputs stay integers


def test_xla_flags():
    assert layers.KerasLayer(keras.layers.Dense(2)).xla_friendly_on_cpu is True
    assert layers.KerasLayer(keras.layers.Conv2D(2, 3)).xla_friendly_on_cpu is False
    pooled = keras.Sequential([keras.layers.MaxPooling2D(), keras.layers.Flatten()])
    assert layers.KerasLayer(pooled).xla_friendly_on_cpu is False
    assert layers.KerasLayer(keras.layers.Dense(2)).supports_jit is True


def test_rejects_non_keras_layers():
    with pytest.raises(ValueError, match="layer="):
        layers.KerasLayer(layers.Dense(2))

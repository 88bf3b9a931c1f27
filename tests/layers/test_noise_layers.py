"""SpatialDropout1D/2D/3D, GaussianNoise and GaussianDropout: Keras's semantics (the goldens
of keras/src/layers/regularization/{spatial_dropout,gaussian_noise,gaussian_dropout}_test.py),
identity at inference as Keras, graphfit's seeded draws (reproducible from the seed, eagerly
and under XLA), training through them, and the errors. The random numbers
are graphfit's, not Keras's: the same distributions, other draws."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_spatial_dropout_drops_whole_channels_as_keras(rank):
    shape = (10, *[3] * rank, 10)  # Keras's correctness tests' shapes
    out = getattr(layers, f"SpatialDropout{rank}D")(0.5, seed=1337)(
        np.ones(shape, "float32"), training=True).numpy()
    first = out[(slice(None), *[0] * rank)]
    for position in [(1,) * rank, (2,) * rank]:  # every position has the channel's draw
        np.testing.assert_array_equal(out[(slice(None), *position)], first)
    assert set(np.unique(out)) == {0.0, 2.0}  # dropped, or kept and scaled by 1 / (1 - rate)
    assert 0.3 < np.mean(first > 0) < 0.7


@pytest.mark.parametrize("name, arguments, std", [
    ("GaussianNoise", {"stddev": 0.3}, 0.3),
    ("GaussianDropout", {"rate": 0.3}, np.sqrt(0.3 / 0.7)),
])
def test_gaussian_layers_have_keras_statistics(name, arguments, std):
    x = np.ones((20, 500), "float32")  # Keras's correctness test
    layer = getattr(layers, name)(seed=1337, **arguments)
    out = layer(x, training=True).numpy()
    np.testing.assert_allclose(np.std(out), std, atol=0.02)
    np.testing.assert_allclose(np.mean(out), 1.0, atol=0.02)
    np.testing.assert_array_equal(layer(x), x)  # inference: the identity, as Keras's
    np.testing.assert_array_equal(getattr(keras.layers, name)(**arguments)(x), x)


@pytest.mark.parametrize("make", [
    lambda: layers.SpatialDropout2D(0.4, seed=7), lambda: layers.GaussianNoise(0.2, seed=7),
    lambda: layers.GaussianDropout(0.2, seed=7)])
def test_draws_are_reproducible_from_the_seed_and_new_per_call_with_and_without_xla(make):
    """Two layers with one seed draw the same sequence, eagerly and under XLA (whose stateless
    random kernels are not the CPU's: its numbers differ from the eager ones, as Dropout's)."""
    x = np.random.default_rng(0).normal(size=(4, 3, 3, 2)).astype("float32")
    for jit in (False, True):
        calls = []
        for layer in (make(), make()):
            step = tf.function(lambda t, layer=layer: layer(t, training=True), jit_compile=jit)
            calls.append([step(x).numpy() for _ in range(2)])
        np.testing.assert_array_equal(calls[0][0], calls[1][0])
        np.testing.assert_array_equal(calls[0][1], calls[1][1])
        assert not np.array_equal(calls[0][0], calls[0][1])


def test_zero_rate_or_stddev_is_the_identity_and_not_stochastic():
    x = np.ones((2, 3), "float32")
    for layer in (layers.GaussianNoise(0.0), layers.GaussianDropout(0.0)):
        np.testing.assert_array_equal(layer(x, training=True), x)
        assert not layer.stochastic_in_training
    assert layers.GaussianNoise(0.1).stochastic_in_training
    assert layers.SpatialDropout1D(0.1).stochastic_in_training


def test_a_model_trains_through_them_and_predicts_deterministically():
    gf.set_seed(0)
    model = gf.Sequential([layers.GaussianNoise(0.1), layers.Dense(8, activation="relu"),
                           layers.Reshape((4, 2)), layers.SpatialDropout1D(0.2),
                           layers.Flatten(), layers.GaussianDropout(0.1), layers.Dense(1)])
    x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model.compile(optimizer=optimizers.Adam(0.02), loss="mse")
    history = model.fit(x, y, epochs=5, batch_size=16, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    np.testing.assert_array_equal(model.predict(x, verbose=0), model.predict(x, verbose=0))


@pytest.mark.parametrize("name, arguments, message", [
    ("GaussianNoise", {"stddev": 1.5}, r"GaussianNoise: stddev must be a number in \[0, 1\]"),
    ("GaussianNoise", {"stddev": "0.1"}, "Received: stddev='0.1'"),
    ("GaussianDropout", {"rate": 1.0}, r"GaussianDropout: rate must be a number in \[0, 1\)"),
    ("GaussianNoise", {"stddev": 0.1, "seed": 1.5}, "GaussianNoise: seed must be an integer"),
    ("SpatialDropout2D", {"rate": -0.1}, r"SpatialDropout2D: rate must be a number in \[0, 1\)"),
    ("SpatialDropout3D", {"rate": 0.1, "data_format": "channels_first"},
     r"SpatialDropout3D supports only data_format='channels_last'"),
])
def test_bad_arguments_are_clear_errors(name, arguments, message):
    with pytest.raises(ValueError, match=message):
        getattr(layers, name)(**arguments)


def test_wrong_rank_names_the_layer():
    with pytest.raises(ValueError, match=r"'sd' \(SpatialDropout1D\) expects inputs of rank 3"):
        layers.SpatialDropout1D(0.5, name="sd")(tf.ones((2, 3, 4, 5)))

"""Dropout: Keras scaling in training, noise_shape, errors. The layer contract, with
inference as the identity, runs from graphfit.testing's examples (test_conformance)."""

import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers


def test_dropout_training_scales_kept_values_by_one_over_keep_probability():
    layer = layers.Dropout(0.25, seed=1)
    out = layer(tf.ones((100, 40)), training=True).numpy()
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.7 < np.mean(out > 0) < 0.8  # 4000 draws: the kept fraction is near 0.75
    assert not np.array_equal(out, layer(tf.ones((100, 40)), training=True).numpy())


def test_dropout_noise_shape_shares_the_mask_along_none_free_axes():
    layer = layers.Dropout(0.5, noise_shape=(None, 1, 5), seed=2)
    out = layer(tf.ones((8, 3, 5)), training=True).numpy()
    # The mask has size 1 on axis 1: each (example, feature) is dropped for every step.
    np.testing.assert_array_equal(out, np.repeat(out[:, :1, :], 3, axis=1))
    assert layer.get_config()["noise_shape"] == (None, 1, 5)


def test_dropout_rate_zero_is_the_identity_in_training():
    x = tf.constant([[1.0, 2.0]])
    np.testing.assert_array_equal(layers.Dropout(0.0)(x, training=True).numpy(), x.numpy())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rate": 1.0}, "rate=1.0"),
        ({"rate": -0.1}, "rate=-0.1"),
        ({"rate": "0.5"}, "rate='0.5'"),
        ({"rate": 0.5, "noise_shape": "abc"}, "noise_shape='abc'"),
        ({"rate": 0.5, "noise_shape": (0, 2)}, r"noise_shape=\(0, 2\)"),
        ({"rate": 0.5, "seed": 1.5}, "seed=1.5"),
    ],
)
def test_dropout_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layers.Dropout(**kwargs)


def test_dropout_noise_shape_rank_must_match_inputs():
    with pytest.raises(ValueError, match="one entry per input axis"):
        layers.Dropout(0.5, noise_shape=(None, 1))(tf.ones((2, 3, 4)), training=True)

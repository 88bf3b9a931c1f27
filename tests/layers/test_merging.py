"""Concatenate and Add: the layer contract on lists of tensors, Keras numbers, errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from tests.layer_testing import run_layer_test

RNG = np.random.default_rng(0)
A, B, C = (RNG.normal(size=(2, 3, n)).astype("float32") for n in (4, 2, 4))


def test_concatenate_matches_keras():
    run_layer_test(
        layers.Concatenate, {}, [A, B], (2, 3, 6), 0, 0, reference=keras.layers.Concatenate()
    )
    out = layers.Concatenate(axis=1)([A, C]).numpy()
    np.testing.assert_array_equal(out, np.concatenate([A, C], axis=1))


def test_add_matches_keras():
    run_layer_test(layers.Add, {}, [A, C, A], (2, 3, 4), 0, 0, reference=keras.layers.Add())
    np.testing.assert_allclose(layers.Add()([A, C]).numpy(), A + C)


def test_merging_errors():
    with pytest.raises(ValueError, match="axis 2 differs"):
        layers.Concatenate(axis=1)([A, B])
    with pytest.raises(ValueError, match="list of tensors"):
        layers.Concatenate()(tf.constant(A))
    with pytest.raises(ValueError, match="one rank"):
        layers.Add()([A, A[0]])
    with pytest.raises(ValueError, match="broadcastable"):
        layers.Add()([A, B])
    with pytest.raises(ValueError, match="axis='x'"):
        layers.Concatenate(axis="x")

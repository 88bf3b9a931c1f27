"""Concatenate and Add: values on lists of tensors, errors. The layer contract on lists of
tensors, with Keras as the reference, runs from graphfit.testing's examples."""

import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers

RNG = np.random.default_rng(0)
A, B, C = (RNG.normal(size=(2, 3, n)).astype("float32") for n in (4, 2, 4))


def test_concatenate_along_another_axis():
    out = layers.Concatenate(axis=1)([A, C]).numpy()
    np.testing.assert_array_equal(out, np.concatenate([A, C], axis=1))


def test_add_sums():
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

"""Pooling over 1, 2 and 3 spatial axes: max, average and global, against Keras 3's layers on
the same inputs, with the parameter sets of Keras's own tests (keras/src/layers/pooling/
{max,average}_pooling_test.py, global_*_pooling_test.py; channels-last cases), hand-computed
goldens, gradients against Keras's, shape inference in a model, and the errors."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers

_ARANGE = {1: np.arange(24, dtype="float32").reshape((2, 3, 4)),
           2: np.arange(100, dtype="float32").reshape((1, 5, 5, 4)),
           3: np.arange(240, dtype="float32").reshape((2, 3, 4, 5, 2))}

# (rank, pool_size, strides, padding) from Keras's correctness tests, channels-last.
_KERAS_CASES = [
    (1, 2, 1, "valid"), (1, 2, 1, "same"), (1, (2,), (2,), "valid"), (1, (2,), (2,), "same"),
    (2, 2, 1, "valid"), (2, (2, 2), (2, 2), "same"), (2, (2, 3), (3, 3), "same"),
    (2, (2, 3), (2, 2), "valid"), (2, 2, (2, 1), "same"),
    (3, 2, 1, "valid"), (3, 2, 1, "same"), (3, (2, 3, 2), (2, 2, 1), "valid"),
    (3, (2, 2, 2), (2, 2, 1), "same"),
]


@pytest.mark.parametrize("kind", ["Max", "Average"])
@pytest.mark.parametrize("rank, pool_size, strides, padding", _KERAS_CASES)
def test_windowed_pooling_matches_keras(kind, rank, pool_size, strides, padding):
    name = f"{kind}Pooling{rank}D"
    arguments = {"pool_size": pool_size, "strides": strides, "padding": padding}
    x = _ARANGE[rank]
    ours, theirs = getattr(layers, name)(**arguments), getattr(keras.layers, name)(**arguments)
    np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-6)
    assert ours.get_config()["pool_size"] == theirs.get_config()["pool_size"]
    assert ours.get_config()["strides"] == theirs.get_config()["strides"]


@pytest.mark.parametrize("kind", ["Max", "Average"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_gradients_match_keras(kind, rank):
    """The input gradient (what backpropagation through the layer gives) equals Keras's; in
    3-D graphfit pools in two separable passes, Keras in one MaxPool3D/AvgPool3D."""
    x = tf.constant(np.random.default_rng(rank).normal(size=_ARANGE[rank].shape), tf.float32)
    name, arguments = f"{kind}Pooling{rank}D", {"pool_size": 2, "strides": 1,
                                                "padding": "same"}
    gradients = []
    for layer in (getattr(layers, name)(**arguments), getattr(keras.layers, name)(**arguments)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            weights = tf.reshape(tf.range(tf.size(y), dtype=y.dtype), tf.shape(y))
            weighted = tf.reduce_sum(y * weights)
        gradients.append(tape.gradient(weighted, x))
    np.testing.assert_allclose(gradients[0], gradients[1], rtol=1e-5, atol=1e-4)


def test_hand_computed_goldens():
    steps = np.array([[[1.0], [5.0], [2.0], [0.0], [3.0]]], "float32")
    # Windows of 2, stride 2, 'same': [1, 5], [2, 0], [3] (the padding left out of the mean).
    assert layers.MaxPooling1D(2, padding="same")(steps).numpy().ravel().tolist() == [5, 2, 3]
    assert layers.AveragePooling1D(2, padding="same")(steps).numpy().ravel().tolist() == [
        3, 1, 3]
    volume = np.arange(8, dtype="float32").reshape((1, 2, 2, 2, 1))
    assert layers.MaxPooling3D(2)(volume).numpy().ravel().tolist() == [7.0]
    assert layers.AveragePooling3D(2)(volume).numpy().ravel().tolist() == [3.5]
    assert layers.AveragePooling3D((1, 2, 2))(volume).numpy().ravel().tolist() == [1.5, 5.5]


@pytest.mark.parametrize("kind", ["Max", "Average"])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("keepdims", [False, True])
def test_global_pooling_matches_keras(kind, rank, keepdims):
    name = f"Global{kind}Pooling{rank}D"
    x = _ARANGE[rank]
    ours = getattr(layers, name)(keepdims=keepdims)
    theirs = getattr(keras.layers, name)(keepdims=keepdims)
    np.testing.assert_allclose(ours(x), theirs(x))
    expected = (np.max if kind == "Max" else np.mean)(
        x, axis=tuple(range(1, rank + 1)), keepdims=keepdims)
    np.testing.assert_allclose(ours(x), expected)


def test_3d_pooling_runs_in_float64_where_tensorflow_has_no_cpu_kernel():
    x = np.random.default_rng(0).normal(size=(2, 4, 4, 4, 3))
    for kind in ("Max", "Average"):
        ours = getattr(layers, f"{kind}Pooling3D")((2, 3, 2), padding="same", dtype="float64")
        out = ours(x)
        assert out.dtype == tf.float64
        reference = getattr(keras.layers, f"{kind}Pooling3D")((2, 3, 2), padding="same")
        np.testing.assert_allclose(out, reference(x.astype("float32")), rtol=1e-5, atol=1e-6)


def test_shapes_in_a_model_with_unknown_batch_and_xla():
    model = gf.Sequential([layers.MaxPooling3D((1, 2, 2)), layers.AveragePooling3D(2),
                           layers.GlobalMaxPooling3D()])
    model.build((None, 4, 8, 8, 2))
    assert model.output_spec.shape.as_list() == [None, 2]
    x = np.random.default_rng(1).normal(size=(3, 4, 8, 8, 2)).astype("float32")
    np.testing.assert_allclose(tf.function(model, jit_compile=True)(x), model(x), rtol=1e-6)


@pytest.mark.parametrize("name, arguments, message", [
    ("MaxPooling1D", {"pool_size": 0}, "pool_size must be a positive integer or a tuple of 1"),
    ("AveragePooling3D", {"pool_size": (2, 2)}, "tuple of 3 positive integers"),
    ("MaxPooling3D", {"padding": "full"}, "padding must be 'valid' or 'same'"),
    ("AveragePooling1D", {"data_format": "channels_first"},
     r"AveragePooling1D supports only data_format='channels_last'.*tf.transpose\(x, \(0, 2, 1\)\)"),
    ("MaxPooling3D", {"data_format": "channels_first"}, r"\(0, 2, 3, 4, 1\)"),
    ("GlobalMaxPooling2D", {"keepdims": "yes"}, "GlobalMaxPooling2D: keepdims must be True"),
    ("GlobalAveragePooling1D", {"data_format": "NHWC"},
     "GlobalAveragePooling1D: data_format must be 'channels_last' or None"),
])
def test_bad_arguments_are_clear_errors(name, arguments, message):
    with pytest.raises(ValueError, match=message):
        getattr(layers, name)(**arguments)


def test_wrong_rank_and_too_small_inputs_name_the_layer():
    with pytest.raises(ValueError, match=r"'pool3' \(MaxPooling3D\) expects inputs of rank 5"):
        layers.MaxPooling3D(name="pool3")(tf.ones((2, 4, 4, 3)))
    with pytest.raises(ValueError, match=r"\(batch, steps, channels\)"):
        layers.GlobalMaxPooling1D()(tf.ones((2, 4)))
    with pytest.raises(ValueError, match="AveragePooling1D 'short': inputs of shape"):
        layers.AveragePooling1D(4, name="short")(tf.ones((1, 3, 2)))

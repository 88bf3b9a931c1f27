"""graphfit's side of the functional API: `gf.Model(inputs, outputs)` is a `GraphModel` (one
mechanism: the same nodes, the same frozen-feature cache), and `gf.Input` refuses what it
cannot take with a message that says what to do. Keras parity is in
tests/keras_parity/test_functional.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import graphfit as gf
from graphfit import layers


def _shared_model():
    inputs = gf.Input((3,), name="x")
    frozen = layers.Dense(4, activation="tanh", name="frozen", trainable=False)
    shared = layers.Dense(4, activation="tanh", name="shared")
    return gf.Model(inputs, layers.Dense(1, name="out")(shared(shared(frozen(inputs)))))


def test_a_functional_model_is_a_graph_model_of_its_calls():
    model = _shared_model()
    assert isinstance(model, gf.GraphModel) and model.input_names == ["x"]
    assert [(node.name, node.inputs) for node in model.nodes] == [
        ("frozen", "x"), ("shared", "frozen"), ("shared/1", "shared"), ("out", "shared/1")]
    assert all(node.layer is model.get_layer("shared") for node in model.nodes[1:3])


def test_cached_frozen_features_train_a_functional_model_as_without():
    x = np.random.default_rng(0).normal(size=(16, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    weights = []
    for cache in (False, True):
        gf.set_seed(1)
        model = _shared_model()
        model.compile(optimizer=gf.optimizers.SGD(0.1), loss="mse")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # cache_frozen warns when it cannot cache
            model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                      cache_frozen=cache)
        weights.append(model.get_weights())
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_input_refuses_what_it_cannot_take():
    with pytest.raises(ValueError, match="does not support sparse"):
        gf.Input((3,), sparse=True)
    with pytest.raises(ValueError, match="not both"):
        gf.Input((3,), batch_shape=(None, 3))
    with pytest.raises(ValueError, match="non-negative integers or None"):
        gf.Input((3.5,))
    with pytest.raises(ValueError, match="dtype must be a TensorFlow dtype"):
        gf.Input((3,), dtype="words")


def test_a_sequential_takes_an_input_first_and_only_first():
    model = gf.Sequential([gf.Input((5,), dtype="int32"), layers.Embedding(10, 2),
                           layers.Flatten()])
    assert model.built and model.built_input_spec.dtype.name == "int32"
    assert model.output_spec.shape.as_list() == [None, 10]
    with pytest.raises(TypeError, match="a gf.Input can only come first"):
        gf.Sequential([layers.Dense(2), gf.Input((3,))])


def test_a_model_dtype_must_be_its_layers():
    inputs = gf.Input((3,))
    outputs = layers.Dense(2)(inputs)
    with pytest.raises(ValueError, match=r"layers \['.*'\] were built with other variables"):
        gf.Model(inputs, outputs, dtype="float64")
    inputs = gf.Input((3,), dtype="float64")
    model = gf.Model(inputs, layers.Dense(2, dtype="float64")(inputs), dtype="float64")
    assert model(np.ones((1, 3))).dtype.name == "float64"


def test_symbolic_calls_take_one_input_and_a_bool_training():
    inputs = gf.Input((3,))
    with pytest.raises(TypeError, match="training must be True, False or None"):
        layers.Dense(2)(inputs, training="yes")
    with pytest.raises(TypeError, match=r"one symbolic tensor or a list of them"):
        layers.Concatenate()({"a": inputs})


def test_a_functional_model_needs_inputs_and_outputs():
    inputs = gf.Input((3,))
    with pytest.raises(ValueError, match=r"needs both.*outputs=None"):
        gf.Model(inputs)
    with pytest.raises(TypeError, match=r"takes name, trainable and dtype; received \['units'\]"):
        gf.Model(inputs, layers.Dense(1)(inputs), units=3)


def test_levenberg_marquardt_fits_a_functional_model():
    x = np.linspace(-1, 1, 20)[:, None]
    inputs = gf.Input((1,), dtype="float64")
    model = gf.Model(inputs, layers.Dense(1, dtype="float64")(inputs), dtype="float64")
    model.compile(optimizer=gf.optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(x, 3 * x + 0.5, batch_size=None, epochs=3, verbose=0)
    np.testing.assert_allclose([w.item() for w in model.get_weights()], [3.0, 0.5], atol=1e-6)

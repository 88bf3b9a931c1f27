"""`predict` through a BlackBox, in the shapes of a crash once reported ("num_elements to reserve
must be a tensor size 1" from the predict loop's TensorArrays): batch sizes that do not divide
the data, several steps per execution, one example, a dataset, per-example F, rank-2 outputs.
Each prediction is compared with the same computation in NumPy; an empty input is refused."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers

X = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)


def pair_map(x):
    """F for a batch (batch, 3) -> (batch, 2, 3): tanh and sin stacked (a rank-2 output)."""
    return np.stack([np.tanh(x), np.sin(x)], axis=1).astype(np.float32)


def pair_map_one(example):
    """The same F for one example (3,) -> (2, 3)."""
    return np.stack([np.tanh(example), np.sin(example)]).astype(np.float32)


def _model(vectorized: bool, steps_per_execution: int):
    dense = layers.Dense(3, name="dense")
    box = layers.BlackBox(pair_map if vectorized else pair_map_one, output_shape=(2, 3),
                          vectorized=vectorized, seed=0, name="plant")
    model = gf.Sequential([dense, box])
    model.build((None, 4))
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=steps_per_execution)
    return model


def _expected(model, x):
    kernel, bias = (v.numpy() for v in model.get_layer("dense").variables)
    return pair_map(x @ kernel + bias)


@pytest.fixture(scope="module")
def models():
    return {(vectorized, spe): _model(vectorized, spe)
            for vectorized in (True, False) for spe in (1, 3)}


@pytest.mark.parametrize("vectorized", [True, False])
@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_predict_matches_numpy_for_any_batching(models, vectorized, steps_per_execution):
    model = models[(vectorized, steps_per_execution)]
    expected = _expected(model, X)
    for batch_size in (3, 4, 10, 32, None):  # 3 and 4 leave a smaller last batch
        out = model.predict(X, batch_size=batch_size, verbose=0)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    one = model.predict(X[:1], batch_size=3, verbose=0)
    assert one.shape == (1, 2, 3)
    np.testing.assert_allclose(one, expected[:1], rtol=1e-5, atol=1e-6)
    dataset = tf.data.Dataset.from_tensor_slices(X).batch(4)
    np.testing.assert_allclose(model.predict(dataset, verbose=0), expected, rtol=1e-5,
                               atol=1e-6)
    calls = model.get_layer("plant").function_calls
    model.predict(X[:7], batch_size=3, verbose=0)  # 3 batches: 3 calls, or 7 per example
    assert model.get_layer("plant").function_calls - calls == (3 if vectorized else 7)


def test_predict_on_no_examples_is_refused(models):
    with pytest.raises(ValueError, match="x is empty"):
        models[(True, 1)].predict(X[:0], verbose=0)

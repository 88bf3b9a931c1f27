"""Issue 13 item 2: an Embedding refuses floats that are not ids, and ids out of range."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers


def test_whole_floats_and_integers_work():
    embedding = layers.Embedding(10, 3, name="tokens")
    a = embedding(tf.constant([[1, 2]]))
    b = embedding(tf.constant([[1.0, 2.0]]))
    np.testing.assert_allclose(a.numpy(), b.numpy())


@pytest.mark.parametrize("bad, message", [([[1.5, 2.0]], "not whole numbers"),
                                          ([[10, 1]], r"\[0, 10\)"), ([[-1, 1]], r"\[0, 10\)")])
def test_bad_ids_fail_naming_the_layer(bad, message):
    embedding = layers.Embedding(10, 3, name="tokens")
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"'tokens'.*{message}"):
        embedding(tf.constant(bad))


def test_fit_with_float_features_into_embedding_fails_even_with_auto_jit():
    model = gf.Sequential([layers.Embedding(10, 2, name="tokens"), layers.Flatten(),
                           layers.Dense(1)])
    model.compile("adam", "mse", jit_compile="auto")
    x = np.random.default_rng(0).random((8, 3)).astype("float32") * 5
    # fit says it as a plain ValueError, without TensorFlow's graph-execution wrapping.
    with pytest.raises(ValueError, match=r"^Embedding 'tokens' looks up integer ids, but "
                                         r"received floating values that are not whole "
                                         r"numbers.*\(batch 0 or after\)\.$"):
        model.fit(x, np.ones((8, 1)), verbose=0)


@pytest.mark.parametrize("ids", [[[1, 10]], [[1, -1]]])
def test_out_of_range_integer_ids_fail_under_the_default_jit_setting(ids):
    # XLA would drop the range check and gather a clamped row; "auto" keeps Embedding out of it.
    model = gf.Sequential([layers.Embedding(10, 3, name="tokens"), layers.Flatten(),
                           layers.Dense(1)])
    model.compile("adam", "mse")
    with pytest.raises(ValueError, match=r"^Embedding 'tokens' has input_dim=10, so its ids "
                                         r"must be in \[0, 10\)"):
        model.predict(np.array(ids, np.int32), verbose=0)
    assert model.compile_state is None or model.compile_state.jit_compile is not True


def test_jit_compile_true_refuses_an_embedding_by_name():
    model = gf.Sequential([layers.Embedding(10, 3, name="tokens"), layers.Flatten(),
                           layers.Dense(1)])
    model.compile("adam", "mse", jit_compile=True)
    with pytest.raises(ValueError, match="'tokens' \\(Embedding\\)"):
        model.fit(np.array([[1, 2]]), np.ones((1, 1)), verbose=0)

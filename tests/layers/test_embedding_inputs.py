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
                                         r"numbers.*\(rows 0 to 7 of x; row 0 fails it "
                                         r"alone: x\[0\] = \[[0-9., ]*\]\)\.$"):
        model.fit(x, np.ones((8, 1)), verbose=0)


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("ids", [[[1, 10]], [[1, -1]]])
def test_out_of_range_integer_ids_fail_with_and_without_xla(ids, jit_compile):
    # XLA drops a step's own range check and gathers a clamped row: the loops check every
    # batch before its step (`Layer.batch_checks`), so Embedding runs under XLA too.
    model = gf.Sequential([layers.Embedding(10, 3, name="tokens"), layers.Flatten(),
                           layers.Dense(1)])
    model.compile("sgd", "mse", jit_compile=jit_compile)
    message = r"^Embedding 'tokens' has input_dim=10, so its ids must be in \[0, 10\)"
    with pytest.raises(ValueError, match=message + r".*\(rows 0 to 0 of x\)\.$"):
        model.predict(np.array(ids, np.int32), verbose=0)
    good = np.array([[1, 2]] * 8, np.int32)
    model.fit(good, np.ones((8, 1)), verbose=0)
    assert model.jit_compile is jit_compile
    start = model.get_weights()
    dataset = tf.data.Dataset.from_tensor_slices(
        (np.concatenate([good, np.array(ids * 4, np.int32)]), np.ones((12, 1)))).batch(4)
    with pytest.raises(ValueError, match=message + r".*\(batch 2\)\.$"):
        model.fit(dataset, verbose=0)
    # The two good batches trained; the bad one never reached a variable.
    after_failure = model.get_weights()
    model.set_weights(start)
    model.fit(dataset.take(2), verbose=0)
    for failed, good_only in zip(after_failure, model.get_weights()):
        np.testing.assert_array_equal(failed, good_only)

"""Chunks of a batch for LM's Jacobian passes: real examples only, each counted once."""

import numpy as np
import pytest
import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import chunks as lm_chunks
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt import matrix_free as lm_matrix_free

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("examples, chunk, starts", [
    (7, 3, [0, 3, 4]),  # the last chunk overlaps the one before by two examples
    (6, 3, [0, 3]),     # a multiple of the chunk: no overlap
    (2, 5, [0]),        # smaller than a chunk: one chunk of the whole batch
])
def test_every_example_is_kept_once_and_chunks_hold_only_real_examples(examples, chunk, starts):
    chunks = lm_chunks.ExampleChunks({"x": tf.range(examples)}, tf.constant(examples), chunk)
    assert int(chunks.count) == len(starts)
    kept = []
    for i, start in enumerate(starts):
        part, keep = chunks.part(i)
        size = min(examples, chunk)
        assert part["x"].numpy().tolist() == list(range(start, start + size))
        kept += part["x"].numpy()[keep.numpy()].tolist()
    assert kept == list(range(examples))


def test_an_empty_batch_has_no_chunks():
    chunks = lm_chunks.ExampleChunks({"x": tf.zeros([0, 2])}, tf.constant(0), 4)
    assert int(chunks.count) == 0
    total = chunks.sum(lambda part, i: tf.constant(1.0), tf.constant(0.0))
    assert float(total) == 0.0


def test_a_layer_that_mixes_examples_sees_only_real_ones_in_the_last_chunk():
    # Rows (x_i − mean of the chunk's x) · θ, as batch normalization centres a batch: the
    # chunk's mean must come from its real examples (padding with zero examples moved it).
    x = tf.constant(RNG.normal(loc=3.0, size=(7, 2)))
    theta = tf.Variable(RNG.normal(size=2))

    def rows_for(part):
        centred = part["x"] - tf.reduce_mean(part["x"], axis=0)
        rows = tf.linalg.matvec(centred, theta)
        return rows, tf.stop_gradient(rows)

    # Chunks of 4: examples 0-3, then 3-6 with example 3 counted already.
    first = x[:4] - tf.reduce_mean(x[:4], axis=0)
    last = (x[3:] - tf.reduce_mean(x[3:], axis=0))[1:]
    c = np.concatenate([first, last])
    expected = c.T @ c
    for mode in ("reverse", "forward"):
        a, g, diag, _, under = lm_jacobian.normal_equations(
            rows_for, {"x": x}, tf.constant(7), 4, [theta], mode, tf.float64)
        np.testing.assert_allclose(a, expected, rtol=1e-12)
        np.testing.assert_allclose(g, c.T @ (c @ theta.numpy()), rtol=1e-12)
        assert not bool(under)
    products = lm_matrix_free.Products(rows_for, {"x": x}, tf.constant(7), 4, [theta])
    v = RNG.normal(size=2)
    np.testing.assert_allclose(products.gauss_newton(tf.constant(v)), expected @ v, rtol=1e-12)
    np.testing.assert_allclose(products.curvature(tf.constant(v)), v @ expected @ v, rtol=1e-12)

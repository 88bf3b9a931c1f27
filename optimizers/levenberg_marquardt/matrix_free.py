"""Matrix-free products of a batch's Jacobian, for the conjugate-gradient solver of LM.

The matrix-free solver (`solver="cg"`) never forms `J` or `JᵀJ`. It needs, over the rows of a
batch (`residuals.batch_rows`):

- `gauss_newton(v) = JᵀJ v`: per chunk of examples one forward pass carrying a tangent
  (`tf.autodiff.ForwardAccumulator`, the JVP `u = J v`) and one backward pass of the same rows
  with `u` as the output gradient (`GradientTape`, the VJP `Jᵀu`);
- `curvature(v) = ‖J v‖²`: one JVP pass, for the predicted reduction of an inexact step;
- `diag(JᵀJ)`: for Marquardt's damping matrix, the convergence tests and the preconditioner,
  either exactly (each chunk's Jacobian rows squared and summed: `jacobian.per_example_jacobian`
  or `jacobian.jacobian`, memory one chunk's Jacobian) or estimated from Rademacher probes
  (`E[(Jᵀv)²] = diag(JᵀJ)` for `v` of independent ±1 entries: one VJP per probe).

Every product is summed over chunks of examples in a `tf.while_loop`, as
`jacobian.normal_equations` does (`chunks.ExampleChunks`: every chunk of real examples, the
last one overlapping the one before with the repeated examples' rows zero), so memory is O(n)
plus one chunk's activations and tangents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import chunks as lm_chunks
from graphfit.optimizers.levenberg_marquardt import dense_forms
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt import residuals as lm_residuals
from graphfit.optimizers.levenberg_marquardt.forward_values import unvectorizable_layers

__all__ = ["Products", "MatrixFreeLinearization", "exact_diagonal", "linearize"]

_ZERO = tf.UnconnectedGradients.ZERO


def _flat64(parts) -> tf.Tensor:
    return tf.concat([tf.reshape(tf.cast(p, tf.float64), [-1]) for p in parts], 0)


class Products:
    """Products with the Jacobian `J` of a batch's residual rows, chunk by chunk.

    Args:
        rows_for: `rows_for(data_chunk) -> (rows, rho)` (`residuals.batch_rows`).
        data: the batch (a structure of tensors whose first axis is the example).
        num_examples: the batch size (a scalar tensor).
        chunk: the most examples per product pass (a Python int).
        variables: the trained variables (n scalars in all).

    Example:

        >>> import tensorflow as tf
        >>> w = tf.Variable([1.0, 2.0], dtype=tf.float64)
        >>> x = tf.constant([[1.0, 0.0], [1.0, 1.0], [0.0, 3.0]], tf.float64)
        >>> rows_for = lambda part: (tf.linalg.matvec(part["x"], w), tf.zeros([0], tf.float64))
        >>> products = Products(rows_for, {"x": x}, tf.constant(3), 2, [w])
        >>> products.gauss_newton(tf.constant([1.0, 0.0], tf.float64)).numpy().tolist()
        [2.0, 1.0]
        >>> float(products.curvature(tf.constant([0.0, 1.0], tf.float64)))
        10.0
    """

    def __init__(self, rows_for: Callable, data, num_examples, chunk: int,
                 variables: Sequence[tf.Variable]):
        self.chunks = lm_chunks.ExampleChunks(data, num_examples, chunk)
        # Takes a chunk's `(part, keep)`: the rows of an example an earlier chunk holds are 0.
        self.kept_rows_for = lm_chunks.kept_rows(rows_for)
        self.variables = list(variables)
        self.sizes = [int(np.prod(v.shape.as_list())) for v in self.variables]
        self.n = sum(self.sizes)

    def tangents(self, v: tf.Tensor) -> list[tf.Tensor]:
        """The flat vector `v` split into the variables' shapes and dtypes."""
        return [tf.cast(tf.reshape(p, var.shape), var.dtype)
                for p, var in zip(tf.split(v, self.sizes), self.variables)]

    def gauss_newton(self, v: tf.Tensor) -> tf.Tensor:
        """`JᵀJ v` (float64, flat): one JVP and one VJP pass over the batch.

        The two passes run one after the other, not nested: TensorFlow cannot trace a
        `ForwardAccumulator` inside a `GradientTape` through a `tf.cond` (a layer whose `call`
        branches on a tensor), which costs one more forward pass per product."""
        tangents = self.tangents(v)

        def chunk(part, _):
            with tf.autodiff.ForwardAccumulator(self.variables, tangents) as accumulator:
                rows, _ = self.kept_rows_for(part)
            jv = tf.stop_gradient(accumulator.jvp(rows, unconnected_gradients=_ZERO))
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(self.variables)
                rows, _ = self.kept_rows_for(part)
            parts = tape.gradient(rows, self.variables, output_gradients=jv,
                                  unconnected_gradients=_ZERO)
            return _flat64(parts)

        return self.chunks.sum(chunk, tf.zeros([self.n], tf.float64))

    def curvature(self, v: tf.Tensor) -> tf.Tensor:
        """`‖J v‖²` (float64 scalar): one JVP pass over the batch."""
        tangents = self.tangents(v)

        def chunk(part, _):
            with tf.autodiff.ForwardAccumulator(self.variables, tangents) as accumulator:
                rows, _ = self.kept_rows_for(part)
            jv = accumulator.jvp(rows, unconnected_gradients=_ZERO)
            return tf.reduce_sum(tf.square(tf.cast(jv, tf.float64)))

        return self.chunks.sum(chunk, tf.constant(0.0, tf.float64))

    def diagonal_probes(self, probes: int, seed: tf.Tensor) -> tf.Tensor:
        """`diag(JᵀJ)` estimated as the mean of `(Jᵀv)²` over `probes` Rademacher vectors
        `v` (±1 per row): one forward and `probes` backward passes over the batch. `seed`: an
        int tensor; the probes of a chunk depend on it and on the chunk's index."""
        def chunk(part, i):
            with tf.GradientTape(watch_accessed_variables=False, persistent=True) as tape:
                tape.watch(self.variables)
                rows, _ = self.kept_rows_for(part)
            total = tf.zeros([self.n], tf.float64)
            for k in range(probes):  # a handful: unrolled
                signs = tf.random.stateless_uniform(
                    tf.shape(rows), tf.stack([tf.cast(seed, tf.int64) * probes + k,
                                              tf.cast(i, tf.int64)]),
                    minval=0, maxval=2, dtype=tf.int32)
                v = tf.cast(2 * signs - 1, rows.dtype)
                parts = tape.gradient(rows, self.variables, output_gradients=v,
                                      unconnected_gradients=_ZERO)
                total += tf.square(_flat64(parts))
            del tape
            return total / probes

        return self.chunks.sum(chunk, tf.zeros([self.n], tf.float64))


def exact_diagonal(rows_for: Callable, data, num_examples, chunk: int,
                   variables: Sequence[tf.Variable], mode: str,
                   dense_layers: Sequence = ()) -> tf.Tensor:
    """`diag(JᵀJ)` exactly: each chunk's Jacobian (`jacobian.per_example_jacobian`, or
    `jacobian.jacobian` in "reverse" or "forward" mode) squared and summed over its rows, so
    memory is one chunk's Jacobian and never n²."""
    products = Products(rows_for, data, num_examples, chunk, variables)

    def part_diagonal(part, _):
        if mode == "per_example":
            c, _ = lm_jacobian.per_example_jacobian(products.kept_rows_for, part, variables,
                                                    dense_layers)
        else:
            c, _ = lm_jacobian.jacobian(lambda: products.kept_rows_for(part), variables, mode)
        return tf.reduce_sum(tf.square(tf.cast(c, tf.float64)), axis=0)

    return products.chunks.sum(part_diagonal, tf.zeros([products.n], tf.float64))


class MatrixFreeLinearization(NamedTuple):
    """What the matrix-free solver knows of a batch's linearization (float64 but `products`).

    Attributes:
        products: the batch's `Products`.
        b: `Jᵀr`, half the loss gradient.
        diag: `diag(JᵀJ)`, exact or estimated.
        under: always False (the n-dimensional system serves every m).
    """

    products: Products
    b: tf.Tensor
    diag: tf.Tensor
    under: tf.Tensor


def linearize(batch, variables: Sequence[tf.Variable], gradients: Sequence[tf.Tensor], y_pred0,
              mode: str, independent: bool, chunk_size: int | None, probes: int | None,
              seed) -> MatrixFreeLinearization:
    """The `MatrixFreeLinearization` of a training batch at the variables' current values.

    Args:
        batch: the training step's `StepBatch`.
        variables: the trained variables.
        gradients: the loss gradient, one tensor per variable.
        y_pred0: the model's output on the batch.
        mode: the optimizer's `jacobian_mode` (for the exact diagonal: `jacobian.choose_mode`).
        independent: whether the examples are independent (`examples_independent`).
        chunk_size: the user's `jacobian_chunk_size`: examples per chunk of every pass, or
            None: the whole batch per product pass, `jacobian.chunk_examples` for the exact
            diagonal.
        probes: None for the exact diagonal, else the number of Rademacher probes.
        seed: an int tensor that changes from step to step (the probes' seed).

    Returns:
        The `MatrixFreeLinearization`.
    """
    data, rows_for, per_example = lm_residuals.batch_rows(batch, y_pred0)
    num_examples = batch.num_examples
    n = sum(int(np.prod(v.shape.as_list())) for v in variables)
    b = 0.5 * _flat64(gradients)
    # The products hold a chunk's activations and one tangent per activation: the whole batch
    # (what a first-order step holds) unless the user chunks it.
    static = tf.get_static_value(num_examples)
    chunk = chunk_size or (int(static) if static is not None else 2**31 - 1)
    products = Products(rows_for, data, num_examples, max(chunk, 1), variables)
    if probes is None:
        jac_mode = lm_jacobian.choose_mode(mode, n, per_example, independent,
                                           unvectorizable_layers(batch.model))
        jac_chunk = lm_jacobian.chunk_examples(n, per_example, jac_mode, chunk_size)
        diag = exact_diagonal(rows_for, data, num_examples, jac_chunk, variables, jac_mode,
                              dense_forms.dense_layers(batch.model))
    else:
        diag = products.diagonal_probes(probes, seed)
    return MatrixFreeLinearization(products, b, diag, tf.constant(False))

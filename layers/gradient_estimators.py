"""Gradient estimators for functions TensorFlow cannot differentiate (BlackBox's backward).

Each estimator computes, per example, the vector-Jacobian product `J(x)^T g` of a function
`F: R^d -> R^m` at the example `x` with the gradient `g` arriving from downstream, using only
evaluations of F. All but "straight_through" share one form: directions `v_1..v_n` (per
example), symmetric differences `s_i = (F(x + sigma v_i) - F(x - sigma v_i)) / (2 sigma)`,
which approximate `J v_i` with an error O(sigma^2), and

    J^T g  ~  c * sum_i (g . s_i) v_i.

- "central": `v_i` = the d unit vectors, `c = 1`: exact up to O(sigma^2); 2d evaluations.
- "spsa" (simultaneous perturbation): `v_i` random signs (Rademacher), `c = 1/n`; since
  `E[v v^T] = I`, unbiased up to O(sigma^2) whatever d; 2 evaluations per sample.
- "antithetic" (Gaussian smoothing, evolution strategies with antithetic pairs): `v_i`
  standard normal, `c = 1/n`: the gradient of F smoothed by a Gaussian of width sigma;
  2 evaluations per sample.
- "straight_through": `J^T g = g`, as if F were the identity (quantisers); no evaluation.
- "surrogate": `J_s^T g` with `J_s` the Jacobian of a network fitted online to F; no
  evaluation beyond the forward pass (see `graphfit.layers.black_box_surrogate`; the layer
  computes it, not `vector_jacobian_product`).

The variance of the random estimators falls as 1/n: quadrupling `num_samples` halves the
error. Directions come from stateless random ops with a seed the caller draws from its own
`tf.random.Generator`, so they are reproducible and checkpointed with it.

Example:

    >>> import tensorflow as tf
    >>> from graphfit.layers import gradient_estimators
    >>> square = lambda points: points ** 2            # (n, batch, 3) -> (n, batch, 3)
    >>> x = tf.constant([[1.0, 2.0, 3.0]])
    >>> grad = gradient_estimators.vector_jacobian_product(
    ...     square, x, tf.ones_like(x), "central", num_samples=1, sigma=1e-2,
    ...     seed=tf.constant([0, 0], tf.int64))
    >>> [round(float(v), 3) for v in grad[0]]
    [2.0, 4.0, 6.0]
"""

from __future__ import annotations

import math
from typing import Callable

import tensorflow as tf

__all__ = ["ESTIMATORS", "evaluations", "vector_jacobian_product"]

ESTIMATORS = ("spsa", "central", "antithetic", "straight_through", "surrogate")


def evaluations(estimator: str, input_size: int, num_samples: int) -> int:
    """How many evaluations of F (on the whole batch) one gradient estimate takes."""
    if estimator in ("straight_through", "surrogate"):
        return 0
    return 2 * (input_size if estimator == "central" else num_samples)


def _directions(estimator: str, batch, size: int, num_samples: int, seed, dtype):
    """The directions `(n, batch, size)` and the weight `c` of the estimator."""
    if estimator == "central":
        eye = tf.eye(size, dtype=dtype)[:, None, :]
        return tf.tile(eye, tf.stack([1, batch, 1])), 1.0
    shape = tf.stack([num_samples, batch, size])
    if estimator == "spsa":
        bits = tf.random.stateless_uniform(shape, seed, minval=0, maxval=2, dtype=tf.int32)
        return tf.cast(2 * bits - 1, dtype), 1.0 / num_samples
    if estimator == "antithetic":
        return tf.random.stateless_normal(shape, seed, dtype=dtype), 1.0 / num_samples
    raise ValueError(f"Unknown estimator {estimator!r}; choose one of {ESTIMATORS}.")


def vector_jacobian_product(evaluate: Callable, x: tf.Tensor, upstream: tf.Tensor,
                            estimator: str, num_samples: int, sigma: float,
                            seed: tf.Tensor) -> tf.Tensor:
    """The estimate of `J(x)^T upstream`, per example, in the shape and dtype of `x`.

    Args:
        evaluate: F on a stack of batches, `(n, batch, *input_shape) -> (n, batch,
            *output_shape)`.
        x: the inputs `(batch, *input_shape)`, static `input_shape`.
        upstream: the gradient with respect to F's outputs, `(batch, *output_shape)`.
        estimator: one of `ESTIMATORS`.
        num_samples: the random directions per example ("spsa", "antithetic").
        sigma: the perturbation size.
        seed: a shape-[2] integer seed of the stateless random directions.
    """
    if estimator == "straight_through":
        return tf.reshape(tf.cast(upstream, x.dtype), tf.shape(x))
    batch = tf.shape(x)[0]
    size = math.prod(x.shape[1:])
    flat = tf.reshape(x, tf.stack([batch, size]))
    directions, weight = _directions(estimator, batch, size, num_samples, seed, x.dtype)
    step = tf.cast(sigma, x.dtype) * directions
    points = tf.concat([flat[None] + step, flat[None] - step], axis=0)
    count = tf.shape(directions)[0]
    values = evaluate(tf.reshape(points, tf.concat([[2 * count], tf.shape(x)], axis=0)))
    values = tf.reshape(values, tf.stack([2 * count, batch, -1]))
    slopes = (values[:count] - values[count:]) / tf.cast(2.0 * sigma, values.dtype)
    g = tf.reshape(tf.cast(upstream, values.dtype), tf.stack([batch, -1]))
    projections = tf.cast(tf.einsum("nbm,bm->nb", slopes, g), x.dtype)
    grad = tf.cast(weight, x.dtype) * tf.einsum("nb,nbd->bd", projections, directions)
    return tf.reshape(grad, tf.shape(x))

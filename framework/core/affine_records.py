"""Affine layers report their inputs and pre-activation outputs, for closed-form Jacobians.

A layer that computes `z = x · W + b` (`layers.Dense`) has a per-example Jacobian in closed
form: when example i's residual rows depend on the parameters only through that example's
`z_i`, `∂r_i/∂W = x_i ⊗ ∂r_i/∂z_i` and `∂r_i/∂b = ∂r_i/∂z_i`, and a single backward pass of
`Σ_i r_i` gives every `∂r_i/∂z_i` at once. Levenberg–Marquardt's Jacobian uses this
(`levenberg_marquardt.layerwise_jacobian`) in place of one differentiation per example
vectorized by pfor, which traces about ten times the ops.

Inside `recording()`, such a layer calls `record_affine` with what it computed; elsewhere
(`fit`'s own forward pass, `predict`) `record_affine` does nothing.

Example:

    >>> import tensorflow as tf
    >>> from graphfit import layers
    >>> from graphfit.core import affine_records
    >>> dense = layers.Dense(2)
    >>> with affine_records.recording() as records:
    ...     _ = dense(tf.ones((3, 4)))
    >>> [v.name.split("/")[-1] for v in records[0].variables], tuple(records[0].outputs.shape)
    (['kernel:0', 'bias:0'], (3, 2))
"""

from __future__ import annotations

import contextlib
from typing import Iterator, NamedTuple

import tensorflow as tf

from graphfit.core.context_stack import ContextStack

__all__ = ["AffineRecord", "recording", "record_affine"]


class AffineRecord(NamedTuple):
    """One call of an affine layer: `outputs = inputs · kernel (+ bias)`, contracted on the
    last axis.

    Attributes:
        variables: `(kernel,)` or `(kernel, bias)`: the variables themselves, each read
            once by the call.
        inputs: `x`, of shape `(batch, ..., features)`.
        outputs: `z`, of shape `(batch, ..., units)`, before any activation.
    """

    variables: tuple
    inputs: tf.Tensor
    outputs: tf.Tensor


_records: ContextStack[list] = ContextStack()


@contextlib.contextmanager
def recording() -> Iterator[list[AffineRecord]]:
    """Collects the `AffineRecord` of every affine layer called inside the block."""
    with _records.push([]) as records:
        yield records


def record_affine(kernel: tf.Variable, bias: tf.Variable | None, inputs: tf.Tensor,
                  outputs: tf.Tensor) -> None:
    """Reports one affine call to the innermost `recording()` block; a no-op outside one."""
    records = _records.top()
    if records is not None:
        variables = (kernel,) if bias is None else (kernel, bias)
        records.append(AffineRecord(variables, inputs, outputs))

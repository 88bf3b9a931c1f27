"""How Levenberg–Marquardt's Jacobians compute a model's `Dense` layers, from outside them.

A `Dense` layer computes `z = x · W + b` (`Dense.pre_activation`), then its activation. Two of
the per-example Jacobian's needs are met by replacing `pre_activation` on the model's own
`Dense` instances while the Jacobian's forward pass is traced (`core.interception`), so the
layer carries none of them:

- `recording`: every call reports its input `x` and its output `z`, the `AffineRecord` the
  closed-form Jacobian reads (`layerwise_jacobian`: `∂r_i/∂W = x_i ⊗ ∂r_i/∂z_i`).
- `single_example_forms`: for one example, as pfor vectorizes the per-example Jacobian
  (`jacobian.per_example_jacobian`), a broadcast product where the kernel is small: pfor
  turns a matmul's gradient into a batched matmul of one tiny matrix per example, whose
  per-matrix overhead dominates; the broadcast product vectorizes into elementwise ops
  (docs/guides/levenberg_marquardt.md has the measurements).

Only a `Dense` that multiplies by its variables themselves takes part (`dense_layers`): a
subclass that overrides `pre_activation` or `compute_value` (a transform of its kernel) keeps
its own computation, and the closed form then leaves the Jacobian to pfor.

Example:

    >>> import tensorflow as tf
    >>> from graphfit import layers
    >>> dense = layers.Dense(2)
    >>> with recording([dense]) as records:
    ...     _ = dense(tf.ones((3, 4)))
    >>> [v.name.split("/")[-1] for v in records[0].variables], tuple(records[0].outputs.shape)
    (['kernel:0', 'bias:0'], (3, 2))
"""

from __future__ import annotations

import contextlib
import functools
from typing import Iterator, NamedTuple

import tensorflow as tf

from graphfit.core import Layer
from graphfit.core.interception import replaced_method
from graphfit.layers import Dense

__all__ = ["AffineRecord", "dense_layers", "recording", "single_example_forms",
           "BROADCAST_KERNEL_LIMIT"]

# The largest kernel (entries) multiplied by broadcasting for a batch of one example; above it
# the batched matmul is the cheaper (docs/guides/levenberg_marquardt.md, "Jacobians, chunk by
# chunk").
BROADCAST_KERNEL_LIMIT = 64


class AffineRecord(NamedTuple):
    """One call of a `Dense`: `outputs = inputs · kernel (+ bias)`, on the last axis.

    Attributes:
        variables: `(kernel,)` or `(kernel, bias)`: the variables themselves.
        inputs: `x`, of shape `(batch, ..., features)`.
        outputs: `z`, of shape `(batch, ..., units)`, before the activation.
    """

    variables: tuple
    inputs: tf.Tensor
    outputs: tf.Tensor


def dense_layers(model) -> list:
    """The `Dense` layers of `model` (itself included) that compute `x · W + b` with their
    own variables: `Dense.pre_activation` and `Layer.compute_value` not overridden."""
    return [layer for layer in model.flatten_layers() if isinstance(layer, Dense)
            and type(layer).pre_activation is Dense.pre_activation
            and type(layer).compute_value is Layer.compute_value]


@contextlib.contextmanager
def _pre_activations_replaced(layers, wrap) -> Iterator[None]:
    """Inside the block, each layer's `pre_activation` is `wrap(layer, pre_activation)`."""
    with contextlib.ExitStack() as stack:
        for layer in layers:
            stack.enter_context(replaced_method(layer, "pre_activation",
                                                functools.partial(wrap, layer)))
        yield


@contextlib.contextmanager
def recording(layers) -> Iterator[list[AffineRecord]]:
    """Collects an `AffineRecord` of every call of `layers` inside the block."""
    records: list[AffineRecord] = []

    def record(layer, pre_activation):
        def recorded(inputs):
            outputs = pre_activation(inputs)
            variables = (layer.kernel,) if layer.bias is None else (layer.kernel, layer.bias)
            records.append(AffineRecord(variables, inputs, outputs))
            return outputs

        return recorded

    with _pre_activations_replaced(layers, record):
        yield records


def _broadcasting(layer, pre_activation):
    """`pre_activation` of one example by a small kernel, by broadcasting."""
    def computed(inputs):
        kernel = layer.compute_value(layer.kernel)
        if (inputs.shape.rank != 2 or inputs.shape[0] != 1
                or kernel.shape.num_elements() > BROADCAST_KERNEL_LIMIT):
            return pre_activation(inputs)
        outputs = tf.reduce_sum(inputs[:, :, None] * kernel, axis=1)
        if layer.bias is not None:
            outputs = outputs + layer.compute_value(layer.bias)
        return outputs

    return computed


def single_example_forms(layers):
    """Inside the block, `layers` multiply one example by a small kernel by broadcasting."""
    return _pre_activations_replaced(layers, _broadcasting)

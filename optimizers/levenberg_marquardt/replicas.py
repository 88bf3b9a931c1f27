"""Levenberg–Marquardt's first pass under a tf.distribute strategy.

Every replica runs the step's first forward pass, its gradient and the linearization of its
slice of the batch; the share-weighted sums (the loss, Jᵀr, JᵀJ and its diagonal) are the
global batch's, the same on every replica, and the trial loop then runs once for all of them
(`LevenbergMarquardt.steps_across_replicas`; docs/guides/levenberg_marquardt.md, "Under a
tf.distribute strategy").
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import update as lm_update
from graphfit.training import distribution

__all__ = ["first_pass_on_replicas"]


def first_pass_on_replicas(batch, variables, n: int, linearize_slice, converged):
    """Under a tf.distribute strategy (`batch.replicas`): every replica runs the first
    forward pass, its gradient and the linearization of its slice; the share-weighted
    sums (the loss, Jᵀr, JᵀJ and its diagonal) are the global batch's, the same on every
    replica.

    Args:
        batch: the step's `StepBatch`, with its `replicas`.
        variables: the trained variables (n scalars in all).
        n: the parameter count.
        linearize_slice: `(local_batch, gradients, y_pred) -> update.Linearization` of one
            replica's slice, in the overdetermined form.
        converged: the optimizer's bool variable: a converged step linearizes nothing.

    Returns:
        `(loss, ForwardPass, gradients, Linearization)`.
    """
    for layer in batch.model.flatten_layers():
        if getattr(layer, "synchronizes_replicas", False):
            raise ValueError(
                f"Layer {layer.name!r} synchronizes its batch statistics across replicas, "
                f"which LevenbergMarquardt cannot linearize under a tf.distribute strategy "
                f"(its Jacobian runs the model inside loops, where no all-reduce can run): "
                f"use synchronized=False, or train on one device.")

    def on_replica(local_batch, local_loss_fn):
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            loss, forward = local_loss_fn()
        gradients = tape.gradient(loss, variables,
                                  unconnected_gradients=tf.UnconnectedGradients.ZERO)

        def linearize():
            linear = linearize_slice(local_batch, gradients, forward.y_pred)
            return linear.matrix, linear.diag

        def skipped():  # the step is skipped: nothing to linearize
            return tf.zeros([n, n], tf.float64), tf.zeros([n], tf.float64)

        matrix, diag = tf.cond(converged, skipped, linearize)
        share = distribution.replica_share(tf.float64)
        parts = {"gradients": gradients, "matrix": matrix, "diag": diag}
        return loss, forward, tf.nest.map_structure(
            lambda v: distribution.weighted(v, share), parts)

    loss0, aux0, parts = batch.replicas.forward(on_replica)
    parts = batch.replicas.sum(parts)
    gradients = parts["gradients"]
    grad = tf.concat([tf.reshape(tf.cast(g, tf.float64), [-1]) for g in gradients], 0)
    linear = lm_update.Linearization(parts["matrix"], 0.5 * grad, tf.zeros([n], tf.float64),
                                     parts["diag"], tf.constant(False))
    return loss0, aux0, gradients, linear

"""A training step run in cross-replica context, for an optimizer that decides for all replicas.

The first-order engine (`graphfit.training.distribution`) runs the whole training step on
every replica. Levenberg–Marquardt cannot: its trial loop moves the variables and keeps or
undoes each move depending on the *global* loss, and under MirroredStrategy an all-reduce or
a mirrored assignment made by a replica inside a loop or a conditional is not possible (it
needs a `merge_call`). An optimizer that sets `steps_across_replicas = True` therefore gets
its `minimize` called once, in cross-replica context, with a `StepBatch` whose `replicas` is
a `Replicas`: it runs per-replica work on the replicas' slices of the global batch
(`Replicas.run`), adds up their share-weighted results (`sum`), and evaluates the global loss
(`combined_loss`, what its `loss_fn` does). Its decisions and assignments are then made once,
from global numbers, for every replica at once.

The share of a replica is its rows / the global batch's rows (`distribution.replica_share`);
a mean over the replica's rows times its share, summed over the replicas, is the mean over
the global batch. Sums of squares (‖r‖², JᵀJ, Jᵀr) of residuals scaled to a replica's mean
add up the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from graphfit.core import update_hooks
from graphfit.core.step_types import ForwardPass
from graphfit.training import distribution

__all__ = ["Replicas", "cross_replica_strategy"]


def cross_replica_strategy():
    """The strategy of a step running in cross-replica context under its scope, else None
    (one device, or inside a replica's function)."""
    strategy = distribution.current_strategy()
    if strategy is None or not tf.distribute.in_cross_replica_context():
        return None
    return strategy


class Replicas:
    """The replicas of a strategy and one global batch split among them.

    Args:
        strategy: the `tf.distribute` strategy (its scope open, cross-replica context).
        data: the global batch, (x,), (x, y) or (x, y, sample_weight).
        local_step: `local_step(local_data) -> (StepBatch, loss_fn)`: the replica's batch and
            its training loss function (`loss_fn() -> (loss, ForwardPass)`, the loss a mean
            over the replica's rows).
    """

    def __init__(self, strategy, data, local_step: Callable):
        self.strategy = strategy
        self._slices = distribution.split_batch(strategy, data)  # once for every trial
        self._local_step = local_step

    def run(self, fn: Callable):
        """`fn(local_batch, local_loss_fn)` on every replica, on its slice; per-replica values.

        Inside `fn`, `distribution.replica_share` is the replica's share of the rows. `fn` may
        all-reduce at its top level, but not inside a `tf.cond` or loop body.
        """
        return distribution.run_on_slices(
            self.strategy, self._slices, lambda local_data: fn(*self._local_step(local_data)))

    def sum(self, per_replica):
        """The sum over the replicas of each tensor in `per_replica`."""
        return tf.nest.map_structure(
            lambda v: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None),
            per_replica)

    def first(self, per_replica):
        """The first replica's values (for values every replica holds the same)."""
        return tf.nest.map_structure(
            lambda v: self.strategy.experimental_local_results(v)[0], per_replica)

    def concat(self, per_replica):
        """The replicas' values concatenated in batch order (outputs)."""
        return distribution.gather_outputs(self.strategy, per_replica)

    def forward(self, fn: Callable):
        """`fn(local_batch, local_loss_fn) -> (loss, ForwardPass, extra)` on every replica,
        combined: `(global loss, global ForwardPass, per-replica extra)`.

        The loss, output losses and added losses are share-weighted and summed (the global
        means), the outputs concatenated, and the update hooks' values combined over the
        replicas (`update_hooks.reduce_over_replicas`), so each holds its global value.
        """
        hooks = []  # filled while tracing: the update hooks of the forward pass

        def on_replica(local_batch, local_loss_fn):
            loss, forward, extra = fn(local_batch, local_loss_fn)
            share = distribution.replica_share(tf.float64)
            updates = update_hooks.reduce_over_replicas(forward.updates, share)
            hooks[:] = [update.hook for update in updates]
            weigh = lambda v: distribution.weighted(v, share)  # noqa: E731
            return ({"loss": weigh(loss), "y_pred": forward.y_pred,
                     "output_losses": {k: weigh(v) for k, v in forward.output_losses.items()},
                     "added_losses": {k: weigh(v) for k, v in forward.added_losses.items()},
                     "updates": [update.value for update in updates]}, extra)

        combined, extra = self.run(on_replica)
        y_pred = combined["y_pred"]
        updates = [update_hooks.PendingUpdate(hook, value)
                   for hook, value in zip(hooks, self.first(combined["updates"]))]
        forward = ForwardPass(None if y_pred is None else self.concat(y_pred),
                              self.sum(combined["output_losses"]), updates,
                              added_losses=self.sum(combined["added_losses"]))
        return self.sum(combined["loss"]), forward, extra

    def combined_loss(self):
        """The training loss of the global batch: `(loss, ForwardPass)` as one device's
        `loss_fn` returns them (see `forward`)."""
        loss, forward, _ = self.forward(
            lambda local_batch, local_loss_fn: (*local_loss_fn(), ()))
        return loss, forward

"""`LayerUpdates`: how a layer declares state changes that gradients do not make.

The methods here are part of `Layer`'s public surface (`add_update`, `add_moving_average`,
`add_update_over_replicas`); they hand an `update_hooks.UpdateHook` to the collector of the
running training step (see `graphfit.core.update_hooks` for the timing and for how values
combine over the replicas of a `tf.distribute` strategy).
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.core import update_hooks
from graphfit.core.autograph_scope import graphfit_api

__all__ = ["LayerUpdates"]


class LayerUpdates:
    """The update-hook methods of `Layer` (a mixin: it reads `name` and `_trainable`)."""

    @graphfit_api
    def add_update(self, variable: tf.Variable, value) -> None:
        """Declares `variable <- value`, applied once per training step after the optimizer.

        Inside `fit` the update is collected and applied after the optimizer's update, in the
        same compiled step. Called with no training step around it (eagerly, or in your own
        `tf.function`), it is applied immediately. A frozen layer registers nothing.
        """
        self._register(variable, value, update_hooks.ASSIGN, None)

    @graphfit_api
    def add_moving_average(self, variable: tf.Variable, value, momentum: float) -> None:
        """Declares `variable <- variable * momentum + value * (1 - momentum)`.

        Same timing as `add_update`: once per training step, after the optimizer's update.
        """
        self._register(variable, value, update_hooks.MOVING_AVERAGE, _momentum(momentum))

    @graphfit_api
    def add_update_over_replicas(self, variable: tf.Variable, value, *, momentum=None,
                                 sums=None, finish=None) -> None:
        """`add_update` (or `add_moving_average` with `momentum`), saying how `value`
        combines over the replicas of a `tf.distribute` strategy (one device: as computed):
        with `sums` (tensors summed over this replica's rows) and `finish` (global sums ->
        value, using tensors of the forward pass, not re-reading variables) the sums are
        added up over the replicas first; with neither, `value` is already equal on every
        replica (from statistics all-reduced in the forward pass). See `update_hooks`."""
        if (sums is None) != (finish is None):
            raise ValueError(f"Layer {self.name!r}: add_update_over_replicas needs both sums "
                             f"and finish, or neither (a value equal on every replica).")
        kind = update_hooks.ASSIGN if momentum is None else update_hooks.MOVING_AVERAGE
        self._register(variable, value, kind, None if momentum is None else _momentum(momentum),
                       sums=sums, finish=finish, replicated=sums is None)

    def _register(self, variable, value, kind, momentum, **replicas) -> None:
        if not isinstance(variable, tf.Variable):
            raise TypeError(
                f"Layer {self.name!r}: update hooks change a tf.Variable created with "
                f"add_weight(..., trainable=False). Received: {type(variable).__name__}"
            )
        if variable.trainable:
            raise ValueError(
                f"Layer {self.name!r}: variable {variable.name!r} is trainable, so the "
                f"optimizer owns it. Create it with add_weight(..., trainable=False) to "
                f"change it through an update hook."
            )
        if not self._trainable:
            return  # a frozen layer keeps its state
        hook = update_hooks.UpdateHook(self, variable, kind, momentum, **replicas)
        update_hooks.register_update(hook, value)


def _momentum(momentum) -> float:
    momentum = float(momentum)
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"momentum must be in [0, 1]. Received: momentum={momentum}")
    return momentum

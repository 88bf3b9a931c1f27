"""Update hooks: graphfit's UPDATE_OPS.

State that gradients do not train (batch-norm moving statistics, running means) changes through
update hooks. A layer declares the change inside `call` with `Layer.add_update` or
`Layer.add_moving_average`; the hook does not assign on the spot. The training step opens a
collector around its forward pass, then applies what was collected once, after the optimizer's
update, inside the same compiled step. Anything else that runs the model (several trial passes
of Levenberg–Marquardt, Jacobians, per-example gradients) collects into a collector it throws
away, so moving statistics move exactly once per training step.

With no collector open (a layer called eagerly with `training=True` outside `fit`, or inside a
user's own `tf.function`), the update is applied immediately, at the point of the call.

Example:

    >>> import tensorflow as tf
    >>> from graphfit import layers
    >>> from graphfit.core import update_hooks
    >>> bn = layers.BatchNormalization(momentum=0.5)
    >>> x = tf.constant([[2.0], [4.0]])
    >>> with update_hooks.collect_updates() as pending:
    ...     _ = bn(x, training=True)
    >>> [(p.hook.variable.name.split("/")[-1], p.hook.kind) for p in pending]
    [('moving_mean:0', 'moving_average'), ('moving_variance:0', 'moving_average')]
    >>> float(bn.moving_mean[0])  # collected, not applied
    0.0
    >>> update_hooks.apply_updates(pending)
    >>> float(bn.moving_mean[0])  # 0 * 0.5 + 3 * 0.5
    1.5
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

import tensorflow as tf

from graphfit.core.context_stack import ContextStack

__all__ = ["UpdateHook", "PendingUpdate", "collect_updates", "apply_updates", "register_update"]

ASSIGN = "assign"
MOVING_AVERAGE = "moving_average"


@dataclasses.dataclass(frozen=True, eq=False)
class UpdateHook:
    """One declared state change: which layer, which variable, and how.

    Attributes:
        layer: the layer that declared it.
        variable: the non-trainable variable it changes.
        kind: "assign" (variable <- value) or "moving_average"
            (variable <- variable * momentum + value * (1 - momentum)).
        momentum: the momentum of a moving average, None for "assign".
    """

    layer: object
    variable: tf.Variable
    kind: str
    momentum: float | None = None

    def __repr__(self) -> str:
        detail = f", momentum={self.momentum}" if self.momentum is not None else ""
        return (
            f"UpdateHook(layer={getattr(self.layer, 'name', self.layer)!r}, "
            f"variable={self.variable.name!r}, kind={self.kind!r}{detail})"
        )

    def new_value(self, value: tf.Tensor) -> tf.Tensor:
        """The variable's value after the hook runs with `value`."""
        value = tf.cast(value, self.variable.dtype)
        if self.kind == MOVING_AVERAGE:
            # The same expression as Keras, so moving statistics match it to the last bit.
            return self.variable * self.momentum + value * (1.0 - self.momentum)
        return value


@dataclasses.dataclass(frozen=True, eq=False)
class PendingUpdate:
    """A hook together with the value its forward pass computed."""

    hook: UpdateHook
    value: tf.Tensor


class _Collector:
    def __init__(self):
        self.pending: list[PendingUpdate] = []


_collectors: ContextStack[_Collector] = ContextStack()


@contextlib.contextmanager
def collect_updates() -> Iterator[list[PendingUpdate]]:
    """Collects the update hooks of the forward passes run inside the block.

    Yields the list that receives the `PendingUpdate`s; nothing is assigned. Pass it to
    `apply_updates` to run them, or drop it to discard them.
    """
    with _collectors.push(_Collector()) as collector:
        yield collector.pending


def apply_updates(pending: list[PendingUpdate], share=None) -> None:
    """Assigns every collected update, in the order the forward pass declared them.

    Args:
        pending: what `collect_updates` collected.
        share: inside a step run on several replicas of a `tf.distribute` strategy, this
            replica's rows / the global batch's rows (a scalar tensor). Each value is then
            replaced by the share-weighted sum over the replicas (one all-reduce): the mean
            over the global batch for a batch mean, and the same on every replica, which
            then assigns it once (the variables are mirrored). None: applied as computed.
    """
    values = [update.value for update in pending]
    context = tf.distribute.get_replica_context()
    if share is not None and pending and context is not None \
            and context.num_replicas_in_sync > 1:
        weighted = [tf.math.multiply_no_nan(tf.cast(v, u.hook.variable.dtype),
                                            tf.cast(share, u.hook.variable.dtype))
                    for u, v in zip(pending, values)]  # a replica with no rows adds 0
        values = context.all_reduce(tf.distribute.ReduceOp.SUM, weighted)
    for update, value in zip(pending, values):
        update.hook.variable.assign(update.hook.new_value(value))


def register_update(hook: UpdateHook, value) -> None:
    """Hands one update to the open collector, or applies it now when none is open."""
    collector = _collectors.top()
    if collector is None:
        hook.variable.assign(hook.new_value(value))
    else:
        collector.pending.append(PendingUpdate(hook, tf.convert_to_tensor(value)))

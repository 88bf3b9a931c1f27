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

**Under a `tf.distribute` strategy** each replica runs the forward pass on its slice of the
global batch, so each computes its own value; `reduce_over_replicas` (called by the step, in
replica context) combines them, so every replica assigns the same global value. How depends on
what the value is, which the layer declares:

- a mean over the batch's rows (`Layer.add_update`, `Layer.add_moving_average`): the
  share-weighted sum of the replicas' values (share = the replica's rows / the global rows),
  the global batch mean for a batch mean;
- a function of sums over the rows (`Layer.add_update_over_replicas` with `sums` and
  `finish`: per-class feature sums, counts, sums of squares): the `sums` are all-reduced as
  plain SUMS and `finish(global sums)` gives the value, so counts add up and a class seen by
  one replica only is not diluted. `finish` may use tensors computed in the forward pass (the
  variables' old values, read there), never read the variables again;
- a value already equal on every replica, computed from statistics all-reduced in the
  forward pass (`Layer.add_update_over_replicas` with neither: synchronized batch norm):
  kept as it is.

On one device (no strategy) the value computed in the forward pass is used as it is, whatever
the declaration, so the numbers do not depend on it.

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
from typing import Any, Callable, Iterator

import tensorflow as tf

from graphfit.core.context_stack import ContextStack

__all__ = ["UpdateHook", "PendingUpdate", "collect_updates", "apply_updates",
           "reduce_over_replicas", "register_update"]

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
        sums: None, or a structure of tensors that are sums over the replica's rows, from
            which `finish(sums)` computes the value; over replicas they are added up first.
        finish: with `sums`, the function from (global) sums to the value.
        replicated: the value is the same on every replica (computed from statistics
            all-reduced in the forward pass): not combined over replicas.
    """

    layer: object
    variable: tf.Variable
    kind: str
    momentum: float | None = None
    sums: Any = None
    finish: Callable | None = None
    replicated: bool = False

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


def apply_updates(pending: list[PendingUpdate], share=None, skip=None) -> None:
    """Assigns every collected update, in the order the forward pass declared them.

    Args:
        pending: what `collect_updates` collected.
        share: inside a step run on several replicas of a `tf.distribute` strategy, this
            replica's rows / the global batch's rows (a scalar tensor): the values are first
            combined over the replicas (`reduce_over_replicas`), so every replica assigns
            the same. None: applied as computed.
        skip: None, or a scalar bool tensor: where True (a step the optimizer skipped, see
            `ForwardPass.skip_updates`) every variable keeps its value, bit for bit. A
            select rather than a `tf.cond`: it runs unchanged in a replica context, where a
            cond around an assignment cannot synchronize the replicas.
    """
    for update in reduce_over_replicas(pending, share):
        variable = update.hook.variable
        new_value = update.hook.new_value(update.value)
        if skip is not None:
            new_value = tf.where(skip, tf.convert_to_tensor(variable), new_value)
        variable.assign(new_value)


def reduce_over_replicas(pending: list[PendingUpdate], share=None) -> list[PendingUpdate]:
    """The updates with each value combined over the replicas of the running step.

    Inside a step run on several replicas (`share` = this replica's rows / the global
    batch's rows, a scalar tensor), one all-reduce (SUM) combines them, by how each hook was
    declared (see the module docstring): a batch mean becomes the share-weighted sum of the
    replicas' values; a hook with `sums` gets `finish` of the summed sums; a `replicated`
    value stays. The returned hooks are `replicated` and carry no sums: every replica holds
    the same global value. With `share` None, or outside a replica context of more than one
    replica, the updates come back unchanged.
    """
    context = tf.distribute.get_replica_context()
    if share is None or not pending or context is None or context.num_replicas_in_sync == 1:
        return list(pending)
    outgoing, plans = _contributions(pending, share)
    reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, outgoing) if outgoing else []
    updates = []
    for update, plan in zip(pending, plans):
        hook, value = update.hook, update.value
        if plan is not None:
            value = _global_value(hook, [reduced[i] for i in plan])
        updates.append(PendingUpdate(dataclasses.replace(
            hook, sums=None, finish=None, replicated=True), value))
    return updates


def _contributions(pending: list[PendingUpdate], share) -> tuple[list, list]:
    """(what this replica adds to the all-reduce, for each update the positions of its
    terms there or None). A sums tensor shared by several hooks (one layer's per-class sums)
    is sent once."""
    outgoing, plans, slots = [], [], {}
    for update in pending:
        hook = update.hook
        if hook.replicated or (hook.sums is None and not hook.variable.dtype.is_floating):
            # Integer state (a Keras seed generator's counter) moves the same way on every
            # replica: not a mean to weigh.
            plans.append(None)
        elif hook.sums is None:
            dtype = hook.variable.dtype
            plans.append([len(outgoing)])
            # multiply_no_nan: a replica with no rows (a NaN mean) adds 0.
            outgoing.append(tf.math.multiply_no_nan(tf.cast(update.value, dtype),
                                                    tf.cast(share, dtype)))
        else:
            positions = []
            for tensor in map(tf.convert_to_tensor, tf.nest.flatten(hook.sums)):
                if id(tensor) not in slots:
                    slots[id(tensor)] = len(outgoing)
                    # Integer sums (counts) travel as float64: exact below 2**53, and every
                    # all-reduce implementation supports it.
                    outgoing.append(tf.cast(tensor, tf.float64) if tensor.dtype.is_integer
                                    else tensor)
                positions.append(slots[id(tensor)])
            plans.append(positions)
    return outgoing, plans


def _global_value(hook: UpdateHook, totals: list):
    """The hook's value from the all-reduced totals of its terms."""
    if hook.sums is None:
        return totals[0]
    originals = [tf.convert_to_tensor(t) for t in tf.nest.flatten(hook.sums)]
    summed = [tf.cast(t, o.dtype) for t, o in zip(totals, originals)]
    return hook.finish(tf.nest.pack_sequence_as(hook.sums, summed))


def register_update(hook: UpdateHook, value) -> None:
    """Hands one update to the open collector, or applies it now when none is open."""
    collector = _collectors.top()
    if collector is None:
        hook.variable.assign(hook.new_value(value))
    else:
        collector.pending.append(PendingUpdate(hook, tf.convert_to_tensor(value)))

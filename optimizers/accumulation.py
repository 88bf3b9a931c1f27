"""`GradientAccumulation`: Keras's `gradient_accumulation_steps`, inside the compiled step.

With `gradient_accumulation_steps=k` an optimizer updates the variables once every k calls of
`apply_gradients`, with the mean of the k gradients, exactly as Keras:

    call n (0-based, the optimizer's raw step counter):
        (n + 1) % k != 0:  accumulator <- accumulator + gradient       (nothing else moves)
        (n + 1) % k == 0:  gradient <- (gradient + accumulator) / k;  clipping, the
                           gradient transforms, weight decay and the update rule run on it;
                           accumulator <- 0

The counter advances at every call; `optimizer.iterations` is `counter // k`, the number of
updates (Adam's bias correction counts updates), while a learning-rate schedule is evaluated
at the raw counter (Keras: "schedules look at the real iterations"). The after-update hooks
(constraints, the moving average) run at every call, as Keras's do, except those marked
`update_steps_only` (Nadam's `u_product`), which run in the update branch only.

The branch is a `tf.cond` on the counter: one trace serves every call (XLA, and
`steps_per_execution` included). Inside a `tf.distribute` replica context a cond cannot
assign mirrored variables, so there the update runs at every call and every value it changed
is put back where the call only accumulates (a select; the same numbers).

Example:

    >>> import tensorflow as tf
    >>> from graphfit import optimizers
    >>> w = tf.Variable([0.0])
    >>> opt = optimizers.SGD(1.0, gradient_accumulation_steps=2)
    >>> _ = opt.apply_gradients([(tf.constant([1.0]), w)])  # accumulated only
    >>> float(w[0]), int(opt.iterations)
    (0.0, 0)
    >>> _ = opt.apply_gradients([(tf.constant([3.0]), w)])  # update with the mean, 2
    >>> float(w[0]), int(opt.iterations)
    (-2.0, 1)
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from graphfit.core import validation
from graphfit.optimizers.base import FIRST_REPLICA

__all__ = ["GradientAccumulation", "in_a_strategy_replica", "either"]


def in_a_strategy_replica() -> bool:
    """Whether the code runs in a `tf.distribute` replica context (even one replica: its
    variables assign through merge_call, which a cond branch forbids)."""
    return tf.distribute.has_strategy() and tf.distribute.get_replica_context() is not None


def either(condition, true_fn: Callable[[], None], false_fn: Callable[[], None],
           state: Sequence[tf.Variable]) -> None:
    """`tf.cond(condition, true_fn, false_fn)` for branches that only assign variables.

    In a strategy's replica context each branch runs, one after the other, and every
    variable of `state` is put back where the branch was not taken: both branches must
    change only variables in `state`.
    """
    if not in_a_strategy_replica():
        tf.cond(condition, true_fn, false_fn)
        return
    for branch, taken in ((true_fn, condition), (false_fn, tf.logical_not(condition))):
        before = [tf.identity(v) for v in state]
        branch()
        for variable, old in zip(state, before):
            variable.assign(tf.where(taken, tf.convert_to_tensor(variable), old))


class _Targets:
    """variable.ref() -> accumulator index; a plain object, not tracked by checkpoints."""

    def __init__(self):
        self.position: dict = {}


class GradientAccumulation(tf.Module):
    """The accumulators of `gradient_accumulation_steps=steps` (see the module docstring).

    Args:
        steps: an integer >= 2.

    Raises:
        ValueError: for anything else (Keras's message).

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import optimizers
        >>> w = tf.Variable([0.0])
        >>> opt = optimizers.SGD(0.5, gradient_accumulation_steps=3)
        >>> for g in (1.0, 2.0, 6.0):
        ...     _ = opt.apply_gradients([(tf.constant([g]), w)])
        >>> float(w[0]), int(opt.iterations)  # one update with the mean gradient, 3
        (-1.5, 1)
    """

    def __init__(self, steps: int):
        super().__init__(name="gradient_accumulation")
        if not validation.is_integer(steps) or steps < 2:
            raise ValueError("`gradient_accumulation_steps` must be an integer >= 2. "
                             f"Received: gradient_accumulation_steps={steps!r}")
        self.steps = int(steps)
        self.accumulators: list[tf.Variable] = []  # tracked: checkpoints save them
        self._targets = _Targets()

    def build(self, optimizer, variables: Sequence[tf.Variable]) -> None:
        """Creates a zero accumulator for each variable that has none (outside any trace)."""
        with tf.init_scope(), optimizer.name_scope:
            for variable in variables:
                if variable.ref() in self._targets.position:
                    continue
                base = variable.name.split(":")[0].replace("/", "_")
                self._targets.position[variable.ref()] = len(self.accumulators)
                self.accumulators.append(tf.Variable(
                    tf.zeros(variable.shape, variable.dtype), trainable=False,
                    name=f"{base}_gradient_accumulator", aggregation=FIRST_REPLICA))

    def is_update_step(self, counter: tf.Variable) -> tf.Tensor:
        """Whether the call with raw counter `counter` (before it advances) updates."""
        return tf.equal((counter + 1) % self.steps, 0)

    def apply(self, grads: Sequence[tf.Tensor], variables: Sequence[tf.Variable],
              counter: tf.Variable, update: Callable[[list], None],
              state: Sequence[tf.Variable]) -> None:
        """Accumulates `grads`, or calls `update(mean gradients)` and resets the
        accumulators; `state` lists every variable `update` may change."""
        accumulators = [self.accumulators[self._targets.position[v.ref()]] for v in variables]
        grads = [tf.cast(g, a.dtype) for g, a in zip(grads, accumulators)]

        def update_with_mean():
            update([(g + a) / self.steps for g, a in zip(grads, accumulators)])
            for accumulator in self.accumulators:
                accumulator.assign(tf.zeros_like(accumulator))

        def accumulate():
            for g, accumulator in zip(grads, accumulators):
                accumulator.assign(g + accumulator)

        state = list({id(v): v for v in [*state, *self.accumulators]}.values())
        either(self.is_update_step(counter), update_with_mean, accumulate, state)

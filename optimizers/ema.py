"""`ExponentialMovingAverage`: Keras's `use_ema`, an after-update hook of the optimizer.

With `use_ema=True` an optimizer keeps, for every variable it updates, an average of the
variable's values after each step (Polyak averaging), in Keras's words and numbers:

    momentum = 0 at the first update, else ema_momentum        (Keras: iterations == 0)
    average <- momentum * average + (1 - momentum) * variable   after every step
    variable <- average       every `ema_overwrite_frequency` updates, when it is set
    variable <- average       once `fit` ends (`finalize_variable_values`, called by the
                              `FinalizeVariableValues` callback the optimizer brings to fit)

The average is updated after every `apply_gradients` call, including the steps that only
accumulate a gradient (`gradient_accumulation_steps`); "first update" and the overwrite
period count updates (`iterations`), as in Keras. The hook runs before the variable
constraints, as Keras updates the average before it projects the variables.

The averages are optimizer variables (zeros until the first step, as in Keras), so training
checkpoints save them; `SwapEMAWeights` puts them into the model for evaluation. Whether they
are swapped in is a variable too (not in `optimizer.variables`): a checkpoint written while
they are (`swap_on_epoch=True`) restores into the same state, so a resumed fit swaps back.

Example:

    >>> import tensorflow as tf
    >>> from graphfit import optimizers
    >>> w = tf.Variable([1.0])
    >>> opt = optimizers.SGD(0.5, use_ema=True, ema_momentum=0.5)
    >>> for _ in range(2):
    ...     _ = opt.apply_gradients([(tf.constant([1.0]), w)])
    >>> float(w[0]), float(opt.moving_average.average_of(w)[0])  # 0.5 then 0.5*0.5 + 0.5*0
    (0.0, 0.25)
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from graphfit.core import validation
from graphfit.optimizers.after_update import AfterUpdate
from graphfit.optimizers.base import FIRST_REPLICA

__all__ = ["ExponentialMovingAverage"]


class _Targets:
    """The model variables that have an average, and where: a plain object, so the
    optimizer's checkpoint does not track the model's variables a second time."""

    def __init__(self):
        self.variables: list[tf.Variable] = []
        self.position: dict = {}


class ExponentialMovingAverage(AfterUpdate, tf.Module):
    """The moving average of the weights that `use_ema=True` keeps (see the module docstring).

    Args:
        momentum: `ema_momentum`, in [0, 1].
        overwrite_frequency: `ema_overwrite_frequency`: None, or an integer >= 1 (overwrite
            the variables with their average every so many updates).

    Raises:
        ValueError: for a momentum outside [0, 1] or a bad frequency (Keras's messages).

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import optimizers
        >>> w = tf.Variable([2.0])
        >>> opt = optimizers.SGD(1.0, use_ema=True, ema_momentum=0.5)
        >>> _ = opt.apply_gradients([(tf.constant([1.0]), w)])  # w: 1, average: 1
        >>> _ = opt.apply_gradients([(tf.constant([1.0]), w)])  # w: 0, average: 0.5
        >>> opt.moving_average.finalize([w])
        True
        >>> float(w[0])
        0.5
    """

    def __init__(self, momentum: float = 0.99, overwrite_frequency: int | None = None):
        tf.Module.__init__(self, name="moving_average")
        if not validation.is_real(momentum) or not 0 <= momentum <= 1:
            raise ValueError("`ema_momentum` must be in the range [0, 1]. "
                             f"Received: ema_momentum={momentum!r}")
        if overwrite_frequency is not None and (
                not validation.is_integer(overwrite_frequency) or overwrite_frequency < 1):
            raise ValueError("`ema_overwrite_frequency` must be an integer >= 1 or None. "
                             f"Received: ema_overwrite_frequency={overwrite_frequency!r}")
        self.momentum = float(momentum)
        self.overwrite_frequency = (None if overwrite_frequency is None
                                    else int(overwrite_frequency))
        self.averages: list[tf.Variable] = []  # tracked: checkpoints save them
        self._targets = _Targets()
        with tf.init_scope():
            # A variable, so a checkpoint written while the averages are swapped in (after
            # `SwapEMAWeights(swap_on_epoch=True)`'s epoch end) records it and a resumed fit
            # swaps back as the uninterrupted one does. Not in `optimizer.variables` (Keras
            # has no such variable there).
            self._swapped = tf.Variable(False, trainable=False, name="averages_swapped",
                                        aggregation=FIRST_REPLICA)

    @property
    def swapped(self) -> bool:
        """Whether the model holds the averages now (`swap`), and the averages its values.
        Read and set eagerly (callbacks); checkpoints keep it."""
        return bool(self._swapped.numpy())

    @swapped.setter
    def swapped(self, value: bool) -> None:
        self._swapped.assign(bool(value))

    def build(self, optimizer, variables: Sequence[tf.Variable]) -> None:
        """Creates a zero average for each variable that has none (outside any trace)."""
        with tf.init_scope(), optimizer.name_scope:
            for variable in variables:
                if variable.ref() in self._targets.position:
                    continue
                base = variable.name.split(":")[0].replace("/", "_")
                average = tf.Variable(tf.zeros(variable.shape, variable.dtype), trainable=False,
                                      name=f"{base}_average", aggregation=FIRST_REPLICA)
                self._targets.position[variable.ref()] = len(self.averages)
                self._targets.variables.append(variable)
                self.averages.append(average)

    def average_of(self, variable: tf.Variable) -> tf.Variable:
        """The average of `variable`.

        Raises:
            ValueError: when the optimizer has not updated (built for) `variable`.
        """
        position = self._targets.position.get(variable.ref())
        if position is None:
            raise ValueError(f"The optimizer keeps no moving average of {variable.name!r}: "
                             "it has not been built for it (train it first).")
        return self.averages[position]

    def __call__(self, variables: Sequence[tf.Variable], step: tf.Tensor) -> None:
        """Updates the averages of `variables` after the update of step `step` (1-based, in
        updates), then overwrites the variables when the period is due."""
        not_first = tf.not_equal(step, 1)
        for variable in variables:
            average = self.average_of(variable)
            # Keras's operations, in its order.
            momentum = tf.cast(not_first, variable.dtype) * self.momentum
            average.assign(momentum * average + (1 - momentum) * tf.convert_to_tensor(variable))
        if self.overwrite_frequency:
            due = tf.equal(step % self.overwrite_frequency, 0)
            for variable in variables:  # a select, not a cond: it runs in any replica context
                variable.assign(tf.where(due, tf.convert_to_tensor(self.average_of(variable)),
                                         tf.convert_to_tensor(variable)))

    def pairs(self, var_list=None) -> list[tuple[tf.Variable, tf.Variable]]:
        """(variable, average) for `var_list` (default: every variable with an average);
        variables without an average are left out."""
        if var_list is None:
            var_list = self._targets.variables
        return [(v, self.averages[self._targets.position[v.ref()]]) for v in var_list
                if v.ref() in self._targets.position]

    def finalize(self, var_list=None) -> bool:
        """Puts the averages into the variables, for good (Keras's `finalize_variable_values`).

        When the model holds the averages already (swapped in by `SwapEMAWeights`), they stay
        and the averages take the model's values, as Keras's callback leaves them after the
        last epoch. Returns whether any variable has an average.
        """
        pairs = self.pairs(var_list)
        for variable, average in pairs:
            if self.swapped:
                average.assign(variable)
            else:
                variable.assign(average)
        self.swapped = False
        return bool(pairs)

    def swap(self) -> None:
        """Exchanges the values of the variables and of their averages (exactly: through a
        copy, not Keras's add-and-subtract) and flips `swapped`."""
        for variable, average in self.pairs():
            value = tf.identity(variable)
            variable.assign(average)
            average.assign(value)
        self.swapped = not self.swapped

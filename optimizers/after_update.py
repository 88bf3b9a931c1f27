"""After-update hooks: what a first-order optimizer does to the variables once it has updated
them, inside the same compiled step.

`Optimizer.apply_gradients` applies the update rule to every variable, then runs its
after-update hooks, in order, on the variables it updated. A hook may create state in
`build(optimizer, variables)`, which the optimizer's `build` calls with the variables that
have no slots yet, as it creates theirs (outside any trace; tracked with
`optimizer.track_variable` or made with `optimizer.add_variable`, so checkpoints keep it),
and assigns in `__call__(variables, step)`. Under `gradient_accumulation_steps` a hook runs at
every call unless it sets `update_steps_only` (then only on the calls that update).
Variable constraints (`ApplyConstraints`, always first: Keras projects after the update) are
one; an exponential moving average of the weights is another (docs/guides/architecture.md
sketches it).

Example:

    >>> import tensorflow as tf
    >>> from graphfit import optimizers
    >>> w = tf.Variable([0.5, -0.5], constraint=lambda v: tf.maximum(v, 0.0))
    >>> _ = optimizers.SGD(1.0).apply_gradients([(tf.constant([1.0, 1.0]), w)])
    >>> w.numpy().tolist()  # [-0.5, -1.5] after the update, projected onto v >= 0
    [0.0, 0.0]
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from graphfit.core import autograph_scope
from graphfit.core.variables import constraint_of

__all__ = ["AfterUpdate", "ApplyConstraints"]


class AfterUpdate:
    """Base class of after-update hooks.

    With `gradient_accumulation_steps`, a hook runs at every `apply_gradients` call, also the
    calls that only accumulate (Keras runs its constraints and moving average there too),
    unless it sets `update_steps_only = True`: then it runs only on the calls that update the
    variables, as Keras's `update_step` and optimizer-level state (Nadam's `u_product`) do.
    """

    #: Run only on the calls that update the variables (not those that only accumulate).
    update_steps_only: bool = False

    def build(self, optimizer, variables: Sequence[tf.Variable]) -> None:
        """Creates the hook's state for `variables` (those new to the optimizer), outside any
        trace; none by default."""
        del optimizer, variables

    def __call__(self, variables: Sequence[tf.Variable], step: tf.Tensor) -> None:
        """Runs after the update of `variables`; `step` is the 1-based step number."""
        raise NotImplementedError(f"{type(self).__name__} must implement __call__.")


class ApplyConstraints(AfterUpdate):
    """Projects each variable that has a constraint (`tf.Variable(..., constraint=fn)`, or one
    attached with `graphfit.core.variables.attach_constraint`, as a wrapped Keras layer's
    weights have) with it: `v <- constraint(v)`, as Keras applies constraints after the
    update."""

    def __call__(self, variables: Sequence[tf.Variable], step: tf.Tensor) -> None:
        del step
        for variable in variables:
            constraint = constraint_of(variable)
            if constraint is not None:
                variable.assign(autograph_scope.convert_user_code(constraint)(
                    tf.convert_to_tensor(variable)))

"""`SGD`: gradient descent with optional (Nesterov) momentum, numerically as Keras."""

from __future__ import annotations

from typing import Any

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["SGD"]


@OPTIMIZERS.register
class SGD(Optimizer):
    """Stochastic gradient descent, with momentum and Nesterov momentum (Keras's rule).

    Update rule for a variable `w` with gradient `g` and learning rate `lr`:

        momentum == 0:   w <- w - g * lr
        momentum > 0:    m <- m * momentum - g * lr
                         w <- w + m                           (nesterov=False)
                         w <- w + (m * momentum - g * lr)     (nesterov=True, new m)

    The velocity `m` is the slot `"momentum"`, one per variable, created once by `build`
    outside any trace (none when `momentum == 0`, as in Keras). A compiled training step only
    reads and assigns it, so each execution continues from the velocity the previous one left.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`. Defaults to 0.01.
        momentum: in [0, 1]; 0 is plain gradient descent. Defaults to 0.0.
        nesterov: whether to use Nesterov momentum. Defaults to False.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: if `momentum` is outside [0, 1] or `nesterov` is not a bool, or for a bad
            base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import SGD
        >>> w = tf.Variable([1.0])
        >>> opt = SGD(learning_rate=0.1, momentum=0.9)
        >>> for _ in range(2):
        ...     _ = opt.minimize(lambda: (0.5 * tf.reduce_sum(w * w), None), [w])
        >>> [round(float(w[0]), 4), round(float(opt.get_slot(w, "momentum")[0]), 4)]
        [0.72, -0.18]
    """

    slot_names = ("momentum",)

    def __init__(
        self,
        learning_rate=0.01,
        momentum: float = 0.0,
        nesterov: bool = False,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        validation.number_in_range("momentum", momentum, 0, 1)
        if not isinstance(nesterov, bool):
            raise validation.invalid("nesterov", nesterov, "a bool")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.momentum = float(momentum)
        self.nesterov = nesterov
        if self.momentum == 0:
            self.slot_names = ()  # Keras keeps no velocity for plain SGD

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's SGD update, written with the same operations in the same order."""
        del step
        if not self.slot_names:
            return variable_value - gradient * learning_rate, {}
        momentum = cast_hyperparameter(self.momentum, variable_value.dtype)
        m = slots["momentum"] * momentum - gradient * learning_rate
        if self.nesterov:
            new_value = variable_value + (m * momentum - gradient * learning_rate)
        else:
            new_value = variable_value + m
        return new_value, {"momentum": m}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "momentum": self.momentum, "nesterov": self.nesterov}


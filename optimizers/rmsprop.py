"""`RMSprop`: gradients scaled by a running RMS, with momentum and centering, as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["RMSprop"]


@OPTIMIZERS.register
class RMSprop(Optimizer):
    """RMSprop (Hinton's lecture 6e), with momentum and the centered variant, as Keras's.

    Update rule for a variable `w` with gradient `g` and learning rate `lr`:

        v <- rho * v + (1 - rho) * g^2
        a <- rho * a + (1 - rho) * g                 (centered=True)
        d <- v - a^2 + epsilon   (centered)   or   v + epsilon
        increment <- lr * g / sqrt(d)
        m <- momentum * m + increment; w <- w - m    (momentum > 0)
        w <- w - increment                           (momentum == 0)

    The slots are `"velocity"` (v), `"momentum"` (m, only when `momentum > 0`) and
    `"average_gradient"` (a, only when centered), Keras's names and order.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        rho: decay rate of the running averages, in [0, 1]. Defaults to 0.9.
        momentum: in [0, 1]; 0 keeps no momentum slot. Defaults to 0.0.
        epsilon: added inside the square root, >= 0. Defaults to 1e-7.
        centered: divide by the running variance instead of the second moment.
            Defaults to False.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for `rho` or `momentum` outside [0, 1], a negative epsilon, a non-bool
            `centered`, or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import RMSprop
        >>> w = tf.Variable([1.0])
        >>> opt = RMSprop(learning_rate=0.01, momentum=0.9, centered=True)
        >>> _ = opt.minimize(lambda: (tf.reduce_sum(w * w), None), [w])
        >>> [round(float(w[0]), 4), opt.slot_names]
        [0.9667, ('velocity', 'momentum', 'average_gradient')]
    """

    slot_names = ("velocity",)

    def __init__(
        self,
        learning_rate=0.001,
        rho: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-7,
        centered: bool = False,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        rho = validation.number_in_range("rho", rho, 0, 1)
        momentum = validation.number_in_range("momentum", momentum, 0, 1)
        if not validation.is_real(epsilon) or epsilon < 0:
            raise validation.invalid("epsilon", epsilon, "a float >= 0")
        if not isinstance(centered, bool):
            raise validation.invalid("centered", centered, "a bool")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.rho = rho
        self.momentum = momentum
        self.epsilon = float(epsilon)
        self.centered = centered
        self.slot_names = ("velocity",) + (("momentum",) if momentum > 0 else ()) + (
            ("average_gradient",) if centered else ())

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's RMSprop update, written with the same operations in the same order."""
        del step
        dtype = variable_value.dtype
        rho = cast_hyperparameter(self.rho, dtype)
        one_minus_rho = cast_hyperparameter(1 - self.rho, dtype)
        epsilon = cast_hyperparameter(self.epsilon, dtype)
        velocity = rho * slots["velocity"] + one_minus_rho * tf.square(gradient)
        new_slots = {"velocity": velocity}
        if self.centered:
            average = rho * slots["average_gradient"] + one_minus_rho * gradient
            new_slots["average_gradient"] = average
            denominator = velocity - tf.square(average) + epsilon
        else:
            denominator = velocity + epsilon
        increment = (learning_rate * gradient) / tf.sqrt(denominator)
        if self.momentum > 0:
            momentum = (cast_hyperparameter(self.momentum, dtype) * slots["momentum"]
                        + increment)
            new_slots["momentum"] = momentum
            return variable_value - momentum, new_slots
        return variable_value - increment, new_slots

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "rho": self.rho, "momentum": self.momentum,
                "epsilon": self.epsilon, "centered": self.centered}

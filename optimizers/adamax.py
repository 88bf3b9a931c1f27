"""`Adamax`: Adam with the infinity norm in place of the second moment, as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Adamax"]


@OPTIMIZERS.register
class Adamax(Optimizer):
    """Adamax (Kingma & Ba, 2014, §7.1), as `keras.optimizers.Adamax`.

    Update rule for a variable `w` with gradient `g`, learning rate `lr` and 1-based step `t`:

        m <- m + (g - m) * (1 - beta_1)
        u <- max(beta_2 * u, |g|)
        w <- w - lr * m / ((1 - beta_1^t) * (u + epsilon))

    `m` and `u` are the slots `"momentum"` and `"norm"`.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        beta_1: decay rate of the first moment, in [0, 1). Defaults to 0.9.
        beta_2: decay rate of the infinity norm, in [0, 1]. Defaults to 0.999.
        epsilon: added to the norm, >= 0. Defaults to 1e-7.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for a beta out of range, a negative `epsilon`, or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Adamax
        >>> w = tf.Variable([1.0, -1.0])
        >>> opt = Adamax(learning_rate=0.1)
        >>> _ = opt.apply_gradients([(tf.constant([2.0, -0.5]), w)])  # first step: lr * sign
        >>> [round(float(x), 4) for x in w]
        [0.9, -0.9]
    """

    slot_names = ("momentum", "norm")

    def __init__(
        self,
        learning_rate=0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        beta_1 = validation.number_in_range("beta_1", beta_1, 0, 1, include_high=False)
        beta_2 = validation.number_in_range("beta_2", beta_2, 0, 1)
        if not validation.is_real(epsilon) or epsilon < 0:
            raise validation.invalid("epsilon", epsilon, "a float >= 0")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = float(epsilon)

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Adamax update, written with the same operations in the same order."""
        dtype = variable_value.dtype
        beta_1_power = tf.pow(cast_hyperparameter(self.beta_1, dtype), step)
        m = slots["momentum"]
        m = m + (gradient - m) * cast_hyperparameter(1 - self.beta_1, dtype)
        u = tf.maximum(cast_hyperparameter(self.beta_2, dtype) * slots["norm"], tf.abs(gradient))
        epsilon = cast_hyperparameter(self.epsilon, dtype)
        new_value = variable_value - (learning_rate * m) / ((1 - beta_1_power) * (u + epsilon))
        return new_value, {"momentum": m, "norm": u}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}

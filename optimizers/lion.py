"""`Lion`: sign of an interpolated momentum (Chen et al., 2023), as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Lion"]


@OPTIMIZERS.register
class Lion(Optimizer):
    """Lion, EvoLved Sign Momentum (Chen et al., 2023), as `keras.optimizers.Lion`.

    Update rule for a variable `w` with gradient `g` and learning rate `lr`:

        w <- w - lr * sign(beta_1 * m + (1 - beta_1) * g)
        m <- beta_2 * m + (1 - beta_2) * g

    `m` is the slot `"momentum"`. Every coordinate moves by exactly `lr` (or 0), so Lion
    wants a learning rate 3-10x smaller than AdamW's, and a larger weight decay.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        beta_1: the interpolation of the update, in (0, 1] (0 degenerates to signSGD,
            which Keras refuses too). Defaults to 0.9.
        beta_2: decay rate of the momentum, in [0, 1]. Defaults to 0.99.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for a beta out of range, or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Lion
        >>> w = tf.Variable([1.0, 1.0, 1.0])
        >>> opt = Lion(learning_rate=0.1)
        >>> _ = opt.apply_gradients([(tf.constant([3.0, -0.01, 0.0]), w)])
        >>> [round(float(x), 4) for x in w]  # each moves by lr against the sign, or not at all
        [0.9, 1.1, 1.0]
    """

    slot_names = ("momentum",)

    def __init__(
        self,
        learning_rate=0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.99,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        beta_1 = validation.number_in_range("beta_1", beta_1, 0, 1, include_low=False)
        beta_2 = validation.number_in_range("beta_2", beta_2, 0, 1)
        super().__init__(learning_rate, name=name, **base_arguments)
        self.beta_1 = beta_1
        self.beta_2 = beta_2

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Lion update, written with the same operations in the same order."""
        del step
        dtype = variable_value.dtype
        beta_1 = cast_hyperparameter(self.beta_1, dtype)
        beta_2 = cast_hyperparameter(self.beta_2, dtype)
        m = slots["momentum"]
        new_value = variable_value - learning_rate * tf.sign(
            m * beta_1 + gradient * (1.0 - beta_1))
        m = m * beta_2 + gradient * (1.0 - beta_2)
        return new_value, {"momentum": m}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2}

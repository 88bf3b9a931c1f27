"""`Adagrad`: per-coordinate step sizes from the sum of squared gradients, as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Adagrad"]


@OPTIMIZERS.register
class Adagrad(Optimizer):
    """Adagrad (Duchi et al., 2011), as `keras.optimizers.Adagrad`.

    Update rule for a variable `w` with gradient `g` and learning rate `lr`:

        acc <- acc + g^2
        w   <- w - lr * g / sqrt(acc + epsilon)

    `acc` is the slot `"accumulator"`, which starts at `initial_accumulator_value`.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        initial_accumulator_value: the accumulator's starting value, >= 0. Defaults to 0.1.
        epsilon: added inside the square root, >= 0. Defaults to 1e-7.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for a negative `initial_accumulator_value` or `epsilon`, or a bad base
            argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Adagrad
        >>> w = tf.Variable([1.0])
        >>> opt = Adagrad(learning_rate=0.1, initial_accumulator_value=0.0, epsilon=0.0)
        >>> _ = opt.apply_gradients([(tf.constant([3.0]), w)])  # 1 - 0.1 * 3 / sqrt(9)
        >>> [round(float(w[0]), 4), float(opt.get_slot(w, "accumulator")[0])]
        [0.9, 9.0]
    """

    slot_names = ("accumulator",)

    def __init__(
        self,
        learning_rate=0.001,
        initial_accumulator_value: float = 0.1,
        epsilon: float = 1e-7,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        if not validation.is_real(initial_accumulator_value) or initial_accumulator_value < 0:
            raise validation.invalid("initial_accumulator_value", initial_accumulator_value,
                                     "a float >= 0")
        if not validation.is_real(epsilon) or epsilon < 0:
            raise validation.invalid("epsilon", epsilon, "a float >= 0")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.epsilon = float(epsilon)

    def slot_initial_value(self, slot_name: str, variable: tf.Variable) -> tf.Tensor:
        """The accumulator starts at `initial_accumulator_value`."""
        del slot_name
        return tf.fill(variable.shape, cast_hyperparameter(self.initial_accumulator_value,
                                                           variable.dtype))

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Adagrad update, written with the same operations in the same order."""
        del step
        epsilon = cast_hyperparameter(self.epsilon, variable_value.dtype)
        accumulator = slots["accumulator"] + tf.square(gradient)
        new_value = variable_value - (learning_rate * gradient) / tf.sqrt(accumulator + epsilon)
        return new_value, {"accumulator": accumulator}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(),
                "initial_accumulator_value": self.initial_accumulator_value,
                "epsilon": self.epsilon}

"""`Adadelta`: step sizes from running averages of gradients and updates, as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Adadelta"]


@OPTIMIZERS.register
class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012), as `keras.optimizers.Adadelta`.

    Update rule for a variable `w` with gradient `g` and learning rate `lr`, where
    `rms(x) = sqrt(x + epsilon)`:

        G <- rho * G + (1 - rho) * g^2
        d <- -(rms(D) * g) / rms(G)
        D <- rho * D + (1 - rho) * d^2
        w <- w + lr * d

    `G` and `D` are the slots `"accumulated_grad"` and `"accumulated_delta_var"`. As in Keras
    the learning rate scales the step (the paper has none: `learning_rate=1.0`).

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        rho: decay rate of the running averages, in [0, 1]. Defaults to 0.95.
        epsilon: added inside the square roots, >= 0. Defaults to 1e-7.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for `rho` outside [0, 1], a negative `epsilon`, or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Adadelta
        >>> w = tf.Variable([1.0])
        >>> opt = Adadelta(learning_rate=1.0, rho=0.5, epsilon=0.01)
        >>> _ = opt.apply_gradients([(tf.constant([1.0]), w)])  # d = -0.1 / sqrt(0.51)
        >>> round(float(w[0]), 4)
        0.86
    """

    slot_names = ("accumulated_grad", "accumulated_delta_var")

    def __init__(
        self,
        learning_rate=0.001,
        rho: float = 0.95,
        epsilon: float = 1e-7,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        rho = validation.number_in_range("rho", rho, 0, 1)
        if not validation.is_real(epsilon) or epsilon < 0:
            raise validation.invalid("epsilon", epsilon, "a float >= 0")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.rho = rho
        self.epsilon = float(epsilon)

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Adadelta update, written with the same operations in the same order."""
        del step
        dtype = variable_value.dtype
        rho = cast_hyperparameter(self.rho, dtype)
        one_minus_rho = cast_hyperparameter(1 - self.rho, dtype)
        epsilon = cast_hyperparameter(self.epsilon, dtype)

        def rms(x):
            return tf.sqrt(x + epsilon)

        accumulated_grad = rho * slots["accumulated_grad"] + one_minus_rho * tf.square(gradient)
        delta = -((rms(slots["accumulated_delta_var"]) * gradient) / rms(accumulated_grad))
        accumulated_delta = (rho * slots["accumulated_delta_var"]
                             + one_minus_rho * tf.square(delta))
        return variable_value + learning_rate * delta, {
            "accumulated_grad": accumulated_grad, "accumulated_delta_var": accumulated_delta}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "rho": self.rho, "epsilon": self.epsilon}

"""`ScheduleFreeAdamW`: schedule-free AdamW, numerically as `keras.optimizers.ScheduleFreeAdamW`."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.core.variables import as_tf_variable
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["ScheduleFreeAdamW"]


@OPTIMIZERS.register
class ScheduleFreeAdamW(Optimizer):
    """Schedule-free AdamW (Defazio et al., 2024), as `keras.optimizers.ScheduleFreeAdamW`.

    Three sequences: `z`, where the gradient steps land (the slot `"momentum"`, initialised
    to the variable's value when the optimizer builds, as in Keras); `x`, their running
    average (not stored: it is recovered from the other two); and `y`, the interpolation the
    model holds and the gradient is taken at (the variable itself). With `t` the 1-based
    step, `lr` warmed up linearly over `warmup_steps`:

        v   <- v + (g^2 - v) * (1 - beta_2)                      (the slot "velocity")
        z   <- z - lr * g / (sqrt(v / (1 - beta_2^t)) + epsilon)
        x   <- (y - (1 - beta_1) * z) / beta_1                   (the new z, see below)
        x   <- (1 - 1/t) * x + (1/t) * z
        y   <- (1 - beta_1) * z + beta_1 * x

    Keras's source means to recover `x` with the *previous* `z` (`momentum_old`) but reads
    the variable after assigning it, so it uses the new `z`; this class does what Keras
    computes, so the numbers match (the step then is not exactly the paper's).

    Evaluation: Keras 3.15.1 swaps nothing: `evaluate`, `predict` and the weights after `fit`
    are `y`, the variable's value. graphfit does the same. The paper's evaluation point `x`
    is available as `optimizer.averaged_value(variable)` (a graphfit extra) for whoever
    wants to evaluate there.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.0025.
        beta_1: the interpolation between `z` and `x`, in (0, 1). Defaults to 0.9.
        beta_2: decay rate of the second moment, in [0, 1). Defaults to 0.999.
        epsilon: added to the denominator, >= 0. Defaults to 1e-8.
        warmup_steps: steps over which the learning rate grows linearly from `lr / steps`
            to `lr`; 0 for none. Defaults to 0.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for an argument outside the ranges above or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import ScheduleFreeAdamW
        >>> w = tf.Variable([1.0, 2.0])
        >>> opt = ScheduleFreeAdamW(learning_rate=0.5)
        >>> _ = opt.apply_gradients([(tf.constant([1.0, -3.0]), w)])
        >>> [round(float(x), 4) for x in w]
        [0.5, 2.5]
        >>> [round(float(x), 4) for x in opt.averaged_value(w)]  # x = z after one step
        [0.5, 2.5]
    """

    slot_names = ("momentum", "velocity")

    def __init__(
        self,
        learning_rate=0.0025,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-8,
        warmup_steps: int = 0,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        beta_1 = validation.number_in_range("beta_1", beta_1, 0, 1, include_low=False,
                                            include_high=False)
        beta_2 = validation.number_in_range("beta_2", beta_2, 0, 1, include_high=False)
        epsilon = validation.finite_number("epsilon", epsilon, minimum=0)
        warmup_steps = validation.non_negative_int("warmup_steps", warmup_steps)
        super().__init__(learning_rate, name=name, **base_arguments)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.warmup_steps = warmup_steps

    def slot_initial_value(self, slot_name: str, variable: tf.Variable) -> tf.Tensor:
        """`momentum` (z) starts at the variable's value, `velocity` at zeros."""
        if slot_name == "momentum":
            return tf.identity(tf.convert_to_tensor(variable))
        return tf.zeros(variable.shape, dtype=variable.dtype)

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's update, written with the same operations in the same order."""
        dtype = variable_value.dtype
        lr = learning_rate
        beta_1 = cast_hyperparameter(self.beta_1, dtype)
        beta_2 = cast_hyperparameter(self.beta_2, dtype)
        epsilon = cast_hyperparameter(self.epsilon, dtype)
        if self.warmup_steps > 0:
            warmup_steps = cast_hyperparameter(self.warmup_steps, dtype)
            lr = lr * tf.minimum(step / warmup_steps, cast_hyperparameter(1.0, dtype))
        bias_correction_2 = 1 - tf.pow(beta_2, step)
        velocity = slots["velocity"]
        velocity = velocity + (tf.square(gradient) - velocity) * (1 - beta_2)
        denom = tf.sqrt(velocity / bias_correction_2) + epsilon
        momentum = slots["momentum"] - (lr * gradient) / denom
        weight = 1.0 / step
        x_old = (variable_value - (1 - beta_1) * momentum) / beta_1
        x_new = (1 - weight) * x_old + weight * momentum
        y_new = (1 - beta_1) * momentum + beta_1 * x_new
        return y_new, {"momentum": momentum, "velocity": velocity}

    def averaged_value(self, variable) -> tf.Tensor:
        """The averaged point `x = (y - (1 - beta_1) * z) / beta_1` of `variable` (its
        schedule-free evaluation point; Keras evaluates at `y`, the variable's value)."""
        variable = as_tf_variable(variable)
        y = tf.convert_to_tensor(variable)
        beta_1 = cast_hyperparameter(self.beta_1, variable.dtype)
        z = tf.convert_to_tensor(self.get_slot(variable, "momentum"))
        return (y - (1 - beta_1) * z) / beta_1

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "warmup_steps": self.warmup_steps,
        }

"""`Ftrl`: Follow The Regularized Leader, with L1, L2 and shrinkage, as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Ftrl"]

_NON_NEGATIVE = ("initial_accumulator_value", "l1_regularization_strength",
                 "l2_regularization_strength", "l2_shrinkage_regularization_strength", "beta")


@OPTIMIZERS.register
class Ftrl(Optimizer):
    """FTRL-Proximal (McMahan et al., 2013), as `keras.optimizers.Ftrl`.

    Update rule for a variable `w` with gradient `g` and learning rate `lr`, with
    `p = -learning_rate_power`, `l1`, `l2`, `l2_shrinkage` the regularization strengths:

        l2'    = l2 + beta / (2 * lr)
        n_new  = n + g^2
        z     <- z + (g + 2 * l2_shrinkage * w) - (n_new^p - n^p) / lr * w
        w     <- (clip(z, -l1, l1) - z) / (n_new^p / lr + 2 * l2')
        n     <- n_new

    `n` and `z` are the slots `"accumulator"` (starting at `initial_accumulator_value`) and
    `"linear"`. With `l1 > 0` coordinates whose `|z| <= l1` are exactly zero: a sparse model.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        learning_rate_power: how the step shrinks with the accumulator, <= 0; -0.5 is
            FTRL's 1/sqrt(n). Defaults to -0.5.
        initial_accumulator_value: the accumulator's starting value, >= 0. Defaults to 0.1.
        l1_regularization_strength: >= 0. Defaults to 0.0.
        l2_regularization_strength: >= 0 (stabilisation, not a loss term). Defaults to 0.0.
        l2_shrinkage_regularization_strength: >= 0; an L2 penalty added to the gradient
            (a magnitude penalty). Defaults to 0.0.
        beta: >= 0; the paper's beta, added to l2 as `beta / (2 * lr)`. Defaults to 0.0.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for a positive `learning_rate_power`, a negative strength, accumulator
            value or beta, or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Ftrl
        >>> w = tf.Variable([1.0, 1.0])
        >>> opt = Ftrl(learning_rate=0.1, l1_regularization_strength=0.5)
        >>> _ = opt.apply_gradients([(tf.constant([0.1, 2.0]), w)])
        >>> [round(float(x), 4) for x in w]  # the first coordinate's |z| <= l1: exactly zero
        [0.0, 0.7204]
    """

    slot_names = ("accumulator", "linear")

    def __init__(
        self,
        learning_rate=0.001,
        learning_rate_power: float = -0.5,
        initial_accumulator_value: float = 0.1,
        l1_regularization_strength: float = 0.0,
        l2_regularization_strength: float = 0.0,
        l2_shrinkage_regularization_strength: float = 0.0,
        beta: float = 0.0,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        if not validation.is_real(learning_rate_power) or learning_rate_power > 0:
            raise validation.invalid("learning_rate_power", learning_rate_power,
                                     "a float <= 0 (-0.5 is FTRL's 1/sqrt(n))")
        values = dict(zip(_NON_NEGATIVE, (initial_accumulator_value, l1_regularization_strength,
                                          l2_regularization_strength,
                                          l2_shrinkage_regularization_strength, beta)))
        for key, value in values.items():
            if not validation.is_real(value) or value < 0:
                raise validation.invalid(key, value, "a float >= 0")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.learning_rate_power = float(learning_rate_power)
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.l1_regularization_strength = float(l1_regularization_strength)
        self.l2_regularization_strength = float(l2_regularization_strength)
        self.l2_shrinkage_regularization_strength = float(l2_shrinkage_regularization_strength)
        self.beta = float(beta)

    def slot_initial_value(self, slot_name: str, variable: tf.Variable) -> tf.Tensor:
        """The accumulator starts at `initial_accumulator_value`, the linear term at zero."""
        if slot_name != "accumulator":
            return super().slot_initial_value(slot_name, variable)
        return tf.fill(variable.shape, cast_hyperparameter(self.initial_accumulator_value,
                                                           variable.dtype))

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Ftrl update, written with the same operations in the same order."""
        del step
        dtype = variable_value.dtype

        def constant(value):
            return cast_hyperparameter(value, dtype)

        power = constant(-self.learning_rate_power)
        l2_reg = constant(self.l2_regularization_strength) + constant(self.beta) / (
            constant(2.0) * learning_rate)
        grad_to_use = gradient + constant(2 * self.l2_shrinkage_regularization_strength) * (
            variable_value)
        accumulator = slots["accumulator"]
        new_accumulator = accumulator + tf.square(gradient)
        linear = slots["linear"] + (grad_to_use - (
            (tf.pow(new_accumulator, power) - tf.pow(accumulator, power)) / learning_rate
        ) * variable_value)
        quadratic = tf.pow(new_accumulator, power) / learning_rate + constant(2.0) * l2_reg
        l1 = constant(self.l1_regularization_strength)
        linear_clipped = tf.clip_by_value(linear, -l1, l1)
        new_value = (linear_clipped - linear) / quadratic
        return new_value, {"accumulator": new_accumulator, "linear": linear}

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "learning_rate_power": self.learning_rate_power,
            "initial_accumulator_value": self.initial_accumulator_value,
            "l1_regularization_strength": self.l1_regularization_strength,
            "l2_regularization_strength": self.l2_regularization_strength,
            "l2_shrinkage_regularization_strength": self.l2_shrinkage_regularization_strength,
            "beta": self.beta,
        }

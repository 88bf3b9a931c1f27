"""`Lamb`: Adam's direction scaled by a per-variable trust ratio (You et al., 2019), as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Lamb"]


@OPTIMIZERS.register
class Lamb(Optimizer):
    """LAMB, layer-wise adaptive moments (You et al., 2019), as `keras.optimizers.Lamb`.

    Update rule for a variable `w` with gradient `g`, learning rate `lr` and 1-based step `t`:

        m <- m + (g - m) * (1 - beta_1)
        v <- v + (g^2 - v) * (1 - beta_2)
        r <- (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon)
        ratio <- ||w|| / ||r||   (1 when either norm is 0)
        w <- w - ratio * lr * r

    `m` and `v` are the slots `"momentum"` and `"velocity"`; the norms are over the whole
    variable (one trust ratio per variable, as in Keras). Weight decay, when set, is Keras's
    decoupled decay before the update (the paper folds it into `r`).

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        beta_1: decay rate of the first moment, in [0, 1). Defaults to 0.9.
        beta_2: decay rate of the second moment, in [0, 1). Defaults to 0.999.
        epsilon: added to the root of the second moment, >= 0. Defaults to 1e-7.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for a beta outside [0, 1), a negative `epsilon`, or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Lamb
        >>> w = tf.Variable([3.0, 4.0])
        >>> opt = Lamb(learning_rate=0.1)
        >>> _ = opt.apply_gradients([(tf.constant([1.0, 1.0]), w)])  # r ~ (1, 1), ratio 5/sqrt(2)
        >>> [round(float(x), 4) for x in w]
        [2.6464, 3.6464]
    """

    slot_names = ("momentum", "velocity")

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
        beta_2 = validation.number_in_range("beta_2", beta_2, 0, 1, include_high=False)
        if not validation.is_real(epsilon) or epsilon < 0:
            raise validation.invalid("epsilon", epsilon, "a float >= 0")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = float(epsilon)

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Lamb update, written with the same operations in the same order."""
        dtype = variable_value.dtype
        beta_1_power = tf.pow(cast_hyperparameter(self.beta_1, dtype), step)
        beta_2_power = tf.pow(cast_hyperparameter(self.beta_2, dtype), step)
        m = slots["momentum"]
        m = m + (gradient - m) * cast_hyperparameter(1 - self.beta_1, dtype)
        v = slots["velocity"]
        v = v + (tf.square(gradient) - v) * cast_hyperparameter(1 - self.beta_2, dtype)
        m_t_hat = m / (1.0 - beta_1_power)
        v_sqrt = tf.sqrt(v / (1.0 - beta_2_power)) + cast_hyperparameter(self.epsilon, dtype)
        update = m_t_hat / v_sqrt
        two = cast_hyperparameter(2, dtype)
        w_norm = tf.sqrt(tf.reduce_sum(tf.pow(variable_value, two)))
        g_norm = tf.sqrt(tf.reduce_sum(tf.pow(update, two)))
        one = cast_hyperparameter(1.0, dtype)
        ratio = tf.where(w_norm > 0, tf.where(g_norm > 0, w_norm / g_norm, one), one)
        return variable_value - ratio * learning_rate * update, {"momentum": m, "velocity": v}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}

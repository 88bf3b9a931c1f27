"""`Adam` (and AMSGrad): adaptive moment estimation, numerically as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Adam"]


@OPTIMIZERS.register
class Adam(Optimizer):
    """Adam (Kingma & Ba, 2014), with the AMSGrad variant, as `keras.optimizers.Adam`.

    Update rule for a variable `w` with gradient `g`, learning rate `lr` and 1-based step `t`
    (the bias correction is folded into the step size, as in Keras and the paper's §2):

        alpha <- lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
        m     <- m + (g - m) * (1 - beta_1)
        v     <- v + (g^2 - v) * (1 - beta_2)
        v_hat <- max(v_hat, v)                     (amsgrad=True; v_hat replaces v below)
        w     <- w - m * alpha / (sqrt(v) + epsilon)

    `m` and `v` are the slots `"momentum"` and `"velocity"` (plus `"velocity_hat"` with
    AMSGrad), created once per variable by `build` outside any trace. A compiled step only
    reads and assigns them, so the moments carry from one execution to the next.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        beta_1: decay rate of the first moment, in [0, 1). Defaults to 0.9.
        beta_2: decay rate of the second moment, in [0, 1). Defaults to 0.999.
        epsilon: "epsilon hat" added to sqrt(v) for stability, >= 0. Defaults to 1e-7.
        amsgrad: whether to use AMSGrad (Reddi et al., 2018). Defaults to False.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for a beta outside [0, 1), a negative epsilon, a non-bool amsgrad, or a
            bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Adam
        >>> w = tf.Variable([1.0, -1.0])
        >>> opt = Adam(learning_rate=0.1)
        >>> _ = opt.minimize(lambda: (tf.reduce_sum(w * w), None), [w])
        >>> [round(float(x), 4) for x in w]  # the first step moves each weight by ~lr
        [0.9, -0.9]
    """

    slot_names = ("momentum", "velocity")

    def __init__(
        self,
        learning_rate=0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        beta_1 = validation.number_in_range("beta_1", beta_1, 0, 1, include_high=False)
        beta_2 = validation.number_in_range("beta_2", beta_2, 0, 1, include_high=False)
        if not validation.is_real(epsilon) or epsilon < 0:
            raise validation.invalid("epsilon", epsilon, "a float >= 0")
        if not isinstance(amsgrad, bool):
            raise validation.invalid("amsgrad", amsgrad, "a bool")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = float(epsilon)
        self.amsgrad = amsgrad
        if amsgrad:
            self.slot_names = ("momentum", "velocity", "velocity_hat")

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Adam update, written with the same operations in the same order."""
        dtype = variable_value.dtype
        beta_1_power = tf.pow(cast_hyperparameter(self.beta_1, dtype), step)
        beta_2_power = tf.pow(cast_hyperparameter(self.beta_2, dtype), step)
        alpha = learning_rate * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        # (1 - beta) is formed in Python first, as in Keras, then rounded once to dtype.
        m = slots["momentum"]
        m = m + (gradient - m) * cast_hyperparameter(1 - self.beta_1, dtype)
        v = slots["velocity"]
        v = v + (tf.square(gradient) - v) * cast_hyperparameter(1 - self.beta_2, dtype)
        new_slots = {"momentum": m, "velocity": v}
        if self.amsgrad:
            v = tf.maximum(slots["velocity_hat"], v)
            new_slots["velocity_hat"] = v
        epsilon = cast_hyperparameter(self.epsilon, dtype)
        new_value = variable_value - (m * alpha) / (tf.sqrt(v) + epsilon)
        return new_value, new_slots

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "amsgrad": self.amsgrad,
        }

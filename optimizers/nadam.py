"""`Nadam`: Adam with Nesterov momentum (Dozat, 2016), numerically as Keras."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.after_update import AfterUpdate
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Nadam"]


def _next_u_product(u_product: tf.Tensor, beta_1: float, step: tf.Tensor) -> tf.Tensor:
    """Keras's `u_product * beta_1 * (1 - 0.5 * 0.96^t)`, in `u_product`'s dtype."""
    dtype = u_product.dtype
    decay = tf.pow(cast_hyperparameter(0.96, dtype), tf.cast(step, dtype))
    return u_product * cast_hyperparameter(beta_1, dtype) * (1.0 - 0.5 * decay)


class _UProduct(AfterUpdate):
    """Nadam's optimizer-level product of the momentum schedule, one scalar for all
    variables: created with the first variables' dtype (Keras), advanced once per step after
    the variables' updates, which read the value it is about to take. Under
    `gradient_accumulation_steps` it advances on update steps only, as Keras's."""

    update_steps_only = True

    def __init__(self, beta_1: float):
        self.beta_1 = beta_1
        self.variable: tf.Variable | None = None

    def build(self, optimizer, variables) -> None:
        if self.variable is None and variables:
            self.variable = optimizer.add_variable("u_product", 1.0, dtype=variables[0].dtype)

    def value_at(self, step: tf.Tensor) -> tf.Tensor:
        """The product including step `step` (the value after this step's update)."""
        return _next_u_product(tf.convert_to_tensor(self.variable), self.beta_1, step)

    def __call__(self, variables, step) -> None:
        del variables
        self.variable.assign(self.value_at(step))


@OPTIMIZERS.register
class Nadam(Optimizer):
    """Nadam: Adam with Nesterov momentum (Dozat, 2016), as `keras.optimizers.Nadam`.

    With gradient `g`, learning rate `lr`, 1-based step `t` and the momentum schedule
    `u_t = beta_1 * (1 - 0.5 * 0.96^t)`, whose running product `P_t = u_1 * ... * u_t` is
    kept once for the whole optimizer (the variable `u_product`, as in Keras):

        m <- m + (g - m) * (1 - beta_1)
        v <- v + (g^2 - v) * (1 - beta_2)
        m_hat <- u_{t+1} * m / (1 - P_t * u_{t+1}) + (1 - u_t) * g / (1 - P_t)
        v_hat <- v / (1 - beta_2^t)
        w <- w - m_hat * lr / (sqrt(v_hat) + epsilon)

    `m` and `v` are the slots `"momentum"` and `"velocity"`. `u_product` lives in the
    optimizer's `variables` (so checkpoints keep it), created with the first variables'
    dtype and advanced once per step by an after-update hook.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        beta_1: decay rate of the first moment, in [0, 1). Defaults to 0.9.
        beta_2: decay rate of the second moment, in [0, 1). Defaults to 0.999.
        epsilon: added to sqrt(v_hat), >= 0. Defaults to 1e-7.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for a beta outside [0, 1), a negative `epsilon`, or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Nadam
        >>> w = tf.Variable([1.0])
        >>> opt = Nadam(learning_rate=0.1)
        >>> for _ in range(2):
        ...     _ = opt.minimize(lambda: (tf.reduce_sum(w * w), None), [w])
        >>> [round(float(w[0]), 4), len(opt.variables)]  # iterations, rate, 2 slots, u_product
        [0.8202, 5]
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
        self._u_product = _UProduct(beta_1)
        self.after_update.append(self._u_product)

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Nadam update, written with the same operations in the same order."""
        dtype = variable_value.dtype
        decay = cast_hyperparameter(0.96, dtype)
        beta_1 = cast_hyperparameter(self.beta_1, dtype)
        beta_2 = cast_hyperparameter(self.beta_2, dtype)
        u_t = beta_1 * (1.0 - 0.5 * tf.pow(decay, step))
        u_t_1 = beta_1 * (1.0 - 0.5 * tf.pow(decay, step + 1))
        u_product_t = tf.cast(self._u_product.value_at(step), dtype)
        u_product_t_1 = u_product_t * u_t_1
        beta_2_power = tf.pow(beta_2, step)
        m = slots["momentum"]
        m = m + (gradient - m) * (1 - beta_1)
        v = slots["velocity"]
        v = v + (tf.square(gradient) - v) * (1 - beta_2)
        m_hat = (u_t_1 * m) / (1 - u_product_t_1) + ((1 - u_t) * gradient) / (1 - u_product_t)
        v_hat = v / (1 - beta_2_power)
        epsilon = cast_hyperparameter(self.epsilon, dtype)
        new_value = variable_value - (m_hat * learning_rate) / (tf.sqrt(v_hat) + epsilon)
        return new_value, {"momentum": m, "velocity": v}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}

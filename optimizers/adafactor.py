"""`Adafactor`: factored second moments, numerically as `keras.optimizers.Adafactor`."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter

__all__ = ["Adafactor"]


def _rms(x: tf.Tensor) -> tf.Tensor:
    return tf.sqrt(tf.reduce_mean(tf.square(x)))


@OPTIMIZERS.register
class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern, 2018), as `keras.optimizers.Adafactor` (Keras 3.15.1).

    For a variable `w` of rank >= 2 the second moment is kept factored over its last two
    axes: a row statistic `r` (shape `w.shape[:-1]`) and a column statistic `c` (shape
    `w.shape[:-2] + w.shape[-1:]`), so a `(n, m)` kernel keeps `n + m` numbers instead of
    `n * m` in them. With `t` the 1-based step and `g` the gradient:

        rho    <- min(lr, 1 / sqrt(t))
        alpha  <- max(epsilon_2, rms(w)) * rho
        g2     <- g^2 + epsilon_1
        beta   <- 1 - t ** beta_2_decay
        r      <- beta * r + (1 - beta) * mean(g2, axis=-1)          (rank >= 2)
        c      <- beta * c + (1 - beta) * mean(g2, axis=-2)          (rank >= 2)
        v      <- (r / mean(r, axis=-1))[..., None] * c[..., None, :]  (rank >= 2)
        v      <- beta * v + (1 - beta) * g2                         (rank < 2)
        u      <- g / sqrt(v)
        w      <- w - alpha * u / max(1, rms(u) / clip_threshold)

    Slots: `"r"` and `"c"` (shapes above; scalar placeholders for a variable of rank < 2, as
    Keras creates) and `"velocity"` (the variable's shape: the unfactored moment for rank < 2;
    for rank >= 2 Keras keeps the reconstructed `v` in a full-size variable too, and so does
    this class, so the state matches Keras's one for one).

    `relative_step=True` with a constant learning rate caps the rate at `1 / sqrt(t)`, as
    Keras does; since `rho` applies the same cap anyway, the flag changes no number (in Keras
    neither).

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        beta_2_decay: the exponent of the second-moment decay, `beta_t = 1 - t**beta_2_decay`;
            a float <= 0. Defaults to -0.8.
        epsilon_1: added to the squared gradient, >= 0. Defaults to 1e-30.
        epsilon_2: the smallest scale of a step relative to the variable, >= 0.
            Defaults to 1e-3.
        clip_threshold: the RMS above which the normalized update is scaled down, > 0.
            Defaults to 1.0.
        relative_step: cap a constant learning rate at `1 / sqrt(t)`. Defaults to True.
        weight_decay, clipnorm, clipvalue, global_clipnorm, gradient_transforms, name:
            see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for an argument outside the ranges above, a non-bool relative_step, or a
            bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Adafactor
        >>> w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
        >>> opt = Adafactor(learning_rate=0.5)
        >>> _ = opt.apply_gradients([(tf.constant([[1.0, 6.0], [7.0, 2.0]]), w)])
        >>> [[round(float(x), 4) for x in row] for row in w.numpy()]  # Keras's golden
        [[0.7007, -0.0081], [1.2492, 3.4407]]
        >>> opt.get_slot(w, "r").shape, opt.get_slot(w, "c").shape
        (TensorShape([2]), TensorShape([2]))
    """

    slot_names = ("r", "c", "velocity")

    def __init__(
        self,
        learning_rate=0.001,
        beta_2_decay: float = -0.8,
        epsilon_1: float = 1e-30,
        epsilon_2: float = 1e-3,
        clip_threshold: float = 1.0,
        relative_step: bool = True,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        if not validation.is_real(beta_2_decay) or beta_2_decay > 0:
            raise validation.invalid("beta_2_decay", beta_2_decay,
                                     "a float <= 0 (the second moment's decay exponent)")
        epsilon_1 = validation.finite_number("epsilon_1", epsilon_1, minimum=0)
        epsilon_2 = validation.finite_number("epsilon_2", epsilon_2, minimum=0)
        clip_threshold = validation.positive_float("clip_threshold", clip_threshold)
        if not isinstance(relative_step, bool):
            raise validation.invalid("relative_step", relative_step, "a bool")
        super().__init__(learning_rate, name=name, **base_arguments)
        self.beta_2_decay = float(beta_2_decay)
        self.epsilon_1 = epsilon_1
        self.epsilon_2 = epsilon_2
        self.clip_threshold = clip_threshold
        self.relative_step = relative_step

    def slot_initial_value(self, slot_name: str, variable: tf.Variable) -> tf.Tensor:
        """Zeros: `r` and `c` of the factored shapes (scalars below rank 2), `velocity` of the
        variable's shape."""
        shape = variable.shape
        if slot_name == "velocity":
            return tf.zeros(shape, dtype=variable.dtype)
        if shape.rank < 2:
            return tf.zeros((), dtype=variable.dtype)  # Keras's placeholder
        factored = shape[:-1] if slot_name == "r" else shape[:-2] + shape[-1:]
        return tf.zeros(factored, dtype=variable.dtype)

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """Keras's Adafactor update, written with the same operations in the same order."""
        dtype = variable_value.dtype
        lr = learning_rate
        epsilon_2 = cast_hyperparameter(self.epsilon_2, dtype)
        one = cast_hyperparameter(1.0, dtype)
        if self._schedule is None and self.relative_step:
            lr = tf.minimum(lr, 1 / tf.sqrt(step))
        rho_t = tf.minimum(lr, 1 / tf.sqrt(step))
        alpha_t = tf.maximum(epsilon_2, _rms(variable_value)) * rho_t
        regulated_grad_square = tf.square(gradient) + cast_hyperparameter(self.epsilon_1, dtype)
        beta_2_t = 1 - tf.pow(step, cast_hyperparameter(self.beta_2_decay, dtype))
        r, c, v = slots["r"], slots["c"], slots["velocity"]
        if variable_value.shape.rank >= 2:
            r = beta_2_t * r + (1 - beta_2_t) * tf.reduce_mean(regulated_grad_square, axis=-1)
            c = beta_2_t * c + (1 - beta_2_t) * tf.reduce_mean(regulated_grad_square, axis=-2)
            v = (tf.expand_dims(r / tf.reduce_mean(r, axis=-1, keepdims=True), axis=-1)
                 * tf.expand_dims(c, -2))
        else:
            v = beta_2_t * v + (1 - beta_2_t) * regulated_grad_square
        u_t = gradient / tf.sqrt(v)
        u_t_hat = u_t / tf.maximum(
            one, _rms(u_t) / cast_hyperparameter(self.clip_threshold, dtype))
        new_value = variable_value - alpha_t * u_t_hat
        return new_value, {"r": r, "c": c, "velocity": v}

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "beta_2_decay": self.beta_2_decay,
            "epsilon_1": self.epsilon_1,
            "epsilon_2": self.epsilon_2,
            "clip_threshold": self.clip_threshold,
            "relative_step": self.relative_step,
        }

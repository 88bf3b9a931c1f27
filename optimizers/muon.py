"""`Muon`: Newton–Schulz orthogonalised momentum, numerically as `keras.optimizers.Muon`."""

from __future__ import annotations

import re
from typing import Any, Sequence

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.core.variables import as_tf_variable
from graphfit.optimizers.optimizer import Optimizer, cast_hyperparameter
from graphfit.optimizers.transforms import DecoupledWeightDecay

__all__ = ["Muon"]


def variable_path(variable) -> str:
    """Keras's `variable.path` for a graphfit variable: its name without the `:0`
    (`"sequential/dense/kernel"`, the same string Keras gives the same model's kernel)."""
    path = getattr(variable, "path", None)
    return path if isinstance(path, str) else variable.name.split(":")[0]


def _transpose_last_axes(x: tf.Tensor) -> tf.Tensor:
    order = list(range(x.shape.rank))
    order[-2], order[-1] = order[-1], order[-2]
    return tf.transpose(x, order)


@OPTIMIZERS.register
class Muon(Optimizer):
    """Muon (Jordan et al., 2024; Liu et al., 2025), as `keras.optimizers.Muon` (Keras 3.15.1).

    Which rule a variable gets is decided once, when the optimizer builds its slots, exactly
    as Keras's `_should_use_adamw`: **AdamW** for a variable whose rank is not 2, for one
    whose path contains "embedding" (case-insensitive) when `exclude_embeddings`, and for
    one whose path matches a regular expression of `exclude_layers` (`re.search`);
    **Muon** for every other variable. The path is Keras's `variable.path`; a graphfit
    variable's is its name without `:0` (`"sequential/dense/kernel"`), which is what Keras
    gives the same model.

    Muon step (momentum `m`, the slot `"momentum"`; `a, b, c = muon_a, muon_b, muon_c`):

        m <- m + (g + m * (momentum - 1))
        G <- g + momentum * m                    (nesterov; else G <- m)
        X <- G / (||G||_F + 1e-7), transposed when it has more rows than columns
        X <- a X + (b A + c A A) X,  A = X X^T   (ns_steps times), transposed back
        w <- w - lr * X * sqrt(max(rows, cols)) * rms_rate    (rms_rate None: no factor)

    AdamW step: Keras's Adam with `adam_beta_1`, `adam_beta_2`, `epsilon` and the rate
    `lr * adam_lr_ratio` (slots `"momentum"` and `"velocity"`). A Muon variable keeps no
    velocity, as in Keras: its `"velocity"` slot is empty (shape `[0]`) and left out of
    `variables`, so `get_weights` and `set_weights` follow Keras's list.

    Weight decay, before the update, `w <- w - w * decay * lr` with the undivided `lr`:
    `weight_decay` for Muon variables, `adam_weight_decay` for AdamW ones (None: none);
    `exclude_from_weight_decay` exempts variables from both.

    Differs from Keras: Keras's Muon fails on a float64 variable when `rms_rate` is set (its
    scale factor is a float32 tensor); graphfit computes it in the variable's dtype.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        adam_beta_1, adam_beta_2: the AdamW moments' decay rates, in [0, 1).
            Default to 0.9 and 0.999.
        adam_weight_decay: decoupled weight decay of the AdamW variables, >= 0 or None.
            Defaults to 0.004.
        epsilon: the AdamW denominator's epsilon, >= 0. Defaults to 1e-7.
        weight_decay: decoupled weight decay of the Muon variables, >= 0 or None.
            Defaults to 0.004.
        exclude_layers: regular expressions; a variable whose path matches one gets AdamW.
        exclude_embeddings: whether variables with "embedding" in their path get AdamW.
            Defaults to True.
        muon_a, muon_b, muon_c: the Newton–Schulz coefficients. Default to 3.4445, -4.775,
            2.0315.
        adam_lr_ratio: the AdamW rate relative to `learning_rate`, >= 0. Defaults to 1.
        momentum: the Muon momentum, in [0, 1]. Defaults to 0.95.
        ns_steps: Newton–Schulz iterations, >= 0. Defaults to 5.
        nesterov: Nesterov momentum for the Muon step. Defaults to True.
        rms_rate: Moonlight's update scale (> 0), or None for none. Defaults to 0.2.
        clipnorm, clipvalue, global_clipnorm, gradient_transforms, name: see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for an argument outside the ranges above, a bad regular expression in
            `exclude_layers`, or a bad base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import Muon
        >>> kernel, bias = tf.Variable(tf.ones((3, 2)), name="kernel"), tf.Variable([0.0])
        >>> opt = Muon(learning_rate=0.1)
        >>> _ = opt.apply_gradients([(tf.ones((3, 2)), kernel), (tf.ones((1,)), bias)])
        >>> opt.uses_adamw(kernel), opt.uses_adamw(bias)
        (False, True)
        >>> opt.get_slot(kernel, "velocity").shape  # a Muon variable keeps no velocity
        TensorShape([0])
        >>> len(opt.variables)  # iterations, rate, 2 momentums, the bias's velocity (Keras's)
        5
    """

    slot_names = ("momentum", "velocity")
    # Measured (benchmarks/optimizers.py, MLP 784-256-256-10 on a CPU): the Newton–Schulz
    # matmuls run about 2x slower under XLA than with TensorFlow's own CPU kernels, so
    # jit_compile="auto" leaves XLA off on a CPU; on a GPU it still compiles.
    xla_friendly_on_cpu = False

    def __init__(
        self,
        learning_rate=0.001,
        adam_beta_1: float = 0.9,
        adam_beta_2: float = 0.999,
        adam_weight_decay: float | None = 0.004,
        epsilon: float = 1e-7,
        weight_decay: float | None = 0.004,
        exclude_layers: Sequence[str] | None = None,
        exclude_embeddings: bool = True,
        muon_a: float = 3.4445,
        muon_b: float = -4.7750,
        muon_c: float = 2.0315,
        adam_lr_ratio: float = 1,
        momentum: float = 0.95,
        ns_steps: int = 5,
        nesterov: bool = True,
        rms_rate: float | None = 0.2,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        self.adam_beta_1 = validation.number_in_range("adam_beta_1", adam_beta_1, 0, 1,
                                                      include_high=False)
        self.adam_beta_2 = validation.number_in_range("adam_beta_2", adam_beta_2, 0, 1,
                                                      include_high=False)
        self.epsilon = validation.finite_number("epsilon", epsilon, minimum=0)
        self.exclude_layers = _patterns(exclude_layers)
        for flag, value in (("exclude_embeddings", exclude_embeddings), ("nesterov", nesterov)):
            if not isinstance(value, bool):
                raise validation.invalid(flag, value, "a bool")
        self.exclude_embeddings, self.nesterov = exclude_embeddings, nesterov
        self.muon_a, self.muon_b, self.muon_c = (
            validation.finite_number(n, v) for n, v in
            (("muon_a", muon_a), ("muon_b", muon_b), ("muon_c", muon_c)))
        self.adam_lr_ratio = validation.finite_number("adam_lr_ratio", adam_lr_ratio, minimum=0)
        self.momentum = validation.number_in_range("momentum", momentum, 0, 1)
        self.ns_steps = validation.non_negative_int("ns_steps", ns_steps)
        self.rms_rate = validation.positive_float("rms_rate", rms_rate, allow_none=True)
        super().__init__(learning_rate, weight_decay=weight_decay, name=name,
                         **base_arguments)
        self.adam_weight_decay = validation.finite_number(
            "adam_weight_decay", adam_weight_decay, minimum=0, allow_none=True)
        # The decays per rule; both share the exclusions (Keras's `_use_weight_decay`).
        self._decays = {True: DecoupledWeightDecay(self.adam_weight_decay or 0.0),
                        False: DecoupledWeightDecay(self.weight_decay or 0.0)}

    # ------------------------------------------------------------------ which rule

    def uses_adamw(self, variable) -> bool:
        """Whether `variable` gets the AdamW step (Keras's `_should_use_adamw`)."""
        variable = as_tf_variable(variable)
        if variable.shape.rank != 2:
            return True
        path = variable_path(variable)
        if self.exclude_embeddings and "embedding" in path.lower():
            return True
        return any(re.search(keyword, path) for keyword in self.exclude_layers)

    def slot_initial_value(self, slot_name: str, variable: tf.Variable) -> tf.Tensor:
        """Zeros of the variable's shape; an empty `velocity` for a Muon variable."""
        if slot_name == "velocity" and not self.uses_adamw(variable):
            return tf.zeros((0,), dtype=variable.dtype)
        return tf.zeros(variable.shape, dtype=variable.dtype)

    def exclude_from_weight_decay(self, var_list=None, var_names=None) -> None:
        """Exempts variables from both decays (see `Optimizer.exclude_from_weight_decay`)."""
        for decay in self._decays.values():
            decay.exclude([as_tf_variable(v) for v in var_list or ()], var_names)

    def weight_decay_for(self, variable: tf.Variable):
        """`adam_weight_decay` for an AdamW variable, `weight_decay` for a Muon one."""
        adamw = self.uses_adamw(variable)
        rate = self.adam_weight_decay if adamw else self.weight_decay
        decay = self._decays[adamw]
        return decay if rate is not None and decay.applies_to(variable) else None

    # ------------------------------------------------------------------ the update

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        """The AdamW step where the variable has a velocity, else the Muon step (Keras's
        `update_step`, with the same operations in the same order)."""
        if slots["velocity"].shape == variable_value.shape:
            lr = learning_rate * cast_hyperparameter(self.adam_lr_ratio, learning_rate.dtype)
            return self._adamw_update(gradient, variable_value, slots, lr, step)
        dtype = variable_value.dtype
        m = slots["momentum"]
        m = m + (gradient + m * cast_hyperparameter(self.momentum - 1, dtype))
        if self.nesterov:
            g = gradient + cast_hyperparameter(self.momentum, dtype) * m
        else:
            g = m
        update = self.zeropower_via_newtonschulz5(g, self.ns_steps)
        new_value = variable_value - self.lr_adjust(learning_rate * update)
        return new_value, {"momentum": m, "velocity": slots["velocity"]}

    def _adamw_update(self, gradient, variable_value, slots, lr, step):
        dtype = variable_value.dtype
        beta_1_power = tf.pow(cast_hyperparameter(self.adam_beta_1, dtype), step)
        beta_2_power = tf.pow(cast_hyperparameter(self.adam_beta_2, dtype), step)
        alpha = lr * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        m, v = slots["momentum"], slots["velocity"]
        m = m + (gradient - m) * cast_hyperparameter(1 - self.adam_beta_1, dtype)
        v = v + (tf.square(gradient) - v) * cast_hyperparameter(1 - self.adam_beta_2, dtype)
        new_value = variable_value - (m * alpha) / (
            tf.sqrt(v) + cast_hyperparameter(self.epsilon, dtype))
        return new_value, {"momentum": m, "velocity": v}

    def lr_adjust(self, x: tf.Tensor) -> tf.Tensor:
        """Moonlight's scale, `x * sqrt(max(rows, cols)) * rms_rate` (None: `x`)."""
        if self.rms_rate is None:
            return x
        largest = cast_hyperparameter(max(x.shape[0], x.shape[1]), x.dtype)
        return x * tf.sqrt(largest) * cast_hyperparameter(self.rms_rate, x.dtype)

    def zeropower_via_newtonschulz5(self, x: tf.Tensor, steps: int) -> tf.Tensor:
        """Keras's quintic Newton–Schulz iteration towards the orthogonal factor of `x`.

        Raises:
            ValueError: for `x` of rank < 2.
        """
        x = tf.convert_to_tensor(x)
        shape = x.shape
        if shape.rank < 2:
            raise ValueError("Expected gradient or momentum to have at least 2 dimensions. "
                             f"Received: shape={shape}")
        dtype = x.dtype
        a, b, c = (cast_hyperparameter(k, dtype) for k in (self.muon_a, self.muon_b, self.muon_c))
        tall = shape[-2] > shape[-1]
        if tall:
            x = _transpose_last_axes(x)
        norm = tf.sqrt(tf.reduce_sum(x * x, axis=(-2, -1), keepdims=True))
        x = x / (norm + cast_hyperparameter(1e-7, dtype))
        for _ in range(steps):
            temp_a = x @ _transpose_last_axes(x)
            temp_b = b * temp_a + c * temp_a @ temp_a
            x = a * x + temp_b @ x
        if tall:
            x = _transpose_last_axes(x)
        return x

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "adam_beta_1": self.adam_beta_1,
            "adam_beta_2": self.adam_beta_2,
            "epsilon": self.epsilon,
            "exclude_layers": list(self.exclude_layers),
            "muon_a": self.muon_a,
            "muon_b": self.muon_b,
            "muon_c": self.muon_c,
            "adam_lr_ratio": self.adam_lr_ratio,
            "momentum": self.momentum,
            "ns_steps": self.ns_steps,
            "nesterov": self.nesterov,
            "exclude_embeddings": self.exclude_embeddings,
            "adam_weight_decay": self.adam_weight_decay,
            "rms_rate": self.rms_rate,
        }


def _patterns(exclude_layers) -> list[str]:
    if exclude_layers is None:
        return []
    if isinstance(exclude_layers, str) or not all(isinstance(k, str) for k in exclude_layers):
        raise validation.invalid("exclude_layers", exclude_layers,
                                 "a list of regular expressions (strings), or None")
    for keyword in exclude_layers:
        try:
            re.compile(keyword)
        except re.error as error:
            raise validation.invalid("exclude_layers", exclude_layers,
                                     f"valid regular expressions ({keyword!r}: {error})") from None
    return list(exclude_layers)

"""`AdamW`: Adam with decoupled weight decay on by default, as `keras.optimizers.AdamW`."""

from __future__ import annotations

from graphfit.core import validation
from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers.adam import Adam

__all__ = ["AdamW"]


@OPTIMIZERS.register
class AdamW(Adam):
    """AdamW (Loshchilov & Hutter, 2019): Adam plus decoupled weight decay, as Keras's.

    Keras's `AdamW` is its `Adam` with `weight_decay` required (default 0.004); so is this
    one. Each step first decays the variable, then applies Adam's update (see `Adam`):

        w <- w - w * weight_decay * lr
        w <- adam_update(w, g)

    The decay acts on the weights, not on the gradient, so Adam's normalisation does not
    rescale it. `exclude_from_weight_decay` exempts variables (biases, norms) from it.

    Args:
        learning_rate: a non-negative float or a Keras `LearningRateSchedule`.
            Defaults to 0.001.
        weight_decay: the decoupled decay rate, a float >= 0 (not None). Defaults to 0.004.
        beta_1, beta_2, epsilon, amsgrad: as `Adam` (0.9, 0.999, 1e-7, False).
        clipnorm, clipvalue, global_clipnorm, gradient_transforms, name: see `Optimizer`.
        **base_arguments: Keras's `use_ema`, `ema_momentum`, `ema_overwrite_frequency`,
            `loss_scale_factor`, `gradient_accumulation_steps` (see `Optimizer`).

    Raises:
        ValueError: for `weight_decay=None` or negative, or a bad Adam or base argument.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit.optimizers import AdamW
        >>> w = tf.Variable([1.0])
        >>> opt = AdamW(learning_rate=0.1, weight_decay=0.5)
        >>> _ = opt.apply_gradients([(tf.constant([0.0]), w)])  # decay only: 1 - 0.5 * 0.1
        >>> round(float(w[0]), 4)
        0.95
    """

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay: float = 0.004,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        *,
        name: str | None = None,
        **base_arguments,
    ):
        if weight_decay is None:
            raise validation.invalid("weight_decay", weight_decay,
                                     "a float >= 0 for AdamW (use Adam for no weight decay)")
        super().__init__(
            learning_rate, beta_1, beta_2, epsilon, amsgrad,
            weight_decay=weight_decay,
            name=name,
            **base_arguments,
        )

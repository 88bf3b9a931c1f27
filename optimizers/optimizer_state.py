"""An optimizer's state as values: `get_weights` / `set_weights`, in `variables` order.

`optimizer.variables` of a first-order optimizer lists, in Keras's order:

    iterations, learning_rate,
    the moving averages (use_ema), one per variable,
    the gradient accumulators (gradient_accumulation_steps), one per variable,
    the slots, variable by variable (Adam: momentum, velocity of the first variable, ...),
        except empty ones (Muon's `velocity` of a Muon variable: Keras has none),
    state its transforms and hooks added (`track_variable`, `add_variable`)

which is the order of a Keras 3 optimizer's `variables` built on the same variables, with two
differences: graphfit keeps the learning-rate variable under a schedule too (unused there;
Keras has none), and each variable's slots stay together (Keras's AMSGrad lists every
`velocity_hat` after all moments). `LossScaleOptimizer` lists its inner optimizer's
variables, then the scale and its counter (Keras puts those two first). Variables built
later (a second `build`) add to each group's end.

Example:

    >>> import numpy as np, tensorflow as tf
    >>> from graphfit import optimizers
    >>> w = tf.Variable([1.0, 2.0])
    >>> opt = optimizers.SGD(0.1, momentum=0.9)
    >>> _ = opt.apply_gradients([(tf.constant([1.0, 1.0]), w)])
    >>> [np.asarray(v, "float64").round(3).tolist() for v in opt.get_weights()]
    [1.0, 0.1, [-0.1, -0.1]]
    >>> twin = optimizers.SGD(0.1, momentum=0.9)
    >>> twin.build([w])
    >>> twin.set_weights(opt.get_weights())
    >>> int(twin.iterations)
    1
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

__all__ = ["get_weights", "set_weights", "BASE_ARGUMENTS"]

#: The Keras base-optimizer arguments beyond clipping and weight decay, with their defaults.
BASE_ARGUMENTS = {"use_ema": False, "ema_momentum": 0.99, "ema_overwrite_frequency": None,
                  "loss_scale_factor": None, "gradient_accumulation_steps": None}


def get_weights(optimizer) -> list[np.ndarray]:
    """The values of `optimizer.variables`, as NumPy arrays, in that order."""
    return [np.asarray(v.numpy()) for v in optimizer.variables]


def set_weights(optimizer, weights: Sequence) -> None:
    """Assigns `weights` (from `get_weights`, or Keras's `optimizer.variables` values) to
    `optimizer.variables`, in order.

    Raises:
        ValueError: before `build` (no slots yet), or for a count or shape that does not
            match, naming the variable; nothing is assigned then.
    """
    variables = optimizer.variables
    weights = list(weights)
    if len(weights) != len(variables):
        hint = (" The optimizer has no per-variable state yet: call "
                "optimizer.build(model.trainable_variables) first."
                if not getattr(optimizer, "built", True) else "")
        raise ValueError(
            f"set_weights() received {len(weights)} arrays for the {len(variables)} variables "
            f"of optimizer {optimizer.name!r} ({', '.join(_short(v) for v in variables)})."
            f"{hint}")
    for variable, weight in zip(variables, weights):
        if tuple(np.shape(weight)) != tuple(variable.shape):
            raise ValueError(
                f"set_weights(): optimizer variable {_short(variable)} has shape "
                f"{tuple(variable.shape)}; the array given for it has shape "
                f"{tuple(np.shape(weight))}.")
    for variable, weight in zip(variables, weights):
        variable.assign(tf.cast(weight, variable.dtype))


def _short(variable) -> str:
    return variable.name.split(":")[0]

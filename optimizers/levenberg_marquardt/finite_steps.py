"""Skipping a Levenberg–Marquardt step that starts from non-finite numbers (float16 overflow).

Under `LossScaleOptimizer` (`LevenbergMarquardt.skip_non_finite_steps`), a step whose starting
loss or gradient is not finite, or whose linearized system (`Jᵀr` and `diag(JᵀJ)`, after the
Jacobian's own overflow clean-up) is not, is skipped: no trial runs, so the variables, λ, ν,
the running scale, the convergence flag and `iterations` keep their values, and the step
reports `applied` False so its update hooks are skipped too. Without the skip such a step
would run its trials on a NaN gain ratio: every trial rejected, λ grown `attempts_per_step`
times for nothing.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from graphfit.optimizers.finite_values import all_finite

__all__ = ["gated_step"]


def gated_step(converged, start_values: list, start_numbers: list, linearize: Callable,
               trials: Callable) -> tuple[list, tf.Tensor]:
    """`(values, applied)` of one step: `start_values` ([loss, *aux tensors] of the start)
    when converged or when `start_numbers` (the start's loss and gradient) are not all finite,
    else `trials(linearize())` when that system is finite.

    `applied` is False exactly when the step was skipped for non-finite numbers (a step
    skipped because LM converged counts as applied, as it always has).
    """
    def skip(applied):
        return lambda: [*start_values, tf.convert_to_tensor(applied)]

    def step():
        system = linearize()
        ok = all_finite([system.b, system.diag])
        return tf.cond(ok, lambda: [*trials(system), tf.constant(True)], skip(False))

    finite_start = all_finite(start_numbers)
    out = tf.cond(converged | ~finite_start, skip(finite_start), step)
    return out[:-1], out[-1]

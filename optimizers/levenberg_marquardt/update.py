"""The Levenberg–Marquardt update rule as pure functions: linearization, damping, gain ratio.

One training step (see `trial.trial_loop` for the loop that strings these together):

1. `linearize`: the normal equations of the batch, `JᵀJ` (or J itself when m < n) and
   `b = Jᵀr`;
2. `damping_range` and `starting_damping`: λ of the first trial, relative to the scaled
   diagonal, within `[floor, top]`;
3. per trial, `ScaledSystem.solve(λ)` (in `damping.py`) gives δ, then `gain_ratio` compares
   the actual with the predicted reduction, `step_accepted` keeps or rejects the trial and
   `next_damping` updates `(λ, ν)` by Nielsen's rule.

These functions read no variables and change none: the state (λ, ν, the convergence flag)
lives on the optimizer, which passes it in and stores what comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian

__all__ = [
    "ACCEPT",
    "MAX_RELATIVE_STEP",
    "DampingRange",
    "Linearization",
    "damping_range",
    "gain_ratio",
    "linearize",
    "next_damping",
    "starting_damping",
    "step_accepted",
    "step_within_bound",
]

# A trial is accepted when it achieves this fraction of the predicted reduction.
ACCEPT = 1e-4

# A trial may move the parameters by at most this multiple of their own size, both measured
# in the scaled norm of the xtol test (`‖S δ‖ ≤ MAX_RELATIVE_STEP · ‖S x‖`): a longer step is
# rejected like an uphill one, whatever its gain. It stops a step that the quadratic model
# judges well from flinging a weakly determined parameter far out (BoxBOD from its first
# start: b2 from 1 to 115, where exp(−b2·x) is 0 and the gradient vanishes). MINPACK's
# first trust radius is 100‖S x₀‖, SciPy's trf radius ‖x₀‖.
MAX_RELATIVE_STEP = 10.0


class Linearization(NamedTuple):
    """The linearized least-squares problem of one batch (all float64 but `under`).

    Attributes:
        matrix: `JᵀJ` (n × n), or J padded with zero rows to n × n when `under`.
        b: `Jᵀr`: half the true loss gradient, or `Jᵀρ` when `under` (which the m × m
            system solves exactly).
        rho: the residuals padded to n when `under`, zeros otherwise.
        diag: `diag(JᵀJ)`.
        under: a bool scalar, the underdetermined case (m < n rows in a single chunk).
    """

    matrix: tf.Tensor
    b: tf.Tensor
    rho: tf.Tensor
    diag: tf.Tensor
    under: tf.Tensor


def linearize(rows_for: Callable, data, num_examples, chunk: int,
              variables: Sequence[tf.Variable], mode: str,
              gradients: Sequence[tf.Tensor], allow_under: bool = True,
              layerwise_rows: int | None = None, single_chunk: bool = False,
              dense_layers: Sequence = (), hooked_layers: Sequence = ()) -> Linearization:
    """The `Linearization` of a batch at the variables' current values.

    Args:
        rows_for: `rows_for(data_chunk) -> (rows, rho)`, as `residuals.batch_rows` returns.
        data: the batch's inputs, labels and per-element weights.
        num_examples: the batch size (a scalar tensor).
        chunk: examples per chunk of the Jacobian (`jacobian.chunk_examples`).
        variables: the trained variables.
        mode: the Jacobian mode, "per_example", "reverse" or "forward".
        gradients: the loss gradient, one tensor per variable (from the step's tape), or
            None: then b is Cᵀρ, which equals ½∇f (the step then runs no backward pass
            of the loss; see `residuals`).
        allow_under: False keeps the overdetermined form (JᵀJ) even when m < n.
        layerwise_rows: the rows of one example, for the closed-form Jacobian (see
            `jacobian.normal_equations`); None: pfor.
        single_chunk: the batch is known to hold at most `chunk` examples: linearized
            without the loop over chunks (`jacobian.normal_equations`).
        dense_layers: the model's `Dense` layers (`dense_forms.dense_layers`).
        hooked_layers: its layers with an `example_jacobian` hook
            (`layerwise_jacobian.hook_layers`).

    Returns:
        The `Linearization`, in float64.
    """
    f64 = tf.float64
    matrix, g_lin, diag, rho, under = lm_jacobian.normal_equations(
        rows_for, data, num_examples, chunk, variables, mode, f64, allow_under,
        layerwise_rows, single_chunk, dense_layers, hooked_layers)
    # b = ½∇f: the true gradient overdetermined; Cᵀρ in the m × m system, which solves
    # exactly that system.
    if gradients is None:  # Cᵀρ: ½∇f overdetermined, exactly (see residuals.py)
        return Linearization(matrix, g_lin, rho, diag, under)
    grad = tf.concat([tf.reshape(tf.cast(g, f64), [-1]) for g in gradients], 0)
    # Where the true gradient overflowed, Cᵀρ (non-finite derivatives counted as zero).
    b = tf.where(under | ~tf.math.is_finite(grad), g_lin, 0.5 * grad)
    return Linearization(matrix, b, rho, diag, under)


class DampingRange(NamedTuple):
    """The scale of λ in one step and the interval it is kept in.

    Attributes:
        scale: the largest diagonal entry of `D^-½ JᵀJ D^-½`, λ's unit.
        floor: `n · ε₆₄ · scale`, or with the direct solve the least λ that changes a
            column's shift (`damping_range`): keeps λ positive.
        top: `MAX_DAMPING · scale`: a λ this large means no step reduces the loss.
    """

    scale: tf.Tensor
    floor: tf.Tensor
    top: tf.Tensor


def damping_range(diag: tf.Tensor, d: tf.Tensor, n: int,
                  column_eps: float | None = None) -> DampingRange:
    """The `DampingRange` of a step from `diag(JᵀJ)`, the damping diagonal `D` and n.

    `column_eps`: the epsilon of the direct solve's resolution, which shifts each column by
    at least `n·ε·P_jj` (`damping.ScaledSystem.shift`): λ's floor is then
    `damping.least_damping`'s, where λ stops changing any column's shift. None (the
    conjugate-gradient solve): `n·ε₆₄·scale`."""
    ratios = diag / d
    scale = tf.reduce_max(ratios)
    # The floor only keeps λ positive at float64's resolution (the solve is in float64; when
    # rounding makes JᵀJ slightly indefinite the eigen fallback takes over).
    floor = n * float(np.finfo(np.float64).eps) * scale
    if column_eps is not None:
        floor = lm_damping.least_damping(ratios, n * column_eps)
    return DampingRange(scale, floor, lm_damping.MAX_DAMPING * scale)


def starting_damping(previous: tf.Tensor, tau: float, limits: DampingRange) -> tf.Tensor:
    """λ of a step's first trial: the previous step's λ, or `tau · scale` (Nielsen's τ) when
    `previous` is negative (no step yet), clipped to `[floor, top]`."""
    damping = tf.where(previous < 0, tau * limits.scale, previous)
    return tf.clip_by_value(damping, limits.floor, limits.top)


def next_damping(damping: tf.Tensor, growth: tf.Tensor, gain: tf.Tensor, accepted: tf.Tensor,
                 limits: DampingRange) -> tuple[tf.Tensor, tf.Tensor]:
    """`(λ, ν)` after a trial: Nielsen's rule (`damping.nielsen_update`), λ clipped to
    `[floor, top]`.

    Accepted: `λ ← λ · max(1/3, 1 − (2·gain − 1)³)`, `ν ← 2`; rejected: `λ ← λν`, `ν ← 2ν`.
    """
    new_damping, new_growth = lm_damping.nielsen_update(damping, growth, gain, accepted)
    return tf.clip_by_value(new_damping, limits.floor, limits.top), new_growth


def gain_ratio(actual: tf.Tensor, predicted: tf.Tensor) -> tf.Tensor:
    """`actual / predicted` reduction of the loss, or 0 when nothing was predicted.

    Example:

        >>> import tensorflow as tf
        >>> float(gain_ratio(tf.constant(3.0), tf.constant(4.0)))
        0.75
        >>> float(gain_ratio(tf.constant(3.0), tf.constant(0.0)))
        0.0
    """
    return tf.where(predicted > 0, actual / predicted, tf.zeros_like(actual))


def step_accepted(finite: tf.Tensor, f_new: tf.Tensor, actual: tf.Tensor,
                  gain: tf.Tensor, within: tf.Tensor | bool = True) -> tf.Tensor:
    """Whether a trial is kept: its δ and loss are finite, the loss went down, the gain
    ratio exceeds `ACCEPT`, and the step is `within` its bound (`step_within_bound`)."""
    return finite & tf.math.is_finite(f_new) & (actual > 0) & (gain > ACCEPT) & within


def step_within_bound(step_norm: tf.Tensor, x_norm: tf.Tensor) -> tf.Tensor:
    """Whether a step of scaled length `step_norm` = `‖S δ‖` from a point of scaled length
    `x_norm` = `‖S x‖` is at most `MAX_RELATIVE_STEP · ‖S x‖` (always true at x = 0).

    Example:

        >>> import tensorflow as tf
        >>> bool(step_within_bound(tf.constant(9.0), tf.constant(1.0)))
        True
        >>> bool(step_within_bound(tf.constant(11.0), tf.constant(1.0)))
        False
        >>> bool(step_within_bound(tf.constant(11.0), tf.constant(0.0)))
        True
    """
    return (step_norm <= MAX_RELATIVE_STEP * x_norm) | (x_norm <= 0)

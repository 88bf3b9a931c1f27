"""Geodesic acceleration (Transtrum and Sethna 2012): a second-order correction to each step.

In a narrow curved valley of the loss the Gauss–Newton step δ points along the valley's
tangent, and a long δ leaves the valley: the trial is rejected, λ grows and the steps shrink to
the valley's curvature. The acceleration bends the step along the valley. With the residuals'
second directional derivative `r_vv = d²r(x + tδ)/dt²` at t = 0, the same damped system gives

    a = −(JᵀJ + λD)⁻¹ Jᵀ r_vv,        the trial moves to x + δ + a/2,

unless `2‖D^½ a‖ > ALPHA ‖D^½ δ‖` (Transtrum's α = 0.75: the a/2 added to δ would be longer
than 0.19 ‖δ‖, so the step's second-order model is no longer trusted): then the trial takes
the plain δ. The m < n form and a step past its bound take the plain δ without the extra
passes. Transtrum rejects
such a trial instead (λ grows); here that stopped fits short of their last digits: near a
minimum δ is tiny and `r_vv` is mostly rounding (below), so every trial was rejected until
the xtol test ended the fit (NIST's Lanczos1: RSS at the parameters 1.8 digits of the
certified value in 40-digit arithmetic, against 6.0 with the plain step as fallback, which
fits MGH10 from start 1 as well).

`r_vv` comes from central differences of the residuals along δ,

    r_vv ≈ (r(x + hδ) − 2 r(x) + r(x − hδ)) / h²,        h = STEP (0.1, Transtrum's),

three forward passes, then `Jᵀ r_vv` is one backward pass at x (the pass that gave r(x)).
Two nested forward-mode accumulators would give `r_vv` exactly, but in TensorFlow 2.21 they
failed inside the training step (an IndexError in forwardprop's handling of `tf.shape`, which
the residual rows and any Reshape or Flatten layer call) and, eagerly, on variable reads.
The differences cancel to about 4ε·|f|/h² (ε the model dtype's epsilon, f the model's
values): in float64 that matters only near a minimum (see above), but in float32 it would blur
the correction on every step, so `LevenbergMarquardt` adds the acceleration on its own
("auto") only for float64 models. It is defined for losses that are sums of squared residuals
(mean squared error and residual losses), where the rows are the residuals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import residuals as lm_residuals

__all__ = ["ALPHA", "STEP", "applies", "check_possible", "acceleration_product",
           "trial_acceleration", "acceptable"]

# The largest ratio 2‖a‖/‖δ‖ (in the scaled norm) of a correction a trial takes.
ALPHA = 0.75


# The finite-difference step along δ, as a fraction of δ.
STEP = 0.1


def applies(setting, solver: str, batch, variables: Sequence[tf.Variable]) -> bool:
    """Whether the trials of this step add geodesic acceleration, for the optimizer's
    `geodesic_acceleration` setting ("auto", True or False).

    It can apply on the direct solver on one device, for a loss that is a sum of squared
    residuals (mean squared error, residual losses); "auto" adds it where the model's
    variables are all float64 (the central differences of `r_vv` need float64's precision).

    Raises:
        ValueError: for True where it cannot apply, naming why (`check_possible`).
    """
    distributed, losses = batch.replicas is not None, batch.loss_set.losses
    if setting is True:
        check_possible(solver, distributed, losses)
    possible = _possible(solver, distributed, losses)
    if setting == "auto":
        return possible and all(v.dtype == tf.float64 for v in variables)
    return possible and setting is True


def check_possible(solver: str, distributed: bool, losses: dict) -> None:
    """Raises the ValueError of `geodesic_acceleration=True` where it cannot apply: the cg
    solver, a tf.distribute strategy (`distributed`), or a loss (of `losses`, by output) that
    is not a sum of squared residuals. `LevenbergMarquardt.check_training` calls it before
    the first step, so `graphfit validate` reports it."""
    if _possible(solver, distributed, losses):
        return
    names = sorted(type(loss).__name__ for loss in losses.values())
    raise ValueError(
        "LevenbergMarquardt(geodesic_acceleration=True) needs the direct solver on one "
        "device and a loss that is a sum of squared residuals (mean squared error or a "
        f"residual loss); this step has solver={solver!r}"
        f"{', a tf.distribute strategy' if distributed else ''} and "
        f"losses {names}. Use 'auto', which adds it where it applies, or False.")


def _possible(solver: str, distributed: bool, losses: dict) -> bool:
    return solver == "direct" and not distributed and lm_residuals.gradient_from_rows(losses)


def acceleration_product(rows_of: Callable[[], tf.Tensor], variables: Sequence[tf.Variable],
                         move: Callable[[tf.Tensor], object], delta: tf.Tensor) -> tf.Tensor:
    """`Jᵀ r_vv` at the start x, flat, in float64, with `r_vv` the residuals' second
    directional derivative along `delta` (central differences, see the module docstring).

    Args:
        rows_of: computes the residual rows (a flat tensor) at the variables' current values.
        variables: the trained variables.
        move: `move(step)` puts the variables at x + step (a flat float64 vector).
        delta: the step δ, flat float64.

    Returns:
        `Jᵀ r_vv`; the variables are left at x.

    Example (r = (b₀b₁, b₀³) at b = (2, 3) along (1, 1): r_vv = (2, 12), J = [[3, 2], [12, 0]]):

        >>> import tensorflow as tf
        >>> b = tf.Variable([2.0, 3.0], dtype=tf.float64)
        >>> start = tf.constant([2.0, 3.0], tf.float64)
        >>> rows = lambda: tf.stack([b[0] * b[1], b[0] ** 3])
        >>> move = lambda step: b.assign(start + step)
        >>> acceleration_product(rows, [b], move, tf.constant([1.0, 1.0], tf.float64)).numpy()
        array([150.,   4.])
    """
    h = tf.constant(STEP, tf.float64)
    move(h * delta)
    ahead = rows_of()
    with tf.control_dependencies([ahead]):
        move(-h * delta)
    behind = rows_of()
    with tf.control_dependencies([behind]):
        move(tf.zeros_like(delta))
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(variables)
        rows = rows_of()
    second = tf.stop_gradient((ahead - 2.0 * rows + behind) / tf.cast(h * h, rows.dtype))
    pieces = tape.gradient(rows, variables, output_gradients=second,
                           unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return tf.concat([tf.reshape(tf.cast(p, tf.float64), [-1]) for p in pieces], 0)


def trial_acceleration(rows_of: Callable[[], tf.Tensor], variables: Sequence[tf.Variable],
                       move: Callable[[tf.Tensor], object], system):
    """`accelerate(δ, λ, skip) -> a = −(JᵀJ + λD)⁻¹ Jᵀ r_vv` for the trials of one step
    (`trial.TrialProblem.accelerate`), with `system` the step's `damping.ScaledSystem`.

    NaN (the plain step), without the extra passes and without moving the variables, where
    `skip` (a bool tensor: the step is past its bound and will be rejected) or in the
    underdetermined form (m < n), which has no right-hand side for it."""
    def accelerate(delta, damping, skip):
        def correction():
            product = acceleration_product(rows_of, variables, move, delta)
            return system.solve(damping, product)[0]

        def plain():
            return tf.fill(tf.shape(delta), tf.constant(float("nan"), delta.dtype))

        return tf.cond(skip | system.under, plain, correction)

    return accelerate


def acceptable(acceleration: tf.Tensor, delta: tf.Tensor, d: tf.Tensor) -> tf.Tensor:
    """Whether `2‖D^½ a‖ ≤ ALPHA ‖D^½ δ‖` (a bool tensor; true for δ = 0 only when a = 0).

    Example:

        >>> import tensorflow as tf
        >>> one = tf.ones([2], tf.float64)
        >>> bool(acceptable(0.3 * one, one, one)), bool(acceptable(0.4 * one, one, one))
        (True, False)
    """
    return 2.0 * tf.norm(tf.sqrt(d) * acceleration) <= ALPHA * tf.norm(tf.sqrt(d) * delta)

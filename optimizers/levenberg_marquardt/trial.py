"""The trial loop of one Levenberg–Marquardt step: solve, try, keep or undo, update λ.

`trial_loop` runs up to `attempts` trials in a `tf.while_loop`, each one an `attempt`: solve
the damped system for δ, move the variables to `x₀ + δ` (`x₀ + δ + a/2` with geodesic
acceleration, `geodesic.py`) and evaluate the loss there, keep the point when the gain ratio
is good enough and the step not too long (`update.step_accepted`, `update.step_within_bound`),
otherwise put the variables back exactly; then update `(λ, ν)` and run the convergence tests.
It stops at the first accepted trial or the first convergence test met.

The loop touches variables only through the callables of its `TrialProblem` (`assign`,
`evaluate`, `restore`), which `variable_steps` builds for a list of variables, so a test can
run it on any small problem.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import convergence as lm_convergence
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import geodesic as lm_geodesic
from graphfit.optimizers.levenberg_marquardt import update as lm_update

__all__ = [
    "Attempt",
    "TrialProblem",
    "TrialResult",
    "VariableSteps",
    "attempt",
    "trial_loop",
    "variable_steps",
]


class VariableSteps(NamedTuple):
    """The starting point of a step and the two callables that move the variables.

    Attributes:
        x0: the variables at the start, flattened and concatenated, in float64.
        assign: `assign(δ)` sets the variables to the start plus δ (a flat float64 vector).
        restore: `restore(keep)` sets them back to the start, bit for bit, unless `keep` (a
            bool tensor) is true.
    """

    x0: tf.Tensor
    assign: Callable[[tf.Tensor], None]
    restore: Callable[[], None]


def variable_steps(variables: Sequence[tf.Variable]) -> VariableSteps:
    """Saves the variables' current values and returns their `VariableSteps`."""
    # The last accepted point, bit for bit: a read is a snapshot (a later assignment copies
    # the buffer it shares), so no tf.identity (an op per variable) is needed.
    saved = [tf.convert_to_tensor(v) for v in variables]
    x0 = tf.concat([tf.reshape(tf.cast(s, tf.float64), [-1]) for s in saved], 0)
    sizes = [int(np.prod(v.shape.as_list())) for v in variables]

    def assign(delta):
        pieces = tf.split(delta, sizes)
        for var, base, piece in zip(variables, saved, pieces):
            var.assign(base + tf.cast(tf.reshape(piece, var.shape), var.dtype))

    def restore(keep):
        # A select, not a tf.cond: it runs once per trial and costs O(n).
        for var, base in zip(variables, saved):
            var.assign(tf.where(keep, tf.convert_to_tensor(var), base))

    return VariableSteps(x0, assign, restore)


class TrialProblem(NamedTuple):
    """What every trial of one step shares.

    Attributes:
        system: the damped system (`damping.ScaledSystem`): `solve(λ) -> (δ, ok)` and
            `predicted_reduction(δ, λ)`.
        assign: `assign(δ)` moves the variables to the start plus δ.
        evaluate: `evaluate() -> [loss, *aux tensors]` at the variables' current values.
        restore: `restore(keep)` moves the variables back to the start exactly unless
            `keep`.
        f0: the loss at the start (float64).
        limits: the step's `update.DampingRange`.
        tests: the step's `convergence.ConvergenceTests`.
        accelerate: `accelerate(δ, λ, skip) -> a`, geodesic acceleration at the start (it may
            move the variables; NaN where `skip`), or None for plain steps.
    """

    system: lm_damping.ScaledSystem
    assign: Callable[[tf.Tensor], Any]
    evaluate: Callable[[], Sequence[tf.Tensor]]
    restore: Callable[[], Any]
    f0: tf.Tensor
    limits: lm_update.DampingRange
    tests: lm_convergence.ConvergenceTests
    accelerate: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None


class Attempt(NamedTuple):
    """The outcome of one trial: whether it was kept, `(λ, ν)` for the next, its convergence
    code, `[loss, *aux]` of the point the variables are now at, and the evaluations of the
    residuals it made (int64: 1, or 3 with a geodesic correction's two more points)."""

    accepted: tf.Tensor
    damping: tf.Tensor
    growth: tf.Tensor
    code: tf.Tensor
    values: list
    evaluations: Any = 1


def attempt(problem: TrialProblem, damping: tf.Tensor, growth: tf.Tensor,
            values: Sequence[tf.Tensor]) -> Attempt:
    """One trial with damping λ and growth ν, from the point whose `[loss, *aux]` is `values`.

    A non-finite δ, or one past `update.step_within_bound`, is never accepted, and the
    variables never visit it: the trial evaluates the starting point instead (δ = 0), rare
    enough to cost less than a `tf.cond` in every trial. A rejected trial leaves the
    variables at its point: the next trial assigns from the start, and `trial_loop` restores
    the start once after its last trial; only a system whose solve reads the variables
    (`solves_at_start_point`, the matrix-free one) has them restored after each trial.
    The trial runs without `tf.cond` (selects instead): the loop runs it up to `attempts`
    times per step, and a cond costs more to trace and run than the selects it would save.
    """
    delta, _ = problem.system.solve(damping)
    finite = tf.reduce_all(tf.math.is_finite(delta))
    delta = tf.where(finite, delta, tf.zeros_like(delta))
    step_norm = tf.norm(problem.tests.column_norms * delta)  # ‖S δ‖: the bound, the xtol test
    within = lm_update.step_within_bound(step_norm, problem.tests.x_norm)
    loss = values[0]
    # Predicted at the start, before the variables move (a matrix-free system linearizes
    # there). With geodesic acceleration the prediction stays that of δ (Transtrum's).
    predicted = problem.system.predicted_reduction(delta, damping)
    step = delta
    evaluations = tf.constant(1, tf.int64)  # the trial point's
    if problem.accelerate is not None:
        with tf.control_dependencies([predicted]):
            acceleration = problem.accelerate(delta, damping, tf.logical_not(within))
        # A correction that is not finite (an overflowed second derivative) or larger than
        # `geodesic.acceptable` allows leaves the plain step (see geodesic.py for why not a
        # rejection).
        bent = (tf.reduce_all(tf.math.is_finite(acceleration))
                & lm_geodesic.acceptable(acceleration, delta, problem.system.d))
        step = tf.where(bent, delta + 0.5 * acceleration, delta)
        # The correction evaluates the residuals at x ± hδ unless it was skipped (the
        # condition of `geodesic.trial_acceleration`); its pass at x is the Jacobian product.
        corrected = tf.logical_not(tf.logical_not(within) | problem.system.under)
        evaluations += 2 * tf.cast(corrected, tf.int64)
    with tf.control_dependencies([predicted, step]):
        problem.assign(tf.where(within, step, tf.zeros_like(step)))
    loss_new, *aux_new = problem.evaluate()
    out = [tf.cast(loss_new, loss.dtype), *aux_new]
    f_new = tf.cast(out[0], tf.float64)
    actual = problem.f0 - f_new
    gain = lm_update.gain_ratio(actual, predicted)
    accepted = lm_update.step_accepted(finite, f_new, actual, gain, within)
    if getattr(problem.system, "solves_at_start_point", False):  # matrix-free products
        with tf.control_dependencies(out):
            problem.restore(accepted)
    new_damping, new_growth = lm_update.next_damping(damping, growth, gain, accepted,
                                                     problem.limits)
    # A rejected trial from a NaN or inf loss ends the step at once: a larger damping would
    # only shorten the step, and carrying λ on to the next batch would stall that one too.
    stalled = tf.logical_not(accepted) & ((damping >= problem.limits.top)
                                          | tf.logical_not(tf.math.is_finite(problem.f0)))
    code = lm_convergence.convergence_code(problem.tests, problem.f0, f_new, predicted, gain,
                                           delta, finite & within, stalled, step_norm)
    kept = [tf.where(accepted, new, old) for new, old in zip(out, values)]
    return Attempt(accepted, new_damping, new_growth, code, kept, evaluations)


class TrialResult(NamedTuple):
    """`(λ, ν)` for the next step, the convergence code, `[loss, *aux]` of the point the
    step ends on, the trials run and their evaluations of the residuals (`Attempt`'s,
    summed; int64), and whether the last trial was accepted (False when none ran)."""

    damping: tf.Tensor
    growth: tf.Tensor
    code: tf.Tensor
    values: list
    trials: Any = 0
    evaluations: Any = 0
    accepted: Any = False


def trial_loop(problem: TrialProblem, damping: tf.Tensor, growth: tf.Tensor,
               values: Sequence[tf.Tensor], attempts: int,
               converged_before: tf.Tensor | None = None,
               code_before: tf.Tensor | None = None) -> TrialResult:
    """Up to `attempts` trials (a `tf.while_loop`), until one is accepted or converges.

    Args:
        problem: the step's `TrialProblem`.
        damping: λ of the first trial (`update.starting_damping`).
        growth: ν, the factor λ grows by after a rejected trial.
        values: `[loss, *aux]` at the start.
        attempts: the most trials (a Python int).
        converged_before: a bool tensor: a test was met before any trial, so the loop runs
            none and returns `code_before` with the starting `(λ, ν)` and values.
        code_before: the int32 code it returns then: GTOL (the gradient test, the default),
            or a deferred FTOL or XTOL that the step's start confirmed
            (`convergence.damping_limited`).

    Returns:
        The `TrialResult`; when every trial was rejected the variables are back at the start
        and `values` are the starting ones.
    """
    def body(i, lam, nu, done, code, accepted, evaluations, *kept):
        del done, code, accepted  # loop state read only by the condition and after the loop
        result = attempt(problem, lam, nu, kept)
        done = result.accepted | (result.code != lm_convergence.NOT_CONVERGED)
        return (i + 1, result.damping, result.growth, done, result.code, result.accepted,
                evaluations + result.evaluations, *result.values)

    skip = tf.constant(False) if converged_before is None else converged_before
    # The code returned when no trial runs (the first trial's replaces it otherwise).
    code = tf.constant(lm_convergence.GTOL) if code_before is None else code_before
    # Nothing accepted when no trial runs: restoring the start then changes nothing.
    start = (0, damping, growth, skip, code, tf.logical_not(skip), tf.constant(0, tf.int64),
             *values)
    out = tf.while_loop(lambda i, lam, nu, done, *rest: (i < attempts) & tf.logical_not(done),
                        body, start, maximum_iterations=attempts)
    # The last trial was rejected (or none ran): back to the start, bit for bit.
    with tf.control_dependencies(out):
        problem.restore(out[5])
    return TrialResult(out[1], out[2], out[4], list(out[7:]), out[0], out[6], out[5])

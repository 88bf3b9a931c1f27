"""MINPACK's convergence tests for Levenberg–Marquardt, as pure functions of tensors.

`lmder` stops on a relative reduction of the loss (ftol), a relative step size (xtol) or a
gradient orthogonal to the residuals (gtol); the optimizer adds STALLED, when no step reduces
the loss with the damping at its maximum, and NOT_FINITE, when it stops from a loss that is NaN
or inf (labels with NaN under `fit(check_finite=False)`, an overflowing model). The codes are
those of the optimizer's `convergence_reason` variable. docs/guides/levenberg_marquardt.md explains
the tests and the defaults.

An accepted trial that meets ftol or xtol does not end the fit at once (`deferred`): the
damping may have made its step short, far from the minimum. MINPACK tests xtol on its trust
radius, which only shrinks when trials fail; Nielsen's λ falls by at most 3 per accepted
step, so a step that λ held short reads as a converged one (a·exp(b·x) from a = 1, b = 3:
b's column of J collapses with a, the running scale keeps b damped, and the fit stopped on
xtol at a ≈ 1e-8). The next step, at the accepted point, forgets the running scale
(D = diag(JᵀJ) there) and ends the fit only if the undamped (Gauss–Newton) step there would
meet the tests too (`damping_limited`); otherwise it goes on with that scale.
A rejected trial that meets them still ends the fit: its step is short because no longer one
reduced the loss, MINPACK's shrinking radius.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import damping as lm_damping

__all__ = [
    "FTOL",
    "FTOL_AND_XTOL",
    "GTOL",
    "NOT_CONVERGED",
    "NOT_FINITE",
    "STALLED",
    "XTOL",
    "ConvergenceTests",
    "convergence_code",
    "convergence_tests",
    "damping_limited",
    "deferred",
    "describe",
    "gradient_converged",
]

# Convergence reason codes (the `convergence_reason` variable).
NOT_CONVERGED, FTOL, XTOL, FTOL_AND_XTOL, GTOL, STALLED, NOT_FINITE = 0, 1, 2, 3, 4, 5, 6


class ConvergenceTests(NamedTuple):
    """What the ftol and xtol tests of every trial of one step compare against.

    Attributes:
        ftol: the relative-reduction tolerance, at least the dtype's machine epsilon.
        xtol: the relative step tolerance, at least the dtype's machine epsilon.
        column_norms: MINPACK's scale `S`, the column norms of J (floored as `D` is under
            Marquardt's damping), whatever damping the step uses.
        x_norm: `‖S x‖` at the step's starting point.
    """

    ftol: float
    xtol: float
    column_norms: tf.Tensor
    x_norm: tf.Tensor


def convergence_tests(diag: tf.Tensor, x0: tf.Tensor, ftol: float, xtol: float,
                      eps: float) -> ConvergenceTests:
    """The tests of one step, from `diag(JᵀJ)` (the running scale) and the flat starting
    point `x0` (float64).

    A tolerance below `eps` (the model dtype's machine epsilon) acts as `eps`. `x_norm`
    leaves out the parameters whose column has had no effect yet (a zero running scale,
    which `scaling` floors at 1e-300): at a start like a = 0 in a·exp(−b·x), b's column is
    zero, and its floored 1e-150·|b| made the step bound `MAX_RELATIVE_STEP · ‖S x‖` reject
    every step (MINPACK counts such a column as 1, and its x = 0 case as no bound).
    """
    # Each parameter counts by its effect on the residuals, whatever the damping.
    column_norms = tf.sqrt(lm_damping.scaling(diag, "marquardt", eps))
    live = tf.where(diag > 0, column_norms, tf.zeros_like(column_norms))
    return ConvergenceTests(max(ftol, eps), max(xtol, eps), column_norms, tf.norm(live * x0))


def convergence_code(tests: ConvergenceTests, f0: tf.Tensor, f_new: tf.Tensor,
                     predicted: tf.Tensor, gain: tf.Tensor, delta: tf.Tensor,
                     finite: tf.Tensor, stalled: tf.Tensor,
                     step_norm: tf.Tensor | None = None) -> tf.Tensor:
    """The convergence code (int32 scalar) of one trial.

    Args:
        tests: the step's `ConvergenceTests`.
        f0: the loss at the starting point.
        f_new: the loss at the trial point.
        predicted: the reduction the quadratic model predicts, `f0 − q(δ)`.
        gain: the gain ratio of the trial (`gain_ratio`).
        delta: the trial step δ (zeros when the solve was not finite).
        finite: whether the trial evaluated the loss at δ itself: the solve gave a finite δ
            within `update.step_within_bound` (a trial that evaluated the start in its place
            measured no reduction, which must not read as a converged one).
        stalled: whether the trial was rejected with the damping at its maximum, or from a
            NaN or inf `f0` (no larger damping would help: `trial.attempt`).
        step_norm: `‖S δ‖`, when the caller has it already (the trial's step bound reads
            it); None: computed here.

    Returns:
        FTOL when `|f0 − f_new| ≤ ftol·f0`, `0 ≤ predicted ≤ ftol·f0` and `gain ≤ 2`; XTOL
        when `‖S δ‖ ≤ xtol·‖S x‖`; FTOL_AND_XTOL for both; else STALLED when `stalled`; else
        NOT_CONVERGED. Any of these but NOT_CONVERGED becomes NOT_FINITE when `f0` is NaN or
        inf: nothing converges from such a start. (A negative prediction is
        rounding, from a damping below the resolution of `JᵀJ`: the quadratic model says
        nothing then.)
    """
    actual = f0 - f_new
    f_ok = finite & tf.math.is_finite(f_new) & (tf.abs(actual) <= tests.ftol * f0) & (
        predicted >= 0.0) & (predicted <= tests.ftol * f0) & (gain <= 2.0)
    if step_norm is None:
        step_norm = tf.norm(tests.column_norms * delta)
    x_ok = finite & (step_norm <= tests.xtol * tests.x_norm)
    code = tf.where(f_ok & x_ok, FTOL_AND_XTOL,
                    tf.where(f_ok, FTOL, tf.where(x_ok, XTOL, NOT_CONVERGED)))
    code = tf.where((code == NOT_CONVERGED) & stalled, STALLED, code)
    return tf.where(tf.math.is_finite(f0) | (code == NOT_CONVERGED), code, NOT_FINITE)


def deferred(code: tf.Tensor, accepted: tf.Tensor) -> tf.Tensor:
    """Whether a trial's `code` waits for the next step's `damping_limited` test: an
    accepted trial that met ftol, xtol or both (a rejected one, or any other code, ends the
    fit at once)."""
    return accepted & (code >= FTOL) & (code <= FTOL_AND_XTOL)


def damping_limited(tests: ConvergenceTests, f0: tf.Tensor, step_norm: tf.Tensor,
                    predicted: tf.Tensor) -> tf.Tensor:
    """Whether the undamped step keeps a fit going that a deferred ftol or xtol would end.

    Args:
        tests: the step's `ConvergenceTests` (at the point the deferred trial accepted).
        f0: the loss there.
        step_norm: `‖S δ‖` of the Gauss–Newton step there, `δ = −(A + λ₀D)⁻¹ b` with λ₀ the
            least damping the solve resolves (`damping.ScaledSystem.undamped`); NaN where it
            was not solved.
        predicted: the reduction the quadratic model predicts for it.

    Returns:
        A bool tensor: the step is longer than xtol allows (`‖S δ‖ > xtol·‖S x‖`) and
        predicts more than ftol allows (`predicted > ftol·f0`); false where either is NaN.
        Either test met by the undamped step itself lets the fit end: then the damping did
        not hold it back.
    """
    return (step_norm > tests.xtol * tests.x_norm) & (predicted > tests.ftol * f0)


def gradient_converged(b: tf.Tensor, diag: tf.Tensor, f0: tf.Tensor, gtol: float) -> tf.Tensor:
    """MINPACK's gradient test: the largest cosine between r and a column of J is ≤ gtol.

    Args:
        b: `Jᵀr` (half the gradient of `f = ‖r‖²`).
        diag: `diag(JᵀJ)`, the squared column norms of J.
        f0: the loss `‖r‖²`.
        gtol: the tolerance.

    Returns:
        A bool scalar, also true when `b` is zero (nothing to descend along); false when `f0`
        or `b` is NaN or inf (the trials then decide: see `convergence_code`).
    """
    column_norms = tf.sqrt(diag)
    cosines = tf.where(column_norms > 0, tf.abs(b) / (column_norms * tf.sqrt(
        tf.maximum(f0, tf.constant(1e-300, f0.dtype)))), tf.zeros_like(b))
    # (A NaN or inf in J reaches b = Jᵀr too, unless r is zero.)
    finite = tf.reduce_all(tf.math.is_finite(tf.concat([b, [f0]], 0)))
    # Every cosine, not their maximum: XLA's reduce_max skips a NaN.
    return finite & tf.logical_or(tf.reduce_all(cosines <= gtol),
                                  tf.logical_not(tf.reduce_any(b != 0)))


def describe(code: int, ftol: float, xtol: float, gtol: float, eps: float | None) -> str:
    """The stop message of convergence code `code`, naming the tolerance that applied: a
    tolerance below `eps` (the machine epsilon of the trained variables' dtype; None before a
    step) acts as eps. A stall is not a convergence: "stopped".

    Example:

        >>> message = describe(XTOL, 1e-15, 1e-15, 1e-15, 2**-23)
        >>> message.split(": ", 1)[1]
        'relative step size below xtol=1.19209e-07 (xtol=1e-15 is below float32 precision)'
        >>> describe(GTOL, 1e-15, 1e-15, 1e-10, 2**-52)
        'LevenbergMarquardt converged: gradient orthogonal to the residuals within gtol=1e-10'
        >>> describe(STALLED, 1e-15, 1e-15, 1e-10, 2**-52).split(":")[0]
        'LevenbergMarquardt stopped'
        >>> describe(NOT_FINITE, 1e-15, 1e-15, 1e-10, 2**-52).split(":")[0]
        'LevenbergMarquardt stopped'
    """
    precision = {2.0**-23: "float32", 2.0**-52: "float64"}.get(eps, "the variables'")

    def tolerance(name: str, value: float) -> str:
        if eps is None or value >= eps:
            return f"{name}={value:g}"
        return f"{name}={eps:g} ({name}={value:g} is below {precision} precision)"

    loss = f"relative reduction of the loss below {tolerance('ftol', ftol)}"
    step = f"relative step size below {tolerance('xtol', xtol)}"
    if code == STALLED:
        return ("LevenbergMarquardt stopped: no step reduces the loss, with the damping at its "
                "maximum")
    if code == NOT_FINITE:
        return ("LevenbergMarquardt stopped: a step started from a NaN or inf loss, and no "
                "trial gave a finite, smaller one. Look for NaN or inf in the labels or inputs "
                "(fit's check_finite=True, the default, refuses them before training) or for "
                "an overflow in the model.")
    return "LevenbergMarquardt converged: " + {
        FTOL: loss,
        XTOL: step,
        FTOL_AND_XTOL: f"{loss} and {step}",
        GTOL: f"gradient orthogonal to the residuals within gtol={gtol:g}",
    }.get(code, f"reason {code}")

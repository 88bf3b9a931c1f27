"""The damped Gauss–Newton system solved by preconditioned conjugate gradients (`solver="cg"`).

`MatrixFreeSystem` has the interface of `damping.ScaledSystem` that `trial.trial_loop` uses,
`solve(λ) -> (δ, ok)` and `predicted_reduction(δ, λ)`, on the products of
`matrix_free.Products`: it solves `(JᵀJ + λD) δ = −b` by `pcg` with at most `iterations`
products `(JᵀJ + λD) p` (one JVP and one VJP pass over the batch each), never forming `J` or
`JᵀJ` (Hessian-free optimization, Martens 2010). The preconditioner is the diagonal of the
damped matrix, `diag(JᵀJ) + λD` (Jacobi). CG is warm-started from the previous solve's δ
(kept in an n-vector variable), scaled to minimize the quadratic along it (or dropped when
that does not reduce it), which costs one more product and lets a bounded number of
iterations per step add up over steps (Martens's warm start).

Because a bounded CG run does not solve the system exactly, the predicted reduction is computed
from the quadratic model itself, `f − q(δ) = −2bᵀδ − ‖Jδ‖²` (one JVP pass), not from the
exact-solution identity `δᵀJᵀJδ + 2λδᵀDδ` that `ScaledSystem` uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import tensorflow as tf

from graphfit.core import validation

__all__ = ["SOLVERS", "CGResult", "MatrixFreeSystem", "pcg", "resolve_solver",
           "validate_cg_arguments"]

SOLVERS = ("auto", "direct", "cg")


def resolve_solver(solver: str, n: int, max_parameters: int) -> str:
    """"direct" or "cg": `solver`, or for "auto" direct while `n ≤ max_parameters`.

    Example:

        >>> resolve_solver("auto", 5000, 5000), resolve_solver("auto", 5001, 5000)
        ('direct', 'cg')
    """
    if solver == "auto":
        return "direct" if n <= max_parameters else "cg"
    return solver


def validate_cg_arguments(solver, iterations, tolerance, probes) -> tuple:
    """`(solver, iterations, tolerance, probes)` checked (a ValueError names a bad one)."""
    validation.one_of("solver", solver, SOLVERS)
    iterations = validation.positive_int("cg_iterations", iterations)
    tolerance = validation.number_in_range("cg_tolerance", tolerance, 0.0, 1.0,
                                           include_high=False)
    probes = validation.positive_int("cg_diagonal_probes", probes, allow_none=True)
    return solver, iterations, tolerance, probes


class CGResult(NamedTuple):
    """`x`, the relative residual `‖r‖_M / ‖rhs‖_M` reached, and the iterations run."""

    x: tf.Tensor
    residual: tf.Tensor
    iterations: tf.Tensor


def _dot(a, b):
    return tf.reduce_sum(a * b)


def pcg(apply: Callable[[tf.Tensor], tf.Tensor], rhs: tf.Tensor, preconditioner: tf.Tensor,
        iterations: int, tolerance: float, x0=None, r0=None) -> CGResult:
    """Preconditioned conjugate gradients for `M x = rhs`, M symmetric positive definite.

    Args:
        apply: `apply(p) -> M p`.
        rhs: the right-hand side (1-D).
        preconditioner: the positive diagonal `P` of the Jacobi preconditioner (≈ diag(M)).
        iterations: the most products `M p` (a Python int).
        tolerance: stop once `‖r‖_{P⁻¹} ≤ tolerance · ‖rhs‖_{P⁻¹}`.
        x0, r0: a starting point and its residual `rhs − M x0`, or None for zero.

    Returns:
        The `CGResult`. A non-positive curvature `pᵀMp` (rounding) stops the iteration.

    Example:

        >>> import tensorflow as tf
        >>> m = tf.constant([[4.0, 1.0], [1.0, 3.0]], tf.float64)
        >>> out = pcg(lambda p: tf.linalg.matvec(m, p), tf.constant([1.0, 2.0], tf.float64),
        ...           tf.constant([4.0, 3.0], tf.float64), 10, 1e-12)
        >>> [round(float(v), 10) for v in out.x], int(out.iterations)
        ([0.0909090909, 0.6363636364], 2)
    """
    x = tf.zeros_like(rhs) if x0 is None else x0
    r = rhs if r0 is None else r0
    z = r / preconditioner
    rz = _dot(r, z)
    goal = tolerance * tolerance * _dot(rhs, rhs / preconditioner)

    def body(i, x, r, p, rz, _):
        mp = apply(p)
        curvature = _dot(p, mp)
        positive = curvature > 0
        alpha = tf.where(positive, rz / tf.where(positive, curvature, 1.0), 0.0)
        x = x + alpha * p
        r = r - alpha * mp
        z = r / preconditioner
        rz_new = _dot(r, z)
        beta = tf.where(rz > 0, rz_new / tf.where(rz > 0, rz, 1.0), 0.0)
        return i + 1, x, r, z + beta * p, rz_new, tf.logical_not(positive)

    def running(i, x, r, p, rz, broke):
        return (rz > goal) & tf.logical_not(broke)

    i, x, r, _, rz, _ = tf.while_loop(running, body, (0, x, r, z, rz, tf.constant(False)),
                                      maximum_iterations=iterations)
    norm = tf.sqrt(_dot(rhs, rhs / preconditioner))
    relative = tf.where(norm > 0, tf.sqrt(tf.maximum(rz, 0.0)) / tf.where(norm > 0, norm, 1.0),
                        tf.zeros_like(norm))
    return CGResult(x, relative, i)


class MatrixFreeSystem:
    """The damped system of one step on matrix-free products (see the module docstring).

    Args:
        linear: the step's `matrix_free.MatrixFreeLinearization` (`products`, `b`, `diag`).
        d: the damping diagonal D (`damping.scaling`).
        iterations: the most CG iterations per solve.
        tolerance: CG's relative residual tolerance.
        start: a float64 n-vector variable holding the last solve's δ (the warm start), or
            None for a cold start every time.
    """

    # Its products linearize at the variables' current values: the trial loop puts them
    # back at the step's start after every rejected trial (`trial.attempt`).
    solves_at_start_point = True

    def __init__(self, linear, d, iterations: int, tolerance: float, start=None):
        self.products, self.b, self.d = linear.products, linear.b, d
        # The preconditioner diag(JᵀJ) + λD is positive: D is, and λ ≥ its floor > 0.
        self.diag = linear.diag
        self.iterations, self.tolerance, self.start = iterations, tolerance, start
        self._solved = None  # ‖Jδ‖² of the last solve's δ

    def apply(self, damping, v) -> tf.Tensor:
        """`(JᵀJ + λD) v`."""
        return self.products.gauss_newton(v) + damping * self.d * v

    def _warm(self, damping, rhs):
        """`(x0, r0)`: the previous δ scaled to minimize `½xᵀMx − rhsᵀx` along it, or zeros
        when that does not go below zero (no previous δ: no product)."""
        previous = tf.convert_to_tensor(self.start)

        def scaled():
            mx = self.apply(damping, previous)
            curvature = _dot(previous, mx)
            scale = _dot(rhs, previous) / tf.where(curvature > 0, curvature, 1.0)
            good = (curvature > 0) & (scale > 0) & tf.math.is_finite(scale)
            scale = tf.where(good, scale, 0.0)
            return scale * previous, rhs - scale * mx

        return tf.cond(tf.reduce_any(previous != 0), scaled, lambda: (tf.zeros_like(rhs), rhs))

    def solve(self, damping) -> tuple[tf.Tensor, tf.Tensor]:
        """δ for the damping λ, and whether CG reached its tolerance."""
        rhs = -self.b
        x0, r0 = (None, None) if self.start is None else self._warm(damping, rhs)
        result = pcg(lambda p: self.apply(damping, p), rhs, self.diag + damping * self.d,
                     self.iterations, self.tolerance, x0, r0)
        if self.start is not None:
            finite = tf.reduce_all(tf.math.is_finite(result.x))
            self.start.assign(tf.where(finite, result.x, tf.zeros_like(result.x)))
        # ‖Jδ‖² at x₀, before the trial moves the variables (see `predicted_reduction`).
        self._solved = self.products.curvature(result.x)
        return result.x, result.residual <= self.tolerance

    def predicted_reduction(self, delta, damping) -> tf.Tensor:
        """`f − q(δ) = −2bᵀδ − ‖Jδ‖²` for the quadratic model `q` of `f = ‖r‖²`: valid for
        any δ, not only the exact solution.

        `trial.attempt` asks for it after moving the variables to `x₀ + δ`, where `J` is no
        longer the step's, so `‖Jδ‖²` of the last `solve` (computed there, at `x₀`, one JVP
        pass) is used for `δ` = that solve's result, or 0 for `δ` = zeros (a non-finite
        solve, not tried). Without a previous `solve` in this graph it is computed at the
        variables' current values.
        """
        del damping  # q does not contain λ
        if self._solved is None:
            curvature = self.products.curvature(delta)
        else:
            curvature = tf.where(tf.reduce_any(delta != 0), self._solved, 0.0)
        return -2.0 * _dot(self.b, delta) - curvature

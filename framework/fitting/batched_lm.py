"""Levenberg–Marquardt on many independent curve fits at once: one traced `tf.while_loop`.

Every tensor carries the curves on its first axis: the parameters `[N, p]`, the residuals
`[N, m]`, the Jacobians `[N, m, p]`, `JᵀJ` `[N, p, p]`. One iteration of the loop is one
trial of `optimizers.LevenbergMarquardt` for every curve still fitting, by the same rules and
constants (docs/guides/levenberg_marquardt.md), each curve with its own λ, ν, running scale, trial
count and convergence test:

1. at the start of a step (the first, after an accepted trial, or after `attempts_per_step`
   rejected ones), the running maximum of `diag(JᵀJ)` takes the step's diagonal with the
   memory of geodesic acceleration (`damping.SCALE_MEMORY` per step: a full batch), λ starts
   from the previous step's (`τ · scale` at the first) and MINPACK's gradient test runs;
2. the damped system `(Ã + λI) u = −D^-½ Jᵀr` is solved by a batched Cholesky factorization
   (`tf.linalg.cholesky` on `[N, p, p]`), with the clipped eigendecomposition for the curves
   whose factorization fails;
3. geodesic acceleration bends the step (central differences of the residuals along δ, the
   correction kept when `2‖D^½a‖ ≤ α‖D^½δ‖`), a step longer than `MAX_RELATIVE_STEP` times
   the point is rejected unseen, the gain ratio accepts or rejects, Nielsen's rule updates λ
   and ν, and MINPACK's ftol and xtol tests (and the stall and NaN tests) end a curve's fit;
   an accepted trial's ftol or xtol only at the next step's start, unless the undamped step
   there is damping-limited (`convergence.deferred`: the running scale forgets there, and the
   step's eigendecomposition gives the undamped step).

A curve whose fit ended keeps its parameters bit for bit while the others go on; the loop ends
when every curve has ended or spent `max_steps` steps. The Jacobian takes one backward pass:
every point reads its own copy of its curve's parameters (`_Curves.linearize`).

The traced loop depends on the formula, its parameters' bounds and `vary` (a bounded one is
fitted through the Formula layer's own transform, `ParameterSpec.external`) and the number
of input columns only: data of any number of curves and points (padded points weigh zero),
starts, fixed values and settings are its arguments, so a second fit of the same formula
(new data, another N or m) reuses it (`fit_function`). Each trial evaluates the residuals at
its point with their Jacobian (one backward pass, kept if the trial is accepted) and, with
geodesic acceleration, at two more points: `LoopResult.nfev` and `njev` count them. The
single-curve fit (`fitting.fit_curve`) is this loop with N = 1.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from graphfit.core.graph_rewrites import graph_rewrites
from graphfit.layers import formula_parser
from graphfit.layers.formula_parameters import ParameterSpec
from graphfit.optimizers.levenberg_marquardt import convergence as lm_convergence
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import geodesic as lm_geodesic
from graphfit.optimizers.levenberg_marquardt import update as lm_update

__all__ = ["Settings", "LoopResult", "fit_function", "trial_function", "run_fit", "use_xla",
           "trace_key", "GRAPH_REWRITES", "XLA_VALUES"]

F64 = tf.float64
EPS = float(np.finfo(np.float64).eps)
# The data values (curves × points) from which `jit_compile="auto"` compiles with XLA.
XLA_VALUES = 50_000
# One round of Grappler: the loop is a few hundred small ops (as LevenbergMarquardt's step).
GRAPH_REWRITES = {"meta_optimizer_iterations": "ONE", "memory_optimization": "NO_MEM_OPT"}


class Settings(NamedTuple):
    """The optimizer settings of a batched fit (LevenbergMarquardt's defaults)."""

    max_steps: int = 1000
    attempts_per_step: int = 10
    initial_damping: float = 1e-3
    ftol: float = 1e-15
    xtol: float = 1e-10
    gtol: float = 0.0
    geodesic_acceleration: bool = True


class LoopResult(NamedTuple):
    """What the loop returns, one row per curve (NumPy arrays).

    Attributes:
        params: `[N, p]` the varying parameters the fits ended on (internal values: bounded
            ones before their transform).
        reason: `[N]` the convergence code (`levenberg_marquardt.convergence`; 0: `max_steps`
            spent).
        steps: `[N]` LM steps (a step: up to `attempts_per_step` trials).
        nfev: `[N]` evaluations of the residuals (SciPy's nfev): one at the start, one at
            each trial point and, with geodesic acceleration, two more per trial.
        njev: `[N]` evaluations of the Jacobian (SciPy's njev): one at the start and one at
            each trial point (taken with that point's residuals in one backward pass).
        residuals: `[N, m]` the weighted residuals at `params`.
        jtj: `[N, p, p]` `JᵀJ` of their Jacobian with respect to the (internal) parameters.
    """

    params: np.ndarray
    reason: np.ndarray
    steps: np.ndarray
    nfev: np.ndarray
    njev: np.ndarray
    residuals: np.ndarray
    jtj: np.ndarray


class _Curves:
    """The weighted residuals `w·(f(x; b) − y)` of N curves and their Jacobian with respect
    to the varying parameters' internal values (`specs`: `ParameterSpec`s of the Formula
    layer; a bounded one maps its internal value into its bounds with the layer's own
    transform), the fixed parameters' values given per curve (`fixed` `[N, q]`)."""

    def __init__(self, parsed, specs, x, y, weights, fixed):
        self.parsed, self.y, self.weights = parsed, y, weights
        self.varying = [spec for spec in specs if spec.vary]
        fixed_names = [spec.name for spec in specs if not spec.vary]
        self.fixed = dict(zip(fixed_names, tf.unstack(fixed[:, :, None], len(fixed_names), 1)))
        columns = tf.unstack(x, num=x.shape[-1], axis=-1)  # [N, m] each
        self.inputs = {name: columns[0 if name == "x" else int(name[1:]) - 1]
                       for name in parsed.inputs}

    def residuals(self, params, per_point=False):
        """`[..., N, m]` for parameters `[..., N, p]`, or with `per_point` `[N, m, p]` (one
        copy per point)."""
        # One Unpack op each (slices cost three constants apiece in the traced loop).
        columns = tf.unstack(params if per_point else params[..., None, :], axis=-1)
        values = {spec.name: spec.external(u) for spec, u in zip(self.varying, columns)}
        values.update(self.fixed)
        values.update(self.inputs)
        model = self.parsed.evaluate(values, F64)
        return (model - self.y) * self.weights

    def linearize(self, params):
        """`(r [N, m], J [N, m, p])` by one backward pass: each point gets its own copy of
        its curve's parameters (`[N, m, p]`), so the gradient of `Σ r` with respect to the
        copies is the Jacobian, row by row (no point reads another's copy)."""
        copies = tf.broadcast_to(tf.expand_dims(params, 1), tf.concat(
            [tf.shape(self.y), tf.shape(params)[-1:]], 0))
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(copies)
            rows = self.residuals(copies, per_point=True)
        jac = tape.gradient(rows, copies, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return rows, formula_parser.zero_nan_slopes(rows, jac)  # 0·inf where r is finite


def _scaled_solve(a, d, damping, near, check, limited, column_floor, resolution):
    """`(solve, limited)` per curve, in the scaled variables (`damping.ScaledSystem`):
    `solve(b) -> δ = −(A + λD)⁻¹ b`, one factorization for every right-hand side of the
    trial: Cholesky, or where it fails and the step's first λ was `near` the resolution
    (below `EIGEN_MARGIN` times it), the eigendecomposition with negative eigenvalues
    clipped. A failed Cholesky elsewhere, and a non-finite system, give NaN (the trial is
    rejected). The eigendecomposition of `P = D^-½ A D^-½` is made also where some curve
    is to be `check`ed, and `limited(values, vectors, finite)` (`[N]` bool) is computed
    from it there (false where no curve is)."""
    inv_sqrt = tf.math.rsqrt(d)
    p = _col(inv_sqrt) * a * tf.expand_dims(inv_sqrt, 1)
    finite = tf.reduce_all(tf.math.is_finite(p), axis=[1, 2])
    eye = tf.eye(tf.shape(a)[-1], batch_shape=tf.shape(a)[:1], dtype=F64)
    p = tf.where(_col(_col(finite)), p, eye)
    # Each column shifted by λ, or by its own resolution where that is larger
    # (`damping.ScaledSystem.solve`).
    factor = tf.linalg.cholesky(p + tf.expand_dims(tf.maximum(_col(damping), column_floor), 1)
                                * eye)
    ok = tf.reduce_all(tf.math.is_finite(factor), axis=[1, 2])
    factor = tf.where(_col(_col(ok)), factor, eye)
    # The eigendecomposition only when some curve needs it (else that of the identity).

    def decomposed():
        values, vectors = tf.linalg.eigh(p)
        return values, vectors, limited(values, vectors, finite)

    values, vectors, limits = tf.cond(tf.reduce_all((ok | ~near) & ~check),
                                      lambda: (eye[:, 0], eye, tf.zeros_like(check)),
                                      decomposed)
    inverse = 1.0 / (tf.maximum(values, 0.0) + _col(tf.maximum(damping, resolution)))
    usable = _col(finite & (ok | near))

    def solve(b):
        rhs = -inv_sqrt * b
        v = tf.where(_col(ok), tf.squeeze(tf.linalg.cholesky_solve(factor, _col(rhs)), -1),
                     tf.linalg.matvec(vectors, inverse * tf.linalg.matvec(
                         vectors, rhs, transpose_a=True)))
        return tf.where(usable, inv_sqrt * v, float("nan"))

    return solve, limits


class _State(NamedTuple):
    params: tf.Tensor  # [N, p]
    r: tf.Tensor  # [N, m] the residuals at params
    jac: tf.Tensor  # [N, m, p] their Jacobian
    damping: tf.Tensor  # [N] λ (negative before the first step)
    first_damping: tf.Tensor  # [N] λ of the step's first trial
    growth: tf.Tensor  # [N] ν
    scale: tf.Tensor  # [N, p] running maximum of diag(JᵀJ)
    new_step: tf.Tensor  # [N] bool: the next trial starts a step
    trials: tf.Tensor  # [N] trials in the current step
    steps: tf.Tensor  # [N] steps started
    nfev: tf.Tensor  # [N] residual evaluations
    njev: tf.Tensor  # [N] Jacobian evaluations
    reason: tf.Tensor  # [N] int64, 0 while fitting
    active: tf.Tensor  # [N] bool
    pending: tf.Tensor  # [N] int64: a deferred code the next step's start tests, or 0


def _col(v):
    """`v[..., None]` in one op (a slice costs four in the traced loop)."""
    return tf.expand_dims(v, -1)


def _transposed_product(jac, r, xla):
    """`Jᵀr` per curve: `[N, p]` from `[N, m, p]` and `[N, m]`. Under XLA a product and a
    sum (XLA on CPU runs a batched dot of tiny matrices as a call per curve); TensorFlow's
    executor runs the batched matmul kernel faster."""
    if xla:
        return tf.reduce_sum(jac * _col(r), 1)
    return tf.einsum("nmp,nm->np", jac, r)


def _product(a, v, xla):
    """`A v` per curve: `[N, p]` from `[N, p, p]` and `[N, p]` (as `_transposed_product`)."""
    if xla:
        return tf.reduce_sum(a * tf.expand_dims(v, 1), -1)
    return tf.einsum("npq,nq->np", a, v)


def _norm(v):
    return tf.norm(v, axis=-1)


def _trial(curves, state: _State, s):
    """One trial for every curve (the inactive ones' results are discarded)."""
    n = state.params.shape[-1]
    r, jac = state.r, state.jac
    f0 = tf.reduce_sum(tf.square(r), -1)
    a = _jtj(jac, s["xla"])
    b = _transposed_product(jac, r, s["xla"])
    diag = tf.linalg.diag_part(a)
    start = state.new_step
    memory = tf.constant(lm_damping.SCALE_MEMORY if s["geodesic"] else 1.0, F64)
    # Forgotten where a deferred code is tested (`convergence.deferred`).
    check = start & (state.pending != lm_convergence.NOT_CONVERGED)
    memory = tf.where(_col(check), tf.constant(0.0, F64), memory)
    kept = tf.where(tf.math.is_finite(diag), diag, state.scale)
    scale = tf.where(_col(start), tf.maximum(memory * state.scale, kept), state.scale)
    d = _floored(scale)
    ratios = diag / d
    unit = tf.reduce_max(ratios, -1)
    resolution, top = n * EPS * unit, lm_damping.MAX_DAMPING * unit
    column_floor = n * EPS * ratios
    floor = lm_damping.least_damping(ratios, n * EPS)
    first = tf.where(state.damping < 0, s["tau"] * unit, state.damping)
    damping = tf.where(start, tf.clip_by_value(first, floor, top), state.damping)
    # MINPACK's S for the step bound and the xtol test: from the running scale, as
    # `convergence.convergence_tests(scale, ...)` in the optimizer.
    column_norms = tf.sqrt(d)
    x_norm = _norm(tf.where(scale > 0, column_norms, 0.0) * state.params)
    tests = lm_convergence.ConvergenceTests(s["ftol"], s["xtol"], column_norms, x_norm)
    gtol_met = start & _gradient_converged(b, diag, f0, s["gtol"])

    first_damping = tf.where(start, damping, state.first_damping)
    # The resolution of a float64 JᵀJ (`ScaledSystem`'s n·ε·scale); λ may go below it, where
    # each column keeps its own resolution.
    # A code deferred by the last (accepted) trial: confirmed here, at a step's start, unless
    # the undamped step is damping-limited (`convergence.deferred`).
    solve, limited = _scaled_solve(a, d, damping,
                                   first_damping < lm_damping.EIGEN_MARGIN * resolution, check,
                                   _damping_limited(b, d, resolution, f0, tests),
                                   column_floor, resolution)
    confirmed = check & ~limited
    delta = solve(b)
    finite = tf.reduce_all(tf.math.is_finite(delta), -1)
    delta = tf.where(_col(finite), delta, 0.0)
    within = (_norm(column_norms * delta) <= lm_update.MAX_RELATIVE_STEP * x_norm) | (
        x_norm <= 0)
    predicted = tf.reduce_sum(delta * _product(a, delta, s["xla"]), -1) + 2.0 * tf.reduce_sum(
        tf.maximum(_col(damping), column_floor) * d * tf.square(delta), -1)
    step = delta
    if s["geodesic"]:
        step = _accelerated(curves, state.params, r, jac, delta, solve, d, within,
                            s["xla"])
    trial_params = state.params + tf.where(_col(within), step, 0.0)
    # The trial point's residuals and Jacobian in one backward pass: kept if it is accepted.
    r_new, jac_new = curves.linearize(trial_params)
    f_new = tf.reduce_sum(tf.square(r_new), -1)
    actual = f0 - f_new
    gain = lm_update.gain_ratio(actual, predicted)
    accepted = lm_update.step_accepted(finite, f_new, actual, gain, within) & _finite_rows(
        jac_new)
    new_damping, new_growth = lm_damping.nielsen_update(damping, state.growth, gain, accepted)
    new_damping = tf.clip_by_value(new_damping, floor, top)
    stalled = ~accepted & ((damping >= top) | ~tf.math.is_finite(f0))
    code = _convergence_code(tests, f0, f_new, predicted, gain, delta, finite & within,
                             stalled)
    code = tf.where(gtol_met, tf.constant(lm_convergence.GTOL, tf.int64), code)
    # ±inf (or NaN, the model not finite) in J at the point: no step helps, stop at once.
    singular = ~_finite_rows(jac)
    code = tf.where(singular, tf.constant(lm_convergence.NOT_FINITE, tf.int64), code)
    accepted &= ~gtol_met & ~singular
    return (scale, trial_params, r_new, jac_new, accepted, new_damping, first_damping,
            new_growth, code, check, confirmed)


def _damping_limited(b, d, floor, f0, tests):
    """`limited(values, vectors, finite) -> [N]` for `_scaled_solve`:
    `convergence.damping_limited` of each curve's undamped step
    (`damping.ScaledSystem.undamped`: at the least damping `floor`, from the step's
    eigendecomposition of `D^-½ A D^-½` with negative eigenvalues clipped); false where
    that is not `finite`."""
    def limited(values, vectors, finite):
        values = tf.maximum(values, 0.0)
        w = tf.linalg.matvec(vectors, -tf.math.rsqrt(d) * b, transpose_a=True) / (
            values + _col(floor))
        weights = tf.square(w)
        step_norm = tf.sqrt(tf.reduce_sum(weights, -1))  # ‖D^½ δ‖ = ‖S δ‖
        predicted = tf.reduce_sum(weights * (values + 2.0 * _col(floor)), -1)
        return finite & lm_convergence.damping_limited(tests, f0, step_norm, predicted)

    return limited


def _finite_rows(jac):
    """`[N]` whether each curve's Jacobian `[N, m, p]` is finite everywhere."""
    return tf.reduce_all(tf.math.is_finite(jac), axis=[1, 2])


def _floored(diag):
    """`damping.scaling(diag, "marquardt")` per curve."""
    floor = tf.maximum(tf.reduce_max(diag, -1, keepdims=True) * 1e-300, 1e-300)
    return tf.maximum(diag, floor)


def _gradient_converged(b, diag, f0, gtol):
    """`convergence.gradient_converged` per curve."""
    norms = tf.sqrt(diag)
    cosines = tf.where(norms > 0, tf.abs(b) / (norms * _col(tf.sqrt(tf.maximum(f0, 1e-300)))),
                       0.0)
    finite = tf.reduce_all(tf.math.is_finite(b), -1) & tf.math.is_finite(f0)
    return finite & (tf.reduce_all(cosines <= gtol, -1) | ~tf.reduce_any(b != 0, -1))


def _accelerated(curves, params, r, jac, delta, solve, d, within, xla):
    """δ + a/2 where the geodesic correction a is finite and acceptable, else δ
    (`geodesic.trial_acceleration`, `geodesic.acceptable`)."""
    h = lm_geodesic.STEP
    # Both points in one evaluation of the formula (`[2, N, m]`).
    ahead, behind = tf.unstack(curves.residuals(tf.stack([params + h * delta,
                                                          params - h * delta])), 2)
    second = (ahead - 2.0 * r + behind) / (h * h)
    accel = solve(_transposed_product(jac, second, xla))
    sqrt_d = tf.sqrt(d)
    bent = tf.reduce_all(tf.math.is_finite(accel), -1) & within & (
        2.0 * _norm(sqrt_d * accel) <= lm_geodesic.ALPHA * _norm(sqrt_d * delta))
    return tf.where(_col(bent), delta + 0.5 * accel, delta)


def _convergence_code(tests, f0, f_new, predicted, gain, delta, finite, stalled):
    """`convergence.convergence_code` per curve (int64): FTOL (1) and XTOL (2) add up to
    FTOL_AND_XTOL (3)."""
    c = lm_convergence
    actual = f0 - f_new
    f_ok = finite & tf.math.is_finite(f_new) & (tf.abs(actual) <= tests.ftol * f0) & (
        predicted >= 0.0) & (predicted <= tests.ftol * f0) & (gain <= 2.0)
    x_ok = finite & (_norm(tests.column_norms * delta) <= tests.xtol * tests.x_norm)
    code = tf.cast(f_ok, tf.int64) * c.FTOL + tf.cast(x_ok, tf.int64) * c.XTOL
    code = tf.where((code == c.NOT_CONVERGED) & stalled, tf.constant(c.STALLED, tf.int64), code)
    return tf.where(tf.math.is_finite(f0) | (code == c.NOT_CONVERGED), code,
                    tf.constant(c.NOT_FINITE, tf.int64))


def _advance(curves, state: _State, s) -> _State:
    """The state after one trial of every active curve."""
    (scale, trial_params, r_new, jac_new, accepted, damping, first, growth,
     code, check, confirmed) = _trial(curves, state, s)
    active = state.active
    # A curve whose deferred code this step's start confirmed, or that has no step left
    # after dropping it, ends without its trial: nothing of it is kept or counted.
    spent = check & (confirmed | (state.steps >= s["max_steps"]))
    code = tf.where(confirmed, state.pending, tf.where(spent, tf.zeros_like(code), code))
    accepted &= ~spent
    deferred = lm_convergence.deferred(code, accepted)
    pending = tf.where(deferred, code, tf.zeros_like(code))
    code = code - pending
    trials = tf.where(state.new_step, tf.ones_like(state.trials), state.trials + 1)
    steps = state.steps + tf.cast(state.new_step & ~spent, tf.int64)
    ended = ((code != lm_convergence.NOT_CONVERGED) | spent) & active
    new_step = accepted | (trials >= s["attempts"])
    out_of_steps = new_step & (steps >= s["max_steps"]) & ~ended & ~deferred

    rows = _col(active)
    taken = active & accepted

    def keep(new, old, where=active):
        rank = old.shape.rank
        return tf.where(where if rank == 1 else tf.reshape(where, [-1] + [1] * (rank - 1)),
                        new, old)

    evaluations = tf.cast(active & ~spent, tf.int64)
    return _State(
        params=keep(trial_params, state.params, taken), r=keep(r_new, state.r, taken),
        jac=keep(jac_new, state.jac, taken),
        damping=keep(damping, state.damping), first_damping=keep(first, state.first_damping),
        growth=keep(growth, state.growth),
        scale=tf.where(rows, scale, state.scale), new_step=keep(new_step, state.new_step),
        trials=keep(trials, state.trials), steps=keep(steps, state.steps),
        nfev=state.nfev + evaluations * (3 if s["geodesic"] else 1),
        njev=state.njev + evaluations,
        reason=tf.where(ended, code, state.reason),
        active=active & ~ended & ~out_of_steps,
        pending=keep(pending, state.pending))


def _run(curves, params, s):
    count = tf.shape(params)[0]
    p = params.shape[-1]

    def zeros(dtype):
        return tf.zeros([count], dtype)

    r, jac = curves.linearize(params)
    one = tf.ones([count], tf.int64)
    state = _State(params, r, jac, zeros(F64) - 1.0, zeros(F64), zeros(F64) + 2.0,
                   tf.zeros([count, p], F64), tf.ones([count], tf.bool), zeros(tf.int64),
                   zeros(tf.int64), one, one, zeros(tf.int64), tf.ones([count], tf.bool),
                   zeros(tf.int64))
    # (+ 1: a code deferred by the last trial is tested at the start of one more step.)
    limit = tf.cast(s["max_steps"] * s["attempts"] + 1, tf.int32)
    state = tf.while_loop(
        lambda *st: tf.reduce_any(_State(*st).active),
        lambda *st: tuple(_advance(curves, _State(*st), s)),
        tuple(state), maximum_iterations=limit)
    state = _State(*state)
    return (state.params, state.reason, state.steps, state.nfev, state.njev, state.r,
            _jtj(state.jac, s["xla"]))


def _jtj(jac, xla):
    """`JᵀJ` per curve (as `_transposed_product`)."""
    if xla:
        return tf.reduce_sum(tf.expand_dims(jac, -1) * tf.expand_dims(jac, -2), 1)
    return tf.einsum("nmp,nmq->npq", jac, jac)


@functools.lru_cache(maxsize=64)
def fit_function(expression: str, specs: tuple, geodesic: bool, jit_compile: bool = False):
    """The traced batched fit of one formula: `run(params [N, p], fixed [N, q], x [N, m, k],
    y [N, m], weights [N, m], settings...) -> LoopResult tensors`, cached per formula
    (expression; `specs`: one `ParameterSpec` per parameter, its value ignored, its bounds
    and `vary` part of the trace), `geodesic` setting and `jit_compile`. Every argument is
    a tensor of relaxed shape, so new data, starts, fixed values, another N or m and other
    settings reuse the trace; with `jit_compile` XLA still compiles once per shape of the
    data (seconds each), and then runs the whole fit as one program (`use_xla`)."""
    names = tuple(spec.name for spec in specs)
    parsed = formula_parser.parse(expression, names)
    p = sum(1 for spec in specs if spec.vary)
    k = max([1] + [int(name[1:]) for name in parsed.inputs if name != "x"])

    def run(params, fixed, x, y, weights, max_steps, attempts, tau, ftol, xtol, gtol):
        s = {"max_steps": max_steps, "attempts": attempts, "tau": tau, "ftol": ftol,
             "xtol": xtol, "gtol": gtol, "geodesic": geodesic, "xla": jit_compile}
        return _run(_Curves(parsed, specs, x, y, weights, fixed), params, s)

    scalar = tf.TensorSpec([], F64)
    signature = [tf.TensorSpec([None, p], F64), tf.TensorSpec([None, len(specs) - p], F64),
                 tf.TensorSpec([None, None, k], F64), tf.TensorSpec([None, None], F64),
                 tf.TensorSpec([None, None], F64), tf.TensorSpec([], tf.int64),
                 tf.TensorSpec([], tf.int64), scalar, scalar, scalar, scalar]
    return tf.function(run, input_signature=signature, autograph=False, reduce_retracing=True,
                       jit_compile=jit_compile)


@functools.lru_cache(maxsize=64)
def trial_function(expression: str, specs: tuple, geodesic: bool):
    """One trial's evaluations for the Python loop (`python_lm`), traced once per formula,
    `specs` (as `fit_function`) and `geodesic` setting: a few dozen ops.

    `trial(vectors [N, 3p + 1 + p²], r [N, m], jac [N, m, p], fixed [N, q], x [N, m, k],
    y [N, m], weights [N, m]) -> (trial params [N, p], their residuals [N, m], Jacobian
    [N, m, p], loss [N], JᵀJ [N, p, p], Jᵀr [N, p])`. `vectors` holds (one tensor to
    convert per call) the parameters, the trial's δ, the damping diagonal D, whether δ is
    `within` its bound (1.0 or 0.0) and the trial's damped inverse `−D^-½ (Ã + λI)⁻¹ D^-½`
    (NaN where the trial's solve is), row-major; `r` and `jac` are those at the
    parameters. The trial point is `params + step` (`step` zero where not `within`), with
    geodesic acceleration `step = δ + a/2` where the correction `a = inverse · Jᵀr_vv` is
    finite and acceptable, as in `_trial`; its residuals and Jacobian take one backward
    pass (`_Curves.linearize`). With `within` 0 it linearizes at `params` (the start).

    Returns:
        The concrete function's flat callable (`call_flat(*tensors)`, its `inference_fn`):
        a call skips tf.function's binding of its arguments, half the cost of a call this
        small.
    """
    names = tuple(spec.name for spec in specs)
    parsed = formula_parser.parse(expression, names)
    p = sum(1 for spec in specs if spec.vary)
    k = max([1] + [int(name[1:]) for name in parsed.inputs if name != "x"])

    def trial(vectors, r, jac, fixed, x, y, weights):
        params, delta, d, within, inverse = tf.split(vectors, [p, p, p, 1, p * p], axis=1)
        within = tf.squeeze(within, -1) > 0.5
        curves = _Curves(parsed, specs, x, y, weights, fixed)
        step = delta
        if geodesic:
            inverse = tf.reshape(inverse, [-1, p, p])
            step = _accelerated(curves, params, r, jac, delta,
                                lambda b: _product(inverse, b, False), d, within, False)
        point = params + tf.where(_col(within), step, 0.0)
        r_new, jac_new = curves.linearize(point)
        # The loss and normal equations by the traced loop's kernels (`_trial`), which
        # round as they do.
        return (point, r_new, jac_new, tf.reduce_sum(tf.square(r_new), -1),
                _jtj(jac_new, False), _transposed_product(jac_new, r_new, False))

    def spec(*shape):
        return tf.TensorSpec(shape, F64)

    concrete = tf.function(trial, autograph=False).get_concrete_function(
        spec(None, 3 * p + 1 + p * p), spec(None, None), spec(None, None, p),
        spec(None, len(specs) - p), spec(None, None, k), spec(None, None), spec(None, None))
    if concrete.captured_inputs:  # nothing to capture: every input is an argument
        raise RuntimeError("trial_function: unexpected captured inputs")
    return concrete.inference_fn


def trace_key(specs) -> tuple:
    """`specs` with their starting values dropped: what `fit_function` traces for."""
    return tuple(ParameterSpec(spec.name, 0.0, spec.min, spec.max, spec.vary)
                 for spec in specs)


def use_xla(jit_compile, count: int, points: int) -> bool:
    """Whether a fit of `count` data sets of `points` points runs under XLA: `jit_compile`
    True or False, or "auto": XLA from `XLA_VALUES` data values on (where its compile time,
    2-3 s per shape on 2 CPU cores, buys more than it costs: docs/benchmarks/performance.md, "Small
    fits and many fits")."""
    if jit_compile == "auto":
        return count * points >= XLA_VALUES
    return bool(jit_compile)


def run_fit(expression: str, specs: tuple, params, fixed, x, y, weights,
            settings: Settings, jit_compile=False) -> LoopResult:
    """Runs the cached traced fit on NumPy arrays (float64, shapes as `fit_function`:
    `params` the varying parameters' internal values, `fixed` the fixed ones' values);
    `jit_compile` True, False or "auto" (`use_xla`)."""
    xla = use_xla(jit_compile, *np.shape(y))
    function = fit_function(expression, trace_key(specs),
                            bool(settings.geodesic_acceleration), xla)
    with graph_rewrites(GRAPH_REWRITES):
        out = function(
            tf.constant(params, F64), tf.constant(fixed, F64), tf.constant(x, F64),
            tf.constant(y, F64), tf.constant(weights, F64),
            tf.constant(settings.max_steps, tf.int64),
            tf.constant(settings.attempts_per_step, tf.int64),
            tf.constant(settings.initial_damping, F64),
            tf.constant(max(settings.ftol, EPS), F64), tf.constant(max(settings.xtol, EPS), F64),
            tf.constant(settings.gtol, F64))
    return LoopResult(*(t.numpy() for t in out))

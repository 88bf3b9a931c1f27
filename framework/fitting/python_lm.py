"""Levenberg–Marquardt on one curve as a Python loop over NumPy, for small fits.

The traced loop of `batched_lm` is about 500 ops per trial: tracing it costs about 0.4 s of
CPU, once per formula and process, and its first call another 0.2 s. For one curve, or a
few, this module runs the SAME algorithm one curve at a time: the same rules and constants
(Nielsen's damping, the running diagonal scale with geodesic acceleration's memory, λ's
start, floor and top, MINPACK's ftol/xtol/gtol tests with an accepted trial's ftol or xtol
deferred to the next step's start (`convergence.deferred`), the acceleration and its acceptance,
`MAX_RELATIVE_STEP`, the stall and NaN tests, `attempts_per_step`, the same `nfev`/`njev`
counts) in NumPy, with the formula evaluated in NumPy too (`numpy_trial.NumpyCurve`: the
values and the exact forward-mode Jacobian over the formula parser's own tree, bounds by the
Formula layer's transform; the acceleration's two points, the trial point, its residuals,
Jacobian and normal equations), so no TensorFlow call per trial.

The fallback is TensorFlow's small traced function per formula
(`batched_lm.trial_function`, the traced loop's own code): `_Curve.evaluate` calls it for a
trial whose NumPy evaluations hold NaN or inf (an overflowing model: TensorFlow's is the
reference),
tracing it on first need; `EVALUATION = "tensorflow"` (or `fit_curves(...,
evaluation="tensorflow")`) evaluates every trial so, as before NumPy's evaluation.

NumPy factorizes and solves (LAPACK), the traced loop TensorFlow, and NumPy and TensorFlow
round the elementary functions differently in the last bit: the loops agree to rounding,
and step for step wherever the fit stays above it (tests/fitting/test_python_loop.py,
tests/fitting/test_numpy_formula.py; docs/guides/levenberg_marquardt_in_depth.md, "Small
fits without the big trace"). Misra1a (`benchmarks/curve_fit_many.py`, 2-core machine at
load 4-6): a first fit in a process 8 ms of CPU, a further fit 3.0 ms (5.8x SciPy's
`curve_fit`; 9.8 ms, 18.6x, with TensorFlow's trial function per trial).
`fit_curve` and `fit_many` take this loop for up to `PYTHON_LOOP_CURVES` curves
(`uses_python_loop`, `loop="auto"`).
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import tensorflow as tf

from graphfit.core.graph_rewrites import graph_rewrites
from graphfit.fitting import batched_lm, numpy_trial
from graphfit.optimizers.levenberg_marquardt import convergence as lm_convergence
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import update as lm_update

__all__ = ["fit_curves", "uses_python_loop", "PYTHON_LOOP_CURVES", "LOOPS", "EVALUATION",
           "EVALUATIONS"]

EPS = batched_lm.EPS
# Up to this many curves `loop="auto"` fits them one by one in the Python loop; from more on,
# in one traced loop. Measured (docs/benchmarks/performance.md, "The Python loop for small
# fits" and "NumPy's evaluation"): the Python loop saves the traced loop's 0.3-0.4 s of tracing
# and instantiation once per formula and process, and a further fit costs about 3 ms of CPU
# per curve (Misra1a, NumPy's evaluation) against 5-7 ms for the traced loop's whole call up
# to 16 curves; so one curve (`fit_curve`) only.
PYTHON_LOOP_CURVES = 1
# The `loop` setting of `fit_curve` and `fit_many`.
LOOPS = ("auto", "python", "traced")
# How the loop evaluates the formula at a trial (`fit_curves`' `evaluation`): in NumPy
# (TensorFlow where NumPy's evaluations are not finite), or by TensorFlow's trial function
# every time (as before NumPy's; kept to compare the two).
EVALUATIONS = ("numpy", "tensorflow")
EVALUATION = "numpy"


def uses_python_loop(loop: str, jit_compile, count: int, points: int) -> bool:
    """Whether a fit of `count` curves of `points` points runs in the Python loop: `loop`
    "python" or "traced" as it says; "auto": up to `PYTHON_LOOP_CURVES` curves, unless
    `jit_compile` asks for XLA (`batched_lm.use_xla`), which only the traced loop has.

    Raises:
        ValueError: for `loop="python"` with `jit_compile=True`.
    """
    if loop == "python" and jit_compile is True:
        raise ValueError("loop='python' runs without tracing, so it cannot compile with XLA: "
                         "pass jit_compile=False (or 'auto'), or loop='traced'. Received: "
                         "loop='python', jit_compile=True")
    if loop != "auto":
        return loop == "python"
    return count <= PYTHON_LOOP_CURVES and not batched_lm.use_xla(jit_compile, count, points)


class _Solver:
    """The trial's damped solve in the scaled variables, as `batched_lm`'s per curve:
    Cholesky, or where it fails and the step's first λ was `near` the resolution, the
    eigendecomposition with negative eigenvalues clipped; NaN where neither applies.
    `delta`: `δ = −(A + λD)⁻¹ b`; `inverse`: the matrix `−(A + λD)⁻¹` (for the
    acceleration's second solve, in the trial function)."""

    def __init__(self, a, b, d, damping, near, column_floor, resolution):
        inv_sqrt = 1.0 / np.sqrt(d)
        p = inv_sqrt[:, None] * a * inv_sqrt[None, :]
        eye = _eye(len(d))
        finite = _all_finite(p)
        shift = np.maximum(damping, column_floor)
        # Right-hand sides: the step's, and the identity's columns for the inverse.
        rhs = -inv_sqrt[:, None] * np.concatenate([b[:, None], eye], 1)
        v = None
        try:
            factor = np.linalg.cholesky((p if finite else eye) + np.diag(shift))
            if _all_finite(factor):
                v = np.linalg.solve(factor.T, np.linalg.solve(factor, rhs))
        except np.linalg.LinAlgError:
            pass
        if v is None and near and finite:
            values, vectors = np.linalg.eigh(p)
            inverse = 1.0 / (np.maximum(values, 0.0) + max(damping, resolution))
            v = vectors @ (inverse[:, None] * (vectors.T @ rhs))
        if v is None or not finite:
            v = np.full_like(rhs, np.nan)
        v = inv_sqrt[:, None] * v
        self.delta, self.inverse = v[:, 0], v[:, 1:]


@functools.lru_cache(maxsize=16)
def _eye(n: int) -> np.ndarray:
    eye = np.eye(n)
    eye.flags.writeable = False
    return eye


def _norm(v):
    return float(np.sqrt((v * v).sum()))


def _all_finite(v) -> bool:
    return bool(np.isfinite(v).all())


class _Curve:
    """One curve's fit state, and its trial evaluations: NumPy's (`numpy_trial.NumpyCurve`)
    where they are finite, else the formula's TensorFlow trial function (`trial`, made on
    first need; `evaluation="tensorflow"`: every trial)."""

    def __init__(self, trial, curve, params, fixed, x, y, weights, geodesic):
        self.trial, self.numpy, self.geodesic = trial, curve, geodesic
        self.data = (fixed, x, y, weights)
        self.params = np.array(params, np.float64)
        p = len(self.params)
        zeros = np.zeros(p)
        self.r, self.jac = np.zeros(len(y)), np.zeros((len(y), p))
        self.params, self.r, self.jac, self.normal = self.evaluate(
            zeros, np.zeros((p, p)), zeros, False)
        self.damping, self.first_damping, self.growth = -1.0, 0.0, 2.0
        self.scale = zeros
        self.new_step, self.trials, self.steps = True, 0, 0
        self.nfev = self.njev = 1
        self.reason, self.active = lm_convergence.NOT_CONVERGED, True
        # The code of an accepted trial that met ftol or xtol, which the next step's start
        # confirms or drops (`convergence.deferred`).
        self.pending = lm_convergence.NOT_CONVERGED

    def evaluate(self, delta, inverse, d, within):
        """(trial params, r, J, (‖r‖², JᵀJ, Jᵀr)) of the trial (at the params when not
        `within`), as `batched_lm.trial_function` computes them."""
        if self.numpy is not None:
            out = self.numpy.trial(self.params, delta, d, within,
                                   inverse if self.geodesic else None, self.r, self.jac)
            if out is not None:
                return out
        if not isinstance(self.data[0], tf.Tensor):
            self.data = tuple(tf.constant(v[None], tf.float64) for v in self.data)
        vectors = np.concatenate([self.params, delta, d, [float(within)], inverse.ravel()])
        tensors = [tf.constant(v[None], tf.float64) for v in (vectors, self.r, self.jac)]
        # The traced loop's Grappler settings; the kernels run in this thread (around the
        # whole fit where every trial calls TensorFlow).
        with (graph_rewrites(batched_lm.GRAPH_REWRITES, "SINGLE_THREADED_EXECUTOR")
              if self.numpy is not None else contextlib.nullcontext()):
            point, r, jac, *normal = self.trial().call_flat(*tensors, *self.data)
        f, a, b = (t.numpy()[0] for t in normal)
        return point.numpy()[0], r.numpy()[0], jac.numpy()[0], (float(f), a, b)


def _step_start(c: _Curve, a, s):
    """The running scale, damping diagonal D and λ's range of the trial (a new step updates
    the scale and starts λ from the previous step's, `batched_lm._trial`)."""
    diag = np.diagonal(a)
    if c.new_step:
        memory = lm_damping.SCALE_MEMORY if s.geodesic_acceleration else 1.0
        if c.pending != lm_convergence.NOT_CONVERGED:  # forgotten where a deferred code is
            memory = 0.0                               # tested (`convergence.deferred`)
        kept = np.where(np.isfinite(diag), diag, c.scale)
        c.scale = np.maximum(memory * c.scale, kept)
    d = np.maximum(c.scale, max(c.scale.max() * 1e-300, 1e-300))
    ratios = diag / d
    unit = float(ratios.max())
    resolution, top = len(d) * EPS * unit, lm_damping.MAX_DAMPING * unit
    # λ's floor (`damping.least_damping`): below it λ shifts no column.
    floor = len(d) * EPS * float(np.where(ratios > 0, ratios, unit).min())
    column_floor = len(d) * EPS * ratios
    damping = c.damping
    if c.new_step:
        first = s.initial_damping * unit if c.damping < 0 else c.damping
        damping = min(max(first, floor), top)
        c.first_damping = damping
    return diag, d, floor, top, damping, resolution, column_floor


def _gradient_converged(b, diag, f0, gtol) -> bool:
    """MINPACK's gradient test (`convergence.gradient_converged`), in NumPy."""
    norms = np.sqrt(diag)
    cosines = np.where(norms > 0, np.abs(b) / (norms * np.sqrt(max(f0, 1e-300))), 0.0)
    finite = _all_finite(b) and np.isfinite(f0)
    return bool(finite and ((cosines <= gtol).all() or not (b != 0).any()))


def _damping_limited(a, b, d, floor, f0, x_norm, s) -> bool:
    """`convergence.damping_limited` of the step's undamped step, in NumPy, as
    `damping.ScaledSystem.undamped` gives it: solved at the least damping, `floor`, through
    the eigendecomposition of `P = D^-½ A D^-½` with negative eigenvalues clipped."""
    inv_sqrt = 1.0 / np.sqrt(d)
    p = inv_sqrt[:, None] * a * inv_sqrt[None, :]
    if not (_all_finite(p) and _all_finite(b)):
        return False  # (TensorFlow's eigh decomposes the identity: NaN, not limited)
    values, vectors = np.linalg.eigh(p)
    values = np.maximum(values, 0.0)
    w = (vectors.T @ (-inv_sqrt * b)) / (values + floor)
    weights = w * w
    step_norm = math.sqrt(float(weights.sum()))  # ‖D^½ δ‖ = ‖S δ‖: S = D^½ here
    predicted = float((weights * (values + 2.0 * floor)).sum())
    return step_norm > max(s.xtol, EPS) * x_norm and predicted > max(s.ftol, EPS) * f0


def _code(s, f0, f_new, predicted, gain, step_norm, x_norm, finite, stalled) -> int:
    """`convergence.convergence_code` of one trial, in Python numbers."""
    c = lm_convergence
    ftol, xtol = max(s.ftol, EPS), max(s.xtol, EPS)
    actual = f0 - f_new
    f_ok = finite and np.isfinite(f_new) and abs(actual) <= ftol * f0 and (
        0.0 <= predicted <= ftol * f0) and gain <= 2.0
    x_ok = finite and step_norm <= xtol * x_norm
    code = c.FTOL * bool(f_ok) + c.XTOL * bool(x_ok)
    if code == c.NOT_CONVERGED and stalled:
        code = c.STALLED
    if not np.isfinite(f0) and code != c.NOT_CONVERGED:
        code = c.NOT_FINITE
    return code


def _trial(c: _Curve, s) -> None:
    """One trial of `batched_lm._trial` and its bookkeeping (`batched_lm._advance`)."""
    f0, a, b = c.normal
    diag, d, floor, top, damping, resolution, column_floor = _step_start(c, a, s)
    column_norms = np.sqrt(d)
    # ‖S x‖ over the columns that have had an effect (`convergence.convergence_tests`).
    x_norm = _norm(np.where(c.scale > 0, column_norms, 0.0) * c.params)
    if c.pending != lm_convergence.NOT_CONVERGED:  # a new step: the last trial was accepted
        if not _damping_limited(a, b, d, resolution, f0, x_norm, s):
            c.reason, c.active = c.pending, False
            return
        c.pending = lm_convergence.NOT_CONVERGED
        if c.steps >= s.max_steps:
            c.active = False
            return
    gtol_met = c.new_step and _gradient_converged(b, diag, f0, s.gtol)
    solve = _Solver(a, b, d, damping, c.first_damping < lm_damping.EIGEN_MARGIN * resolution,
                    column_floor, resolution)
    delta = solve.delta
    finite = _all_finite(delta)
    if not finite:
        delta = np.zeros_like(delta)
    step_norm = _norm(column_norms * delta)
    within = step_norm <= lm_update.MAX_RELATIVE_STEP * x_norm or x_norm <= 0
    predicted = float(delta @ (a @ delta) + 2.0 * (np.maximum(damping, column_floor) * d
                                                   * delta * delta).sum())
    trial_params, r_new, jac_new, normal = c.evaluate(delta, solve.inverse, d, within)
    f_new = normal[0]
    actual = f0 - f_new
    gain = actual / predicted if predicted > 0 else 0.0
    accepted = bool(finite and np.isfinite(f_new) and actual > 0
                    and gain > lm_update.ACCEPT and within and _all_finite(jac_new))
    if accepted:
        new_damping = damping * max(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
    else:
        new_damping = damping * c.growth
    c.growth = 2.0 if accepted else c.growth * 2.0
    stalled = not accepted and (damping >= top or not np.isfinite(f0))
    code = _code(s, f0, f_new, predicted, gain, step_norm, x_norm, finite and within, stalled)
    if gtol_met:
        code, accepted = lm_convergence.GTOL, False
    if not _all_finite(c.jac):  # ±inf (or NaN, the model not finite) in J: no step helps
        code, accepted = lm_convergence.NOT_FINITE, False
    c.damping = min(max(new_damping, floor), top)
    c.trials = 1 if c.new_step else c.trials + 1
    c.steps += int(c.new_step)
    c.new_step = accepted or c.trials >= s.attempts_per_step
    if accepted:
        c.params, c.r, c.jac, c.normal = trial_params, r_new, jac_new, normal
    c.nfev += 3 if s.geodesic_acceleration else 1
    c.njev += 1
    if accepted and lm_convergence.FTOL <= code <= lm_convergence.FTOL_AND_XTOL:
        c.pending, code = code, lm_convergence.NOT_CONVERGED  # `convergence.deferred`
    ended = code != lm_convergence.NOT_CONVERGED
    c.reason = code if ended else c.reason
    c.active = not ended and not (c.new_step and c.steps >= s.max_steps
                                  and c.pending == lm_convergence.NOT_CONVERGED)


def _fit_one(trial, curve, params, fixed, x, y, weights, s) -> _Curve:
    curve = _Curve(trial, curve, params, fixed, x, y, weights, bool(s.geodesic_acceleration))
    for _ in range(s.max_steps * s.attempts_per_step + 1):  # + the last deferred test
        if not curve.active:
            break
        _trial(curve, s)
    return curve


def fit_curves(expression: str, specs: tuple, params, fixed, x, y, weights,
               settings: batched_lm.Settings, evaluation: str | None = None
               ) -> batched_lm.LoopResult:
    """`batched_lm.run_fit`'s fit, curve by curve in the Python loop: the same arguments
    (NumPy arrays, one row per curve) and the same `LoopResult`. `evaluation`: "numpy"
    (NumPy's trials, TensorFlow's where they are not finite) or "tensorflow" (every trial
    by `batched_lm.trial_function`); None: `EVALUATION`."""
    evaluation = EVALUATION if evaluation is None else evaluation
    if evaluation not in EVALUATIONS:
        raise ValueError(f"evaluation must be one of {EVALUATIONS}. Received: {evaluation!r}")
    trial = functools.partial(batched_lm.trial_function, expression,
                              batched_lm.trace_key(specs), bool(settings.geodesic_acceleration))
    # (A trial may overflow: its loss is then inf, and it is rejected, as in the traced loop.)
    with (graph_rewrites(batched_lm.GRAPH_REWRITES, "SINGLE_THREADED_EXECUTOR")
          if evaluation == "tensorflow" else contextlib.nullcontext()), np.errstate(
            over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        curves = []
        for row in zip(params, fixed, x, y, weights):
            curve = (numpy_trial.NumpyCurve(expression, specs, *row[1:])
                     if evaluation == "numpy" else None)
            curves.append(_fit_one(trial, curve, *row, settings))
    return batched_lm.LoopResult(
        params=np.stack([c.params for c in curves]),
        reason=np.array([c.reason for c in curves], np.int64),
        steps=np.array([c.steps for c in curves], np.int64),
        nfev=np.array([c.nfev for c in curves], np.int64),
        njev=np.array([c.njev for c in curves], np.int64),
        residuals=np.stack([c.r for c in curves]),
        jtj=np.stack([c.normal[1] for c in curves]))

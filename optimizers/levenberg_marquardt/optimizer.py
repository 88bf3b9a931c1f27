"""`LevenbergMarquardt`: a second-order optimizer that trains a model's own variables."""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np
import tensorflow as tf

from graphfit.core import update_hooks
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt import residuals as lm_residuals
from graphfit.optimizers.gradient_record import record_gradients
from graphfit.optimizers.optimizer import Optimizer, _as_tf_variable
from graphfit.core.registry import OPTIMIZERS

__all__ = ["LevenbergMarquardt"]

# Convergence reason codes (the `convergence_reason` variable).
NOT_CONVERGED, FTOL, XTOL, FTOL_AND_XTOL, GTOL, STALLED = 0, 1, 2, 3, 4, 5
_ACCEPT = 1e-4  # a trial is accepted when it achieves this fraction of the predicted reduction


def _check_tolerance(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(value) and 0 <= value < 1):
        raise ValueError(f"{name} must be a float in [0, 1). Received: {name}={value!r}")
    return float(value)


def _check_int(name: str, value, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer{' or None' if allow_none else ''}. "
                         f"Received: {name}={value!r}")
    return int(value)


@OPTIMIZERS.register
class LevenbergMarquardt(Optimizer):
    """Levenberg–Marquardt: damped Gauss–Newton steps on the model's own variables.

    Each training step linearizes the batch's residuals `r` (m values) around the current
    variables `x` (n scalars, all trainable variables flattened), with Jacobian `J` (m × n),
    and solves the damped normal equations

        (JᵀJ + λ D) δ = −Jᵀr          D = diag(JᵀJ) ("marquardt") or I ("identity")

    by Cholesky (an eigendecomposition when rounding breaks positive definiteness; the m × m
    system `δ = −D⁻¹Jᵀ(JD⁻¹Jᵀ + λI)⁻¹r` when m < n). The trial `x + δ` is kept only when the
    gain ratio `ρ = (f(x) − f(x+δ)) / (f(x) − q(δ))` of the actual to the predicted reduction of
    the loss exceeds 1e-4; then `λ ← λ·max(1/3, 1 − (2ρ−1)³)`, `ν ← 2` (Nielsen). A rejected
    trial is undone exactly (the variables return to the saved values, bit for bit) and
    `λ ← λν`, `ν ← 2ν`; up to `attempts_per_step` trials per step, all inside the compiled
    training step (a `tf.while_loop`).

    The residuals follow the compiled loss, scaled so that `‖r‖²` *is* the loss `fit` reports
    (mean squared error with sample weights exactly; see `optimizers.lm_residuals`).
    Cross-entropy losses (sparse, categorical, binary, from logits or not) use the generalized
    Gauss–Newton matrix `JᵀHJ`, so classifiers train with LM too. A loss with a
    `residuals(y_true, y_pred)` method (`optimizers.ResidualLoss`) supplies its own residuals.

    Update hooks (batch-norm moving averages) and training metrics see one forward pass per
    step: that of the accepted trial (or of the starting point when every trial failed), run
    with `training=True`. The loss a step returns is the loss at the point it ends on.

    Convergence follows MINPACK's `lmder`, tested on every trial: relative reduction
    (`|actual| ≤ ftol·f`, `predicted ≤ ftol·f`, `ρ ≤ 2`), step (`‖S δ‖ ≤ xtol·‖S x‖` with `S`
    the column norms of J) and, before the trials, gradient (the largest cosine between `r` and
    a column of `J` is at most `gtol`); a tolerance below the dtype's machine epsilon acts as the
    epsilon. The defaults ftol = xtol = 1e-10 are tighter than MINPACK's √ε ≈ 1.49e-8: with
    those, large-residual fits (NIST's Chwirut1 and Chwirut2) stop at 5.9 certified digits;
    with 1e-10 every NIST problem tested reaches 6 or more from both starting points, for one
    or two more steps. When a test is met `converged` is set, later steps leave the variables
    alone, and `fit` stops after its current chunk of steps with `model.stop_reason` saying
    why (`stop_reason()` reports it once and re-arms the optimizer).

    The Jacobian of each chunk of examples comes from one of three modes:

    - "per_example": reverse mode one example at a time, each example's rows differentiated
      on a batch of one and all examples vectorized with `tf.vectorized_map` (as
      torch-levenberg-marquardt's `vmap(jacrev)`): work linear in the examples;
    - "reverse": `GradientTape.jacobian` with pfor on a whole chunk, one backward pass of the
      chunk per residual row (chunks of about `max(n, 256)` rows keep that work bounded);
    - "forward": `tf.autodiff.ForwardAccumulator` vectorized over unit tangents, one forward
      pass per parameter.

    "auto" picks forward mode when one example alone has more rows than there are parameters
    (say an image output of a small model); otherwise "per_example", or "reverse" when a layer
    of the model mixes the examples of a batch (`Layer.mixes_examples`: BatchNormalization in
    training) or the loss does (`ResidualLoss(mixes_examples=True)`), which a batch of one
    would break. `JᵀJ` is accumulated over the chunks, so memory stays O(n²) plus one chunk.
    Each chunk runs through the model on its own: a layer that mixes examples sees each chunk
    as its own batch when a batch is split (pass a `jacobian_chunk_size` of at least the batch
    size to avoid that). Dropout makes the loss random, which LM's gain ratio cannot judge:
    leave it out of models trained with LM.

    Args:
        damping: "marquardt" (scale-invariant, MINPACK's choice) or "identity".
        initial_damping: λ at the first step, relative to the largest diagonal entry of
            `D^-½ JᵀJ D^-½` (Nielsen's τ). Defaults to 1e-3.
        attempts_per_step: trial steps per training step. Defaults to 10.
        ftol: relative-reduction tolerance. Defaults to 1e-10 (see above).
        xtol: relative step tolerance. Defaults to 1e-10.
        gtol: gradient (cosine) tolerance. Defaults to 0.0 (MINPACK's).
        jacobian_mode: "auto", "per_example", "reverse" or "forward" (see above).
        jacobian_chunk_size: examples per chunk of the Jacobian, or None to choose as above.
        max_parameters: the largest n accepted; above it a clear ValueError names n and the
            memory JᵀJ would need. Defaults to 5000.
        name: the optimizer's name.

    Raises:
        ValueError: for a bad argument (named, with the value received).

    Example:

        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers, optimizers
        >>> x = np.linspace(-1, 1, 50)[:, None]
        >>> model = gf.Sequential([layers.Dense(1)], input_shape=(1,), dtype="float64")
        >>> model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
        >>> history = model.fit(x, 3 * x + 1, batch_size=None, epochs=20, verbose=0)
        >>> [round(float(v), 6) for v in model.get_weights()[0].ravel()], len(history.epoch) < 20
        ([3.0], True)
    """

    slot_names = ()
    # jit_compile="auto" leaves XLA off on a CPU-only machine for LM: the trial loop and the
    # linear solves compile for seconds, and measured on 2 cores the digits recipe trained in
    # 8.6 s without XLA against 17.7 s with it (GPUs still get XLA).
    xla_friendly_on_cpu = False

    def __init__(
        self,
        damping: str = "marquardt",
        initial_damping: float = 1e-3,
        attempts_per_step: int = 10,
        ftol: float = 1e-10,
        xtol: float = 1e-10,
        gtol: float = 0.0,
        jacobian_mode: str = "auto",
        jacobian_chunk_size: int | None = None,
        max_parameters: int = 5000,
        name: str | None = None,
    ):
        if damping not in ("marquardt", "identity"):
            raise ValueError("damping must be 'marquardt' or 'identity'. "
                             f"Received: damping={damping!r}")
        if isinstance(initial_damping, bool) or not isinstance(initial_damping, numbers.Real) \
                or not (math.isfinite(initial_damping) and initial_damping > 0):
            raise ValueError("initial_damping must be a positive float. "
                             f"Received: initial_damping={initial_damping!r}")
        if jacobian_mode not in lm_jacobian.MODES:
            raise ValueError("jacobian_mode must be 'auto', 'per_example', 'reverse' or "
                             f"'forward'. Received: jacobian_mode={jacobian_mode!r}")
        self.attempts_per_step = _check_int("attempts_per_step", attempts_per_step)
        self.jacobian_chunk_size = _check_int("jacobian_chunk_size", jacobian_chunk_size, True)
        self.max_parameters = _check_int("max_parameters", max_parameters)
        self.ftol = _check_tolerance("ftol", ftol)
        self.xtol = _check_tolerance("xtol", xtol)
        self.gtol = _check_tolerance("gtol", gtol)
        super().__init__(1.0, name=name)  # no learning rate: the step length is solved for
        self.damping = damping
        self.initial_damping = float(initial_damping)
        self.jacobian_mode = jacobian_mode
        # State that persists across steps and is checkpointed: λ (negative until the first
        # step sets it), ν, and the convergence flag with its reason code.
        self._damping = self.add_variable("damping", -1.0, tf.float64)
        self._growth = self.add_variable("damping_growth", 2.0, tf.float64)
        self._converged = self.add_variable("converged", False, tf.bool)
        self._reason = self.add_variable("convergence_reason", NOT_CONVERGED, tf.int32)

    # ---------------------------------------------------------------------------- state

    @property
    def converged(self) -> tf.Variable:
        """True once a convergence test was met (bool variable)."""
        return self._converged

    @property
    def convergence_reason(self) -> tf.Variable:
        """0 not converged, 1 ftol, 2 xtol, 3 both, 4 gtol, 5 no reduction possible."""
        return self._reason

    @property
    def damping_value(self) -> tf.Variable:
        """λ of the next step (float64 variable; negative before the first step)."""
        return self._damping

    def stop_reason(self) -> str | None:
        """Why `fit` should stop, once: the convergence message, then the flag is cleared so
        the next `fit` (or step) starts afresh. None while not converged."""
        if not bool(self._converged.numpy()):
            return None
        code = int(self._reason.numpy())
        self._converged.assign(False)
        self._reason.assign(NOT_CONVERGED)
        return "LevenbergMarquardt converged: " + {
            FTOL: f"relative reduction of the loss below ftol={self.ftol:g}",
            XTOL: f"relative step size below xtol={self.xtol:g}",
            FTOL_AND_XTOL: f"relative reduction of the loss below ftol={self.ftol:g} and "
                           f"relative step size below xtol={self.xtol:g}",
            GTOL: f"gradient orthogonal to the residuals within gtol={self.gtol:g}",
            STALLED: "no step reduces the loss, with the damping at its maximum",
        }.get(code, f"reason {code}")

    # ----------------------------------------------------------------------------- step

    def minimize(self, loss_fn, variables):
        """One Levenberg–Marquardt step (see the class docstring).

        Args:
            loss_fn: the training step's `loss_fn`; it must carry `loss_fn.batch` (the model,
                loss set, inputs, labels and sample weights), as graphfit's compiled training
                step provides.
            variables: the trainable variables.

        Returns:
            `(loss, aux)` at the point the step ends on.

        Raises:
            ValueError: when the loss cannot be linearized, the batch is missing, or n is
                above `max_parameters`.
        """
        variables = [_as_tf_variable(v) for v in variables]
        batch = getattr(loss_fn, "batch", None)
        if batch is None:
            raise ValueError(
                "LevenbergMarquardt needs the model's residuals, not only the loss value: use it "
                "through model.compile(optimizer=LevenbergMarquardt(), loss=...) and fit, whose "
                "training step passes the batch (loss_fn.batch)."
            )
        n = sum(int(np.prod(v.shape.as_list())) for v in variables)
        lm_jacobian.check_parameter_count(n, self.max_parameters)
        losses = batch.loss_set.losses
        for output, loss in losses.items():
            if not lm_residuals.linearizable(loss):
                raise ValueError(
                    f"LevenbergMarquardt cannot write the loss {loss.name!r}"
                    + (f" of output {output!r}" if output else "")
                    + " as a sum of squares. Use mean squared error, a cross-entropy, or a "
                    "loss with a residuals(y_true, y_pred) method (optimizers.ResidualLoss)."
                )
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            loss0, aux0 = loss_fn()
        gradients = tape.gradient(loss0, variables,
                                  unconnected_gradients=tf.UnconnectedGradients.ZERO)
        record_gradients(gradients, variables)
        flat0, rebuild = _split_aux(aux0)
        y_pred0 = aux0[0] if isinstance(aux0, tuple) else None

        def skip():
            return [loss0, *flat0]

        def step():
            return self._step(loss_fn, batch, variables, n, loss0, flat0, gradients, y_pred0)

        out = tf.cond(self._converged, skip, step)
        self._iterations.assign_add(1)
        return out[0], rebuild(out[1:])

    def _step(self, loss_fn, batch, variables, n, loss0, flat0, gradients, y_pred0):
        """Linearizes, then tries up to `attempts_per_step` damped steps (a tf.while_loop).
        Returns `[loss, *aux tensors]` of the point the step ends on."""
        eps = float(np.finfo(np.float32 if any(v.dtype == tf.float32 for v in variables)
                             else np.float64).eps)
        f64 = tf.float64
        data, rows_for, per_example = lm_residuals.batch_rows(batch, y_pred0)
        num_examples = tf.shape(tf.nest.flatten(batch.x)[0])[0]
        independent = examples_independent(batch.model, batch.loss_set)
        mode = lm_jacobian.choose_mode(self.jacobian_mode, n, per_example, independent)
        if mode == "per_example" and not independent:  # Python: once per trace
            warnings.warn(
                "jacobian_mode='per_example' differentiates each example on a batch of its "
                "own, but a layer or the loss of this model mixes the examples of a batch "
                "(mixes_examples=True), so the Jacobian is not exact. Use 'auto' or 'reverse'.",
                stacklevel=2)
        chunk = lm_jacobian.chunk_examples(n, per_example, mode, self.jacobian_chunk_size)
        matrix, g_lin, diag, rho, under = lm_jacobian.normal_equations(
            rows_for, data, num_examples, chunk, variables, mode, f64)
        # b = ½∇f: the true gradient overdetermined; Cᵀρ in the m × m system, which solves
        # exactly that system.
        grad = tf.concat([tf.reshape(tf.cast(g, f64), [-1]) for g in gradients], 0)
        b = tf.where(under, g_lin, 0.5 * grad)
        d = lm_damping.scaling(diag, self.damping, eps)
        system = lm_damping.ScaledSystem(matrix, b, rho, d, under)
        scale = tf.reduce_max(diag / d)
        # λ's floor only keeps λ positive at float64's resolution (the solve is in float64;
        # when rounding makes JᵀJ slightly indefinite the eigen fallback takes over).
        floor = n * float(np.finfo(np.float64).eps) * scale
        f0 = tf.cast(loss0, f64)
        saved = [tf.identity(v) for v in variables]  # the last accepted point, bit for bit
        x0 = tf.concat([tf.reshape(tf.cast(s, f64), [-1]) for s in saved], 0)
        # The step test measures in MINPACK's scale, the column norms of J, whatever the
        # damping: each parameter counts by its effect on the residuals.
        sqrt_d = tf.sqrt(lm_damping.scaling(diag, "marquardt", eps))
        x_norm = tf.norm(sqrt_d * x0)
        ftol, xtol = max(self.ftol, eps), max(self.xtol, eps)
        # MINPACK's gradient test: the largest cosine between r and a column of J.
        column_norms = tf.sqrt(diag)
        cosines = tf.where(column_norms > 0, tf.abs(b) / (column_norms * tf.sqrt(
            tf.maximum(f0, tf.constant(1e-300, f64)))), tf.zeros_like(b))
        gradient_met = tf.logical_or(tf.reduce_max(cosines) <= self.gtol,
                                     tf.logical_not(tf.reduce_any(b != 0)))
        lam = self._damping.read_value()
        lam = tf.where(lam < 0, self.initial_damping * scale, lam)
        lam = tf.clip_by_value(lam, floor, lm_damping.MAX_DAMPING * scale)
        sizes = [int(np.prod(v.shape.as_list())) for v in variables]

        def assign(delta):
            pieces = tf.split(delta, sizes)
            for var, base, piece in zip(variables, saved, pieces):
                var.assign(base + tf.cast(tf.reshape(piece, var.shape), var.dtype))

        def restore():
            for var, base in zip(variables, saved):
                var.assign(base)
            return tf.constant(False)

        def attempt(i, lam, nu, done, code, loss, *flat):
            del done, code  # loop state read only by the loop's condition and after it
            delta, _ = system.solve(lam)
            finite = tf.reduce_all(tf.math.is_finite(delta))
            delta = tf.where(finite, delta, tf.zeros_like(delta))

            def trial():
                assign(delta)
                loss_new, aux_new = loss_fn()
                return [tf.cast(loss_new, loss.dtype), *_split_aux(aux_new)[0]]

            def no_trial():
                return [loss, *flat]

            out = tf.cond(finite, trial, no_trial)
            f_new = tf.cast(out[0], f64)
            actual = f0 - f_new
            predicted = system.predicted_reduction(delta, lam)
            gain = tf.where(predicted > 0, actual / predicted, tf.zeros_like(actual))
            accepted = finite & tf.math.is_finite(f_new) & (actual > 0) & (gain > _ACCEPT)
            with tf.control_dependencies(out):
                tf.cond(accepted, lambda: tf.constant(True), restore)
            f_ok = finite & tf.math.is_finite(f_new) & (tf.abs(actual) <= ftol * f0) & (
                predicted <= ftol * f0) & (gain <= 2.0)
            x_ok = finite & (tf.norm(sqrt_d * delta) <= xtol * x_norm)
            code = tf.where(f_ok & x_ok, FTOL_AND_XTOL,
                            tf.where(f_ok, FTOL, tf.where(x_ok, XTOL, NOT_CONVERGED)))
            new_lam, new_nu = lm_damping.nielsen_update(lam, nu, gain, accepted)
            top = lm_damping.MAX_DAMPING * scale
            stalled = tf.logical_not(accepted) & (lam >= top)
            code = tf.where((code == NOT_CONVERGED) & stalled, STALLED, code)
            new_lam = tf.clip_by_value(new_lam, floor, top)
            keep = [tf.where(accepted, a, b_) for a, b_ in zip(out, [loss, *flat])]
            return (i + 1, new_lam, new_nu, accepted | (code != NOT_CONVERGED), code, *keep)

        def run_attempts():
            start = (0, lam, self._growth.read_value(), tf.constant(False),
                     tf.constant(NOT_CONVERGED), loss0, *flat0)
            result = tf.while_loop(
                lambda i, lam, nu, done, *rest: tf.logical_and(i < self.attempts_per_step,
                                                               tf.logical_not(done)),
                attempt, start, maximum_iterations=self.attempts_per_step)
            return list(result[1:3]) + [result[4]] + list(result[5:])

        def gradient_zero():
            return [lam, self._growth.read_value(), tf.constant(GTOL), loss0, *flat0]

        result = tf.cond(gradient_met, gradient_zero, run_attempts)
        new_lam, new_nu, code = result[:3]
        self._damping.assign(new_lam)
        self._growth.assign(new_nu)
        converged = code != NOT_CONVERGED
        self._reason.assign(tf.where(converged, code, self._reason))
        self._converged.assign(converged | self._converged)
        return result[3:]

    # ---------------------------------------------------------------------------- config

    def get_config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "damping": self.damping,
            "initial_damping": self.initial_damping,
            "attempts_per_step": self.attempts_per_step,
            "ftol": self.ftol,
            "xtol": self.xtol,
            "gtol": self.gtol,
            "jacobian_mode": self.jacobian_mode,
            "jacobian_chunk_size": self.jacobian_chunk_size,
            "max_parameters": self.max_parameters,
        }


def examples_independent(model, loss_set) -> bool:
    """Whether each example's residual rows depend on that example alone: no layer of the
    model (`Layer.mixes_examples`) and no loss (a `mixes_examples` attribute, as
    `ResidualLoss` has) mixes the examples of a batch."""
    if any(layer.mixes_examples for layer in model.flatten_layers()):
        return False
    return not any(getattr(loss, "mixes_examples", False) for loss in loss_set.losses.values())


def _split_aux(aux):
    """(tensors, rebuild): the tensors of `aux`, with each `PendingUpdate` contributing its
    value, and the function that puts new tensors back in `aux`'s structure."""
    leaves = tf.nest.flatten(aux)
    tensors = []
    for leaf in leaves:
        if isinstance(leaf, update_hooks.PendingUpdate):
            tensors.append(leaf.value)
        elif leaf is not None:
            tensors.append(tf.convert_to_tensor(leaf))

    def rebuild(values):
        values = list(values)
        out = []
        for leaf in leaves:
            if isinstance(leaf, update_hooks.PendingUpdate):
                out.append(update_hooks.PendingUpdate(leaf.hook, values.pop(0)))
            elif leaf is None:
                out.append(None)
            else:
                out.append(values.pop(0))
        return tf.nest.pack_sequence_as(aux, out)

    return tensors, rebuild

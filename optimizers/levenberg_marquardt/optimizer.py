"""`LevenbergMarquardt`: a second-order optimizer that trains a model's own variables."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from graphfit.core import step_context, validation
from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.registry import OPTIMIZERS
from graphfit.core.step_types import ForwardPass, StepBatch, reads_backward_pass
from graphfit.core.variables import as_tf_variable
from graphfit.optimizers.after_update import ApplyConstraints
from graphfit.optimizers.base import FIRST_REPLICA
from graphfit.optimizers.levenberg_marquardt import batch_linearization as lm_batch
from graphfit.optimizers.levenberg_marquardt import conjugate_gradient as lm_cg
from graphfit.optimizers.levenberg_marquardt import convergence as lm_convergence
from graphfit.optimizers.levenberg_marquardt import damping as lm_damping
from graphfit.optimizers.levenberg_marquardt import finite_steps as lm_finite
from graphfit.optimizers.levenberg_marquardt import geodesic as lm_geodesic
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt import matrix_free as lm_matrix_free
from graphfit.optimizers.levenberg_marquardt import model_checks as lm_model_checks
from graphfit.optimizers.levenberg_marquardt import regularization as lm_regularization
from graphfit.optimizers.levenberg_marquardt import replicas as lm_replicas
from graphfit.optimizers.levenberg_marquardt import residuals as lm_residuals
from graphfit.optimizers.levenberg_marquardt import trial as lm_trial
from graphfit.optimizers.levenberg_marquardt import update as lm_update
from graphfit.optimizers.levenberg_marquardt.convergence import NOT_CONVERGED
from graphfit.optimizers.levenberg_marquardt.forward_values import examples_independent, split_aux
from graphfit.optimizers.second_order import SecondOrderOptimizer

# Grappler's settings for the direct solver's step (`LevenbergMarquardt.graph_rewrites`).
SMALL_STEP_REWRITES = {"meta_optimizer_iterations": "ONE", "memory_optimization": "NO_MEM_OPT"}

# The weights' constraints, projected after each step (accepted or not: a no-op on a point
# that satisfies them), as first-order optimizers do after each update.
_CONSTRAINTS = ApplyConstraints()

__all__ = ["LevenbergMarquardt"]


class _EvaluationCounts(tf.Module):
    """`LevenbergMarquardt`'s evaluation counts (int64 variables), a checkpoint part."""

    def __init__(self, scope):
        super().__init__(name="evaluation_counts")
        with tf.init_scope(), scope:
            self.function_evaluations, self.jacobian_evaluations = (
                tf.Variable(0, dtype=tf.int64, trainable=False, name=name,
                            aggregation=FIRST_REPLICA)
                for name in ("function_evaluations", "jacobian_evaluations"))


class _DeferredCode(tf.Module):
    """The code of an accepted trial that met ftol or xtol, which the next step's start
    confirms or drops (`convergence.deferred`; int64, 0 for none): a checkpoint part, so a
    resumed fit steps as an unbroken one and checkpoints written before it restore."""

    def __init__(self, scope):
        super().__init__(name="deferred_convergence")
        with tf.init_scope(), scope:
            self.code = tf.Variable(NOT_CONVERGED, dtype=tf.int64, trainable=False,
                                    name="code", aggregation=FIRST_REPLICA)


@OPTIMIZERS.register
class LevenbergMarquardt(SecondOrderOptimizer):
    """Levenberg–Marquardt: damped Gauss–Newton steps on the model's own variables.

    Each training step linearizes the batch's residuals `r` (scaled so that `‖r‖²` is the
    loss `fit` reports; cross-entropies use the generalized Gauss–Newton matrix) around the
    variables `x`, with Jacobian `J`, and tries up to `attempts_per_step` damped steps:

        (JᵀJ + λ D) δ = −Jᵀr                 D = diag(JᵀJ) ("marquardt") or I ("identity")
        ρ = (f(x) − f(x+δ)) / (f(x) − q(δ))   gain ratio, q the quadratic model of f = ‖r‖²
        ρ > 1e-4:  x ← x + δ,  λ ← λ·max(1/3, 1 − (2ρ−1)³),  ν ← 2     (Nielsen)
        otherwise: x unchanged (bit for bit),  λ ← λν,  ν ← 2ν

    With geodesic acceleration (`geodesic_acceleration`) the accepted point is x + δ + a/2.

    It stops (`converged`, `convergence_reason`) on MINPACK's ftol, xtol and gtol tests; an
    accepted trial's ftol or xtol is tested again at the next step's start, and ends the fit
    there unless the undamped step is damping-limited (`convergence.deferred`).
    docs/guides/levenberg_marquardt.md explains the scaling, the m < n case, the Jacobian modes, the
    generalized Gauss–Newton matrix and the convergence tests, and names the functions
    (`update`, `trial`, `convergence`) that carry out each part. Leave dropout out of models
    trained with LM: a random loss cannot be judged by the gain ratio.
    L2 weight penalties (`kernel_regularizer=keras.regularizers.L2(λ)`) enter as rows √λ·w, so
    LM minimises the loss `fit` reports; other penalties and the losses layers add in `call`
    are refused (`regularization.py`). Weight constraints are projected after each step.

    Args:
        damping: "marquardt" (scale-invariant, MINPACK's choice) or "identity".
        initial_damping: λ at the first step, relative to the largest diagonal entry of
            `D^-½ JᵀJ D^-½` (Nielsen's τ). Defaults to 1e-3.
        attempts_per_step: trial steps per training step. Defaults to 10.
        ftol: relative-reduction tolerance. Defaults to 1e-15: the loss's own resolution in
            float64, so the parameters' digits come from xtol (see the docs).
        xtol: relative step tolerance. Defaults to 1e-10.
        gtol: gradient (cosine) tolerance. Defaults to 0.0 (MINPACK's).
        jacobian_mode: "auto", "per_example", "reverse" or "forward" (see the docs).
        jacobian_chunk_size: examples per chunk of the Jacobian, or None to choose
            automatically.
        max_parameters: the largest n of the direct solver; above it a clear ValueError
            names n and the memory JᵀJ would need. Defaults to 5000.
        solver: "direct" (JᵀJ and Cholesky: n² memory, n ≤ max_parameters), "cg" (conjugate
            gradients on Jacobian-vector products: O(n) memory, each CG iteration one JVP and
            one VJP pass over the batch) or "auto" (direct while n ≤ max_parameters, cg above;
            the default). The direct solver holds about five n × n float64 arrays per step
            and factorizes in n³/3; cg costs per trial at most cg_iterations + 1
            JVP-and-VJP products, one more JVP and the trial's forward pass
            (docs/guides/levenberg_marquardt.md, "Past the n² wall", has the limits and the
            measured seconds per step).
        cg_iterations: the most CG iterations per trial (solver "cg"). Defaults to 20.
        cg_tolerance: CG's relative residual tolerance, in [0, 1). Defaults to 1e-4.
        cg_diagonal_probes: the Rademacher probes that estimate diag(JᵀJ) for solver "cg"
            (D, the preconditioner and the convergence scale), one VJP pass each; defaults
            to 4. None: the exact diagonal, each chunk's Jacobian rows squared (the direct
            solver's steps exactly, but k VJPs per example for k residual rows: 12 times
            slower per step on the digits conv net).
        geodesic_acceleration: bend each trial step along the loss's curved valley
            (Transtrum and Sethna 2012: x + δ + a/2, a from the residuals' second directional
            derivative; three forward passes and one backward pass more per trial). "auto"
            (the default) adds it on the direct solver on one device for mean squared error
            and residual losses of float64 models; True forces it (refused where it cannot
            apply), False turns it off. With it the running scale D halves its memory each
            pass over the data (each step outside `fit`; docs/guides/levenberg_marquardt.md,
            "Geodesic acceleration").
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

    # Under a tf.distribute strategy the trial loop runs once, for all replicas, on global
    # sums (`steps_across_replicas`): each replica linearizes its slice, JᵀJ, Jᵀr and the
    # losses are all-reduced.

    def __init__(
        self,
        damping: str = "marquardt",
        initial_damping: float = 1e-3,
        attempts_per_step: int = 10,
        ftol: float = 1e-15,
        xtol: float = 1e-10,
        gtol: float = 0.0,
        jacobian_mode: str = "auto",
        jacobian_chunk_size: int | None = None,
        max_parameters: int = 5000,
        solver: str = "auto",
        cg_iterations: int = 20,
        cg_tolerance: float = 1e-4,
        cg_diagonal_probes: int | None = 4,
        geodesic_acceleration: bool | str = "auto",
        name: str | None = None,
    ):
        self.solver, self.cg_iterations, self.cg_tolerance, self.cg_diagonal_probes = \
            lm_cg.validate_cg_arguments(solver, cg_iterations, cg_tolerance, cg_diagonal_probes)
        self._cg_start = None  # the warm start of CG, an n-vector created at the first step
        validation.one_of("damping", damping, ("marquardt", "identity"))
        validation.one_of("geodesic_acceleration", geodesic_acceleration, ("auto", True, False))
        self.geodesic_acceleration = geodesic_acceleration
        initial_damping = validation.positive_float("initial_damping", initial_damping)
        validation.one_of("jacobian_mode", jacobian_mode, lm_jacobian.MODES)
        self.attempts_per_step = validation.positive_int("attempts_per_step", attempts_per_step)
        self.jacobian_chunk_size = validation.positive_int(
            "jacobian_chunk_size", jacobian_chunk_size, allow_none=True)
        self.max_parameters = validation.positive_int("max_parameters", max_parameters)
        self.ftol, self.xtol, self.gtol = (
            validation.number_in_range(name, value, 0.0, 1.0, include_high=False)
            for name, value in (("ftol", ftol), ("xtol", xtol), ("gtol", gtol)))
        super().__init__(name=name)  # no learning rate: the step length is solved for
        self.damping = damping
        self.initial_damping = float(initial_damping)
        self.jacobian_mode = jacobian_mode
        # State that persists across steps and is checkpointed: λ (negative until the first
        # step sets it), ν, and the convergence flag with its reason code. The code is int64:
        # TensorFlow keeps int32 variables in host memory, where an XLA step on a GPU cannot
        # reach them.
        self._damping = self.add_variable("damping", -1.0, tf.float64)
        self._growth = self.add_variable("damping_growth", 2.0, tf.float64)
        self._converged = self.add_variable("converged", False, tf.bool)
        self._reason = self.add_variable("convergence_reason", NOT_CONVERGED, tf.int64)
        # SciPy's nfev and njev over every step: checkpointed as a part of their own
        # (`checkpoint_parts`), not among the optimizer's own state, so checkpoints written
        # before they were counted restore as they are (their counts start at 0).
        self._counts = self._no_dependency(_EvaluationCounts(self.name_scope))
        # The code a trial deferred to the next step's start: a checkpoint part of its own.
        self._deferred_part = self._no_dependency(_DeferredCode(self.name_scope))
        self._deferred = self._deferred_part.code
        self._scale = None  # the running maximum of diag(JᵀJ), see _solver_state
        self._eps = None  # the machine epsilon of the trained variables, set by a step
        self._per_size: dict[str, dict[str, tf.Variable]] = {}  # n → its scale, cg_start

    # ---------------------------------------------------------------------------- state

    @property
    def converged(self) -> tf.Variable:
        """True once the optimizer asks `fit` to stop (bool variable): a convergence test was
        met, or the step stalled, or it started from a NaN or inf loss (`convergence_reason`)."""
        return self._converged

    @property
    def convergence_reason(self) -> tf.Variable:
        """0 not converged, 1 ftol, 2 xtol, 3 both, 4 gtol, 5 no reduction possible, 6 a NaN or
        inf loss (int64 variable)."""
        return self._reason

    def checkpoint_parts(self) -> dict[str, tf.Module]:
        """What a training checkpoint saves: this optimizer as `optimizer`, its evaluation
        counts as `evaluation_counts` and the code a trial deferred to the next step's start
        as `deferred_convergence` (parts a checkpoint may lack)."""
        return {"optimizer": self, "evaluation_counts": self._counts,
                "deferred_convergence": self._deferred_part}

    @property
    def evaluations(self) -> tf.Variable:
        """Evaluations of the residuals over every step (int64 variable; SciPy's nfev, the
        counts of `fitting.fit_many`): each step's at its start, one at each trial point,
        accepted or rejected, and two more for each trial's geodesic correction (the
        residuals at x ± hδ). Like `iterations`, it counts on across fits and is
        checkpointed; `reset_state` keeps it."""
        return self._counts.function_evaluations

    @property
    def jacobian_evaluations(self) -> tf.Variable:
        """Linearizations of the residuals over every step (int64 variable; SciPy's njev):
        one per step that runs its trials (a step's Jacobian, or for the cg solver its
        Jacobian-vector products, at its start point)."""
        return self._counts.jacobian_evaluations

    @property
    def damping_value(self) -> tf.Variable:
        """λ of the next step (float64 variable; negative before the first step)."""
        return self._damping

    @property
    def damping_scale(self) -> tf.Variable | None:
        """MINPACK's scale: the running maximum of diag(JᵀJ) over the steps (with geodesic
        acceleration, the earlier maximum halved per pass over the data), per parameter
        (float64 variable; None before `build`). D is this vector under "marquardt"."""
        return self._scale

    @property
    def graph_rewrites(self) -> dict | None:
        """Grappler's settings for the model's compiled steps (`graphfit.core.graph_rewrites`):
        with the direct solver one round and no memory optimizer, whose work on a step of a
        thousand small ops lengthens its first call and changes nearly nothing
        (docs/guides/levenberg_marquardt.md, "Where a small step's time goes"); TensorFlow's own
        for the cg solver, whose large step makes that first-call cost negligible."""
        return dict(SMALL_STEP_REWRITES) if self._resolved_solver() == "direct" else None

    def _resolved_solver(self) -> str:
        """"direct" or "cg" for the parameters built for; before `build`, `solver` as given."""
        if self._scale is None:
            return self.solver
        return lm_cg.resolve_solver(self.solver, int(self._scale.shape[0]), self.max_parameters)

    def reset_state(self) -> None:
        """Forgets what earlier steps learned, as a new optimizer would: λ (set again by
        the next step), ν, the running scale, the cg warm start and the convergence flag.
        Use it to fit the same model again from a new starting point."""
        self._damping.assign(-1.0)
        self._growth.assign(2.0)
        self._converged.assign(False)
        self._reason.assign(NOT_CONVERGED)
        self._deferred.assign(NOT_CONVERGED)
        for state in (self._scale, self._cg_start):
            if state is not None:
                state.assign(tf.zeros_like(state))

    def check_training(self, losses: dict, distributed: bool, sample_weight=None) -> None:
        """Refuses, before the first step, a loss LM cannot write as a sum of squares,
        `geodesic_acceleration=True` where it cannot apply (both are checked again when the
        step is traced, for steps that `fit` does not prepare), the cg solver under a
        strategy, and a negative sample weight (the residuals are sqrt(w)·r: NaN, and every
        step would fail)."""
        lm_residuals.check_linearizable(losses)
        if distributed and self._resolved_solver() == "cg":
            self._refuse_cg_under_a_strategy(
                None if self._scale is None else int(self._scale.shape[0]))
        if self.geodesic_acceleration is True and self._scale is not None:
            lm_geodesic.check_possible(self._resolved_solver(), distributed, losses)
        if sample_weight is None:
            return
        weights = np.asarray(sample_weight, dtype=np.float64).ravel()
        negative = np.flatnonzero(weights < 0)
        if negative.size:
            raise ValueError(
                f"LevenbergMarquardt needs sample_weight >= 0 (it weighs each residual by "
                f"sqrt(w)); {negative.size} weight(s) are negative, such as "
                f"{weights[negative[0]]:g} at index {negative[0]}.")

    def check_model(self, model) -> None:
        """Refuses, before the first step, weight regularizers that are no sums of squares
        (L1) and L2 penalties with what cannot take their rows (the cg solver, geodesic
        acceleration forced on); the step checks them again when it is traced."""
        variables = model.trainable_variables
        penalty = lm_regularization.L2Rows.of(model, variables)
        if penalty is not None:
            n = sum(int(np.prod(v.shape.as_list())) for v in variables)
            penalty.check(lm_cg.resolve_solver(self.solver, n, self.max_parameters),
                          self.geodesic_acceleration)

    def _refuse_cg_under_a_strategy(self, n: int | None) -> None:
        """The matrix-free solver has no distributed form yet (n: the parameters, if known)."""
        chose = ("" if self.solver == "cg" else
                 f" chooses the cg solver for n={n} > max_parameters={self.max_parameters},"
                 f" and cg")
        direct = ("solver='direct'" if n is None or n <= self.max_parameters else
                  f"solver='direct' with max_parameters >= {n} (JᵀJ alone then takes "
                  f"{n * n * 8 / 2**30:.2f} GiB)")
        raise ValueError(
            f"LevenbergMarquardt(solver={self.solver!r}){chose} does not run under a "
            f"tf.distribute strategy yet: train on one device, or use {direct}.")

    def stop_reason(self) -> str | None:
        """Why `fit` should stop, once: the convergence message, then the flag is cleared so
        the next `fit` (or step) starts afresh. None while not converged."""
        if not bool(self._converged.numpy()):
            return None
        code = int(self._reason.numpy())
        self._converged.assign(False)
        self._reason.assign(NOT_CONVERGED)
        return lm_convergence.describe(code, self.ftol, self.xtol, self.gtol, self._eps)

    # ----------------------------------------------------------------------------- step

    @graphfit_api
    def minimize(self, loss_fn, variables, batch: StepBatch | None = None):
        """One Levenberg–Marquardt step (see the class docstring).

        Args:
            loss_fn: the training step's loss function: returns `(loss, ForwardPass)`.
            variables: the trainable variables.
            batch: the `StepBatch` behind `loss_fn` (model, loss set, inputs, labels and
                sample weights), which `Model.train_step` passes.

        Returns:
            `(loss, aux)` at the point the step ends on.

        Raises:
            ValueError: when the loss cannot be linearized, the batch is missing, or n is
                above `max_parameters`.
        """
        variables = [as_tf_variable(v) for v in variables]
        lm_model_checks.check_trainable(variables, None if batch is None else batch.model)
        if batch is None:
            raise ValueError(
                "LevenbergMarquardt needs the model's residuals, not only the loss value: use it "
                "through model.compile(optimizer=LevenbergMarquardt(), loss=...) and fit, whose "
                "training step passes the batch: optimizer.minimize(loss_fn, variables, batch)."
            )
        lm_model_checks.warn_random_layers(batch.model)  # Python: once per trace
        lm_model_checks.warn_cancelled_biases(batch.model, self.damping)
        lm_model_checks.warn_narrow_loss(batch.model, variables)
        n = sum(int(np.prod(v.shape.as_list())) for v in variables)
        solver = lm_cg.resolve_solver(self.solver, n, self.max_parameters)
        if solver == "direct":
            lm_jacobian.check_parameter_count(n, self.max_parameters)
        elif batch.replicas is not None:
            self._refuse_cg_under_a_strategy(n)
        self._solver_state(n, solver)
        if not batch.loss_set.losses:
            raise ValueError(
                "LevenbergMarquardt minimises the squared residuals of the compiled loss, and "
                "the model was compiled with loss=None (the losses layers add are no residuals "
                "it can linearize). Compile it with loss='mse', a cross-entropy or a "
                "ResidualLoss.")
        lm_residuals.check_linearizable(batch.loss_set.losses)
        penalty = lm_regularization.L2Rows.of(batch.model, variables)  # None: unregularized
        if penalty is not None:
            penalty.check(solver, self.geodesic_acceleration)
        linear = None  # linearized in the step below; under a strategy, by every replica
        if batch.replicas is None and not self._needs_loss_gradient(solver, loss_fn, batch):
            # JᵀJ's linearization gives b = Jᵀr = ½∇f itself.
            loss0, aux0 = loss_fn()
            gradients = None
        elif batch.replicas is None:
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(variables)
                loss0, aux0 = loss_fn()
            gradients = tape.gradient(loss0, variables,
                                      unconnected_gradients=tf.UnconnectedGradients.ZERO)
        else:
            def linearize_slice(local_batch, gradients, y_pred):
                return self._linearize(local_batch, variables, n, gradients, y_pred,
                                       whole_batch=False)

            loss0, aux0, gradients, linear = lm_replicas.first_pass_on_replicas(
                batch, variables, n, linearize_slice, self._converged)
        self._counts.function_evaluations.assign_add(1)  # the start point's residuals (loss0)
        if gradients is not None:
            step_context.record_gradients(gradients, variables)
        flat0, rebuild = split_aux(aux0)
        if not isinstance(aux0, ForwardPass):
            raise TypeError(
                "LevenbergMarquardt linearizes the model's outputs, so loss_fn must return "
                f"(loss, ForwardPass(y_pred, output_losses, updates)). Received aux={aux0!r}")

        def skip():
            return [loss0, *flat0]

        def linearize():
            if solver == "cg":
                return lm_matrix_free.linearize(
                    batch, variables, gradients, aux0.y_pred, self.jacobian_mode,
                    examples_independent(batch.model, batch.loss_set),
                    self.jacobian_chunk_size, self.cg_diagonal_probes, self._iterations)
            # With L2 rows the system stays JᵀJ (whole_batch=False: never the m < n form).
            system = linear if linear is not None else self._linearize(
                batch, variables, n, gradients, aux0.y_pred, whole_batch=penalty is None)
            return system if penalty is None else penalty.augment(system)

        accelerates = penalty is None and lm_geodesic.applies(
            self.geodesic_acceleration, solver, batch, variables)

        def trials(system):
            rows_of = None  # the residual rows at the variables' values (geodesic acceleration)
            if accelerates:  # built here, inside the step's cond: the loss probes name scopes
                data, rows_for, _ = lm_residuals.batch_rows(batch, aux0.y_pred)
                rows_of = lambda: rows_for(data)[0]  # noqa: E731
            return self._trials(loss_fn, variables, n, loss0, flat0, system, rows_of,
                                batch.steps_per_pass)

        if batch.skip_non_finite:  # under LossScaleOptimizer (float16)
            out, applied = lm_finite.gated_step(
                self._converged, skip(), [loss0, *gradients],
                linearize, trials)
            _CONSTRAINTS(variables, self._iterations + 1)
            self._iterations.assign_add(tf.cast(applied, tf.int64))
            return out[0], rebuild(out[1:]).skipping_updates(~applied)
        out = tf.cond(self._converged, skip, lambda: trials(linearize()))
        _CONSTRAINTS(variables, self._iterations + 1)  # Keras projects after the update
        self._iterations.assign_add(1)
        return out[0], rebuild(out[1:])

    def _needs_loss_gradient(self, solver: str, loss_fn, batch) -> bool:
        """Whether the step differentiates the loss with a tape: when b = Cᵀρ is not the
        gradient (`batch_linearization.gradient_from_rows`), for TensorBoard's gradient
        histograms and activation gradient taps, the cg solver's right-hand side, and the
        finiteness test of skipped steps. Otherwise the direct solver's b = Cᵀρ is the
        gradient (half of it), and the step saves a backward pass."""
        return (solver == "cg" or batch.skip_non_finite or step_context.records_gradients()
                or reads_backward_pass(loss_fn) or not lm_batch.gradient_from_rows(batch))

    def _linearize(self, batch, variables, n, gradients, y_pred0, whole_batch: bool = True):
        """`batch_linearization.linearize_batch` with this optimizer's Jacobian settings;
        a whole batch with the bound `fit` promises its traced step (`StepBatch.bound`)."""
        return lm_batch.linearize_batch(batch, variables, n, gradients, y_pred0,
                                        self.jacobian_mode, self.jacobian_chunk_size,
                                        whole_batch,
                                        batch.bound if whole_batch else None)

    def _trials(self, loss_fn, variables, n, loss0, flat0, linear, rows_of=None,
                steps_per_pass=None):
        """Tries up to `attempts_per_step` damped steps on the linearization `linear`
        (`trial.trial_loop`), with geodesic acceleration when `rows_of` (the residual rows at
        the variables' values) is given. Returns `[loss, *aux tensors]` of the point the step
        ends on."""
        eps = float(np.finfo(np.float32 if any(v.dtype == tf.float32 for v in variables)
                             else np.float64).eps)
        self._eps = eps  # for the stop message (Python: once per trace)
        # Both solvers scale by the running maximum of diag(JᵀJ) (for cg, of its estimate);
        # with geodesic acceleration it has a memory (damping.scale_memory), but not in the
        # m < n form, where the steps stay plain.
        memory = 1.0 if rows_of is None else tf.where(
            linear.under, tf.constant(1.0, tf.float64), lm_damping.scale_memory(steps_per_pass))
        # The code a trial of the last step deferred (`convergence.deferred`): this step's
        # start ends the fit with it unless the undamped step here is damping-limited, and
        # the running scale forgets its history here. The cg solver has no undamped step:
        # its ftol and xtol end the fit at once.
        deferred = self._deferred.value()
        pending = deferred != NOT_CONVERGED
        direct = not isinstance(linear, lm_matrix_free.MatrixFreeLinearization)
        if direct:
            memory = tf.where(pending, tf.constant(0.0, tf.float64), memory)
        scale = lm_damping.running_scale(self._scale.value(), linear.diag, memory)
        self._scale.assign(scale)
        d = lm_damping.scaling(scale, self.damping, eps)
        # Column resolutions for a float64 JᵀJ only (`ScaledSystem`'s column_resolution).
        columns = direct and eps == float(np.finfo(np.float64).eps)
        limits = lm_update.damping_range(linear.diag, d, n, eps if columns else None)
        lam = lm_update.starting_damping(self._damping.value(), self.initial_damping, limits)
        if not direct:
            system = lm_cg.MatrixFreeSystem(linear, d, self.cg_iterations, self.cg_tolerance,
                                            self._cg_start)
        else:  # JᵀJ's products are in the model's dtype: resolved to its epsilon
            system = lm_damping.ScaledSystem(
                linear.matrix, linear.b, linear.rho, d, linear.under, n * eps * limits.scale,
                lam, decompose=pending,
                column_resolution=n * eps * linear.diag / d if columns else None)
        f0 = tf.cast(loss0, tf.float64)
        steps = lm_trial.variable_steps(variables)
        tests = lm_convergence.convergence_tests(scale, steps.x0, self.ftol, self.xtol, eps)
        gradient_met = lm_convergence.gradient_converged(linear.b, linear.diag, f0, self.gtol)
        stop, code_before = gradient_met, None
        if direct:  # S = D^½ under Marquardt's damping: the eigenbasis gives ‖S δ‖
            confirmed = pending & ~lm_convergence.damping_limited(tests, f0, *system.undamped(
                None if self.damping == "marquardt" else tests.column_norms))
            stop = gradient_met | confirmed
            code_before = tf.where(confirmed, tf.cast(deferred, tf.int32), lm_convergence.GTOL)

        def evaluate():
            loss_new, aux_new = loss_fn()
            return [loss_new, *split_aux(aux_new)[0]]

        accelerate = None
        if rows_of is not None and isinstance(system, lm_damping.ScaledSystem):
            accelerate = lm_geodesic.trial_acceleration(rows_of, variables, steps.assign,
                                                        system)
        problem = lm_trial.TrialProblem(system, steps.assign, evaluate, steps.restore, f0,
                                        limits, tests, accelerate)

        result = lm_trial.trial_loop(problem, lam, self._growth.value(),
                                     [loss0, *flat0], self.attempts_per_step,
                                     converged_before=stop, code_before=code_before)
        self._damping.assign(result.damping)
        self._growth.assign(result.growth)
        self._counts.function_evaluations.assign_add(result.evaluations)
        self._counts.jacobian_evaluations.assign_add(1)  # `linear`, at the start point
        code, values = result.code, result.values
        if direct:
            later = lm_convergence.deferred(code, result.accepted)
            self._deferred.assign(tf.where(later, tf.cast(code, tf.int64), NOT_CONVERGED))
            code = tf.where(later, NOT_CONVERGED, code)
        converged = code != NOT_CONVERGED
        self._reason.assign(tf.where(converged, tf.cast(code, tf.int64), self._reason))
        self._converged.assign(converged | self._converged)
        return values

    def build(self, variables) -> None:
        """Creates the per-parameter state for `variables` (the running scale, and the cg
        solver's warm start) before the first trace: a variable created while tracing makes
        `tf.function` trace the whole step twice."""
        super().build(variables)
        n = sum(int(np.prod(as_tf_variable(v).shape.as_list())) for v in variables)
        self._solver_state(n, lm_cg.resolve_solver(self.solver, n, self.max_parameters))

    def _solver_state(self, n: int, solver: str) -> None:
        """Makes current, for n trained parameters, the running maximum of diag(JᵀJ)
        (MINPACK's scale, float64) and for the cg solver its warm start: created from zeros
        for a new n (layers frozen or unfrozen), the earlier ones of that n again when n comes
        back. Tracked state only grows (checkpoints); each size is created once."""
        key = str(n)  # string keys: the dict is tracked for checkpoints
        name = "" if not self._per_size else f"_{n}"
        if key not in self._per_size:
            self._per_size[key] = {"scale": self.add_variable(f"damping_scale{name}",
                                                              np.zeros(n), tf.float64)}
        state = self._per_size[key]
        if solver == "cg" and "cg_start" not in state:
            state["cg_start"] = self.add_variable(f"cg_start{name}", np.zeros([n]), tf.float64)
        self._scale, self._cg_start = state["scale"], state.get("cg_start")

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
            "solver": self.solver,
            "cg_iterations": self.cg_iterations,
            "cg_tolerance": self.cg_tolerance,
            "cg_diagonal_probes": self.cg_diagonal_probes,
            "geodesic_acceleration": self.geodesic_acceleration,
        }


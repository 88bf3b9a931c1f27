"""`Optimizer`: a pure update rule plus explicit slot state.

How do momentum "moments" carry from one step to the next when the step is only a graph?
An optimizer's state lives in *slot variables* (SGD's `momentum`, Adam's `momentum` and
`velocity`), one set per model variable. `build(variables)` creates them once, under
`tf.init_scope()`, so even when `build` first runs while a `tf.function` (XLA included) is
being traced, the variables are created eagerly, outside the graph, and only once. The traced
training step then contains nothing but *read* and *assign* ops on those variables: each
execution of the compiled step reads the value the previous execution assigned, so the moments
carry over exactly as they would in a Python loop, and no retrace is needed.

An optimizer subclass writes only `update_rule`, a small pure function
`(gradient, value, slots, learning_rate, step) -> (new_value, new_slots)` with no assignment in
it (Sonnet's `Momentum`, Optax's `ScaleByAdamState`). The base class does the rest of a step:

1. drops missing (None) gradients, with one warning naming the variables, and densifies
   `tf.IndexedSlices`; divides them by `loss_scale_factor` when it is set;
2. a transform that computes the gradient itself (`PerExampleClipping`) replaces them;
3. with `gradient_accumulation_steps=k`, adds them to the accumulators and goes on to 4-6
   once every k calls only, with the mean gradient (`graphfit.optimizers.accumulation`);
4. applies the gradient transforms to the WHOLE list (`clipvalue`, `clipnorm`,
   `global_clipnorm`, then the user's `gradient_transforms`): every gradient is computed and
   transformed before any variable changes;
5. applies Keras's decoupled weight decay, `v <- v - v * weight_decay * learning_rate`;
6. reads the slots, calls `update_rule`, and assigns the new variable and slot values;
7. runs the after-update hooks (the moving average of `use_ema`, then the constraints); under
   accumulation those marked `update_steps_only` (Nadam's `u_product`) run with step 6 only;
8. increments the step counter.

The Keras base-optimizer machinery lives in modules of its own: `ema` (`use_ema`),
`accumulation` (`gradient_accumulation_steps`), `optimizer_state` (`get_weights`,
`set_weights` and the order of `variables`); `schedules` resolves the learning rate.

Learning rates, hyperparameters and gradients are cast to each variable's dtype, so float32
and float64 models both work; float32 results match `keras.optimizers` bit for bit up to the
order XLA chooses for its fused ops.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterable, Sequence

import tensorflow as tf

from graphfit.core import autograph_scope, step_context, validation
from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.step_types import StepBatch, loss_and_aux
from graphfit.core.variables import as_tf_variable
from graphfit.optimizers import optimizer_state, schedules, transforms
from graphfit.optimizers.accumulation import GradientAccumulation
from graphfit.optimizers.after_update import ApplyConstraints
from graphfit.optimizers.base import FIRST_REPLICA, BaseOptimizer
from graphfit.optimizers.ema import ExponentialMovingAverage
from graphfit.training import distribution

__all__ = ["Optimizer", "cast_hyperparameter"]


def cast_hyperparameter(value, dtype: tf.DType) -> tf.Tensor:
    """A Python number as a constant of `dtype`, rounded once (exact in float64).

    `tf.cast(0.1, tf.float64)` goes through float32 first; this does not. In float32 it gives
    the same constant as Keras's `ops.cast(0.1, "float32")`.
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return tf.cast(value, dtype)
    return tf.convert_to_tensor(value, dtype=dtype)


class _AfterUpdateHooks:
    """The optimizer's after-update hooks, in order. A plain object: tf.Module neither
    tracks it in checkpoints nor walks it for variables (a hook tracks its own state with
    `track_variable`)."""

    def __init__(self, hooks):
        self.hooks = list(hooks)

    def __iter__(self):
        return iter(self.hooks)

    def append(self, hook) -> None:
        self.hooks.append(hook)

    def insert(self, index: int, hook) -> None:
        self.hooks.insert(index, hook)

    def remove_instances(self, kind: type) -> None:
        self.hooks = [hook for hook in self.hooks if not isinstance(hook, kind)]


class _BuiltOnce:
    """Which gradient transforms have built their state: `build` runs once for each,
    whenever the optimizer builds. A plain object, like `_AfterUpdateHooks`."""

    def __init__(self):
        self.built: set[int] = set()

    def build(self, extension, *arguments) -> None:
        if id(extension) not in self.built:
            extension.build(*arguments)
            self.built.add(id(extension))


class _SlotIndex:
    """variable.ref() -> index into Optimizer._slots. A plain object: tf.Module neither
    tracks it in checkpoints nor walks it when collecting variables."""

    def __init__(self):
        self.position: dict = {}


class Optimizer(BaseOptimizer):
    """Base class of first-order optimizers: slot state plus a pure `update_rule`.

    Subclasses set the class attribute `slot_names` (an instance may narrow it in `__init__`,
    e.g. SGD without momentum keeps no slot), implement `update_rule`, and extend
    `get_config` with their own hyperparameters. A subclass constructor that takes
    `**base_arguments` and passes them on here gives its users `use_ema=` and the other Keras
    base arguments in Python; `from_config` (recipes) sets them whatever the constructor
    takes. See the module docstring for the order of the work in a step and for why slots
    persist across executions of a compiled step.

    Args:
        learning_rate: a non-negative float, a `keras.optimizers.schedules`
            `LearningRateSchedule` (evaluated at the step counter each step), a schedule
            config, or a zero-argument callable returning the rate (as Keras).
        clipnorm: if set, clip each gradient to this L2 norm (`transforms.ClipByNorm`).
        clipvalue: if set, clip gradient elements to `[-clipvalue, clipvalue]`.
        global_clipnorm: if set, scale all gradients together to this joint L2 norm. Keras
            refuses more than one of the three; graphfit applies them in the order above.
        weight_decay: if set, decoupled weight decay `v <- v - v * weight_decay * lr`,
            applied before the update rule (Keras's semantics).
        gradient_transforms: more transforms (callables `grads -> grads`, or configs of the
            built-in ones), applied to the whole gradient list after the clipping flags.
        use_ema: keep an exponential moving average of the weights (`optimizers.ema`),
            put into the model when `fit` ends. Defaults to False.
        ema_momentum: the average's momentum, in [0, 1] (with `use_ema`). Defaults to 0.99.
        ema_overwrite_frequency: None, or overwrite the weights with their average every so
            many updates (with `use_ema`).
        loss_scale_factor: None, or a positive float: `minimize` differentiates
            `loss * loss_scale_factor` and the gradients are divided by it (as Keras).
        gradient_accumulation_steps: None, or an integer >= 2: update once every so many
            steps with the mean gradient (`optimizers.accumulation`).
        name: the optimizer's name (a valid scope name).

    Raises:
        ValueError: for a bad learning rate, clipping value, weight decay or base argument.

    Example:

        >>> import tensorflow as tf
        >>> class PlainGD(Optimizer):
        ...     slot_names = ()
        ...     def update_rule(self, gradient, value, slots, learning_rate, step):
        ...         return value - learning_rate * gradient, {}
        >>> w = tf.Variable([1.0, 2.0])
        >>> loss, aux = PlainGD(0.5).minimize(lambda: (tf.reduce_sum(w * w), None), [w])
        >>> w.numpy().tolist()
        [0.0, 0.0]
    """

    slot_names: tuple[str, ...] = ()

    def __init__(
        self,
        learning_rate,
        *,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        weight_decay: float | None = None,
        gradient_transforms: Sequence[Callable | dict] = (),
        use_ema: bool = False,
        ema_momentum: float = 0.99,
        ema_overwrite_frequency: int | None = None,
        loss_scale_factor: float | None = None,
        gradient_accumulation_steps: int | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        learning_rate = schedules.get(learning_rate)
        if isinstance(gradient_transforms, (dict, str)) or callable(gradient_transforms):
            raise ValueError(
                "gradient_transforms must be a list of transforms. "
                f"Received: gradient_transforms={gradient_transforms!r}"
            )
        # Plain (untrackable) objects, so tf.Module leaves them out of checkpoints. Their
        # constructors validate the arguments.
        self._flag_transforms = transforms.from_flags(clipvalue, clipnorm, global_clipnorm)
        self._user_transforms = transforms.Chain(list(gradient_transforms))
        # A transform that computes the gradient itself (per-example clipping) runs first.
        self._gradient_source = self._user_transforms.take_gradient_source()
        # What runs on the variables after each update (`graphfit.optimizers.after_update`).
        self.after_update = _AfterUpdateHooks([ApplyConstraints()])
        self._built_once = _BuiltOnce()
        self._weight_decay = (
            None if weight_decay is None else transforms.DecoupledWeightDecay(weight_decay)
        )
        self.clipvalue = None if clipvalue is None else float(clipvalue)
        self.clipnorm = None if clipnorm is None else float(clipnorm)
        self.global_clipnorm = None if global_clipnorm is None else float(global_clipnorm)
        self.weight_decay = None if weight_decay is None else float(weight_decay)
        self._index = _SlotIndex()
        # A LearningRateSchedule or a zero-argument callable; None for a constant rate.
        self._schedule = learning_rate if not isinstance(learning_rate, float) else None
        with tf.init_scope(), self.name_scope:
            # float64 so a float64 model gets its learning rate exactly; cast to float32 it
            # is the same constant Keras keeps in its float32 variable. Unused under a schedule.
            self._learning_rate_variable = tf.Variable(
                0.0 if self._schedule is not None else learning_rate, dtype=tf.float64,
                trainable=False, name="learning_rate", aggregation=FIRST_REPLICA)
        self._slots: list[dict[str, tf.Variable]] = []  # one dict per built model variable
        self._configure_base_arguments(
            use_ema=use_ema, ema_momentum=ema_momentum,
            ema_overwrite_frequency=ema_overwrite_frequency, loss_scale_factor=loss_scale_factor,
            gradient_accumulation_steps=gradient_accumulation_steps)

    def _configure_base_arguments(self, *, use_ema, ema_momentum, ema_overwrite_frequency,
                                  loss_scale_factor, gradient_accumulation_steps) -> None:
        """Sets Keras's EMA, loss-scale and accumulation arguments (before `build`; also
        `from_config`, for a subclass whose constructor does not take them)."""
        if self._slots:
            raise ValueError(f"Optimizer {self.name!r} is built: its EMA and accumulation "
                             "arguments can no longer change.")
        if not isinstance(use_ema, bool):
            raise validation.invalid("use_ema", use_ema, "a bool")
        # Keras checks the EMA arguments only with use_ema; they are kept either way.
        self._moving_average = (ExponentialMovingAverage(ema_momentum, ema_overwrite_frequency)
                                if use_ema else None)
        self.use_ema, self.ema_momentum = use_ema, ema_momentum
        self.ema_overwrite_frequency = ema_overwrite_frequency
        self.after_update.remove_instances(ExponentialMovingAverage)
        if use_ema:  # before the constraints: Keras averages, then projects
            self.after_update.insert(0, self._moving_average)
        self.loss_scale_factor = validation.positive_float(
            "loss_scale_factor", loss_scale_factor, allow_none=True)
        self._accumulation = (None if gradient_accumulation_steps is None
                              else GradientAccumulation(gradient_accumulation_steps))
        self.gradient_accumulation_steps = gradient_accumulation_steps

    # ----------------------------------------------------------------------------- state

    @property
    def learning_rate(self) -> tf.Tensor | tf.Variable:
        """The learning rate of the next step: the schedule at `iterations`, or the constant.

        A constant rate is the optimizer's float64 variable itself, as Keras returns its
        variable, so `optimizer.learning_rate.assign(0.01)` works; a Keras schedule's is a
        float32 tensor. Each update casts it to the variable's dtype. Setting a float (or a
        scalar tensor) assigns the variable, so a compiled step sees it at its next execution
        without retracing. Setting a schedule replaces the rule; steps traced before keep the
        old one until retraced.

        Raises:
            TypeError: when setting a float on an optimizer built with a schedule (Keras).
            ValueError: when setting a negative or non-numeric rate.
        """
        if isinstance(self._schedule, schedules.LearningRateSchedule):
            return tf.convert_to_tensor(self._schedule(self._iterations))
        if self._schedule is not None:  # Keras: a callable is called with no argument
            return tf.convert_to_tensor(self._schedule())
        return self._learning_rate_variable

    @learning_rate.setter
    def learning_rate(self, value) -> None:
        tensor = isinstance(value, (tf.Tensor, tf.Variable))
        resolved = value if tensor else schedules.get(value)
        if not isinstance(resolved, float) and not tensor:
            self._schedule = resolved  # a schedule or a callable
            return
        if self._schedule is not None:
            raise TypeError(
                "This optimizer was created with a LearningRateSchedule (or a callable) as "
                "its learning_rate, so its learning rate cannot be set to a number (a step "
                "traced with the schedule would ignore it). Create the optimizer with a float "
                "learning_rate to make it settable."
            )
        # Not through float32: 0.03 must stay 0.03 for a float64 model.
        self._learning_rate_variable.assign(cast_hyperparameter(resolved, tf.float64))

    @property
    def iterations(self):
        """The number of updates applied: the step counter (an int64 variable), or, with
        `gradient_accumulation_steps=k`, the counter // k (a tensor), as Keras."""
        if self._accumulation is not None:
            return self._iterations // self._accumulation.steps
        return self._iterations

    @property
    def built(self) -> bool:
        """Whether `build` created the per-variable state of at least one variable."""
        return bool(self._slots)

    @property
    def moving_average(self) -> ExponentialMovingAverage | None:
        """The moving average of the weights (`use_ema=True`), or None."""
        return self._moving_average

    @property
    def variables(self) -> list[tf.Variable]:
        """The optimizer's own collection, in Keras's order: iterations, learning rate, the
        moving averages, the gradient accumulators, then the slots, variable by variable, and
        the state of transforms and hooks (see `optimizers.optimizer_state`). A slot with no
        element (Muon's `velocity` of a Muon variable) holds no state and is left out, as
        Keras has no variable there; checkpoints still keep it."""
        slots = [slot for per_variable in self._slots for slot in per_variable.values()
                 if slot.shape.num_elements() != 0]
        averages = self._moving_average.averages if self._moving_average else []
        accumulators = self._accumulation.accumulators if self._accumulation else []
        return [self._iterations, self._learning_rate_variable, *averages, *accumulators,
                *slots, *self._extra_variables]

    def get_weights(self) -> list:
        """The values of `variables`, NumPy arrays in that order (Keras 2's method)."""
        return optimizer_state.get_weights(self)

    def set_weights(self, weights) -> None:
        """Assigns `weights` to `variables`, in order (Keras's method; build first).

        Raises:
            ValueError: for a count or shape that does not match (nothing is assigned).
        """
        optimizer_state.set_weights(self, weights)

    def finalize_variable_values(self, var_list) -> bool:
        """Puts the moving averages into `var_list` (with `use_ema`; Keras's method, which
        `fit` calls once its epochs end). Returns whether any variable changed."""
        if self._moving_average is None:
            return False
        return self._moving_average.finalize([as_tf_variable(v) for v in var_list])

    def fit_callbacks(self) -> list:
        """With `use_ema`, the callback that finalizes the weights when `fit` ends."""
        if self._moving_average is None:
            return []
        from graphfit.callbacks.finalize_variable_values import FinalizeVariableValues

        return [FinalizeVariableValues()]

    def scale_loss(self, loss):
        """`loss * loss_scale_factor` (unchanged without one), for a custom step that calls
        `apply_gradients` itself, as Keras's `scale_loss`."""
        if self.loss_scale_factor is None:
            return loss
        loss = tf.convert_to_tensor(loss)
        return loss * tf.cast(self.loss_scale_factor, loss.dtype)

    def build(self, variables: Iterable[tf.Variable]) -> None:
        """Creates the slots of every variable that has none yet (idempotent, incremental).

        Runs under `tf.init_scope()`, so it is safe to call first inside a `tf.function`
        (XLA included): the slots are created eagerly, once, and later traces reuse them.

        Args:
            variables: the model variables this optimizer will update.
        """
        for transform in (self._gradient_source, *self._user_transforms.transforms):
            if isinstance(transform, transforms.GradientTransform):
                self._built_once.build(transform, self)  # their state, tracked in variables
        new, seen = [], set()
        for variable in variables:
            variable = as_tf_variable(variable)
            if variable.ref() not in self._index.position and variable.ref() not in seen:
                seen.add(variable.ref())
                new.append(variable)
        if not new:
            return
        for hook in self.after_update:
            hook.build(self, new)  # like the slots: for the variables that have none yet
        if self._accumulation is not None:
            self._accumulation.build(self, new)
        with tf.init_scope(), self.name_scope:
            for variable in new:
                base = variable.name.split(":")[0].replace("/", "_")
                slots = {slot: tf.Variable(self.slot_initial_value(slot, variable),
                                           trainable=False, name=f"{base}_{slot}",
                                           aggregation=FIRST_REPLICA)
                         for slot in self.slot_names}
                self._index.position[variable.ref()] = len(self._slots)
                # Appended inside init_scope: a checkpoint restore deferred until now runs
                # eagerly here, never inside a trace.
                self._slots.append(slots)

    def built_for(self, variables: Iterable[tf.Variable]) -> bool:
        """Whether `build` has made the slots of every variable in `variables` (a variable
        without slots, as under plain SGD, counts once `build` has seen it), so that `build`
        creates nothing more for them."""
        return all(as_tf_variable(v).ref() in self._index.position for v in variables)

    def slot_initial_value(self, slot_name: str, variable: tf.Variable) -> tf.Tensor:
        """The initial value of a slot (zeros of the variable's shape and dtype)."""
        del slot_name
        return tf.zeros(variable.shape, dtype=variable.dtype)

    def check_training(self, losses: dict, distributed: bool, sample_weight=None) -> None:
        """A first-order update minimises any loss; under a strategy the engine runs this
        optimizer's `minimize` on every replica and sums the gradients in it, so a subclass
        that overrides `minimize` is refused there."""
        del losses, sample_weight
        if distributed and type(self).minimize is not Optimizer.minimize:
            raise ValueError(
                f"{type(self).__name__} runs its own minimize, which is not supported under a "
                f"tf.distribute strategy: use the default minimize there (the engine sums the "
                f"replicas' gradients in it), or train on one device.")

    def get_slot(self, variable: tf.Variable, name: str) -> tf.Variable:
        """The slot `name` of `variable`.

        Raises:
            ValueError: if the optimizer was not built on `variable` or has no such slot.
        """
        position = self._index.position.get(as_tf_variable(variable).ref())
        if position is None:
            raise ValueError(
                f"Optimizer {self.name!r} has no slots for variable {variable.name!r}. Call "
                "optimizer.build(variables) or apply gradients to it first."
            )
        slots = self._slots[position]
        if name not in slots:
            raise ValueError(f"Optimizer {self.name!r} has no slot {name!r}. "
                             f"Its slots: {list(slots) or 'none'}.")
        return slots[name]

    def exclude_from_weight_decay(self, var_list=None, var_names=None) -> None:
        """Exempts variables from weight decay (Keras's method; call it before training).

        Args:
            var_list: variables to exempt.
            var_names: regular expressions; a variable whose name contains a match is exempt,
                e.g. `["bias", "gamma"]`.
        """
        if self._weight_decay is not None:
            self._weight_decay.exclude([as_tf_variable(v) for v in var_list or ()], var_names)

    def weight_decay_for(self, variable: tf.Variable):
        """The decoupled weight decay applied to `variable` before its update, or None: the
        constructor's `weight_decay` unless the variable is exempt. An optimizer whose rate
        depends on the variable (Muon: `adam_weight_decay` for its AdamW variables) overrides
        it; the result is a callable `(value, learning_rate) -> decayed value`."""
        if self._weight_decay is not None and self._weight_decay.applies_to(variable):
            return self._weight_decay
        return None

    # ------------------------------------------------------------------------------ steps

    @graphfit_api
    def minimize(self, loss_fn: Callable[[], tuple[Any, Any]], variables,
                 batch: StepBatch | None = None) -> tuple[Any, Any]:
        """One step: differentiate `loss_fn` with respect to exactly `variables`, then update.

        Args:
            loss_fn: called once with no arguments; returns `(loss, aux)` where `loss` is the
                scalar to minimize and `aux` anything the caller wants back (the training
                step's `ForwardPass`).
            variables: the variables to train; the tape watches these and nothing else.
            batch: the batch and model behind `loss_fn` (`graphfit.core.step_types.StepBatch`),
                for optimizers that re-run the model (`LevenbergMarquardt`); a first-order
                update ignores it (a transform that needs the batch, `PerExampleClipping`,
                reads it from the step's context).

        The raw gradients go to `step_context.record_gradients` (read by TensorBoard's
        gradient histograms); an override should report its gradient there too when it has
        one.

        Returns:
            `(loss, aux)` as `loss_fn` returned them (values before the update).

        Raises:
            TypeError: if `loss_fn` does not return a pair.
        """
        variables = [as_tf_variable(v) for v in variables]
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            loss, aux = loss_and_aux(loss_fn())
            scaled = self.scale_loss(loss)  # apply_gradients divides by the factor
        gradients = tape.gradient(scaled, variables)
        # Under a tf.distribute strategy: the global batch's gradient, before any transform.
        gradients = distribution.sum_gradients(gradients)
        step_context.record_gradients(gradients, variables)  # for gradient histograms
        autograph_scope.convert_user_code(self.apply_gradients)(zip(gradients, variables))
        return loss, aux

    @graphfit_api
    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, tf.Variable]]) -> tf.Variable:
        """Applies one step of gradients (see the module docstring for the order of work).

        Args:
            grads_and_vars: `(gradient, variable)` pairs; a None gradient skips its variable.

        Returns:
            The `iterations` variable (as Keras returns it).

        Raises:
            ValueError: if every gradient is None.
        """
        pairs = [(g, as_tf_variable(v)) for g, v in grads_and_vars]
        if not pairs:
            return self._iterations
        self.build([v for _, v in pairs])
        missing = [v.name for g, v in pairs if g is None]
        pairs = [(g, v) for g, v in pairs if g is not None]
        if not pairs:
            raise ValueError(f"No gradients provided for any variable: {missing}.")
        if missing:
            # Python code: in a tf.function this runs once per trace, not once per step.
            warnings.warn(
                f"Gradients do not exist for variables {missing} when minimizing the loss; "
                "they are left unchanged. Check that the loss depends on them, or freeze "
                "them (trainable=False).", stacklevel=2)
        grads = [tf.convert_to_tensor(g) for g, _ in pairs]  # densifies tf.IndexedSlices
        variables = [v for _, v in pairs]
        if self.loss_scale_factor is not None:
            grads = [g / tf.cast(self.loss_scale_factor, g.dtype) for g in grads]
        if self._gradient_source is not None:
            grads = self._gradient_source.apply(grads, variables)
        step = self.iterations + 1  # the 1-based number of the update this call belongs to
        if self._accumulation is None:
            self._update(grads, variables, step)
        else:  # updates once every k calls, with the mean gradient
            self._accumulation.apply(grads, variables, self._iterations,
                                     lambda mean: self._update(mean, variables, step),
                                     [*variables, *self.variables[1:]])
        for hook in self.after_update:  # the moving average, the constraints, ...
            if self._accumulation is None or not hook.update_steps_only:
                hook(variables, step)
        self._iterations.assign_add(1)
        return self._iterations

    def _update(self, grads, variables, step) -> None:
        """Steps 4-6 of the module docstring; under accumulation, also the after-update hooks
        that run on update steps only (in the update branch, as Keras's `update_step`)."""
        grads = self._flag_transforms.apply(grads, variables)
        grads = self._user_transforms.apply(grads, variables)
        learning_rate = self.learning_rate
        for gradient, variable in zip(grads, variables):
            self._update_variable(gradient, variable, learning_rate, step)
        if self._accumulation is not None:
            for hook in self.after_update:
                if hook.update_steps_only:
                    hook(variables, step)

    def _update_variable(self, gradient, variable, learning_rate, step) -> None:
        dtype = variable.dtype
        lr = tf.cast(learning_rate, dtype)
        value = tf.convert_to_tensor(variable)
        decay = self.weight_decay_for(variable)
        if decay is not None:
            value = decay(value, lr)  # folded into the single assign below
        slots = self._slots[self._index.position[variable.ref()]]
        current = {name: tf.convert_to_tensor(slot) for name, slot in slots.items()}
        new_value, new_slots = autograph_scope.convert_user_code(self.update_rule)(
            tf.cast(gradient, dtype), value, current, lr, tf.cast(step, dtype))
        if set(new_slots) != set(slots):
            raise RuntimeError(f"{type(self).__name__}.update_rule returned slots "
                               f"{sorted(new_slots)}; expected {sorted(slots)}.")
        for name, slot in slots.items():
            slot.assign(new_slots[name])
        variable.assign(new_value)

    def update_rule(self, gradient: tf.Tensor, variable_value: tf.Tensor,
                    slots: dict[str, tf.Tensor], learning_rate: tf.Tensor,
                    step: tf.Tensor) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """The pure update of one variable: no assignment, no variable creation.

        Args:
            gradient: the transformed gradient, in the variable's dtype.
            variable_value: the variable's current value (after weight decay).
            slots: the current value of each slot in `slot_names`.
            learning_rate: the learning rate of this step, in the variable's dtype.
            step: the 1-based number of this step (`iterations + 1`), in the variable's dtype.

        Returns:
            `(new_variable_value, new_slots)` with the same keys as `slots`.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement update_rule.")

    # ----------------------------------------------------------------------------- config

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments with Keras's names; a schedule is serialized by Keras.

        Raises:
            ValueError: for a learning rate that is a plain Python callable (a config cannot
                hold it; Keras fails on a lambda too): use a `LearningRateSchedule`.
        """
        if isinstance(self._schedule, schedules.LearningRateSchedule):
            learning_rate = schedules.serialize(self._schedule)
        elif self._schedule is not None:
            raise ValueError(
                f"Optimizer {self.name!r} has a Python callable as its learning_rate "
                f"({self._schedule!r}), which a config cannot hold. Use a number or a "
                "keras.optimizers.schedules.LearningRateSchedule to save or serialize it.")
        else:
            learning_rate = float(self._learning_rate_variable.numpy())
        return {
            "name": self.name,
            "learning_rate": learning_rate,
            "weight_decay": self.weight_decay,
            "clipnorm": self.clipnorm,
            "global_clipnorm": self.global_clipnorm,
            "clipvalue": self.clipvalue,
            "gradient_transforms": [
                transforms.serialize(t) for t in ([self._gradient_source] if
                                                  self._gradient_source else [])
                + self._user_transforms.transforms],
            "use_ema": self.use_ema,
            "ema_momentum": self.ema_momentum,
            "ema_overwrite_frequency": self.ema_overwrite_frequency,
            "loss_scale_factor": self.loss_scale_factor,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Optimizer":
        """Rebuilds an optimizer from `get_config()` (or from a Keras optimizer's config).

        The Keras base arguments (`use_ema`, ..., `gradient_accumulation_steps`) are set
        after construction, so they work for every subclass, whether or not its constructor
        names them.
        """
        config = dict(config)
        base = {key: config.pop(key, default)
                for key, default in optimizer_state.BASE_ARGUMENTS.items()}
        optimizer = cls(**config)
        optimizer._configure_base_arguments(**base)
        return optimizer

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r} slots={list(self.slot_names)}>"

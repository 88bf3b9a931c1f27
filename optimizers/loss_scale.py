"""`LossScaleOptimizer`: dynamic loss scaling for float16 training, as Keras's.

A float16 gradient underflows to zero below about 6e-8. Loss scaling multiplies the loss by a
large factor S before differentiating, so the backward pass carries `S * gradient`, and
divides the gradients by S before the update. S is dynamic (Keras's rule, number for number):

    a step whose scaled gradients are all finite: the inner optimizer applies gradient / S;
        then S <- 2 S after `dynamic_growth_steps` such steps in a row (the counter restarts)
    a step with an inf or NaN gradient: skipped, S <- S / 2 (the counter restarts)

A skipped step changes no model variable, no slot, not the inner optimizer's `iterations`
(so a learning-rate schedule does not advance) and no update hook: the step's batch-norm
moving statistics and class means are not applied (`ForwardPass.skip_updates`).

Example:

    >>> import tensorflow as tf
    >>> from graphfit import optimizers
    >>> w = tf.Variable([1.0])
    >>> opt = optimizers.LossScaleOptimizer(optimizers.SGD(0.5), initial_scale=4.0)
    >>> _ = opt.minimize(lambda: (tf.reduce_sum(w * w), None), [w])  # gradient 2: w <- 0
    >>> float(w[0]), float(opt.loss_scale), int(opt.iterations)
    (0.0, 4.0, 1)
    >>> _ = opt.minimize(lambda: (tf.reduce_sum(w) * float("inf"), None), [w])  # skipped
    >>> float(w[0]), float(opt.loss_scale), int(opt.iterations)
    (0.0, 2.0, 1)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import tensorflow as tf

from graphfit.core import autograph_scope, step_context, validation
from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.registry import OPTIMIZERS
from graphfit.core.step_types import ForwardPass, StepBatch, loss_and_aux
from graphfit.core.variables import as_tf_variable
from graphfit.optimizers.base import BaseOptimizer
from graphfit.optimizers.finite_values import all_finite
from graphfit.optimizers.optimizer import Optimizer
from graphfit.optimizers.second_order import SecondOrderOptimizer
from graphfit.training import distribution

__all__ = ["LossScaleOptimizer"]

_FIRST = tf.VariableAggregation.ONLY_FIRST_REPLICA


def _checked_inner(inner_optimizer) -> BaseOptimizer:
    if isinstance(inner_optimizer, (dict, str)):  # a recipe's {type: SGD, ...} or "adam"
        from graphfit import optimizers  # the package imports this module

        inner_optimizer = optimizers.get(inner_optimizer)
    if isinstance(inner_optimizer, LossScaleOptimizer):
        raise ValueError(
            "inner_optimizer is already a LossScaleOptimizer: its loss would be scaled twice. "
            f"Wrap the plain optimizer once. Received: inner_optimizer={inner_optimizer!r}")
    if not isinstance(inner_optimizer, BaseOptimizer):  # None too: Keras requires it too
        raise ValueError(
            "inner_optimizer must be a graphfit optimizer to wrap (graphfit.optimizers.SGD(...), "
            f"Adam(...), ...; in a config {{type: SGD, ...}}). "
            f"Received: inner_optimizer={inner_optimizer!r}")
    try:
        transforms = inner_optimizer.get_config().get("gradient_transforms") or []
    except ValueError:  # a user's transform has no config: it is not PerExampleClipping
        transforms = []
    if getattr(inner_optimizer, "loss_scale_factor", None) is not None:
        raise ValueError(
            "LossScaleOptimizer cannot wrap an optimizer with a loss_scale_factor: the loss "
            "would be scaled twice (Keras drops the inner factor silently). Leave "
            "loss_scale_factor unset on the inner optimizer. Received: "
            f"loss_scale_factor={inner_optimizer.loss_scale_factor!r}")
    if any(t.get("type") == "PerExampleClipping" for t in transforms):
        raise ValueError(
            "LossScaleOptimizer cannot wrap an optimizer with PerExampleClipping (its "
            "per-example gradients are not computed from the scaled loss): train it without "
            f"loss scaling. Received: inner_optimizer={inner_optimizer!r}")
    if (isinstance(inner_optimizer, Optimizer)
            and type(inner_optimizer).minimize is not Optimizer.minimize):
        raise ValueError(
            f"LossScaleOptimizer cannot wrap {type(inner_optimizer).__name__}: it runs its own "
            "minimize and cannot skip a non-finite step. Received: "
            f"inner_optimizer={inner_optimizer!r}")
    return inner_optimizer


def _runs_own_minimize(optimizer) -> bool:
    """A second-order optimizer (LevenbergMarquardt) replaces the gradient step, and skips a
    non-finite step itself when its `StepBatch.skip_non_finite` asks."""
    return isinstance(optimizer, SecondOrderOptimizer)


def _divided(gradient, scale):
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values / tf.cast(scale, gradient.dtype),
                                gradient.indices, gradient.dense_shape)
    return gradient / tf.cast(scale, gradient.dtype)


def _in_a_strategy_replica() -> bool:
    # Even one replica: its variables assign through merge_call, which a cond branch forbids.
    return tf.distribute.has_strategy() and tf.distribute.get_replica_context() is not None


class _LossScaleState(tf.Module):
    """The scale and the count of finite steps since it last changed (checkpointed)."""

    def __init__(self, initial_scale: float):
        super().__init__(name="loss_scale")
        with tf.init_scope():
            self.scale = tf.Variable(initial_scale, dtype=tf.float32, trainable=False,
                                     name="dynamic_scale", aggregation=_FIRST)
            self.step_counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                            name="step_counter", aggregation=_FIRST)


@OPTIMIZERS.register
class LossScaleOptimizer(BaseOptimizer):
    """Wraps an optimizer with dynamic loss scaling (Keras's `LossScaleOptimizer`).

    See the module docstring for the rule. `minimize` differentiates `loss * loss_scale`,
    all-reduces the scaled gradients under a `tf.distribute` strategy (so every replica sees
    the same finiteness), checks them, and hands `gradient / loss_scale` to the inner
    optimizer's `apply_gradients` (its clipping and weight decay included) or skips the step.
    `apply_gradients` takes gradients of a loss already scaled with `scale_loss`, as Keras's.
    `iterations`, `learning_rate` (settable) and the slots are the inner optimizer's.

    A second-order inner optimizer (`LevenbergMarquardt`) solves for its step from
    per-example residuals, where a scale brings nothing: its loss is not scaled (the scale
    stays as it is), but a step whose starting loss, gradient or linearized system is not
    finite is skipped, with its state (damping, running scale, counters) and the update hooks
    untouched.

    Args:
        inner_optimizer: the graphfit optimizer to wrap (or its name or config, as
            `optimizers.get` takes them: a recipe's `{type: SGD, momentum: 0.9}`).
        initial_scale: the starting loss scale, a positive float. Defaults to 2**15.
        dynamic_growth_steps: finite steps in a row after which the scale doubles, a positive
            integer. Defaults to 2000.
        name: the optimizer's name.

    Raises:
        ValueError: for a bad argument, an inner optimizer that is not a graphfit optimizer,
            is already a `LossScaleOptimizer` or uses `PerExampleClipping`.

    Example:

        >>> from graphfit import optimizers
        >>> opt = optimizers.LossScaleOptimizer(optimizers.SGD(0.1, momentum=0.9))
        >>> float(opt.loss_scale), opt.dynamic_growth_steps, float(opt.learning_rate)
        (32768.0, 2000, 0.1)
    """

    def __init__(self, inner_optimizer: BaseOptimizer | None = None,
                 initial_scale: float = 2.0**15,
                 dynamic_growth_steps: int = 2000, name: str | None = None):
        inner_optimizer = _checked_inner(inner_optimizer)
        initial_scale = validation.positive_float("initial_scale", initial_scale)
        self.dynamic_growth_steps = validation.positive_int("dynamic_growth_steps",
                                                            dynamic_growth_steps)
        # Not BaseOptimizer.__init__: its iterations would be dead state here; they, and the
        # learning rate where there is one, are the inner optimizer's.
        tf.Module.__init__(self, name=name or "loss_scale_optimizer")
        self.inner_optimizer = inner_optimizer
        self.initial_scale = initial_scale
        self._state = _LossScaleState(initial_scale)

    # ----------------------------------------------------------------------------- state

    @property
    def loss_scale(self) -> tf.Variable:
        """The current loss scale (float32 variable)."""
        return self._state.scale

    @property
    def step_counter(self) -> tf.Variable:
        """Finite steps since the scale last changed (int64 variable)."""
        return self._state.step_counter

    @property
    def iterations(self) -> tf.Variable:
        """The inner optimizer's `iterations`: skipped steps do not count."""
        return self.inner_optimizer.iterations

    @property
    def learning_rate(self):
        """The inner optimizer's learning rate (settable, as callbacks do)."""
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value) -> None:
        self.inner_optimizer.learning_rate = value

    @property
    def slot_names(self) -> tuple[str, ...]:
        return tuple(getattr(self.inner_optimizer, "slot_names", ()))

    @property
    def xla_friendly_on_cpu(self) -> bool:
        return self.inner_optimizer.xla_friendly_on_cpu

    @property
    def steps_across_replicas(self) -> bool:
        return self.inner_optimizer.steps_across_replicas

    @property
    def graph_rewrites(self) -> dict | None:
        return self.inner_optimizer.graph_rewrites

    @property
    def variables(self) -> list[tf.Variable]:
        """The inner optimizer's variables, then the loss scale and the step counter."""
        return [*self.inner_optimizer.variables, self.loss_scale, self.step_counter]

    def checkpoint_parts(self) -> dict[str, tf.Module]:
        """What a training checkpoint saves: the inner optimizer under the name `optimizer`
        (where a checkpoint without loss scaling keeps its optimizer, so either restores
        into the other) and the scale under `loss_scale`; the inner optimizer's own further
        parts too, where it has them."""
        parts = getattr(self.inner_optimizer, "checkpoint_parts", None)
        inner = dict(parts()) if parts else {"optimizer": self.inner_optimizer}
        return {**inner, "loss_scale": self._state}

    def build(self, variables) -> None:
        """Builds the inner optimizer's slots."""
        self.inner_optimizer.build(variables)

    def get_slot(self, variable, name: str) -> tf.Variable:
        return self.inner_optimizer.get_slot(variable, name)

    def exclude_from_weight_decay(self, var_list=None, var_names=None) -> None:
        self.inner_optimizer.exclude_from_weight_decay(var_list, var_names)

    def add_variable(self, name: str, initial_value, dtype=None) -> tf.Variable:
        return self.inner_optimizer.add_variable(name, initial_value, dtype)

    def track_variable(self, variable: tf.Variable) -> None:
        self.inner_optimizer.track_variable(variable)

    def stop_reason(self) -> str | None:
        return self.inner_optimizer.stop_reason()

    # The inner optimizer's EMA and end-of-fit machinery (`use_ema`), as Keras forwards it.
    @property
    def built(self) -> bool:
        return getattr(self.inner_optimizer, "built", True)

    @property
    def moving_average(self):
        """The inner optimizer's moving average of the weights, or None."""
        return getattr(self.inner_optimizer, "moving_average", None)

    def fit_callbacks(self) -> list:
        return self.inner_optimizer.fit_callbacks()

    def finalize_variable_values(self, var_list) -> bool:
        return self.inner_optimizer.finalize_variable_values(var_list)

    def check_training(self, losses: dict, distributed: bool, sample_weight=None) -> None:
        self.inner_optimizer.check_training(losses, distributed, sample_weight)

    def check_model(self, model) -> None:
        self.inner_optimizer.check_model(model)

    def scale_loss(self, loss):
        """`loss * loss_scale`, for a custom step that calls `apply_gradients` itself."""
        loss = tf.convert_to_tensor(loss)
        return loss * tf.cast(self.loss_scale, loss.dtype)

    # ------------------------------------------------------------------------------ steps

    @graphfit_api
    def minimize(self, loss_fn: Callable[[], tuple[Any, Any]], variables,
                 batch: StepBatch | None = None) -> tuple[Any, Any]:
        """One loss-scaled step (see the class docstring).

        Args:
            loss_fn: returns `(loss, aux)`; `loss` is the unscaled loss.
            variables: the variables to train.
            batch: passed on to a second-order inner optimizer.

        Returns:
            `(loss, aux)`, the loss unscaled; a `ForwardPass` aux carries `skip_updates`, True
            when the step was skipped, so the training step leaves its update hooks alone.
        """
        if _runs_own_minimize(self.inner_optimizer):
            if batch is not None:  # it skips a non-finite step itself
                batch = dataclasses.replace(batch, skip_non_finite=True)
            return self.inner_optimizer.minimize(loss_fn, variables, batch)
        variables = [as_tf_variable(v) for v in variables]
        step_context.record_loss_scale(tf.identity(self.loss_scale))  # before it changes
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            loss, aux = loss_and_aux(loss_fn())
            scaled = self.scale_loss(loss)
        # The global batch's scaled gradients: every replica then agrees on finiteness.
        gradients = distribution.sum_gradients(tape.gradient(scaled, variables))
        unscaled = [_divided(g, self.loss_scale) for g in gradients]
        step_context.record_gradients(unscaled, variables)
        finite = self._apply_unscaled(all_finite(gradients), unscaled, variables)
        if isinstance(aux, ForwardPass):
            aux = aux.skipping_updates(~finite)
        return loss, aux

    @graphfit_api
    def apply_gradients(self, grads_and_vars) -> tf.Variable:
        """Applies gradients of a loss scaled by `scale_loss`, or skips them (see the class
        docstring).

        Returns:
            The inner optimizer's `iterations`.
        """
        pairs = [(g, as_tf_variable(v)) for g, v in grads_and_vars]
        if pairs:
            gradients = [g for g, _ in pairs]
            self._apply_unscaled(all_finite(gradients),
                                 [_divided(g, self.loss_scale) for g in gradients],
                                 [v for _, v in pairs])
        return self.iterations

    def _apply_unscaled(self, finite, unscaled, variables) -> tf.Tensor:
        """Applies `unscaled` (the gradients / scale) when the scaled gradients were `finite`
        and updates the scale; returns `finite` (a scalar bool tensor)."""
        self.inner_optimizer.build([v for g, v in zip(unscaled, variables) if g is not None])

        def apply_finite():
            apply = autograph_scope.convert_user_code(self.inner_optimizer.apply_gradients)
            apply(zip(unscaled, variables))
            self._grow_scale()

        if _in_a_strategy_replica():
            # A cond whose branch assigns mirrored variables cannot synchronize the replicas:
            # apply, then put every value back where the step is skipped.
            state = [*variables, *self.inner_optimizer.variables]
            before = [tf.identity(v) for v in state]
            scale, counter = tf.identity(self.loss_scale), tf.identity(self.step_counter)
            apply_finite()
            for variable, old in zip(state, before):
                variable.assign(tf.where(finite, tf.convert_to_tensor(variable), old))
            self.loss_scale.assign(tf.where(finite, tf.convert_to_tensor(self.loss_scale),
                                            scale * 0.5))
            self.step_counter.assign(tf.where(finite, tf.convert_to_tensor(self.step_counter),
                                              tf.zeros_like(counter)))
        else:
            tf.cond(finite, apply_finite, self._shrink_scale)
        return finite

    def _grow_scale(self) -> None:
        """After a finite step: S <- 2 S once `dynamic_growth_steps` are reached in a row."""
        grow = tf.equal(self.step_counter, self.dynamic_growth_steps - 1)
        self.loss_scale.assign(tf.where(grow, self.loss_scale * 2.0, self.loss_scale))
        self.step_counter.assign(tf.where(grow, tf.zeros_like(self.step_counter),
                                          self.step_counter + 1))

    def _shrink_scale(self) -> None:
        """After a non-finite step: S <- S / 2, the counter restarts."""
        self.step_counter.assign(tf.zeros_like(self.step_counter))
        self.loss_scale.assign(self.loss_scale * 0.5)

    # ----------------------------------------------------------------------------- config

    def get_config(self) -> dict[str, Any]:
        """Keras's keys; `inner_optimizer` is `{"type": name, **its config}`."""
        return {
            "name": self.name,
            "inner_optimizer": {"type": type(self.inner_optimizer).__name__,
                                **self.inner_optimizer.get_config()},
            "initial_scale": self.initial_scale,
            "dynamic_growth_steps": self.dynamic_growth_steps,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "LossScaleOptimizer":
        """Rebuilds it from `get_config()`; `inner_optimizer` may be an optimizer, a name or
        a config dict (`{"type": "SGD", ...}` or Keras's `{"class_name": ..., "config": ...}`).
        """
        return super().from_config(config)  # the constructor takes the inner's config too

    def __repr__(self) -> str:
        return (f"<LossScaleOptimizer name={self.name!r} "
                f"inner_optimizer={self.inner_optimizer!r}>")

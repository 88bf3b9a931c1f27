"""`BaseOptimizer`: the contract between the training engine and every optimizer.

The compiled training step calls `minimize(loss_fn, variables, batch)` once per step; that is
all an optimizer has to do. The rest of the contract has defaults that suit first-order
optimizers, and a second-order optimizer (`SecondOrderOptimizer`) overrides what it needs:

    build(variables)            creates the optimizer's state before the first trace (outside
                                it, under `tf.init_scope`), so a compiled step only reads and
                                assigns it
    built_for(variables)        whether that state exists for every variable, so a step
                                traced now creates nothing; False when it cannot tell
    minimize(loss_fn, variables, batch)
                                one step; `loss_fn() -> (loss, ForwardPass)`; `batch`, a
                                `StepBatch`, holds what re-running the model takes and what
                                `fit` knows of the step (its batch bound, the steps per pass
                                over the data, whether to skip a non-finite step)
    check_training(losses, distributed, sample_weight)
                                refuses, before the first step, what it cannot minimise
    check_model(model)          refuses, before the first step, a model it cannot train
                                (`fit` and `graphfit validate` call both)
    stop_reason()               polled after each chunk of steps: a string stops `fit`
    fit_callbacks()             callbacks `fit` runs with the user's, first (an optimizer with
                                `use_ema` brings the one that calls
                                `finalize_variable_values` once the epochs end)
    finalize_variable_values(var_list)
                                puts the final values into the model's variables (Keras's
                                method: the moving average of `use_ema`); none by default
    steps_across_replicas       under a `tf.distribute` strategy: False, the whole step runs
                                on every replica; True, `minimize` runs once, in cross-replica
                                context, and splits the batch itself (`batch.replicas`)
    xla_friendly_on_cpu         `jit_compile="auto"` turns XLA off on a CPU when False
    graph_rewrites              Grappler settings for the compiled functions that run it
                                (`graphfit.core.graph_rewrites`), or None

`iterations` counts the steps applied, and `variables` lists the state training checkpoints
save (`get_weights` / `set_weights` read and write it as values). `add_variable` and
`track_variable` add state that is not per variable.

The Keras base-optimizer arguments `use_ema`, `gradient_accumulation_steps`,
`loss_scale_factor` (and `ema_momentum`, `ema_overwrite_frequency`) belong to first-order
optimizers (`Optimizer`); the constructor (`SecondOrderOptimizer`) and `from_config` of an
optimizer that does not take them refuse them with the reason.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

__all__ = ["BaseOptimizer", "FIRST_REPLICA", "FIRST_ORDER_ARGUMENTS",
           "refuse_first_order_argument"]

# Under a tf.distribute strategy every replica computes the same update from all-reduced
# gradients: the first replica's value is assigned, once, to every copy.
FIRST_REPLICA = tf.VariableAggregation.ONLY_FIRST_REPLICA

# Keras's base-optimizer arguments that only a first-order optimizer takes, at their defaults.
FIRST_ORDER_ARGUMENTS = {"use_ema": False, "ema_momentum": 0.99,
                          "ema_overwrite_frequency": None, "loss_scale_factor": None,
                          "gradient_accumulation_steps": None}


def refuse_first_order_argument(cls: type, key: str, value) -> None:
    """Raises the ValueError for Keras's base-optimizer argument `key` given to `cls`, an
    optimizer that is not first-order (it does not take it)."""
    raise ValueError(
        f"{cls.__name__} does not take {key}: it is an argument of first-order "
        f"optimizers (graphfit.optimizers.Optimizer), whose gradient step the "
        f"moving average, the accumulation and the loss factor act on. Give it "
        f"to the first-order optimizer (the inner_optimizer of a "
        f"LossScaleOptimizer), or leave it out. Received: {key}={value!r}")


class BaseOptimizer(tf.Module):
    """What the training engine asks of an optimizer (see the module docstring).

    Args:
        name: the optimizer's name (a valid scope name).
    """

    steps_across_replicas: bool = False
    xla_friendly_on_cpu: bool = True
    graph_rewrites: dict | None = None

    def __init__(self, name: str | None = None):
        super().__init__(name=name)
        with tf.init_scope(), self.name_scope:
            self._iterations = tf.Variable(0, dtype=tf.int64, trainable=False,
                                           name="iterations", aggregation=FIRST_REPLICA)
        self._extra_variables: list[tf.Variable] = []

    @property
    def iterations(self) -> tf.Variable:
        """The number of steps applied so far (int64 variable)."""
        return self._iterations

    @property
    def variables(self) -> list[tf.Variable]:
        """The optimizer's own collection: `iterations`, then the state it added."""
        return [self._iterations, *self._extra_variables]

    def add_variable(self, name: str, initial_value, dtype=None) -> tf.Variable:
        """Creates optimizer-level state that is not per variable (call it from `build` or
        the constructor: never inside a trace)."""
        with tf.init_scope(), self.name_scope:
            variable = tf.Variable(initial_value, dtype=dtype, trainable=False, name=name,
                                   aggregation=FIRST_REPLICA)
            self._extra_variables.append(variable)
        return variable

    def track_variable(self, variable: tf.Variable) -> None:
        """Adds state created elsewhere (a gradient transform's random generator) to the
        optimizer's variables, so checkpoints of the optimizer save and restore it."""
        with tf.init_scope():
            if not any(v is variable for v in self._extra_variables):
                self._extra_variables.append(variable)

    def build(self, variables) -> None:
        """Creates the state for `variables` before the first step is traced; the default
        has none."""
        del variables

    def built_for(self, variables) -> bool:
        """Whether `build(variables)` has nothing left to create: a step traced now with
        these variables creates no optimizer state (`model.flops()` traces with a copy of an
        optimizer that would). The base class cannot tell what a subclass's `build` creates
        and says False; an optimizer that can tell overrides it."""
        del variables
        return False

    def minimize(self, loss_fn: Callable[[], tuple[Any, Any]], variables,
                 batch=None) -> tuple[Any, Any]:
        """One step; returns `(loss, aux)` as `loss_fn` returned them."""
        raise NotImplementedError(f"{type(self).__name__} must implement minimize.")

    def apply(self, grads, trainable_variables=None):
        """Applies `grads` to `trainable_variables`, in the same order: Keras 3's form of
        `apply_gradients(zip(grads, trainable_variables))`, for a custom `train_step`.

        Returns:
            The `iterations` variable.

        Raises:
            ValueError: without variables, or with more or fewer gradients than variables.
            NotImplementedError: for an optimizer that takes no gradients (a second-order
                one runs its own `minimize`).
        """
        apply_gradients = getattr(self, "apply_gradients", None)
        if apply_gradients is None:
            raise NotImplementedError(
                f"{type(self).__name__} computes its own steps (minimize) and takes no "
                f"gradients; in a custom train_step use a first-order optimizer (SGD, Adam).")
        if trainable_variables is None:
            raise ValueError(
                "apply(grads, trainable_variables) needs the variables the gradients belong "
                "to, in the same order: pass self.trainable_variables (graphfit optimizers "
                "serve several variable lists, so they do not guess).")
        grads, variables = list(grads), list(trainable_variables)
        if len(grads) != len(variables):
            raise ValueError(
                f"apply() received {len(grads)} gradients for {len(variables)} variables; "
                f"give one gradient (or None) per variable.")
        return apply_gradients(zip(grads, variables))

    def check_training(self, losses: dict, distributed: bool, sample_weight=None) -> None:
        """Raises a ValueError, before the first step, when the default training step cannot
        minimise `losses` (the compiled losses, by output) with this optimizer, on one device
        or (`distributed`) under a strategy, or with these in-memory sample weights (a NumPy
        array, or None). `fit` and `graphfit validate` call it; the default accepts all."""
        del losses, distributed, sample_weight

    def check_model(self, model) -> None:
        """Raises a ValueError, before the first step, for what of the built `model` this
        optimizer cannot train (its weights' regularizers, say). `fit` and `graphfit
        validate` call it; the default accepts every model."""
        del model

    def stop_reason(self) -> str | None:
        """Why the optimizer asks `fit` to stop (it converged), or None to go on; `fit` asks
        after each chunk of training steps and keeps the answer as `model.stop_reason`."""
        return None

    def fit_callbacks(self) -> list:
        """Callbacks `fit` runs before the user's (none by default)."""
        return []

    def finalize_variable_values(self, var_list) -> bool:
        """Sets the final values of `var_list` once `fit` ends; returns whether it changed
        them. Nothing by default."""
        del var_list
        return False

    def scale_loss(self, loss):
        """The loss a custom step differentiates (unchanged by default)."""
        return loss

    def get_weights(self) -> list:
        """The values of `variables`, NumPy arrays in that order."""
        from graphfit.optimizers import optimizer_state  # it documents the order

        return optimizer_state.get_weights(self)

    def set_weights(self, weights) -> None:
        """Assigns `weights` to `variables`, in order.

        Raises:
            ValueError: for a count or shape that does not match (nothing is assigned).
        """
        from graphfit.optimizers import optimizer_state

        optimizer_state.set_weights(self, weights)

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments (Keras's names where Keras has the optimizer)."""
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "BaseOptimizer":
        """Rebuilds an optimizer from `get_config()`.

        Raises:
            ValueError: for a Keras base-optimizer argument this optimizer does not take
                (`use_ema`, `gradient_accumulation_steps`, ...) at other than its default.
        """
        config = dict(config)
        for key, default in FIRST_ORDER_ARGUMENTS.items():
            if key in config and config[key] != default:
                refuse_first_order_argument(cls, key, config[key])
            config.pop(key, None)
        return cls(**config)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"

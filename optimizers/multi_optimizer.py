"""`MultiOptimizer` and `OptimizerMap`: each variable trained by its own optimizer (Keras's).

An `OptimizerMap` maps regular expressions over a variable's path (Keras's `variable.path`;
in graphfit the variable's name without ":0", `"dense_1/kernel"`) to first-order optimizers,
with a default for the variables no pattern matches. A `MultiOptimizer` differentiates the
loss once, hands each variable's gradient to the optimizer its map gives it, and counts its
own `iterations`; each inner optimizer keeps its own slots, learning rate and `iterations`
(which count only the steps it had variables in).

A recipe writes it as `get_config()` writes it:

    optimizer:
      type: MultiOptimizer
      optimizer_map:
        default_optimizer: {type: SGD, learning_rate: 0.1}
        optimizer_map:
          "dense_1/.*": {type: Adam, learning_rate: 0.001}

Example:

    >>> import tensorflow as tf
    >>> from graphfit import optimizers
    >>> with tf.name_scope("dense_1"):
    ...     kernel = tf.Variable([2.0], name="kernel")
    >>> bias = tf.Variable([2.0], name="bias")
    >>> opt = optimizers.MultiOptimizer(optimizers.OptimizerMap(
    ...     optimizers.SGD(1.0), {"dense_1/.*": optimizers.SGD(0.1)}))
    >>> _ = opt.apply([tf.constant([1.0]), tf.constant([1.0])], [kernel, bias])
    >>> [round(float(kernel[0]), 4), round(float(bias[0]), 4)], int(opt.iterations)
    ([1.9, 1.0], 1)
"""

from __future__ import annotations

import re
import warnings
from collections.abc import MutableMapping
from typing import Any, Callable

import tensorflow as tf

from graphfit.core import autograph_scope, step_context, validation
from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.registry import OPTIMIZERS
from graphfit.core.step_types import loss_and_aux
from graphfit.core.variables import as_tf_variable
from graphfit.optimizers.base import BaseOptimizer
from graphfit.optimizers.loss_scale import LossScaleOptimizer
from graphfit.optimizers.muon import variable_path
from graphfit.optimizers.optimizer import Optimizer
from graphfit.training import distribution

__all__ = ["MultiOptimizer", "OptimizerMap"]


def _resolved(value):
    """An optimizer given as a config (`{type: SGD, ...}`, Keras's `{class_name: ...}`) or a
    name, resolved through the registry; anything else as it is."""
    if isinstance(value, (dict, str)):
        from graphfit import optimizers  # the package imports this module

        return optimizers.get(value)
    return value


def _checked_inner(optimizer, what: str):
    """Keras's refusals of an optimizer for the map (ValueError, Keras's messages first)."""
    if isinstance(optimizer, LossScaleOptimizer):
        raise ValueError(f"{what} cannot be LossScaleOptimizer. Wrap the MultiOptimizer in "
                         f"it instead. Received: {what}={optimizer!r}")
    if isinstance(optimizer, MultiOptimizer):
        raise ValueError(f"{what} cannot be MultiOptimizer. Put its optimizers in this map "
                         f"instead. Received: {what}={optimizer!r}")
    if not isinstance(optimizer, Optimizer):
        raise ValueError(f"{what} must be a graphfit first-order Optimizer instance "
                         f"(optimizers.SGD(...), Adam(...); in a config {{type: SGD, ...}}). "
                         f"Received: {what}={optimizer!r}")
    if type(optimizer).minimize is not Optimizer.minimize:
        raise ValueError(f"{what} cannot be {type(optimizer).__name__}: it runs its own "
                         f"minimize, which a MultiOptimizer would bypass. "
                         f"Received: {what}={optimizer!r}")
    return optimizer


class OptimizerMap(MutableMapping):
    """Variables' paths (regular expressions) -> optimizers, with a default (Keras's).

    `map[path]` returns the optimizer of the exact key `path`, else of the one pattern that
    `re.fullmatch`es it, else `default_optimizer`; `map(variable)` looks up the variable's
    path. A key that two patterns match is refused when looked up.

    Args:
        default_optimizer: the first-order optimizer of every variable no key matches (or
            its config, `{type: SGD, learning_rate: 0.1}`).
        optimizer_map: a dict of keys (paths or patterns) to optimizers (or their configs),
            added one by one as `map[key] = optimizer` adds them.

    Raises:
        TypeError: for a default that is not an optimizer, or an `optimizer_map` that is
            not a dict (Keras's errors).
        ValueError: for a key or optimizer `map[key] = optimizer` refuses.

    Example:

        >>> from graphfit import optimizers
        >>> m = optimizers.OptimizerMap(optimizers.RMSprop())
        >>> m["encoder/layer_0/dense"] = optimizers.Adam()
        >>> m["encoder/.*"] = optimizers.SGD()
        >>> [m[k].name for k in ("encoder/layer_0/dense", "encoder/x", "decoder/x")]
        ['adam', 'sgd', 'rm_sprop']
    """

    def __init__(self, default_optimizer, optimizer_map=None):
        default_optimizer = _resolved(default_optimizer)
        if not isinstance(default_optimizer, BaseOptimizer):
            raise TypeError("default_optimizer must be a graphfit Optimizer instance "
                            "(optimizers.SGD(...), or a config {type: SGD, ...}). "
                            f"Received: default_optimizer={default_optimizer!r}")
        _checked_inner(default_optimizer, "default_optimizer")
        if optimizer_map is not None and not isinstance(optimizer_map, dict):
            raise TypeError("optimizer_map must be a dictionary of variable paths or "
                            "patterns to optimizers. "
                            f"Received: optimizer_map={optimizer_map!r}")
        self._default_optimizer = default_optimizer
        self._optimizer_map: dict[str, Optimizer] = {}
        for key, optimizer in (optimizer_map or {}).items():
            self[key] = optimizer

    @property
    def default_optimizer(self) -> Optimizer:
        """The optimizer of the variables no key matches."""
        return self._default_optimizer

    def __getitem__(self, key: str) -> Optimizer:
        if key in self._optimizer_map:
            return self._optimizer_map[key]
        matching = [pattern for pattern in self._optimizer_map if re.fullmatch(pattern, key)]
        if len(matching) > 1:
            raise ValueError(f"Multiple optimizers assigned to variable {key}: the patterns "
                             f"{matching} all match it. Make the patterns exclusive.")
        return self._optimizer_map[matching[0]] if matching else self._default_optimizer

    def __setitem__(self, key: str, optimizer) -> None:
        if key in self._optimizer_map:
            raise ValueError(f"'{key}' already exists in the OptimizerMap with value "
                             f"{self._optimizer_map[key]!r}. Please make sure to not use "
                             f"duplicated keys.")
        if not isinstance(key, str):
            raise ValueError(f"key must be a string (a variable path or a regular "
                             f"expression). Received: key={key!r}")
        try:
            re.compile(key)
        except re.error as error:
            raise ValueError(f"key must be a valid regular expression ({error}). "
                             f"Received: key={key!r}") from None
        self._optimizer_map[key] = _checked_inner(_resolved(optimizer), "optimizer")

    def __delitem__(self, key: str) -> None:
        del self._optimizer_map[key]

    def __len__(self) -> int:
        return len(self._optimizer_map)

    def __iter__(self):
        return iter(self._optimizer_map)

    def __call__(self, variable) -> Optimizer:
        return self[variable_path(variable)]

    def get_config(self) -> dict[str, Any]:
        """Keras's keys, each optimizer as `{"type": name, **its config}`."""
        from graphfit import optimizers

        return {"default_optimizer": optimizers.serialize(self._default_optimizer),
                "optimizer_map": {key: optimizers.serialize(optimizer)
                                  for key, optimizer in self._optimizer_map.items()}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "OptimizerMap":
        """Rebuilds the map from `get_config()` (or Keras's config of one)."""
        return cls(config["default_optimizer"], config.get("optimizer_map"))


def _as_map(optimizer_map):
    """An OptimizerMap or a callable as given; a config of a map (graphfit's
    `{default_optimizer, optimizer_map}` or Keras's `{class_name: OptimizerMap, config}`)
    built."""
    if isinstance(optimizer_map, dict):
        if optimizer_map.get("class_name") == "OptimizerMap":
            optimizer_map = optimizer_map.get("config") or {}
        unknown = set(optimizer_map) - {"default_optimizer", "optimizer_map"}
        if "default_optimizer" not in optimizer_map or unknown:
            raise ValueError(
                "optimizer_map as a config must be {default_optimizer: {type: SGD, ...}, "
                "optimizer_map: {pattern: {type: Adam, ...}}}"
                + (f"; unknown keys {sorted(unknown)}" if unknown else "")
                + f". Received: optimizer_map={optimizer_map!r}")
        return OptimizerMap.from_config(optimizer_map)
    if isinstance(optimizer_map, BaseOptimizer) or not callable(optimizer_map):
        raise ValueError(
            "optimizer_map must be an OptimizerMap, a callable variable -> optimizer, or a "
            "config {default_optimizer: ..., optimizer_map: {...}}. For one optimizer give "
            f"OptimizerMap(default_optimizer=it). Received: optimizer_map={optimizer_map!r}")
    return optimizer_map


class _Routing:
    """The map and variable.ref() -> index into `optimizers`. A plain object: tf.Module
    neither tracks it in checkpoints nor walks it for variables."""

    def __init__(self, optimizer_map):
        self.map = optimizer_map
        self.index: dict = {}


@OPTIMIZERS.register
class MultiOptimizer(BaseOptimizer):
    """Trains each variable with the optimizer its map gives it (Keras's `MultiOptimizer`).

    See the module docstring. `optimizers` lists the inner optimizers (the map's, then the
    default, then those a callable returned first at `build`); `variables` are its own
    `iterations` then each inner optimizer's variables. It has no learning rate of its own:
    reading or setting `learning_rate` raises AttributeError (set it on `optimizers`).

    Args:
        optimizer_map: an `OptimizerMap`, its config (`{default_optimizer: {type: SGD},
            optimizer_map: {"dense_1/.*": {type: Adam}}}`), or a callable
            `variable -> optimizer` (graphfit first-order optimizers).
        loss_scale_factor: None, or a positive float: the loss is multiplied by it and the
            gradients divided by it. It replaces every inner optimizer's own factor (Keras).
        name: the optimizer's name.

    Raises:
        ValueError: for a map that is none of the above, or (at `build`) a variable mapped
            to something that is not a first-order optimizer, to a `LossScaleOptimizer` or
            to a `MultiOptimizer`.

    Example:

        >>> from graphfit import optimizers
        >>> opt = optimizers.MultiOptimizer(optimizers.OptimizerMap(
        ...     optimizers.SGD(0.1), {"dense_1/.*": optimizers.Adam()}))
        >>> [o.name for o in opt.optimizers], opt.name
        (['adam', 'sgd'], 'multi_optimizer')
    """

    def __init__(self, optimizer_map=None, loss_scale_factor: float | None = None,
                 name: str | None = None):
        optimizer_map = _as_map(optimizer_map)
        super().__init__(name=name or "multi_optimizer")
        self._routing = _Routing(optimizer_map)
        self._inner_optimizers: list[Optimizer] = []
        for optimizer in [*getattr(optimizer_map, "values", list)(),
                          getattr(optimizer_map, "default_optimizer", None)]:
            if optimizer is not None and not any(optimizer is o for o in self._inner_optimizers):
                self._inner_optimizers.append(optimizer)
        self.loss_scale_factor = loss_scale_factor

    # ----------------------------------------------------------------------------- state

    @property
    def optimizers(self) -> list[Optimizer]:
        """The inner optimizers, in the order they were found."""
        return list(self._inner_optimizers)

    @property
    def optimizer_map(self):
        """The `OptimizerMap` or callable given."""
        return self._routing.map

    @property
    def learning_rate(self):
        """Raises AttributeError: each inner optimizer has its own (Keras's behaviour)."""
        raise AttributeError("Learning rate cannot be accessed on a MultiOptimizer. Access "
                             "the learning rate on the individual sub-optimizers instead "
                             "(optimizer.optimizers).")

    @learning_rate.setter
    def learning_rate(self, value) -> None:
        raise AttributeError("Learning rate cannot be set on a MultiOptimizer. Set the "
                             "learning rate on the individual sub-optimizers instead "
                             "(optimizer.optimizers).")

    @property
    def loss_scale_factor(self) -> float | None:
        """The loss factor, also every inner optimizer's (setting it sets theirs)."""
        return getattr(self, "_loss_scale_factor", None)

    @loss_scale_factor.setter
    def loss_scale_factor(self, value) -> None:
        value = validation.positive_float("loss_scale_factor", value, allow_none=True)
        self._loss_scale_factor = value
        for optimizer in getattr(self, "_inner_optimizers", ()):
            optimizer.loss_scale_factor = value

    @property
    def xla_friendly_on_cpu(self) -> bool:
        return all(o.xla_friendly_on_cpu for o in self._inner_optimizers)

    @property
    def built(self) -> bool:
        """Whether `build` routed at least one variable."""
        return bool(self._routing.index)

    @property
    def variables(self) -> list[tf.Variable]:
        """Its own `iterations` (and added state), then each inner optimizer's variables."""
        own = [self._iterations, *self._extra_variables]
        return own + [v for o in self._inner_optimizers for v in o.variables]

    def optimizer_of(self, variable) -> Optimizer:
        """The inner optimizer that updates `variable` (after `build`)."""
        position = self._routing.index.get(as_tf_variable(variable).ref())
        if position is None:
            raise ValueError(f"MultiOptimizer {self.name!r} was not built on variable "
                             f"{variable.name!r}: call optimizer.build(variables) first.")
        return self._inner_optimizers[position]

    def build(self, variables) -> None:
        """Routes every new variable to its optimizer and builds that optimizer's state
        (idempotent, incremental, safe inside a trace).

        Raises:
            ValueError: for a variable mapped to what the map may not hold.
        """
        groups: dict[int, list] = {}
        with tf.init_scope():
            for variable in variables:
                variable = as_tf_variable(variable)
                if variable.ref() in self._routing.index:
                    continue
                optimizer = self._routing.map(variable)
                self._check_routed(optimizer, variable)
                if not any(optimizer is o for o in self._inner_optimizers):
                    optimizer.loss_scale_factor = self.loss_scale_factor
                    self._inner_optimizers.append(optimizer)
                position = next(i for i, o in enumerate(self._inner_optimizers)
                                if o is optimizer)
                self._routing.index[variable.ref()] = position
                groups.setdefault(position, []).append(variable)
        for position, group in sorted(groups.items()):
            self._inner_optimizers[position].build(group)

    @staticmethod
    def _check_routed(optimizer, variable) -> None:
        if isinstance(optimizer, LossScaleOptimizer):
            raise ValueError("LossScaleOptimizer cannot be used inside an MultiOptimizer "
                             f"(variable {variable_path(variable)!r}). Wrap the "
                             "MultiOptimizer in it instead.")
        if isinstance(optimizer, MultiOptimizer):
            raise ValueError("MultiOptimizer cannot be used inside an MultiOptimizer "
                             f"(variable {variable_path(variable)!r}).")
        if not isinstance(optimizer, Optimizer):
            raise ValueError(f"Optimizer for variable {variable_path(variable)!r} is not an "
                             f"Optimizer instance: the map returned {optimizer!r}. Map it to "
                             f"a graphfit first-order optimizer.")
        _checked_inner(optimizer, "optimizer")

    # ------------------------------------------------------------------------------ steps

    @graphfit_api
    def minimize(self, loss_fn: Callable[[], tuple[Any, Any]], variables,
                 batch=None) -> tuple[Any, Any]:
        """One step: differentiates `loss_fn` once, then `apply_gradients`.

        Returns:
            `(loss, aux)` as `loss_fn` returned them.
        """
        del batch  # first-order: the gradient is all it needs
        variables = [as_tf_variable(v) for v in variables]
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            loss, aux = loss_and_aux(loss_fn())
            scaled = self.scale_loss(loss)  # the inner optimizers divide by the factor
        gradients = distribution.sum_gradients(tape.gradient(scaled, variables))
        step_context.record_gradients(gradients, variables)
        autograph_scope.convert_user_code(self.apply_gradients)(zip(gradients, variables))
        return loss, aux

    @graphfit_api
    def apply_gradients(self, grads_and_vars) -> tf.Variable:
        """Hands each `(gradient, variable)` pair to the variable's optimizer; an optimizer
        whose variables all lack a gradient is left alone this step.

        Returns:
            The `iterations` variable.

        Raises:
            ValueError: if every gradient is None.
        """
        pairs = [(g, as_tf_variable(v)) for g, v in grads_and_vars]
        if not pairs:
            return self._iterations
        if all(g is None for g, _ in pairs):
            raise ValueError(f"No gradients provided for any variable: "
                             f"{[v.name for _, v in pairs]}.")
        self.build([v for _, v in pairs])
        groups: dict[int, list] = {}
        for gradient, variable in pairs:
            groups.setdefault(self._routing.index[variable.ref()], []).append(
                (gradient, variable))
        for position, group in sorted(groups.items()):
            if any(g is not None for g, _ in group):
                apply = self._inner_optimizers[position].apply_gradients
                autograph_scope.convert_user_code(apply)(group)
            elif group:
                warnings.warn(f"Gradients do not exist for variables {[v.name for _, v in group]}"
                              f"; they are left unchanged.", stacklevel=2)
        self._iterations.assign_add(1)
        return self._iterations

    def scale_loss(self, loss):
        """`loss * loss_scale_factor` (unchanged without one), as Keras's."""
        if self.loss_scale_factor is None:
            return loss
        loss = tf.convert_to_tensor(loss)
        return loss * tf.cast(self.loss_scale_factor, loss.dtype)

    # ------------------------------------------------------------------ fit's other seams

    def check_training(self, losses: dict, distributed: bool, sample_weight=None) -> None:
        for optimizer in self._inner_optimizers:
            optimizer.check_training(losses, distributed, sample_weight)

    def check_model(self, model) -> None:
        """Looks up every trainable variable of `model` in an `OptimizerMap` before the first
        step (so `graphfit validate` reports a path that two patterns match), then lets each
        inner optimizer check the model."""
        if isinstance(self._routing.map, OptimizerMap):
            for variable in model.trainable_variables:
                self._routing.map(variable)
        for optimizer in self._inner_optimizers:
            optimizer.check_model(model)

    def fit_callbacks(self) -> list:
        """The inner optimizers' callbacks, one of each kind."""
        callbacks, kinds = [], set()
        for optimizer in self._inner_optimizers:
            for callback in optimizer.fit_callbacks():
                if type(callback) not in kinds:
                    kinds.add(type(callback))
                    callbacks.append(callback)
        return callbacks

    def finalize_variable_values(self, var_list) -> bool:
        """Each inner optimizer finalizes its own variables of `var_list` (its moving
        average, with `use_ema`); returns whether any changed."""
        groups: dict[int, list] = {}
        for variable in var_list:
            position = self._routing.index.get(as_tf_variable(variable).ref())
            if position is not None:
                groups.setdefault(position, []).append(variable)
        changed = [self._inner_optimizers[p].finalize_variable_values(g)
                   for p, g in sorted(groups.items())]
        return any(changed)

    # ----------------------------------------------------------------------------- config

    def get_config(self) -> dict[str, Any]:
        """Keras's keys; the map as `OptimizerMap.get_config()`.

        Raises:
            ValueError: for a callable map, which a config cannot hold.
        """
        if not isinstance(self._routing.map, OptimizerMap):
            raise ValueError(
                f"MultiOptimizer {self.name!r} routes with a Python callable "
                f"({self._routing.map!r}), which a config cannot hold. Use an OptimizerMap "
                "to save or serialize it.")
        return {"name": self.name, "optimizer_map": self._routing.map.get_config(),
                "loss_scale_factor": self.loss_scale_factor}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "MultiOptimizer":
        """Rebuilds it from `get_config()` (or Keras's config, its map nested as
        `{class_name: OptimizerMap, config: ...}`)."""
        return cls(**config)

    def __repr__(self) -> str:
        return (f"<MultiOptimizer name={self.name!r} "
                f"optimizers={[o.name for o in self._inner_optimizers]}>")

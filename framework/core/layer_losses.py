"""`LayerLosses`: the losses a layer adds to training, as Keras's `Layer` has them.

Three kinds, each reaching the training loss through the step's context
(`step_context.add_loss`), so the step itself knows none of them:

- **weight regularizers** (`add_weight(regularizer=...)`, `kernel_regularizer=` on the
  built-in layers): `regularizer(variable)` of the layer's own trainable weights, added once
  per forward pass however often the layer runs in it, logged as `regularization_loss`;
- **activity regularizers** (`activity_regularizer=`, settable on every layer):
  `regularizer(output) / batch size` of each output (Keras 3), logged as
  `activity_regularization_loss`;
- **`add_loss(tensor)`** inside `call`, logged as `added_loss`.

The training loss is the compiled loss plus all of them, in `fit` and `evaluate` (Keras's
`compute_loss` adds `model.losses` in both). Outside a step, `layer.losses` lists them for the
layer and every layer inside it: the added and activity losses of the last call, and the weight
regularizers evaluated now (Keras's `Layer.losses`; a layer called several times in one
forward pass lists its last call's, where Keras lists all: the training loss counts all).

Example:

    >>> import tensorflow as tf, keras
    >>> from graphfit import layers
    >>> dense = layers.Dense(2, kernel_initializer="ones",
    ...                      kernel_regularizer=keras.regularizers.L1(0.01),
    ...                      activity_regularizer=keras.regularizers.L2(0.01))
    >>> _ = dense(tf.ones((5, 5)) * 2.0)
    >>> round(float(tf.add_n(dense.losses)), 4)  # 0.1 (kernel) + 2.0 (activity, / batch of 5)
    2.1
"""

from __future__ import annotations

import contextlib
import inspect

import keras
import tensorflow as tf

from graphfit.core import step_context
from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.registry import did_you_mean

__all__ = ["LayerLosses", "get_regularizer", "get_constraint", "serialize", "REGULARIZATION_LOSS",
           "ACTIVITY_REGULARIZATION_LOSS", "ADDED_LOSS"]

REGULARIZATION_LOSS = "regularization_loss"
ACTIVITY_REGULARIZATION_LOSS = "activity_regularization_loss"
ADDED_LOSS = "added_loss"

# Keras 2 spelled L1L2 "l1_l2"; Keras 3 knows "l1l2" and "L1L2" (and "l1", "l2", ...).
_REGULARIZER_ALIASES = {"l1_l2": "l1l2"}
_REGULARIZER_NAMES = ("l1", "l2", "l1l2", "l1_l2", "orthogonal_regularizer")
_CONSTRAINT_NAMES = ("non_neg", "max_norm", "min_max_norm", "unit_norm")

def get_regularizer(value, argument: str):
    """`keras.regularizers.get(value)`: None, a Keras regularizer, its name ("l1", "l2",
    "l1l2" or "l1_l2"), its config dict, or a callable `(tensor) -> scalar`.

    Raises:
        ValueError: naming `argument` and the value received, with the close names.
    """
    if isinstance(value, str):
        value = _REGULARIZER_ALIASES.get(value, value)
    return _get(keras.regularizers.get, value, argument, "regularizer", _REGULARIZER_NAMES,
                "keras.regularizers.L2(0.01)")


def get_constraint(value, argument: str):
    """`keras.constraints.get(value)`: None, a Keras constraint ("non_neg", "max_norm",
    "min_max_norm", "unit_norm", an object or its config dict) or a callable
    `(tensor) -> tensor`, applied to the weight after each update.

    Raises:
        ValueError: naming `argument` and the value received, with the close names.
    """
    return _get(keras.constraints.get, value, argument, "constraint", _CONSTRAINT_NAMES,
                "keras.constraints.MaxNorm(2.0)")


def _get(getter, value, argument, kind, names, example):
    original = value
    if isinstance(value, dict) and "type" in value and "class_name" not in value:
        # A recipe's form, {type: L2, l2: 0.01}: Keras's is {class_name: L2, config: {...}}.
        config = {key: item for key, item in value.items() if key != "type"}
        value = {"class_name": value["type"], "config": config}
    try:
        resolved = getter(value)
    except (ValueError, TypeError) as error:
        resolved, reason = None, f" ({error})"
    else:
        reason = ""
    if value is not None and not callable(resolved):
        hint = did_you_mean(value, names) if isinstance(value, str) else ""
        raise ValueError(
            f"{argument} must be a Keras {kind}, its name ({', '.join(map(repr, names))}), "
            f"its config dict, a callable or None, e.g. {example}{reason}.{hint} "
            f"Received: {argument}={original!r}")
    return resolved


def serialize(value):
    """A regularizer's or constraint's config for `get_config` (None stays None)."""
    return None if value is None else keras.saving.serialize_keras_object(value)


class LayerLosses:
    """The loss methods of `Layer` (a mixin: it reads `name`, `_trainable`,
    `_trainable_weights` and `flatten_layers`)."""

    @property
    def activity_regularizer(self):
        """The regularizer of the layer's outputs (None: none); settable on every layer."""
        return self.__dict__.get("_activity_regularizer")

    @activity_regularizer.setter
    def activity_regularizer(self, value) -> None:
        self._activity_regularizer = get_regularizer(value, "activity_regularizer")

    def _losses_config(self) -> dict:
        """`activity_regularizer` for `get_config`, when set and the constructor takes it."""
        if self.activity_regularizer is None or "activity_regularizer" not in \
                inspect.signature(type(self).__init__).parameters:
            return {}
        return {"activity_regularizer": serialize(self.activity_regularizer)}

    @graphfit_api
    def add_loss(self, loss) -> None:
        """Adds a scalar loss from inside `call`, as Keras's `Layer.add_loss`: inside `fit`
        and `evaluate` it joins the step's loss (logged as `added_loss`); after any call it
        is listed in `losses` until the layer's next call.

        Raises:
            ValueError: for something that is not a tensor or a number.
        """
        self._add_named_loss(ADDED_LOSS, loss)

    def _add_named_loss(self, name: str, loss) -> None:
        for value in tf.nest.flatten(loss):
            try:
                tensor = tf.convert_to_tensor(value)
            except (TypeError, ValueError):
                tensor = None
            if tensor is None or not (tensor.dtype.is_floating or tensor.dtype.is_integer):
                raise ValueError(
                    f"Layer {self.name!r}: add_loss takes a scalar tensor computed in call(). "
                    f"Received: {value!r}")
            if not tensor.dtype.is_floating:  # Keras casts such losses to floatx
                tensor = tf.cast(tensor, tf.float32)
            tensor = tf.reduce_sum(tensor) if tensor.shape.rank else tensor
            self.__dict__.setdefault("_call_losses", []).append(tensor)
            step_context.add_loss(name, tensor)

    @property
    def losses(self) -> list:
        """Scalar losses of this layer and every layer inside it (Keras's `Layer.losses`):
        those added by the last call (`add_loss`, activity regularizers), then the weight
        regularizers' penalties of the trainable weights, evaluated now."""
        layers = list(self.flatten_layers())
        added = [loss for layer in layers for loss in layer.__dict__.get("_call_losses", [])
                 if _reachable(loss)]
        return added + [loss for layer in layers for loss in layer._weight_penalties()]

    def weight_regularizers(self) -> list:
        """`(variable, regularizer)` of this layer's own trainable weights that have one
        (none while the layer is frozen); a layer holding weights made elsewhere (a Keras
        layer's) overrides it. Levenberg–Marquardt reads it to write L2 terms as rows."""
        if not self._trainable:
            return []
        return [(variable, variable.regularizer) for variable in self._trainable_weights
                if getattr(variable, "regularizer", None) is not None]

    def _weight_penalties(self) -> list:
        return [tf.convert_to_tensor(regularizer(tf.convert_to_tensor(variable)))
                for variable, regularizer in self.weight_regularizers()]

    def _start_call(self):
        """Entered around each call: the layer forgets the losses of its last call."""
        self.__dict__.pop("_call_losses", None)
        return contextlib.nullcontext()

    def _add_call_losses(self, outputs) -> None:
        """After `call`: the activity regularizer's losses, and the weight regularizers'
        penalties once per open step (a layer shared by several nodes runs more often)."""
        regularizer = self.activity_regularizer
        if regularizer is not None:
            for output in tf.nest.flatten(outputs):
                if isinstance(output, tf.Tensor) and output.dtype.is_floating:
                    loss = tf.convert_to_tensor(regularizer(output))
                    if output.shape.rank:  # Keras 3: per example, whatever the batch size
                        loss = tf.math.divide_no_nan(
                            loss, tf.cast(tf.shape(output)[0], loss.dtype))
                    self._add_named_loss(ACTIVITY_REGULARIZATION_LOSS, loss)
        context = step_context.current()
        if (context is None or context.checks is not None
                or not context.first_time(("weight_penalties", id(self)))):
            return
        penalties = self._weight_penalties()
        if penalties:
            step_context.add_loss(REGULARIZATION_LOSS, tf.add_n(
                [tf.cast(p, penalties[0].dtype) for p in penalties]))


def _reachable(tensor) -> bool:
    """Whether `tensor` can be used here: eager, or of the graph being traced (or one it is
    nested in). A call traced earlier (a finished `fit`) left tensors of a graph now gone."""
    if not tf.is_symbolic_tensor(tensor):
        return True
    graph = tf.compat.v1.get_default_graph()
    while graph is not None:
        if graph is tensor.graph:
            return True
        graph = getattr(graph, "outer_graph", None)
    return False

"""The compiled loss: Keras losses resolved by name or object, one per model output.

Keras computes losses well; graphfit only resolves the identifiers, puts every loss in the
model's dtype (Keras losses default to float32, which would throw away float64 precision), and
sums the per-output losses with their weights.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import warnings

import keras
import tensorflow as tf

from graphfit.core import autograph_scope, validation
from graphfit.core.naming import snake_case
from graphfit.core.registry import LOSSES, unknown_name_error

__all__ = ["LossSet", "resolve_loss", "loss_kind", "LossKind", "FunctionLoss", "loss_classes",
           "valid_loss_names", "registered_loss", "ShapeChosenCrossentropy", "loss_key",
           "AddedLossesOnly", "no_loss_to_compute"]

# Keras's own aliases (keras.losses.get), and two of tf.keras's that recipes may still use.
_ALIASES = {
    "bce": "binary_crossentropy",
    "mse": "mean_squared_error",
    "mae": "mean_absolute_error",
    "mape": "mean_absolute_percentage_error",
    "msle": "mean_squared_logarithmic_error",
    "kld": "kl_divergence",
    "kullback_leibler_divergence": "kl_divergence",
    "logcosh": "log_cosh",
}


@functools.cache
def loss_classes() -> dict[str, type]:
    """{'mean_squared_error': keras.losses.MeanSquaredError, ...} for every public loss."""
    classes = {}
    for attribute in dir(keras.losses):
        value = getattr(keras.losses, attribute)
        if isinstance(value, type) and issubclass(value, keras.losses.Loss):
            if value is not keras.losses.Loss:
                classes[snake_case(attribute)] = value
    classes["kl_divergence"] = keras.losses.KLDivergence
    return classes


def registered_loss(key: str):
    """The loss class `key` names: a Keras loss, else one registered with
    `graphfit.core.registry.LOSSES` (graphfit's `layers.CenterLoss`, or a user's)."""
    own = {snake_case(name): LOSSES.get(name) for name in LOSSES.names()}
    return loss_classes().get(key) or own.get(key)


def valid_loss_names() -> list[str]:
    return sorted(set(loss_classes()) | set(_ALIASES) | set(_CHOSEN_BY_SHAPE)
                  | {snake_case(name) for name in LOSSES.names()})


# Keras's "crossentropy" / "ce": binary, sparse or categorical, chosen by the shapes.
_CHOSEN_BY_SHAPE = ("crossentropy", "ce")


def loss_key(name: str) -> str:
    """The snake_case key a loss name stands for: 'MSE' and 'mse' -> 'mean_squared_error',
    'Huber' -> 'huber', 'KLDivergence' -> 'kl_divergence' (Keras accepts all of these)."""
    if name.isupper():
        key = name.lower()
    else:
        key = snake_case(name) if name[:1].isupper() else name.lower()
    return _ALIASES.get(key, key)


class ShapeChosenCrossentropy(keras.losses.Loss):
    """Keras's `loss="crossentropy"` (or `"ce"`): binary cross-entropy for one output unit,
    sparse categorical for class ids, categorical for one-hot rows (Keras's rule,
    `compile_utils.is_binary_or_sparse_categorical`).

    `LossSet.build` replaces it by the chosen loss once the shapes are known; called
    directly, it chooses at each call.
    """

    def __init__(self, name="crossentropy", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def chosen(self, y_true_shape, y_pred_shape) -> keras.losses.Loss:
        """The Keras loss object Keras would use for labels and outputs of these shapes."""
        y_true_shape, y_pred_shape = tf.TensorShape(y_true_shape), tf.TensorShape(y_pred_shape)
        if y_pred_shape[-1] == 1:
            cls = keras.losses.BinaryCrossentropy
        elif y_true_shape.rank < y_pred_shape.rank or (
                y_true_shape[-1] == 1 and (y_pred_shape[-1] or 0) > 1):
            cls = keras.losses.SparseCategoricalCrossentropy
        else:
            cls = keras.losses.CategoricalCrossentropy
        return cls(name=self.name, reduction=self.reduction, dtype=self.dtype)

    def call(self, y_true, y_pred):
        return self.chosen(y_true.shape, y_pred.shape).call(y_true, y_pred)


class FunctionLoss(keras.losses.Loss):
    """A Keras loss around a plain function `fn(y_true, y_pred) -> per-example losses`.

    Args:
        fn: the function; it returns one value per example (or per element, then averaged).
        name: the name shown in logs; default the function's name.
        dtype: the dtype the loss computes in.
    """

    def __init__(self, fn, name: str | None = None, dtype=None, reduction="sum_over_batch_size"):
        super().__init__(name=name or getattr(fn, "__name__", "loss"), reduction=reduction,
                         dtype=dtype)
        self.fn = fn

    def call(self, y_true, y_pred):
        # Keras's rule: a trailing axis of size 1 on one side only is squeezed away.
        if y_true.shape.rank == y_pred.shape.rank + 1 and y_true.shape[-1] == 1:
            y_true = tf.squeeze(y_true, -1)
        elif y_pred.shape.rank == y_true.shape.rank + 1 and y_pred.shape[-1] == 1:
            y_pred = tf.squeeze(y_pred, -1)
        return autograph_scope.convert_user_code(self.fn)(y_true, y_pred)


def resolve_loss(identifier, dtype: tf.DType) -> keras.losses.Loss:
    """A Keras `Loss` object computing in `dtype`, from a name, a Loss object or a callable.

    Raises:
        ValueError: for an unknown name, listing the valid names.
        TypeError: for anything that is not a name, a Loss or a callable.
    """
    if isinstance(identifier, str):
        key = loss_key(identifier)
        if key in _CHOSEN_BY_SHAPE:
            return ShapeChosenCrossentropy(name=identifier, dtype=dtype.name)
        cls = registered_loss(key)
        if cls is None:
            raise unknown_name_error(
                "loss", identifier, valid_loss_names(),
                "or pass a keras.losses.Loss object or a function (y_true, y_pred) -> losses.",
            )
        return cls(dtype=dtype.name)
    if isinstance(identifier, keras.losses.Loss):
        if identifier.dtype == dtype.name:
            return identifier
        try:
            rebuilt = type(identifier).from_config({**identifier.get_config(),
                                                    "dtype": dtype.name})
            if _same_arguments(identifier, rebuilt):
                return rebuilt
            raise ValueError("its config drops constructor arguments")
        except (TypeError, ValueError):
            warnings.warn(
                f"Loss {identifier.name!r} computes in {identifier.dtype} and could not be "
                f"rebuilt in the model's {dtype.name}; pass dtype={dtype.name!r} to its "
                f"constructor to keep full precision.",
                stacklevel=3,
            )
            return identifier
    if callable(identifier):
        return FunctionLoss(identifier, dtype=dtype.name)
    raise TypeError(
        f"loss must be a loss name, a keras.losses.Loss or a function (y_true, y_pred). "
        f"Received: loss={identifier!r}"
    )


def _same_arguments(loss: keras.losses.Loss, rebuilt: keras.losses.Loss) -> bool:
    """Whether `rebuilt` (from `loss`'s config) computes what `loss` does. Some Keras 3.15
    configs leave constructor arguments out (`Huber`'s delta, the `axis` of
    `SparseCategoricalCrossentropy` and `CosineSimilarity`); a wrapper's repr names its
    function's arguments, so it tells a lossy rebuild apart."""
    arguments = [p.name for p in inspect.signature(type(loss).__init__).parameters.values()
                 if p.name not in ("self", "name", "reduction", "dtype")
                 and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    config = loss.get_config()
    return all(name in config for name in arguments) or repr(loss) == repr(rebuilt)


@dataclasses.dataclass(frozen=True)
class LossKind:
    """What a loss expects of its labels: used to check labels and to pick metrics.

    Attributes:
        labels: "sparse_categorical" (integer class ids), "categorical" (one-hot rows),
            "binary" (0/1), "own_shape" (labels whose shape the loss defines, unlike its
            outputs': CTC's label sequences, Circle's class ids) or None (anything of the
            outputs' shape, e.g. regression).
        from_logits: whether predictions are logits.
        ignore_class: a class id the loss skips (Keras's `ignore_class`): allowed in the labels
            although it is no class of the outputs.
    """

    labels: str | None
    from_logits: bool = False
    ignore_class: int | None = None


_KINDS = {
    "sparse_categorical_crossentropy": "sparse_categorical",
    "categorical_generalized_cross_entropy": "sparse_categorical",
    "categorical_crossentropy": "categorical",
    "categorical_focal_crossentropy": "categorical",
    "binary_crossentropy": "binary",
    "binary_focal_crossentropy": "binary",
    "ctc": "own_shape",
    "circle": "own_shape",
}


def loss_kind(loss: keras.losses.Loss) -> LossKind:
    config = loss.get_config() if hasattr(loss, "get_config") else {}
    # Keras's loss classes wrap a function (`fn`), as FunctionLoss does: its name says the
    # kind, also for a subclass of a Keras loss.
    if callable(getattr(loss, "fn", None)):
        name = getattr(loss.fn, "__name__", "")
    else:
        name = snake_case(type(loss).__name__)
    return LossKind(_KINDS.get(name), bool(config.get("from_logits", False)),
                    config.get("ignore_class"))


class LossSet:
    """The model's total loss: `sum_i weight_i * loss_i(y_true_i, y_pred_i, sample_weight)`.

    Args:
        loss: one loss for every output, a list in output order, or a dict by output name.
        loss_weights: None, a list in output order, or a dict by output name.
    """

    def __init__(self, loss, loss_weights=None):
        if loss is None:
            raise ValueError(
                "compile() needs a loss, e.g. loss='mse' or "
                "loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)."
            )
        if loss_weights is not None and not (
                isinstance(loss_weights, (dict, list, tuple)) or validation.is_real(loss_weights)):
            raise ValueError(
                f"loss_weights must be a number (one output), or a list or dict of numbers "
                f"(one per output). Received: loss_weights={loss_weights!r}")
        self._spec = loss
        self._weight_spec = loss_weights
        self.output_names: list[str] | None = None
        self.losses: dict[str | None, keras.losses.Loss] = {}
        self.weights: dict[str | None, float] = {}
        self.built = False
        if isinstance(loss, (str, keras.losses.Loss)) or callable(loss):
            resolve_loss(loss, tf.float32)  # fail at compile time on a bad name
        elif isinstance(loss, (dict, list, tuple)):
            items = loss.values() if isinstance(loss, dict) else loss
            if all(item is None for item in items):
                raise ValueError(
                    f"loss gives no output a loss. Received: loss={loss!r}; name a loss for "
                    f"at least one output (None leaves an output without one).")
            for item in items:
                if item is not None:  # an output without a loss (Keras's None)
                    resolve_loss(item, tf.float32)

    def build(self, output_names: list[str] | None, dtype: tf.DType,
              y_true_spec=None, y_pred_spec=None) -> None:
        """Resolves one loss per output, once the model's outputs are known.

        Args:
            output_names: the model's output names, or None for one unnamed output.
            dtype: the dtype the losses compute in.
            y_true_spec, y_pred_spec: the labels' and outputs' specs (by output name for
                several), when known: "crossentropy" is chosen from their shapes.
        """
        self.output_names = output_names
        keys = output_names or [None]
        spec, weights = self._spec, self._weight_spec
        per_output = _per_output(spec, keys, "loss")
        weight_per_output = _weights_per_output(weights, keys) if weights is not None else {}
        self.losses = {k: resolve_loss(v, dtype) for k, v in per_output.items() if v is not None}
        if y_true_spec is not None and y_pred_spec is not None:
            for k, loss in self.losses.items():
                if isinstance(loss, ShapeChosenCrossentropy):
                    true, pred = (y_true_spec, y_pred_spec) if k is None else (
                        y_true_spec[k], y_pred_spec[k])
                    self.losses[k] = loss.chosen(true.shape, pred.shape)
        self.weights = {k: float(weight_per_output.get(k, 1.0)) for k in self.losses}
        # Built without labels (predict first), "crossentropy" is chosen again when they come.
        self.built = not any(isinstance(loss, ShapeChosenCrossentropy)
                             for loss in self.losses.values())

    def bind(self, model) -> None:
        """Lets losses that read the model's state find it (a loss with a
        `bind_model(model, output)` method: `layers.CenterLoss` finds its ClassMeans layer);
        called by the train and test steps, once per trace."""
        for output, loss in self.losses.items():
            if hasattr(loss, "bind_model"):
                loss.bind_model(model, output)

    def kind(self, output: str | None = None) -> LossKind:
        loss = self.losses.get(output)
        return loss_kind(loss) if loss is not None else LossKind(None)

    def __call__(self, y_true, y_pred, sample_weight=None):
        """Returns (total loss, {output name: loss}) for one batch."""
        if self.output_names is None:
            loss = self.losses[None](y_true, y_pred, sample_weight=sample_weight)
            if self.weights[None] != 1.0:  # compile(loss_weights=0.2), as Keras weighs it
                loss = loss * tf.cast(self.weights[None], loss.dtype)
            return loss, {}
        per_output = {}
        total = None
        for name, loss_fn in self.losses.items():
            value = loss_fn(y_true[name], y_pred[name], sample_weight=sample_weight)
            per_output[name] = value
            weighted = value * tf.cast(self.weights[name], value.dtype)
            total = weighted if total is None else total + weighted
        return total, per_output


def _weights_per_output(weights, keys: list) -> dict:
    """{output: weight} from compile's loss_weights: a number for a single-output model, a
    list in output order or a dict by output name (Keras's forms)."""
    several = keys != [None]
    if not isinstance(weights, (dict, list, tuple)):
        if several:
            raise ValueError(
                f"loss_weights={weights!r} is one number, but the model has the outputs "
                f"{keys}: give one weight per output, as a list in that order or a dict by "
                f"output name (as Keras requires).")
        weights = [weights]
    per_output = _per_output(weights, keys, "loss_weights")
    for key, weight in per_output.items():
        if weight is not None and not validation.is_real(weight):
            raise ValueError(
                f"loss_weights must be numbers. Received {weight!r} for "
                f"{'the output ' + repr(key) if several else 'the loss'}.")
    return {k: w for k, w in per_output.items() if w is not None}


def _per_output(spec, keys: list, argument: str) -> dict:
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in keys]
        if unknown:
            raise ValueError(
                f"{argument} names outputs {unknown} that the model does not have. Its outputs "
                f"are {[k for k in keys if k is not None]}."
            )
        return {k: spec.get(k) for k in keys}
    if isinstance(spec, (list, tuple)):
        if len(spec) != len(keys):
            raise ValueError(
                f"{argument} has {len(spec)} entries but the model has {len(keys)} outputs "
                f"({[k for k in keys if k is not None]}). Give one per output, or a dict by "
                f"output name."
            )
        return dict(zip(keys, spec))
    return {k: spec for k in keys}


class AddedLossesOnly(LossSet):
    """The compiled loss of a model compiled with `loss=None`: none, so the default steps
    minimise only the losses its layers add (`add_loss`, regularizers), as Keras does (a
    variational autoencoder's KL and reconstruction terms, say). The step refuses a batch
    whose layers added nothing (`no_loss_to_compute`)."""

    def __init__(self):  # no spec to check
        self.output_names = None
        self.losses, self.weights = {}, {}
        self.built = True

    def build(self, output_names, dtype, y_true_spec=None, y_pred_spec=None) -> None:
        self.output_names = output_names

    def __call__(self, y_true, y_pred, sample_weight=None):
        floating = [t.dtype for t in tf.nest.flatten(y_pred) if t.dtype.is_floating]
        return tf.zeros((), floating[0] if floating else tf.float32), {}


def no_loss_to_compute(model_name: str, caller: str) -> ValueError:
    """The error of a default step with no compiled loss and no loss its layers added."""
    return ValueError(
        f"{caller}() has no loss to compute: model {model_name!r} was compiled without a "
        f"loss and its layers added none (add_loss, kernel_regularizer, ...). Compile it with "
        f"one (model.compile(optimizer=..., loss='mse')), or add the loss in a layer's call.")

"""`KerasLayer`: runs any Keras 3 layer inside graphfit, with graphfit's update-hook timing."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import keras
import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.core.variables import attach_constraint

__all__ = ["KerasLayer"]

# Keras layers that draw random numbers in training (besides the `Random*` augmentations).
_KERAS_RANDOM = {"Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                 "GaussianNoise", "GaussianDropout", "AlphaDropout"}

# Modules of Keras's convolution and pooling layers: XLA on CPU slows these down.
_XLA_UNFRIENDLY_MODULES = ("keras.src.layers.convolutional", "keras.src.layers.pooling")


@register_layer
class KerasLayer(Layer):
    """Adapts a `keras.layers.Layer` (Keras 3) so that it trains inside graphfit.

    The Keras layer's weights join graphfit's collections in the Keras layer's own weight
    order, as the underlying `tf.Variable`s (so `GradientTape` gradients and the optimizer
    work on them): `variables` lists `keras_layer.weights` followed by its other state
    (random seed generators), `trainable_variables` lists `keras_layer.trainable_weights`.

    State the Keras layer changes itself (BatchNormalization moving statistics, seed
    generator state) is not assigned on the spot: the layer runs inside
    `keras.StatelessScope()` and each recorded assignment becomes a graphfit update hook
    (`add_update`), applied once per training step after the optimizer update, or at once
    when called eagerly outside `fit`. A call with `training=False` leaves the seed state
    as it was (Keras's LSTM and GRU advance it at inference too), so evaluating and
    predicting do not move training's random stream. Freezing the adapter freezes the Keras layer
    (`keras_layer.trainable = False`; a Keras BatchNormalization then runs in inference
    mode). `training` is passed on only when the Keras layer's `call` accepts it.

    The Keras layer is built in `build()` from the input shape (`keras_layer.build(shape)`);
    a layer whose `build` needs something else should be built before it is wrapped.
    A Keras layer whose `call` takes several tensors (`MultiHeadAttention(query, value)`)
    gets the items of a list input in that order, or one input tensor in each place
    (self-attention).
    The Keras layer's losses join graphfit's: its weight regularizers (`regularization_loss`),
    its `add_loss` and activity regularizers (`added_loss`). Its weight constraints
    (`kernel_constraint=...`) are applied after each update by every graphfit optimizer, as
    Keras's optimizers apply them.

    Args:
        layer: the Keras 3 layer to wrap (built or not), or Keras's serialized form of one
            (`{"class_name": "LSTM", "config": {"units": 32}}`, as `keras.layers.serialize`
            gives; made with `keras.layers.deserialize`, in Keras's safe mode).
        name: the adapter's name (default: 'keras_layer', 'keras_layer_1', ...).
        dtype: the adapter's floating dtype (None inherits the model's). When the Keras
            layer computes in another dtype, floating inputs are cast to its compute dtype
            and floating outputs back.
        trainable: False freezes the adapter and the Keras layer.

    Attributes:
        keras_layer: the wrapped layer.
        supports_jit: the Keras layer's `supports_jit`.
        xla_friendly_on_cpu: False when the wrapped layer is or holds a Keras convolution or
            pooling layer.
        vectorizes_per_example: False when the wrapped layer is or holds a Keras
            `EinsumDense` (MultiHeadAttention's projections): Keras computes its einsum as a
            broadcasting batched matmul, whose gradients TensorFlow's vectorizer (pfor)
            crashes on when mapped over examples; or a recurrent layer running its
            `tf.while_loop` (`unroll=False`), which pfor cannot map once it holds gradients.
            Levenberg–Marquardt's `jacobian_mode="auto"` then takes whole-batch reverse mode.

    Raises:
        ValueError: if `layer` is not a Keras 3 layer.

    Example:

        >>> import keras, tensorflow as tf
        >>> from graphfit import layers
        >>> adapter = layers.KerasLayer(keras.layers.Dense(2))
        >>> adapter(tf.ones((4, 3))).shape
        TensorShape([4, 2])
        >>> [tuple(v.shape) for v in adapter.trainable_variables]
        [(3, 2), (2,)]
    """

    xla_friendly_on_cpu = True

    def __init__(
        self,
        layer: keras.layers.Layer,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        if isinstance(layer, dict):
            layer = keras.layers.deserialize(_with_layer_modules(copy.deepcopy(layer)))
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(
                "layer must be a Keras 3 layer (an instance of keras.layers.Layer) or its "
                "serialized form {'class_name': ..., 'config': {...}}. "
                f"Received: layer={layer!r}"
            )
        self.keras_layer = layer
        if not trainable:
            layer.trainable = False
        self._passes_training = "training" in inspect.signature(layer.call).parameters
        self._tensor_count = _required_positional(layer.call)
        self.xla_friendly_on_cpu = not _holds_conv_or_pooling(layer)

    # --------------------------------------------------------------------- trainability
    def _set_trainable(self, value: bool) -> None:
        Layer.trainable.fset(self, value)
        self.keras_layer.trainable = bool(value)

    trainable = property(Layer.trainable.fget, _set_trainable, doc=Layer.trainable.__doc__)

    @property
    def mixes_examples(self) -> bool:
        """Whether a Keras BatchNormalization inside trains with batch statistics."""
        return any(isinstance(layer, keras.layers.BatchNormalization) and layer.trainable
                   for layer in self.keras_layer._flatten_layers())

    @property
    def stochastic_in_training(self) -> bool:
        """Whether the Keras layer (or one inside it) draws random numbers in training: a
        dropout, noise or `Random*` augmentation layer whose rate is not 0, or a layer with
        a `dropout` or `recurrent_dropout` rate above 0 (LSTM, MultiHeadAttention)."""
        return any(_random_in_training(layer) for layer in self.keras_layer._flatten_layers())

    @property
    def vectorizes_per_example(self) -> bool:
        """False when the Keras layer is or holds a Keras `EinsumDense` (MultiHeadAttention)
        or a recurrent layer that runs its time loop (`unroll=False`)."""
        return not _holds_einsum_dense(self.keras_layer) and not any(
            isinstance(sub, keras.layers.RNN) and not sub.unroll
            for sub in _sublayers(self.keras_layer))

    @property
    def supports_jit(self) -> bool:
        """Whether the Keras layer can be XLA-compiled (`keras_layer.supports_jit`)."""
        return bool(getattr(self.keras_layer, "supports_jit", True))

    # ------------------------------------------------------------------------ collections
    @property
    def variables(self) -> list[tf.Variable]:
        """The Keras layer's weights in its order, then its other state (seed generators)."""
        weights = [_tf_variable(v) for v in self.keras_layer.weights]
        known = {id(v) for v in weights}
        others = [_tf_variable(v) for v in self.keras_layer.variables]
        return weights + [v for v in others if id(v) not in known]

    @property
    def weights(self) -> list[tf.Variable]:
        """The Keras layer's weights (`keras_layer.weights`: not its seed state, as in Keras)."""
        return [_tf_variable(v) for v in self.keras_layer.weights]

    @property
    def trainable_variables(self) -> list[tf.Variable]:
        """The Keras layer's trainable weights; empty when the adapter is frozen."""
        if not self.trainable:
            return []
        return [_tf_variable(v) for v in self.keras_layer.trainable_weights]

    def weight_regularizers(self) -> list:
        """The Keras layer's weights that carry a regularizer (`kernel_regularizer=...`),
        as the `tf.Variable`s graphfit trains."""
        if not self.trainable:
            return []
        return [(_tf_variable(v), v.regularizer) for v in self.keras_layer.trainable_weights
                if getattr(v, "regularizer", None) is not None]

    # ---------------------------------------------------------------------------- contract
    def build(self, input_shape) -> None:
        if not self.keras_layer.built:
            if self._tensor_count > 1:  # build(query_shape, value_shape) and the like
                self.keras_layer.build(*[tuple(tf.TensorShape(s).as_list())
                                         for s in self._spread(input_shape, is_shape=True)])
            else:
                self.keras_layer.build(tf.nest.map_structure(
                    lambda s: tuple(tf.TensorShape(s).as_list()), input_shape))
        # Keras keeps a weight's constraint on its keras.Variable; graphfit's optimizers
        # update the tf.Variable under it and find the constraint attached there.
        for weight in self.keras_layer.weights:
            attach_constraint(_tf_variable(weight), getattr(weight, "constraint", None))

    def _spread(self, inputs, is_shape: bool = False) -> list:
        """The positional tensors of a Keras call taking several (query, value): a list's
        items, or one tensor repeated (self-attention)."""
        single = not isinstance(inputs, (list, tuple)) or (
            is_shape and all(d is None or isinstance(d, int) for d in inputs))
        if single:
            return [inputs] * self._tensor_count
        if len(inputs) < self._tensor_count:
            raise ValueError(
                f"{type(self.keras_layer).__name__} takes {self._tensor_count} input tensors; "
                f"give it a list of {self._tensor_count} (or one, used for each). "
                f"Received: {len(inputs)} inputs")
        return list(inputs)

    def call(self, inputs, training: bool = False):
        compute_dtype = tf.as_dtype(self.keras_layer.compute_dtype)
        inputs = tf.nest.map_structure(lambda t: _cast_floating(t, compute_dtype), inputs)
        kwargs = {"training": training} if self._passes_training else {}
        arguments = self._spread(inputs) if self._tensor_count > 1 else [inputs]
        with keras.StatelessScope(collect_losses=True) as scope:
            outputs = self.keras_layer(*arguments, **kwargs)
        for loss in scope.losses:  # the Keras layer's add_loss and activity regularizer
            self.add_loss(loss)
        # Keras's LSTM draws dropout masks at inference too: that seed advance is left out,
        # so evaluating or predicting leaves training's random stream where it was.
        kept = self.keras_layer.weights if training is False or training is None \
            else self.keras_layer.variables
        for variable in kept:
            new_value = scope.get_current_value(variable)
            if new_value is not None:
                self.add_update(_tf_variable(variable), new_value)
        return tf.nest.map_structure(lambda t: _cast_floating(t, self.compute_dtype), outputs)

    # ------------------------------------------------------------------- configuration
    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "layer": keras.layers.serialize(self.keras_layer)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "KerasLayer":
        config = dict(config)
        config["layer"] = keras.layers.deserialize(config["layer"])
        return cls(**config)


def _with_layer_modules(config):
    """Keras's serialized form with `module: keras.layers` filled in where a layer's
    `class_name` (nested ones too: a Bidirectional's `layer`) comes without one; Keras
    finds many layer classes only through it."""
    if isinstance(config, dict):
        name = config.get("class_name")
        if (isinstance(name, str) and "module" not in config and "config" in config
                and isinstance(getattr(keras.layers, name, None), type)):
            config["module"] = "keras.layers"
        return {key: _with_layer_modules(value) for key, value in config.items()}
    if isinstance(config, list):
        return [_with_layer_modules(item) for item in config]
    return config


def _required_positional(call) -> int:
    """How many tensors a Keras `call` takes positionally: 2 for `call(query, value, ...)`,
    1 for a layer taking one input (or one list of inputs, as Concatenate does)."""
    parameters = inspect.signature(call).parameters.values()
    required = [p for p in parameters if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return max(len(required), 1)


def _tf_variable(variable) -> tf.Variable:
    """The `tf.Variable` under a Keras variable (what tapes, optimizers and checkpoints see)."""
    value = getattr(variable, "value", variable)
    if not isinstance(value, tf.Variable):  # inside a StatelessScope `value` may be a tensor
        value = variable._value
    return value


def _cast_floating(tensor, dtype: tf.DType):
    if isinstance(tensor, tf.Tensor) and tensor.dtype.is_floating and tensor.dtype != dtype:
        return tf.cast(tensor, dtype)
    return tensor


def _sublayers(layer: keras.layers.Layer) -> list:
    # Keras has no public "all sublayers" API; fall back to the layer alone without it.
    flatten = getattr(layer, "_flatten_layers", None)
    return list(flatten(include_self=True, recursive=True)) if flatten else [layer]


def _holds_conv_or_pooling(layer: keras.layers.Layer) -> bool:
    return any(
        cls.__module__.startswith(_XLA_UNFRIENDLY_MODULES)
        for sub in _sublayers(layer)
        for cls in type(sub).__mro__
    )


def _holds_einsum_dense(layer: keras.layers.Layer) -> bool:
    return any(isinstance(sub, (keras.layers.EinsumDense, keras.layers.MultiHeadAttention))
               for sub in _sublayers(layer))


def _rate_above_zero(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _random_in_training(layer: keras.layers.Layer) -> bool:
    """Whether this one Keras layer draws random numbers in training: a dropout or noise
    layer (or `Random*` augmentation) unless its rate (`rate`, `stddev`) is 0, or a layer
    whose `dropout`/`recurrent_dropout` is above 0."""
    name = type(layer).__name__
    if name in _KERAS_RANDOM or name.startswith("Random"):
        rate = getattr(layer, "rate", getattr(layer, "stddev", None))
        return rate is None or not isinstance(rate, (int, float)) or rate > 0
    return any(_rate_above_zero(getattr(layer, key, None))
               for key in ("dropout", "recurrent_dropout"))

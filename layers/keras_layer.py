"""`KerasLayer`: runs any Keras 3 layer inside graphfit, with graphfit's update-hook timing."""

from __future__ import annotations

import inspect
from typing import Any

import keras
import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer

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
    when called eagerly outside `fit`. Freezing the adapter freezes the Keras layer
    (`keras_layer.trainable = False`; a Keras BatchNormalization then runs in inference
    mode). `training` is passed on only when the Keras layer's `call` accepts it.

    The Keras layer is built in `build()` from the input shape (`keras_layer.build(shape)`);
    a layer whose `build` needs something else should be built before it is wrapped.
    Keras regularization losses (`add_loss`, activity regularizers) are not collected.

    Args:
        layer: the Keras 3 layer to wrap (built or not).
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
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(
                "layer must be a Keras 3 layer (an instance of keras.layers.Layer). "
                f"Received: layer={layer!r}"
            )
        self.keras_layer = layer
        if not trainable:
            layer.trainable = False
        self._passes_training = "training" in inspect.signature(layer.call).parameters
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
        """Whether the Keras layer (or one inside it) is a dropout, noise or `Random*`
        augmentation layer, which draws random numbers in training."""
        names = {type(layer).__name__ for layer in self.keras_layer._flatten_layers()}
        return bool(names & _KERAS_RANDOM) or any(n.startswith("Random") for n in names)

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
    def trainable_variables(self) -> list[tf.Variable]:
        """The Keras layer's trainable weights; empty when the adapter is frozen."""
        if not self.trainable:
            return []
        return [_tf_variable(v) for v in self.keras_layer.trainable_weights]

    # ---------------------------------------------------------------------------- contract
    def build(self, input_shape) -> None:
        if not self.keras_layer.built:
            shapes = tf.nest.map_structure(
                lambda s: tuple(tf.TensorShape(s).as_list()), input_shape
            )
            self.keras_layer.build(shapes)

    def call(self, inputs, training: bool = False):
        compute_dtype = tf.as_dtype(self.keras_layer.compute_dtype)
        inputs = tf.nest.map_structure(lambda t: _cast_floating(t, compute_dtype), inputs)
        kwargs = {"training": training} if self._passes_training else {}
        with keras.StatelessScope() as scope:
            outputs = self.keras_layer(inputs, **kwargs)
        for variable in self.keras_layer.variables:
            new_value = scope.get_current_value(variable)
            if new_value is not None:
                self.add_update(_tf_variable(variable), new_value)
        return tf.nest.map_structure(lambda t: _cast_floating(t, self.dtype), outputs)

    # ------------------------------------------------------------------- configuration
    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "layer": keras.layers.serialize(self.keras_layer)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "KerasLayer":
        config = dict(config)
        config["layer"] = keras.layers.deserialize(config["layer"])
        return cls(**config)


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


def _holds_conv_or_pooling(layer: keras.layers.Layer) -> bool:
    # Keras has no public "all sublayers" API; fall back to the layer alone without it.
    flatten = getattr(layer, "_flatten_layers", None)
    sublayers = flatten(include_self=True, recursive=True) if flatten else [layer]
    return any(
        cls.__module__.startswith(_XLA_UNFRIENDLY_MODULES)
        for sub in sublayers
        for cls in type(sub).__mro__
    )

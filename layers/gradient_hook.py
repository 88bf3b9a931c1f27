"""`GradientHook`: the identity forward, a function of the gradient backward."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.layers import user_functions

__all__ = ["GradientHook"]


@register_layer
class GradientHook(Layer):
    """Passes its input through unchanged and changes the gradient flowing back through it.

    Forward, `outputs = inputs`. Backward, the gradient of the loss with respect to the
    outputs (a tensor of the inputs' shape, batch axis included) is transformed before it
    reaches the layers upstream: clipped to `clip_norm`, then multiplied by `scale`; or
    mapped by `fn`. `scale=0` freezes everything upstream (their gradients are exactly zero),
    `scale=-1` reverses the gradient (domain-adversarial training), `clip_norm` bounds what
    one batch can push upstream.

    Give either `fn`, or `scale` and/or `clip_norm` (the forms a config or recipe can hold).

    Args:
        fn: a function `gradient -> gradient` of TensorFlow ops, returning a tensor of the
            gradient's shape; or a reference `'package.module:name'` to one. It runs inside
            the compiled step, so it must not use Python side effects to change state.
        scale: a finite number the gradient is multiplied by (after clipping).
        clip_norm: a positive number: the gradient tensor of the batch is rescaled so that
            its L2 norm (over all its entries) is at most `clip_norm` (`tf.clip_by_norm`).
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if no transformation, or both `fn` and `scale`/`clip_norm`, are given, or
            one is invalid; on the backward pass, if `fn` returns something that is not a
            tensor of the gradient's shape.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> hook = layers.GradientHook(scale=2.0)
        >>> x = tf.constant([[1.0, -3.0]])
        >>> with tf.GradientTape() as tape:
        ...     tape.watch(x)
        ...     y = hook(x)
        ...     loss = tf.reduce_sum(y * y)
        >>> y.numpy(), tape.gradient(loss, x).numpy()
        (array([[ 1., -3.]], dtype=float32), array([[  4., -12.]], dtype=float32))
    """

    xla_friendly_on_cpu = True

    function_arguments = ("fn",)  # a recipe names it as "module:name" user code
    def __init__(
        self,
        fn=None,
        scale: float | None = None,
        clip_norm: float | None = None,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        owner = f"GradientHook {self.name!r}"
        if fn is None and scale is None and clip_norm is None:
            raise ValueError(
                f"{owner} needs a transformation of the gradient: fn=<function gradient -> "
                f"gradient>, scale=<number>, or clip_norm=<positive number>.")
        if fn is not None and (scale is not None or clip_norm is not None):
            raise ValueError(
                f"{owner}: give either fn, or scale and/or clip_norm, not both (fn would "
                f"have to say where scale and clipping come). Received: fn={fn!r}, "
                f"scale={scale!r}, clip_norm={clip_norm!r}")
        self._fn_argument = fn
        self.fn = None if fn is None else user_functions.resolve("fn", fn, owner)
        self.scale = validation.finite_number("scale", scale) if scale is not None else None
        self.clip_norm = validation.positive_float("clip_norm", clip_norm, allow_none=True)

    def call(self, inputs, training: bool = False):
        if not isinstance(inputs, tf.Tensor):
            raise ValueError(
                f"GradientHook {self.name!r} takes one tensor; received "
                f"{type(inputs).__name__}. Put one hook on each branch instead.")
        if not inputs.dtype.is_floating:
            return tf.identity(inputs)  # no gradient flows through integers

        @tf.custom_gradient
        def hooked(x):
            def backward(upstream):
                return self._transform(upstream)

            return tf.identity(x), backward

        return hooked(inputs)

    def _transform(self, gradient: tf.Tensor) -> tf.Tensor:
        """The gradient sent upstream, from the one arriving from downstream."""
        if self.fn is not None:
            return self._checked(self.fn(gradient), gradient)
        if self.clip_norm is not None:
            gradient = tf.clip_by_norm(gradient, tf.cast(self.clip_norm, gradient.dtype))
        if self.scale is None or self.scale == 1.0:
            return gradient
        if self.scale == 0.0:
            return tf.zeros_like(gradient)  # exactly zero, even where the gradient is inf
        return gradient * tf.cast(self.scale, gradient.dtype)

    def _checked(self, result, gradient: tf.Tensor) -> tf.Tensor:
        received = f"{type(result).__name__}"
        try:
            result = tf.convert_to_tensor(result)
        except (TypeError, ValueError):
            result = None
        if result is None or not result.shape.is_compatible_with(gradient.shape):
            if result is not None:
                received = f"a tensor of shape {result.shape}"
            raise ValueError(
                f"GradientHook {self.name!r}: fn must return a tensor of the gradient's shape "
                f"{gradient.shape}; it returned {received}.")
        if result.dtype != gradient.dtype:
            if not result.dtype.is_floating:
                raise ValueError(
                    f"GradientHook {self.name!r}: fn must return a floating tensor; it "
                    f"returned dtype {result.dtype.name}.")
            result = tf.cast(result, gradient.dtype)
        return tf.reshape(result, tf.shape(gradient))

    def get_config(self) -> dict[str, Any]:
        config = self._base_config()
        if self.fn is not None:
            config["fn"] = user_functions.config_reference(
                "fn", self._fn_argument, self.fn, f"GradientHook {self.name!r}")
        if self.scale is not None:
            config["scale"] = self.scale
        if self.clip_norm is not None:
            config["clip_norm"] = self.clip_norm
        return config

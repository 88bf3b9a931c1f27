"""`LSTM` and `GRU`: Keras's recurrent layers as graphfit layers (`KerasBacked`).

They take Keras's arguments and compute Keras's numbers (the Keras layer itself runs inside
graphfit's `KerasLayer` adapter). One default differs: `unroll=None` unrolls the time loop
when the number of steps is known when the layer is built and at most `MAX_UNROLL`. An
unrolled layer computes the same numbers without a `tf.while_loop`, which TensorFlow's
vectorizer (pfor) cannot map over examples once it holds gradients: Levenberg–Marquardt's
per-example Jacobians and vectorized per-example gradients then work through the layer.
`unroll=False` keeps Keras's loop; the layer then says `vectorizes_per_example = False` and
Levenberg–Marquardt's `jacobian_mode='auto'` takes whole-batch reverse mode.
"""

from __future__ import annotations

import keras

from graphfit.core.registry import register_layer
from graphfit.layers.keras_backed import KerasBacked

__all__ = ["LSTM", "GRU", "MAX_UNROLL"]

MAX_UNROLL = 64  # unroll=None unrolls sequences of known length up to this many steps


class _Recurrent(KerasBacked):
    """Keras's RNN layer with graphfit's `unroll=None` (unrolled when short and known)."""

    graphfit_defaults = {"unroll": None}

    def _keras_arguments(self, given: dict) -> dict:
        if given.get("return_state"):
            raise ValueError(
                f"{type(self).__name__}(return_state=True) is not supported: a graphfit layer "
                f"has one output, and the states would be extra ones. Use "
                f"return_sequences=True for every step's output (the last step's is the "
                f"state h), or build that model in Keras. Received: return_state=True")
        self._auto_unroll = given.get("unroll") is None
        if self._auto_unroll:
            given["unroll"] = False
        return given

    def build(self, input_shape) -> None:
        steps = input_shape[1] if len(input_shape) > 2 else None
        if self._auto_unroll and steps is not None and steps <= MAX_UNROLL:
            self.keras_layer.unroll = True  # read by Keras's RNN at every call
        super().build(input_shape)


@register_layer
class LSTM(_Recurrent):
    """Long short-term memory, Keras's `keras.layers.LSTM` as a graphfit layer.

    Inputs `(batch, steps, features)`; outputs `(batch, units)`, or `(batch, steps, units)`
    with `return_sequences=True`. Weights, in Keras's order: `kernel`, `recurrent_kernel`,
    `bias`. All of Keras's arguments are taken with Keras's defaults but `unroll` (None:
    unrolled when the number of steps is known and at most `MAX_UNROLL`, see the module
    docstring). Masking and `return_state` (several outputs) are Keras's and not supported
    in graphfit models.

    Args:
        units: the size of the state; a positive integer.
        activation: as in Keras; so are recurrent_activation, use_bias, kernel_initializer,
            recurrent_initializer, bias_initializer, unit_forget_bias, the regularizers and
            constraints, dropout, recurrent_dropout, seed, return_sequences, go_backwards,
            stateful and use_cudnn.
        unroll: None (graphfit's default, see above), True or False.
        name: the layer's name (also the Keras layer's). dtype: the adapter's floating dtype.
        trainable: False freezes the layer.

    Raises:
        ValueError: naming the layer, for arguments Keras refuses or does not take.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> lstm = layers.LSTM(4)
        >>> lstm(tf.ones((2, 5, 3))).shape
        TensorShape([2, 4])
        >>> [tuple(v.shape) for v in lstm.trainable_variables]
        [(3, 16), (4, 16), (16,)]
    """

    keras_class = keras.layers.LSTM


@register_layer
class GRU(_Recurrent):
    """Gated recurrent unit, Keras's `keras.layers.GRU` as a graphfit layer.

    As `LSTM` (inputs, outputs, `unroll=None`); weights `kernel`, `recurrent_kernel`, `bias`
    (shape `(2, 3 * units)` with Keras's default `reset_after=True`).

    Args:
        units: the size of the state; a positive integer.
        activation: as in Keras; so are recurrent_activation, use_bias, the initializers,
            regularizers and constraints, dropout, recurrent_dropout, seed, return_sequences,
            go_backwards, stateful, reset_after and use_cudnn.
        unroll: None (graphfit's default, see `LSTM`), True or False.
        name: the layer's name (also the Keras layer's). dtype: the adapter's floating dtype.
        trainable: False freezes the layer.

    Raises:
        ValueError: naming the layer, for arguments Keras refuses or does not take.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.GRU(4, return_sequences=True)(tf.ones((2, 5, 3))).shape
        TensorShape([2, 5, 4])
    """

    keras_class = keras.layers.GRU

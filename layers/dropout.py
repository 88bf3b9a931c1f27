"""`Dropout`: zeroes random inputs during training and rescales the rest."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer

__all__ = ["Dropout"]


@register_layer
class Dropout(Layer):
    """Sets a random fraction `rate` of its inputs to 0 during training (Keras semantics).

    With `training=True` each input is kept with probability `1 - rate` and the kept ones are
    scaled by `1 / (1 - rate)`, so the expected sum is unchanged; with `training=False`
    (inference, the default) the layer is the identity. Every call draws a new mask from the
    layer's own `tf.random.Generator` through stateless dropout, so the sequence of masks is
    reproducible from `seed` (or, with `seed=None`, from the global seed set by
    `graphfit.set_seed`), with and without XLA (stateful random ops under XLA ignore seeds).
    The generator's state is saved in checkpoints, so a resumed run draws the masks an
    uninterrupted one would.

    Args:
        rate: the fraction of inputs to drop, in [0, 1).
        noise_shape: the shape of the keep/drop mask, broadcast against the inputs, batch axis
            included (e.g. `(None, 1, features)` drops whole features for every timestep).
            None entries take the input's size. None: a mask of the input's shape.
        seed: an integer operation seed, or None.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if `rate`, `noise_shape` or `seed` is invalid.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> dropout = layers.Dropout(0.5, seed=1)
        >>> dropout(tf.ones((2, 3))).numpy()  # inference: unchanged
        array([[1., 1., 1.],
               [1., 1., 1.]], dtype=float32)
        >>> sorted(set(dropout(tf.ones((4, 8)), training=True).numpy().ravel()) - {0.0, 2.0})
        []
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    @property
    def stochastic_in_training(self) -> bool:
        """True unless rate is 0: training draws a new mask on every call."""
        return self.rate > 0

    def __init__(
        self,
        rate: float,
        noise_shape=None,
        seed: int | None = None,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
            raise ValueError(
                "rate must be a number in [0, 1) (the fraction of inputs dropped; rate=1 would "
                f"drop everything and scale by infinity). Received: rate={rate!r}"
            )
        if noise_shape is not None:
            if isinstance(noise_shape, str) or not _is_shape(noise_shape):
                raise ValueError(
                    "noise_shape must be a tuple of positive integers or None, batch axis "
                    f"included. Received: noise_shape={noise_shape!r}"
                )
            noise_shape = tuple(noise_shape)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer or None. Received: seed={seed!r}")
        self.rate = float(rate)
        self.noise_shape = noise_shape
        self.seed = seed

    def build(self, input_shape):
        # Drawn from NumPy's global state when no seed is given, so set_seed fixes it too.
        seed = self.seed if self.seed is not None else int(np.random.randint(0, 2**31 - 1))
        self._generator = tf.random.Generator.from_seed(seed)

    def call(self, inputs, training: bool = False):
        if not training or self.rate == 0.0:
            return inputs
        seed = self._generator.make_seeds(1)[:, 0]
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=seed, noise_shape=self._noise_shape(inputs)
        )

    def _noise_shape(self, inputs):
        if self.noise_shape is None:
            return None
        if len(self.noise_shape) != inputs.shape.rank:
            raise ValueError(
                f"Dropout {self.name!r}: noise_shape={self.noise_shape} must have one entry "
                f"per input axis (batch included); the inputs have shape "
                f"{tuple(inputs.shape.as_list())}."
            )
        dynamic = tf.shape(inputs)
        return tf.stack(
            [dynamic[i] if size is None else size for i, size in enumerate(self.noise_shape)]
        )


def _is_shape(value) -> bool:
    try:
        entries = list(value)
    except TypeError:
        return False
    return all(
        v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0) for v in entries
    )

"""Random layers that act in training only: `Dropout`, `SpatialDropout1D/2D/3D` (whole
channels dropped), `GaussianNoise` (additive) and `GaussianDropout` (multiplicative).

All draw from the layer's own `tf.random.Generator` (`_Seeded`): stateless ops seeded from it,
so the draws are reproducible from `seed` (or `graphfit.set_seed`), with and without XLA, and a
checkpoint resumes them. At inference (`training=False`) each is the identity.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.layers.spatial_arguments import channels_last_only, public_class, spatial_input_spec

__all__ = ["Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
           "GaussianNoise", "GaussianDropout"]


class _Seeded(Layer):
    """A layer that draws new random numbers at every training call from its own generator."""

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def _set_seed(self, seed) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"{type(self).__name__}: seed must be an integer or None. "
                             f"Received: seed={seed!r}")
        self.seed = seed

    def build(self, input_shape):
        # Drawn from NumPy's global state when no seed is given, so set_seed fixes it too.
        seed = self.seed if self.seed is not None else int(np.random.randint(0, 2**31 - 1))
        self._generator = tf.random.Generator.from_seed(seed)

    def _next_seed(self) -> tf.Tensor:
        """A fresh stateless-op seed (shape (2,)); advances the generator."""
        return self._generator.make_seeds(1)[:, 0]


def _fraction(layer: str, argument: str, value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{layer}: {argument} must be a number in [0, 1) ({what}). "
                         f"Received: {argument}={value!r}")
    return float(value)


@register_layer
class Dropout(_Seeded):
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
        self.rate = _fraction(type(self).__name__, "rate", rate,
                              "the fraction of inputs dropped; rate=1 would drop everything "
                              "and scale by infinity")
        if noise_shape is not None:
            if isinstance(noise_shape, str) or not _is_shape(noise_shape):
                raise ValueError(
                    "noise_shape must be a tuple of positive integers or None, batch axis "
                    f"included. Received: noise_shape={noise_shape!r}"
                )
            noise_shape = tuple(noise_shape)
        self.noise_shape = noise_shape
        self._set_seed(seed)

    def call(self, inputs, training: bool = False):
        if not training or self.rate == 0.0:
            return inputs
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=self._next_seed(), noise_shape=self._noise_shape(inputs)
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


class _SpatialDropout(Dropout):
    """Dropout of whole channels: one keep/drop draw per example and channel, shared by every
    position of the `rank` spatial axes (Keras's SpatialDropout)."""

    rank = 1

    def __init__(self, rate: float, data_format=None, seed: int | None = None,
                 name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(rate, seed=seed, name=name, dtype=dtype, trainable=trainable)
        self.data_format = channels_last_only(data_format, type(self).__name__, self.rank)
        self.input_spec = spatial_input_spec(self.rank)

    def _noise_shape(self, inputs):
        dynamic = tf.shape(inputs)
        return tf.stack([dynamic[0], *[1] * self.rank, dynamic[-1]])


_SPATIAL_DOC = """Drops whole channels of {what} in training (Keras's {{name}}).

    In training each channel of each example is dropped (all its positions) with probability
    `rate`, the kept ones scaled by `1 / (1 - rate)`; at inference the layer is the identity.
    Inputs are channels-last, {shape}. The masks are graphfit's draws (see `Dropout`): the
    same distribution as Keras's, not the same numbers.

    Args:
        rate: the fraction of channels to drop, in [0, 1).
        data_format: None or 'channels_last' (channels_first is refused, with the transpose
            that converts the inputs).
        seed: an integer operation seed, or None.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: for invalid arguments; on call, for inputs that are not rank {ndim}.

    Example:

        >>> import numpy as np, tensorflow as tf
        >>> from graphfit import layers
        >>> out = layers.{{name}}(0.5, seed=1)(tf.ones({example}), training=True).numpy()
        >>> bool(np.all(out == out[:, {first}, :]))  # one draw per example and channel
        True
"""
_SPATIAL_SHAPES = {1: ("`(batch, steps, channels)`", (2, 5, 4), "0:1"),
                   2: ("`(batch, height, width, channels)`", (2, 3, 3, 4), "0:1, 0:1"),
                   3: ("`(batch, depth, height, width, channels)`", (2, 2, 2, 2, 4),
                       "0:1, 0:1, 0:1")}


def _spatial_dropout_class(rank: int) -> type:
    shape, example, first = _SPATIAL_SHAPES[rank]
    what = {1: "sequences", 2: "images", 3: "volumes"}[rank]
    doc = _SPATIAL_DOC.format(what=what, rank=rank, shape=shape, ndim=rank + 2, example=example,
                              first=first)
    return public_class(_SpatialDropout, f"SpatialDropout{rank}D", rank, __name__, doc)


SpatialDropout1D, SpatialDropout2D, SpatialDropout3D = (
    _spatial_dropout_class(rank) for rank in (1, 2, 3))


class _GaussianLayer(_Seeded):
    """Training-only Gaussian noise: `combine(inputs, normal(mean, stddev))`."""

    @property
    def stochastic_in_training(self) -> bool:
        """True unless the noise's standard deviation is 0."""
        return self._stddev() > 0

    def call(self, inputs, training: bool = False):
        stddev = self._stddev()
        if not training or stddev == 0:
            return inputs
        noise = tf.random.stateless_normal(tf.shape(inputs), seed=self._next_seed(),
                                           mean=self._mean, stddev=stddev, dtype=inputs.dtype)
        return self._combine(inputs, noise)


@register_layer
class GaussianNoise(_GaussianLayer):
    """Adds zero-mean Gaussian noise of standard deviation `stddev` in training.

    Keras's GaussianNoise: the identity at inference.

    Args:
        stddev: the noise's standard deviation, in [0, 1] as Keras requires.
        seed: an integer operation seed, or None (see `Dropout` for how graphfit seeds).
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if `stddev` or `seed` is invalid.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> noise = layers.GaussianNoise(0.1, seed=0)
        >>> noise(tf.ones((2, 3))).numpy().tolist()  # inference: unchanged
        [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
        >>> bool(tf.reduce_any(noise(tf.ones((2, 3)), training=True) != 1.0))
        True
    """

    _mean = 0.0

    def __init__(self, stddev: float, seed: int | None = None, name: str | None = None,
                 dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        if isinstance(stddev, bool) or not isinstance(stddev, (int, float)) or not (
                0 <= stddev <= 1):
            raise ValueError("GaussianNoise: stddev must be a number in [0, 1] (the noise's "
                             f"standard deviation, as Keras requires). Received: "
                             f"stddev={stddev!r}")
        self.stddev = float(stddev)
        self._set_seed(seed)

    def _stddev(self) -> float:
        return self.stddev

    @staticmethod
    def _combine(inputs, noise):
        return inputs + noise


@register_layer
class GaussianDropout(_GaussianLayer):
    """Multiplies its inputs by Gaussian noise of mean 1 in training.

    Keras's GaussianDropout: the noise's standard deviation is `sqrt(rate / (1 - rate))`; the
    identity at inference.

    Args:
        rate: the drop probability of the equivalent Dropout, in [0, 1) (Keras also takes 1,
            an infinite standard deviation).
        seed: an integer operation seed, or None (see `Dropout` for how graphfit seeds).
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no variables.

    Raises:
        ValueError: if `rate` or `seed` is invalid.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> layers.GaussianDropout(0.2, seed=0)(tf.ones((1, 2))).numpy().tolist()
        [[1.0, 1.0]]
    """

    _mean = 1.0

    def __init__(self, rate: float, seed: int | None = None, name: str | None = None,
                 dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.rate = _fraction("GaussianDropout", "rate", rate,
                              "the drop probability; rate=1 means infinite noise")
        self._set_seed(seed)

    def _stddev(self) -> float:
        return (self.rate / (1.0 - self.rate)) ** 0.5

    @staticmethod
    def _combine(inputs, noise):
        return inputs * noise

"""`BatchNormalization`, with optional batch renormalization (Keras 3 semantics)."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments

__all__ = ["BatchNormalization"]

_CLIPPING_KEYS = ("rmax", "rmin", "dmax")


@register_layer
class BatchNormalization(Layer):
    """Normalizes each feature with batch statistics in training, moving ones at inference.

    Training (`training=True` and the layer not frozen):
    `outputs = gamma * (x - mean(batch)) / sqrt(var(batch) + epsilon) + beta`, and the moving
    statistics move towards the batch statistics:
    `moving_mean <- moving_mean * momentum + mean(batch) * (1 - momentum)` (the same for
    `moving_variance`). Inference: the same formula with `moving_mean` and `moving_variance`.
    The numbers, weight names and weight order equal `keras.layers.BatchNormalization`:
    `gamma`, `beta` (trainable), `moving_mean`, `moving_variance`, and with renorm
    `moving_stddev`, `renorm_mean`, `renorm_stddev` (non-trainable), so `get_weights()` of a
    Keras twin can be copied in by position.

    **When the moving statistics change (update hooks).** `call` never assigns them; it
    declares the change with `add_moving_average` / `add_update`. Inside `fit`, the training
    step collects these hooks during the forward pass and applies them once per training
    step, after the optimizer's update, in the same compiled step; forward passes that are
    not a training step (Levenberg–Marquardt trial passes, Jacobians, per-example gradients)
    never move them. Called eagerly with `training=True` outside `fit` (no collector open),
    the layer applies them immediately, as Keras does. Under
    `graphfit.core.update_hooks.collect_updates()` they are collected and not applied.

    **momentum versus renorm_momentum.** They drive two different sets of averages:

    - `momentum` drives `moving_mean` and `moving_variance` (and, with renorm,
      `moving_stddev`, from which `moving_variance = relu(moving_stddev**2 - epsilon)` is
      derived). These are used only at *inference* (`training=False`, `evaluate`,
      `predict`, or a frozen layer); they never change what the layer computes in training.
      The average spans roughly the last `1 / (1 - momentum)` steps: 0.99 (the default)
      about 100 steps, right for runs of thousands of steps. Lower it (0.9) for short runs
      or few steps per epoch, when validation results lag training results because the
      averages have not caught up with the final weights.
    - `renorm_momentum` (only with `renorm=True`) drives `renorm_mean` and `renorm_stddev`,
      which are used *during training* to compute the batch-renormalization corrections
      `r = clip(std(batch) / renorm_stddev, rmin, rmax)` and
      `d = clip((mean(batch) - renorm_mean) / renorm_stddev, -dmax, dmax)`; the training
      output is `gamma * (x_hat * r + d) + beta`, with `r` and `d` treated as constants by
      the gradient. So it trades noise against staleness: too small and the averages follow
      each batch (r ~ 1, d ~ 0: plain batch norm, noisy with small batches); too large and
      the averages lag the changing weights. Keep the default 0.99 with small or non-i.i.d.
      batches, the case renorm is for; lower it (0.9) when the weights change quickly (high
      learning rate, short runs). Start with tight `renorm_clipping` (rmin=1, rmax=1,
      dmax=0 is plain batch norm) and relax it (rmax=3, rmin=1/3, dmax=5, as in the paper) once
      the averages have settled.

    **synchronized (several devices).** Under a `tf.distribute` strategy each replica runs the
    forward pass on its slice of the global batch. With `synchronized=False` (the default,
    cheapest) it normalizes with its slice's statistics; the moving mean becomes the global
    batch mean, the moving variance the mean of the slices' variances (the spread between
    their means left out). With `synchronized=True` the batch mean and variance are those of
    the *global* batch (two all-reduces per layer and step, the gradient flowing through
    them), so outputs, moving statistics and weights equal one device's on the same global
    batches. Use it when each replica's slice is small (a few examples per GPU, as in
    detection or segmentation): per-slice statistics are then noisy and training degrades.
    Without a strategy it changes nothing. Levenberg–Marquardt cannot run it under a
    strategy (its loops cannot hold an all-reduce): see `synchronizes_replicas`.

    **Freezing.** With `trainable=False` the layer runs in inference mode even when called
    with `training=True` and registers no hooks (Keras 3 behaviour), so fine-tuning a frozen
    base keeps its statistics.

    Args:
        axis: the features axis, normalized per entry (-1 for channels-last data).
        momentum: momentum of the inference averages, in [0, 1].
        epsilon: a small positive float added to the variance.
        center: whether to add the learned offset `beta`.
        scale: whether to multiply by the learned scale `gamma`.
        beta_initializer: a Keras initializer (or name) of `beta`; gamma_initializer,
            moving_mean_initializer and moving_variance_initializer: of the other three weights.
        beta_regularizer, gamma_regularizer, beta_constraint, gamma_constraint: Keras
            regularizers and constraints of `beta` and `gamma` (as Keras).
        renorm: whether to use batch renormalization (https://arxiv.org/abs/1702.03275).
        renorm_clipping: with renorm, a dict with optional keys 'rmax', 'rmin', 'dmax'
            bounding the corrections (missing: inf, 0, inf).
        renorm_momentum: momentum of the renorm averages used in training, in [0, 1].
        name: the layer's name. dtype: its dtype policy (None inherits the model's); under a
            mixed policy the statistics and the normalization run in float32 (as in Keras) and
            the output is in the compute dtype.
        synchronized: under a `tf.distribute` strategy, compute the training batch
            statistics over all replicas (the global batch) instead of each replica's slice.
        trainable: False freezes the layer (inference mode, no hooks).

    Raises:
        ValueError: for invalid arguments; on call, for inputs whose rank or feature size
            differs from the build.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> bn = layers.BatchNormalization(momentum=0.9)
        >>> x = tf.constant([[0.0, 10.0], [2.0, 30.0]])
        >>> bn(x, training=True).numpy().round(2)  # batch statistics
        array([[-1., -1.],
               [ 1.,  1.]], dtype=float32)
        >>> bn.moving_mean.numpy()  # hook applied at once: no training step around the call
        array([0.1, 2. ], dtype=float32)
    """

    keeps_example_axis = True

    xla_friendly_on_cpu = True
    casts_integer_inputs = True  # computes on floats: integer features are cast

    def __init__(
        self,
        axis: int = -1,
        momentum: float = 0.99,
        epsilon: float = 1e-3,
        center: bool = True,
        scale: bool = True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        moving_mean_initializer="zeros",
        moving_variance_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        renorm: bool = False,
        renorm_clipping: dict | None = None,
        renorm_momentum: float = 0.99,
        synchronized: bool = False,
        name: str | None = None,
        dtype=None,
        trainable: bool = True,
        activity_regularizer=None,
    ):
        super().__init__(name=name, dtype=dtype, trainable=trainable,
                         activity_regularizer=activity_regularizer)
        self._weight_options = arguments.set_weight_options(
            self, beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
            beta_constraint=beta_constraint, gamma_constraint=gamma_constraint)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise ValueError(f"axis must be an integer. Received: axis={axis!r}")
        self.axis = axis
        self.momentum = _unit_interval(momentum, "momentum")
        self.epsilon = validation.positive_float("epsilon", epsilon)
        self.center = _boolean(center, "center")
        self.scale = _boolean(scale, "scale")
        self.beta_initializer = arguments.get_initializer(beta_initializer, "beta_initializer")
        self.gamma_initializer = arguments.get_initializer(gamma_initializer, "gamma_initializer")
        self.moving_mean_initializer = arguments.get_initializer(
            moving_mean_initializer, "moving_mean_initializer"
        )
        self.moving_variance_initializer = arguments.get_initializer(
            moving_variance_initializer, "moving_variance_initializer"
        )
        self.renorm = _boolean(renorm, "renorm")
        self.renorm_clipping = _renorm_clipping(renorm_clipping, self.renorm)
        self.renorm_momentum = _unit_interval(renorm_momentum, "renorm_momentum")
        self.synchronized = _boolean(synchronized, "synchronized")
        self.input_spec = InputSpec(
            min_ndim=2,
            hint="BatchNormalization needs a batch axis and a features axis: add "
            "layers.Reshape((1,)) before it for one value per example.",
        )

    def build(self, input_shape) -> None:
        rank = input_shape.rank
        if not -rank <= self.axis < rank or self.axis % rank == 0:
            raise ValueError(
                f"BatchNormalization {self.name!r}: axis={self.axis} must name a features "
                f"axis of the inputs (not the batch axis 0); the inputs have shape "
                f"{tuple(input_shape.as_list())}."
            )
        size = input_shape[self.axis]
        if size is None:
            raise ValueError(
                f"BatchNormalization {self.name!r} needs a known size of axis {self.axis}. "
                f"Received input shape {tuple(input_shape.as_list())}."
            )
        shape = (int(size),)
        self.gamma, self.beta = arguments.scale_and_offset(self, shape)
        self.moving_mean = self.add_weight(
            "moving_mean", shape, initializer=self.moving_mean_initializer, trainable=False
        )
        self.moving_variance = self.add_weight(
            "moving_variance", shape, initializer=self.moving_variance_initializer, trainable=False
        )
        if self.renorm:
            # As Keras: the stddev averages start at the square root of the variance initializer.
            def stddev_initializer(shape, dtype=None):
                return tf.sqrt(_clone(self.moving_variance_initializer)(shape, dtype=dtype))

            self.moving_stddev = self.add_weight(
                "moving_stddev", shape, initializer=stddev_initializer, trainable=False
            )
            self.renorm_mean = self.add_weight(
                "renorm_mean", shape, initializer=_clone(self.moving_mean_initializer),
                trainable=False,
            )
            self.renorm_stddev = self.add_weight(
                "renorm_stddev", shape, initializer=stddev_initializer, trainable=False
            )
        self._feature_axis = self.axis % rank
        self._reduction_axes = [i for i in range(rank) if i != self._feature_axis]
        self.input_spec = InputSpec(ndim=rank, axes={self.axis: int(size)})

    @property
    def mixes_examples(self) -> bool:
        """Batch statistics in training; a frozen layer uses its moving ones."""
        return self.trainable

    @property
    def synchronizes_replicas(self) -> bool:
        """Whether a training forward pass under a strategy all-reduces across replicas
        (`synchronized=True` and not frozen): such a pass must run at the top level of a
        replica's function, not inside a `tf.cond` or loop body."""
        return self.synchronized and self.trainable

    def call(self, inputs, training: bool = False):
        # Under a mixed policy the statistics and the normalization run in float32 (as in
        # Keras): a 16-bit variance of large activations loses most of its digits.
        outputs = self._normalize_in_variable_dtype(tf.cast(inputs, self.variable_dtype), training)
        return tf.cast(outputs, self.compute_dtype)

    def _normalize_in_variable_dtype(self, inputs, training: bool):
        gamma, beta = self.gamma, self.beta
        # Keras 3: a frozen layer normalizes with its moving statistics even in training.
        if training and self.trainable:
            synced = self.synchronized and _replicas_in_sync() > 1
            if synced:
                mean, variance = _global_moments(inputs, self._reduction_axes)
            else:
                mean, variance = tf.nn.moments(inputs, axes=self._reduction_axes)
            if self.renorm:
                r, d = self._renorm_corrections(mean, variance)
                gamma, beta = _compose(r, d, gamma, beta)
                self._update_renorm_statistics(mean, variance, synced)
            else:
                self._average(self.moving_mean, mean, self.momentum, synced)
                self._average(self.moving_variance, variance, self.momentum, synced)
        else:
            mean, variance = self.moving_mean, self.moving_variance
        return self._normalize(inputs, mean, variance, beta, gamma)

    def _normalize(self, inputs, mean, variance, offset, scale):
        if self._feature_axis != inputs.shape.rank - 1:
            shape = [1] * inputs.shape.rank
            shape[self._feature_axis] = -1
            mean, variance = tf.reshape(mean, shape), tf.reshape(variance, shape)
            offset = None if offset is None else tf.reshape(offset, shape)
            scale = None if scale is None else tf.reshape(scale, shape)
        return tf.nn.batch_normalization(
            inputs, mean, variance, offset=offset, scale=scale, variance_epsilon=self.epsilon
        )

    def _renorm_corrections(self, mean, variance):
        """The corrections r and d of batch renormalization, clipped (as Keras)."""
        stddev = tf.sqrt(variance + self.epsilon)
        # The floor avoids dividing by zero early in training.
        renorm_stddev = tf.maximum(
            tf.convert_to_tensor(self.renorm_stddev), tf.sqrt(tf.cast(self.epsilon, mean.dtype))
        )
        r = stddev / renorm_stddev
        d = (mean - self.renorm_mean) / renorm_stddev
        clipping = self.renorm_clipping or {}
        if clipping.get("rmin") is not None:
            r = tf.maximum(r, clipping["rmin"])
        if clipping.get("rmax") is not None:
            r = tf.minimum(r, clipping["rmax"])
        if clipping.get("dmax") is not None:
            d = tf.clip_by_value(d, -clipping["dmax"], clipping["dmax"])
        return r, d

    def _average(self, variable, value, momentum, synced: bool) -> None:
        """A moving-average hook; synced, its value is already the global batch's."""
        if synced:
            self.add_update_over_replicas(variable, value, momentum=momentum)
        else:
            self.add_moving_average(variable, value, momentum)

    def _update_renorm_statistics(self, mean, variance, synced: bool) -> None:
        stddev = tf.sqrt(variance + self.epsilon)
        self._average(self.renorm_mean, mean, self.renorm_momentum, synced)
        self._average(self.renorm_stddev, stddev, self.renorm_momentum, synced)
        self._average(self.moving_mean, mean, self.momentum, synced)
        # Read moving_stddev before its hook may run: moving_variance derives from the new
        # value with Keras's exact expression.
        new_moving_stddev = self.moving_stddev * self.momentum + stddev * (1.0 - self.momentum)
        self._average(self.moving_stddev, stddev, self.momentum, synced)
        # ReLU guards against rounding making the variance negative.
        variance = tf.nn.relu(new_moving_stddev * new_moving_stddev - self.epsilon)
        if synced:
            self.add_update_over_replicas(self.moving_variance, variance)
        else:
            self.add_update(self.moving_variance, variance)

    def get_config(self) -> dict[str, Any]:
        serialize = keras.initializers.serialize
        return {
            **self._base_config(),
            "axis": self.axis,
            "momentum": self.momentum,
            "epsilon": self.epsilon,
            "center": self.center,
            "scale": self.scale,
            "beta_initializer": serialize(self.beta_initializer),
            "gamma_initializer": serialize(self.gamma_initializer),
            "moving_mean_initializer": serialize(self.moving_mean_initializer),
            "moving_variance_initializer": serialize(self.moving_variance_initializer),
            "renorm": self.renorm,
            "renorm_clipping": None if self.renorm_clipping is None else dict(self.renorm_clipping),
            "renorm_momentum": self.renorm_momentum,
            "synchronized": self.synchronized,
            **arguments.weight_options_config(self, self._weight_options),
        }


def _replicas_in_sync() -> int:
    """The replicas running this forward pass together (1 on one device)."""
    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


def _global_moments(inputs, axes):
    """Mean and variance of the global batch, in a replica's function: an all-reduce of the
    sums, then of the squared deviations from the global mean (no cancellation)."""
    context = tf.distribute.get_replica_context()
    dtype = tf.float32 if inputs.dtype in (tf.float16, tf.bfloat16) else inputs.dtype
    values = tf.cast(inputs, dtype)
    count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(values), axes)), dtype)
    total = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
    share = tf.math.divide_no_nan(count, total)
    mean = _replica_sum(tf.reduce_sum(values, axes, keepdims=True), share, context) / total
    deviations = tf.math.squared_difference(values, tf.stop_gradient(mean))
    variance = _replica_sum(tf.reduce_sum(deviations, axes, keepdims=True), share,
                            context) / total
    squeeze = lambda t: tf.cast(tf.squeeze(t, axes), inputs.dtype)  # noqa: E731
    return squeeze(mean), squeeze(variance)


def _replica_sum(local, share, context):
    """The sum of `local` over the replicas, differentiable for graphfit's distributed step:
    it weighs replica r's gradients by its share s_r of the rows (its loss a mean over its
    rows), so d(global loss)/d(sum) = sum_q s_q dL_q/d(sum), divided here by the s_r that
    multiplies replica r's gradient afterwards."""
    @tf.custom_gradient
    def summed(value):
        def gradient(upstream):
            weighted = context.all_reduce(tf.distribute.ReduceOp.SUM, upstream * share)
            return tf.math.divide_no_nan(weighted, share)  # a replica with no rows: 0

        return context.all_reduce(tf.distribute.ReduceOp.SUM, value), gradient

    return summed(local)


def _compose(r, d, gamma, beta):
    """(x * r + d) * gamma + beta as x * (r * gamma) + (d * gamma + beta); r, d constants."""
    r, d = tf.stop_gradient(r), tf.stop_gradient(d)
    if gamma is not None:
        new_gamma, new_beta = r * gamma, d * gamma
    else:
        new_gamma, new_beta = r, d
    if beta is not None:
        new_beta = new_beta + beta
    return new_gamma, new_beta


def _clone(initializer):
    """A fresh copy of a Keras initializer, so a seeded one does not repeat its draw."""
    if isinstance(initializer, keras.initializers.Initializer):
        return type(initializer).from_config(initializer.get_config())
    return initializer


def _unit_interval(value, argument: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{argument} must be a float in [0, 1]. Received: {argument}={value!r}")
    return float(value)


def _boolean(value, argument: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{argument} must be True or False. Received: {argument}={value!r}")
    return value


def _renorm_clipping(clipping, renorm: bool) -> dict | None:
    if clipping is None:
        return None
    if not renorm:
        raise ValueError("renorm_clipping only applies with renorm=True; pass renorm=True or "
                         f"drop it. Received: renorm_clipping={clipping!r}")
    if not isinstance(clipping, dict) or set(clipping) - set(_CLIPPING_KEYS):
        raise ValueError(f"renorm_clipping must be a dict with keys among {list(_CLIPPING_KEYS)}. "
                         f"Received: renorm_clipping={clipping!r}")
    for key, value in clipping.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(
                f"renorm_clipping[{key!r}] must be a number. Received: renorm_clipping={clipping!r}"
            )
    rmax, rmin, dmax = (clipping.get(k) for k in _CLIPPING_KEYS)
    if rmax is not None and rmin is not None and rmax < rmin:
        raise ValueError(f"renorm_clipping needs rmax >= rmin. Received: rmax={rmax}, rmin={rmin}")
    if dmax is not None and dmax < 0:
        raise ValueError(f"renorm_clipping needs dmax >= 0. Received: dmax={dmax}")
    return {k: (None if v is None else float(v)) for k, v in clipping.items()}

"""Per-example gradient clipping with Gaussian noise: differentially private SGD's gradient.

DP-SGD (Abadi et al. 2016, as in `tensorflow_privacy`) bounds how much any one example can
move the model: each example's gradient (all variables together) is clipped to an L2 norm of
at most `l2_norm_clip`, the clipped gradients are summed, Gaussian noise of standard deviation
`noise_multiplier * l2_norm_clip` is added, and the result is divided by the batch size.

An ordinary gradient transform sees only the batch gradient, where the examples are already
summed. `PerExampleClipping` is a transform that computes the gradient instead
(`computes_gradients`): from the training step's batch, which the default `train_step` puts
in the step's context (`core.step_context`), it computes the batch's per-example gradients
(`graphfit.autodiff.per_example`, vectorized over the examples), clips and aggregates them,
and hands the result to the rest of the update (the clipping flags, the remaining transforms,
weight decay, the update rule). The optimizer's `minimize` is the plain one: the forward pass
that reports the loss and collects the update hooks runs once, as in any step.

"Each example's gradient" is the gradient the batch loss would have if every example of the
batch were that one: grad(w_i * loss_i) for a mean-reduced loss (Keras's default). So with a
clip no example reaches and no noise, the step is exactly the plain step.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from graphfit.core import step_context, validation
from graphfit.optimizers import transforms
from graphfit.training import distribution

__all__ = ["PerExampleClipping"]


class PerExampleClipping(transforms.GradientTransform):
    """Clips each example's gradient to a global L2 norm, sums, adds noise, divides by batch.

    For the per-example gradients g_1..g_B of a batch (each a list over the variables):

        g = (sum_i g_i * min(1, l2_norm_clip / ||g_i||) + N(0, (noise_multiplier *
             l2_norm_clip)^2 I)) / B

    where ||g_i|| is the norm of all of example i's gradients together. Put it first in an
    optimizer's `gradient_transforms` and train with `model.fit`; its training step computes
    the per-example gradients. The noise comes from a `tf.random.Generator` created once,
    outside any trace, from `seed` (or, when None, from NumPy's global state, which
    `graphfit.set_seed` fixes), so a run is reproducible with XLA too. Its state is one of the
    optimizer's variables, so training checkpoints save it and a resumed run goes on with new
    noise.

    Layers that mix the examples of a batch (BatchNormalization at training time) see each
    example as a batch of one here; DP-SGD needs independent examples (use
    LayerNormalization). Dropout works, but its random generator cannot be vectorized, so
    the per-example gradients are then computed one example at a time (slower, with a
    warning).

    Args:
        l2_norm_clip: the largest L2 norm one example's gradient keeps (positive).
        noise_multiplier: the noise standard deviation in units of `l2_norm_clip`
            (non-negative; 0 clips without noise).
        seed: an integer seed for the noise, or None.

    Raises:
        ValueError: for a bad argument (named, with the value received).

    Example:

        >>> import tensorflow as tf
        >>> clip = PerExampleClipping(l2_norm_clip=1.0)
        >>> # Two examples: gradient norms 5 (clipped to 1) and 0.5 (kept); one variable.
        >>> per_example = [tf.constant([[3.0, 4.0], [0.3, 0.4]])]
        >>> [round(float(v), 6) for v in clip.clip_and_aggregate(per_example)[0]]
        [0.45, 0.6]
        >>> from graphfit import optimizers
        >>> sgd = optimizers.get({"type": "SGD", "learning_rate": 0.1, "gradient_transforms": [
        ...     {"type": "PerExampleClipping", "l2_norm_clip": 1.0, "noise_multiplier": 1.1}]})
        >>> sgd.get_config()["gradient_transforms"]
        [{'type': 'PerExampleClipping', 'l2_norm_clip': 1.0, 'noise_multiplier': 1.1, 'seed': None}]
    """

    def __init__(self, l2_norm_clip: float, noise_multiplier: float = 0.0,
                 seed: int | None = None):
        self.l2_norm_clip = validation.positive_float("l2_norm_clip", l2_norm_clip)
        self.noise_multiplier = validation.finite_number(
            "noise_multiplier", noise_multiplier, minimum=0.0)
        self.seed = validation.non_negative_int("seed", seed, allow_none=True)
        self._generator: tf.random.Generator | None = None  # created at the first noisy step

    def clip_and_aggregate(self, per_example: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        """The DP-SGD gradient from per-example gradients.

        Args:
            per_example: one tensor per variable, shaped (batch, *var.shape): row i is
                example i's gradient.

        Returns:
            One tensor per variable, shaped var.shape (see the class docstring).
        """
        per_example = [tf.convert_to_tensor(g) for g in per_example]
        dtypes = {g.dtype for g in per_example}
        norm_dtype = per_example[0].dtype if len(dtypes) == 1 else tf.float64
        squares = [tf.reduce_sum(tf.reshape(tf.cast(g, norm_dtype) ** 2, [tf.shape(g)[0], -1]),
                                 axis=1) for g in per_example]
        norms = tf.sqrt(tf.add_n(squares))
        limit = tf.constant(self.l2_norm_clip, norm_dtype)
        factors = limit / tf.maximum(norms, limit)  # 1 below the limit, limit/norm above
        batch = tf.shape(per_example[0])[0]
        aggregated = []
        for g in per_example:
            total = tf.tensordot(tf.cast(factors, g.dtype), g, axes=[[0], [0]])
            if self.noise_multiplier > 0:
                stddev = self.noise_multiplier * self.l2_norm_clip
                total += self._noise_generator().normal(tf.shape(total), stddev=stddev,
                                                        dtype=g.dtype)
            aggregated.append(total / tf.cast(batch, g.dtype))
        return aggregated

    def _noise_generator(self) -> tf.random.Generator:
        if self._generator is None:
            # Outside any trace, once: the compiled step then only reads and advances it.
            seed = self.seed if self.seed is not None else int(np.random.randint(0, 2**31 - 1))
            with tf.init_scope():
                self._generator = tf.random.Generator.from_seed(seed)
        return self._generator

    computes_gradients = True

    def build(self, optimizer) -> None:
        """Puts the noise generator's state among `optimizer`'s variables, so training
        checkpoints save it and a resumed run draws new noise, never the noise it drew
        before (a restore deferred until now fills it). No-op without noise."""
        if self.noise_multiplier > 0:
            optimizer.track_variable(self._noise_generator().state)

    def __call__(self, grads: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        raise ValueError(
            "PerExampleClipping computes each example's gradient, so it needs the variables "
            "the gradients belong to: use it as the first of an optimizer's "
            "gradient_transforms, whose update passes them.")

    def apply(self, grads: Sequence[tf.Tensor], variables) -> list[tf.Tensor]:
        """The DP-SGD gradient of the open training step's batch (`grads`, the batch
        gradient, is not used)."""
        del grads
        context = step_context.current()
        batch = None if context is None else context.batch
        if batch is None or variables is None:
            raise ValueError(
                "PerExampleClipping needs the batch to compute per-example gradients, not only "
                "the loss: train with model.compile(optimizer=...) and model.fit, whose "
                "training step puts the batch in the step's context.")
        if distribution.replica_share(tf.float64) is not None:
            raise ValueError(
                "PerExampleClipping is not supported under a tf.distribute strategy: remove it "
                "from gradient_transforms, or train on one device.")
        from graphfit.autodiff import per_example  # graphfit imports the optimizers package

        gradients = per_example.compute(
            batch.model, batch.loss_set, batch.x, batch.y, batch.sample_weight, variables,
            training=True, method="auto")
        size = tf.shape(gradients[0])[0]
        # As if the batch were example i: the per-example loss weighed by the batch size.
        private = self.clip_and_aggregate([g * tf.cast(size, g.dtype) for g in gradients])
        penalty = _penalty_gradients(batch.model, variables)
        return private if penalty is None else [
            g + tf.cast(p, g.dtype) for g, p in zip(private, penalty)]

    def get_config(self) -> dict[str, Any]:
        return {"l2_norm_clip": self.l2_norm_clip, "noise_multiplier": self.noise_multiplier,
                "seed": self.seed}


def _penalty_gradients(model, variables) -> list:
    """The gradient of the model's weight penalties (`kernel_regularizer=...`): it reads no
    example, so it is added after clipping and noise, unclipped; None without penalties."""
    pairs = [pair for layer in model.flatten_layers() for pair in layer.weight_regularizers()]
    if not pairs:
        return None
    with tf.GradientTape() as tape:
        total = tf.add_n([tf.cast(regularizer(v), tf.float64) for v, regularizer in pairs])
    return tape.gradient(total, list(variables),
                         unconnected_gradients=tf.UnconnectedGradients.ZERO)


# Registered with the built-in transforms, so recipes and optimizer configs name it
# (`gradient_transforms: [{type: PerExampleClipping, l2_norm_clip: 1.0}]`).
transforms.register_transform(PerExampleClipping)

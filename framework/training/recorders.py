"""Step recorders: what a training step records besides its update, in the same compiled step.

A recorder is the seam through which a feature watches the training step without a branch in
it. `model.add_step_recorder(recorder)` has the training step traced again with it; then

- the default `train_step` passes its loss function through `wrap_loss_fn` before
  `minimize` (to capture the outputs of named layers, or route them through a tapped
  identity: `node_taps`, `activation_taps`), and
- after any train step (the model's own too) `after_step` reads what the step reported in its
  `core.step_context.StepContext`: the gradients `minimize` recorded (when a recorder sets
  `records_gradients`), the loss scale.

TensorBoard's gradient histograms (`GradientTaps`), gradient taps (`NodeTaps`) and activation
gradient taps (`ActivationTaps`) are recorders. A recorder creates its variables once, outside
any trace; what it assigns inside the step it reads back between calls of the compiled loop.

Example:

    >>> import numpy as np, graphfit as gf
    >>> from graphfit.training.recorders import GradientTaps
    >>> model = gf.Sequential([gf.layers.Dense(1)], input_shape=(2,))
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> taps = GradientTaps(model)
    >>> model.add_step_recorder(taps)
    >>> _ = model.fit(np.ones((4, 2)), np.zeros((4, 1)), epochs=1, verbose=0)
    >>> [tuple(tap.shape) for _, tap in taps.recorded_gradients()]
    [(2, 1), (1,)]
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

__all__ = ["StepRecorder", "GradientTaps"]


class StepRecorder:
    """Base class of step recorders; override what the recorder needs.

    Attributes:
        needs_default_step: True when the recorder wraps the loss function, which only the
            default `train_step` passes through it: `add_step_recorder` then refuses a model
            that overrides `train_step`.
        records_gradients: True when `after_step` reads `context.gradients`.
    """

    needs_default_step = False
    records_gradients = False

    def wrap_loss_fn(self, loss_fn: Callable, model) -> Callable:
        """The default train step's loss function, as `minimize` should call it (traced)."""
        del model
        return loss_fn

    def after_step(self, context) -> None:
        """Runs after the train step, inside the compiled step (traced); `context` is the
        step's `StepContext`."""


class GradientTaps(StepRecorder):
    """The raw gradients of the last training step, copied into tap variables.

    One non-trainable tap per trainable variable of the model (same shape and dtype, zeros),
    created when the recorder is made. Every training step overwrites the taps with the
    gradients `minimize` reports (`step_context.record_gradients`: the raw gradients of the
    loss, before clipping and weight decay), so between steps they hold the last step's.

    Args:
        model: the built model whose trainable variables to tap.
    """

    records_gradients = True

    def __init__(self, model):
        self.variables = list(model.trainable_variables)
        with tf.init_scope():
            self.taps = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                     name=f"gradient_tap_{v.name.split(':')[0].replace('/', '_')}")
                         for v in self.variables]
        self._filled: list[int] = []

    def after_step(self, context) -> None:
        gradients = context.gradients or {}
        # At trace time: which taps this trace fills (none when minimize reports no gradients).
        self._filled = [i for i, v in enumerate(self.variables) if v.ref() in gradients]
        for i in self._filled:
            gradient = tf.convert_to_tensor(gradients[self.variables[i].ref()])  # IndexedSlices
            self.taps[i].assign(tf.cast(gradient, self.taps[i].dtype))

    def recorded_gradients(self) -> list[tuple[tf.Variable, tf.Variable]]:
        """(variable, tap) pairs whose tap the traced train step fills: empty before the first
        step, and when the optimizer's `minimize` reports no gradients."""
        return [(self.variables[i], self.taps[i]) for i in self._filled]

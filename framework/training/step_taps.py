"""Switching on the recordings a training step can make: gradient, node and activation taps.

A mixin of `CompiledSteps`: each switch creates its tap variables once, outside any trace, and
has the training step and loops traced again (`CompiledSteps.retrace_training`).
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.training import activation_taps, node_taps

__all__ = ["TapSwitches"]


class TapSwitches:
    """The tap switches of `CompiledSteps` (which provides `model`, `variables`, `strategy`,
    the tap attributes and `retrace_training`)."""

    def enable_gradient_taps(self) -> None:
        """Makes every training step copy its raw gradients into tap variables, from now on.

        Creates, once and outside any trace, one non-trainable tap per trainable variable
        (same shape and dtype, zeros), and drops the traced train step and training loops
        so they are traced again with the assignments. The gradients are those the
        optimizer's `minimize` reports to `optimizers.gradient_record.record_gradients`: the raw
        gradients of the loss, before clipping and weight decay. Each step overwrites the
        taps, so between steps they hold the last step's gradients.
        """
        if self.gradient_taps is not None:
            return
        self._refuse_under_strategy("gradient histograms (gradient taps)")
        with tf.init_scope():
            self.gradient_taps = [
                tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                            name=f"gradient_tap_{v.name.split(':')[0].replace('/', '_')}")
                for v in self.variables
            ]
        self.retrace_training()

    def _refuse_under_strategy(self, what: str) -> None:
        if self.strategy is not None:
            raise ValueError(
                f"TensorBoard's {what} are not supported under a tf.distribute strategy "
                f"({type(self.strategy).__name__}): turn them off, or train on one device.")

    def enable_node_taps(self, names, every_n_steps: int = 1, capacity: int = 1) -> None:
        """Makes training record the norms of d(sum of node)/d(variables), from now on.

        See `graphfit.training.node_taps`. The tap variables are created once, outside any
        trace, and the train step and loops traced again; the same arguments again change
        nothing, others replace the taps. Read them with `self.node_taps.read(after_step)`.
        `capacity`: the recordings kept between two reads. Raises ValueError for an unknown
        layer name (listing the model's layers) or a bad argument.
        """
        self._refuse_under_strategy("gradient_taps")
        if self.node_taps is None or not self.node_taps.matches(names, every_n_steps, capacity):
            self.node_taps = node_taps.NodeTaps(self.model, self.variables, names,
                                                every_n_steps, capacity)
            self.retrace_training()

    def enable_activation_taps(self, names, every_n_steps: int = 1, capacity: int = 1) -> None:
        """As `enable_node_taps`, for d(loss)/d(each named layer's output) from the step's
        own backward pass (`graphfit.training.activation_taps`; `activation_taps.read`)."""
        self._refuse_under_strategy("activation_gradient_taps")
        taps = self.activation_taps
        if taps is None or not taps.matches(names, every_n_steps, capacity):
            self.activation_taps = activation_taps.ActivationTaps(self.model, names,
                                                                  every_n_steps, capacity)
            self.retrace_training()

    def recorded_gradients(self) -> list[tuple[tf.Variable, tf.Variable]]:
        """(variable, tap) pairs whose tap the traced train step fills: empty before the
        first step with taps, and when the optimizer's `minimize` reports no gradients."""
        if self.gradient_taps is None:
            return []
        return [(self.variables[i], self.gradient_taps[i]) for i in self._filled_taps]

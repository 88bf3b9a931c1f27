"""What a layer requires of the data a batch brings it: the `batch_checks` hook (a mixin of
`Layer`), and how the base class runs it.

A layer states its requirements in `batch_checks` (`graphfit.core.data_checks`). Inside a
training loop's check pass (`step_context.checking`) the base class reports them for the loop
to evaluate before the step; called outside any step (directly, in the user's own function) it
asserts them; inside a step the loop has checked the batch already.
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.core import data_checks, step_context

__all__ = ["LayerChecks"]


class LayerChecks:
    """The batch-check hook of `Layer`."""

    def batch_checks(self, inputs, training: bool) -> list[tuple[tf.Tensor, str]]:
        """What this layer requires of the data a batch brings it; none by default.

        The training loops call it (through the model's forward pass, in inference mode)
        before each step of `fit`, `evaluate` and `predict`, for every batch, and stop with
        a `graphfit.core.data_checks.DataCheckError` at the first check that fails: nothing
        of that batch reaches a variable, under XLA too (which drops assertions inside a
        compiled step). In-memory arrays are checked once, before the first step.

        Args:
            inputs: what the layer is called on, cast as `call` receives it.
            training: whether the batch is for a training step. The batch's labels, for a
                layer that reads them, come from `step_context.labels_for`.

        Returns:
            `(ok, message)` pairs: `ok` a boolean tensor that must be all True, `message`
            what is wrong and how to fix it, naming the layer.

        Example:

            >>> import tensorflow as tf, graphfit as gf
            >>> class Positive(gf.Layer):
            ...     def batch_checks(self, inputs, training):
            ...         return [(tf.reduce_all(inputs > 0), "inputs must be positive")]
            ...     def call(self, x, training=False):
            ...         return tf.math.log(x)
            >>> [message for _, message in Positive().batch_checks(tf.ones((2, 1)), False)]
            ['inputs must be positive']
        """
        del inputs, training
        return []

    @property
    def checks_batches(self) -> bool:
        """Whether this layer states requirements of its batches: True when its class
        overrides `batch_checks`. A layer whose checks depend on its configuration (a
        `Formula` has some only in a global fit) says False when it has none, which spares
        the loops their check pass."""
        return type(self).batch_checks is not LayerChecks.batch_checks

    def _batch_checked_inputs(self, inputs, training: bool):
        """`inputs`, after this layer's `batch_checks`: reported to the loop that checks a
        batch before its step, or asserted when the layer runs outside any step (a direct
        call); inside a step the loop has checked the batch already."""
        if not self.checks_batches:
            return inputs
        context = step_context.current()
        if context is not None and context.checks is not None:
            context.checks += [(self, ok, message)
                               for ok, message in self.batch_checks(inputs, context.training)]
        elif context is None:
            checks = [data_checks.assertion(tf.reduce_all(ok), message)
                      for ok, message in self.batch_checks(inputs, training)]
            with tf.control_dependencies(checks):
                return tf.nest.map_structure(tf.identity, inputs)
        return inputs

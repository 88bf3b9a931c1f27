"""TensorBoard's gradient taps: the norms of ∂(named node)/∂(variables), written as scalars,
and activation gradient taps: ∂loss/∂(output of a named layer), as a norm and a histogram.

The norms are computed inside the compiled training step (`graphfit.training.node_taps` has the
semantics); this module checks the callback's arguments, turns the taps on before the first
step is traced, and writes what the step recorded after each call of the compiled loop:

    train/gradient_taps/<node>/<variable tag>     a scalar at the global step it was computed
    train/gradient_taps                           text: the variables tapped per node, and
                                                  those the node does not depend on
    train/activation_gradient_taps/<layer>/norm   ‖∂loss/∂(layer output)‖₂ over the batch
    train/activation_gradient_taps/<layer>        its histogram (TensorBoard's 30 buckets)

Activation gradient taps come from the step's own backward pass
(`graphfit.training.activation_taps`), at the global step of the step that computed them.
"""

from __future__ import annotations

import math
import numbers

import tensorflow as tf

from graphfit.callbacks.tensorboard import writers as tbw
from graphfit.core import validation
from graphfit.training.activation_taps import ActivationTaps
from graphfit.training.node_taps import NodeTaps

__all__ = ["ActivationTapWriter", "TapWriter", "check_activation_gradient_taps",
           "check_gradient_taps"]


def check_gradient_taps(gradient_taps, gradient_tap_freq) -> list[str] | None:
    """Validates the callback's `gradient_taps` and `gradient_tap_freq` (plain YAML data).

    Returns:
        The node names as a list, or None when taps are off.

    Raises:
        ValueError: naming the argument and the value received.
    """
    if not validation.is_integer(gradient_tap_freq) or gradient_tap_freq < 1:
        raise validation.invalid("gradient_tap_freq", gradient_tap_freq,
                                 "a positive integer (record every that many training steps)")
    if gradient_taps is None:
        return None
    if isinstance(gradient_taps, str) or not isinstance(gradient_taps, (list, tuple)) \
            or not gradient_taps or not all(isinstance(n, str) and n for n in gradient_taps):
        raise ValueError("gradient_taps must be a non-empty list of layer names (or 'output', "
                         f"'loss'), or None. Received: gradient_taps={gradient_taps!r}")
    if len(set(gradient_taps)) != len(gradient_taps):
        raise ValueError(f"gradient_taps must not repeat a name. "
                         f"Received: gradient_taps={gradient_taps!r}")
    return list(gradient_taps)


def check_activation_gradient_taps(names, freq) -> list[str] | None:
    """Validates `activation_gradient_taps` and `activation_gradient_tap_freq` (YAML data).

    Returns:
        The layer names as a list, or None when the taps are off.

    Raises:
        ValueError: naming the argument and the value received.
    """
    if not validation.is_integer(freq) or freq < 1:
        raise validation.invalid("activation_gradient_tap_freq", freq,
                                 "a positive integer (record every that many training steps)")
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names \
            or not all(isinstance(n, str) and n for n in names):
        raise ValueError("activation_gradient_taps must be a non-empty list of layer names, or "
                         f"None. Received: activation_gradient_taps={names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"activation_gradient_taps must not repeat a name. "
                         f"Received: activation_gradient_taps={names!r}")
    return list(names)


def _capacity(model, every_n_steps: int) -> int:
    """Rows enough for every recording of one call of the compiled loop."""
    setting = model.steps_per_execution
    # "auto" runs one step per call while a callback listens to every batch.
    per_call = setting if isinstance(setting, numbers.Integral) else 1
    return max(1, math.ceil(per_call / every_n_steps))


class _RingWriter:
    """What both tap writers share: enable the taps at the start of `fit`, then hand out the
    recordings (kept in a ring buffer in the compiled step) made since the last write.

    Args:
        names: the nodes or layers to tap (already checked).
        every_n_steps: record in the steps whose global step is a multiple of it.
    """

    def __init__(self, names: list[str], every_n_steps: int):
        self.names = names
        self.every_n_steps = int(every_n_steps)
        self._taps = None
        self._written_step = 0

    def _make(self, model, capacity: int):
        """The taps' step recorder."""
        raise NotImplementedError

    def begin(self, model) -> None:
        """Adds the taps to the model's training step (before it is traced), with room for
        every recording of one call of the loop; the same taps again change nothing.

        Raises:
            ValueError: for a node or layer the model does not have (with its layers).
        """
        if not model.compiled:
            return
        capacity = _capacity(model, self.every_n_steps)
        taps = self._taps
        if taps is None or taps not in model.step_recorders or not taps.matches(
                self.names, self.every_n_steps, capacity):
            if taps is not None:
                model.remove_step_recorder(taps)
            taps = self._make(model, capacity)
            model.add_step_recorder(taps)
        self._taps = taps
        # A model trained before (another fit) holds older values: not this run's to write.
        self._written_step = int(self._taps.last_step.numpy())

    def _new_rows(self) -> list:
        """The (step, values) recordings since the last call."""
        rows = [] if self._taps is None else self._taps.read(after_step=self._written_step)
        if rows:
            self._written_step = rows[-1][0]
        return rows


class ActivationTapWriter(_RingWriter):
    """Writes ∂loss/∂(layer output) taps: a norm and a histogram per layer and recording."""

    def _make(self, model, capacity: int):
        return ActivationTaps(model, self.names, self.every_n_steps, capacity)

    def write(self, runs: tbw.RunWriters) -> None:
        """Writes the recordings made since the last call to the train run."""
        rows = self._new_rows()
        if not rows:
            return
        from tensorboard.plugins.histogram import metadata

        with runs.writer("train").as_default():
            for step, values in rows:
                for layer, (norm, histogram) in values.items():
                    tag = f"activation_gradient_taps/{layer}"
                    tf.summary.scalar(f"{tag}/norm", norm, step=step)
                    # The buckets were counted in the step: written as the histogram
                    # plugin's [left, right, count] tensor.
                    tf.summary.write(tag, histogram, step=step,
                                     metadata=metadata.create_summary_metadata(tag, ""))


class TapWriter(_RingWriter):
    """Writes node taps: norms of ∂(sum of node)/∂(each variable), described once in text."""

    def __init__(self, names: list[str], every_n_steps: int):
        super().__init__(names, every_n_steps)
        self._described = False

    def _make(self, model, capacity: int):
        return NodeTaps(model, model.trainable_variables, self.names, self.every_n_steps,
                        capacity)

    def write(self, runs: tbw.RunWriters, model) -> None:
        """Writes the recordings made since the last call to the train run."""
        rows = self._new_rows()
        if not rows:
            return
        tags = {v.name: tbw.variable_tag(model, v) for v in self._taps.variables}
        for step, values in rows:
            runs.scalars("train", {f"gradient_taps/{node}/{tags[name]}": norm
                                   for node, norms in values.items()
                                   for name, norm in norms.items()}, step)
        if not self._described:
            self._described = True
            with runs.writer("train").as_default():
                tbw.write_text("gradient_taps", self.describe(model), step=rows[0][0])

    def describe(self, model) -> str:
        """Which variables each node has a tap for, and which it does not depend on."""
        lines = []
        for node in self.names:
            tapped = [tbw.variable_tag(model, self._taps.variables[i])
                      for i in self._taps.connected.get(node, [])]
            missing = [tbw.variable_tag(model, v) for v in self._taps.unconnected.get(node, [])]
            lines.append(f"{node}: d(sum of {node})/d(variable) for {', '.join(tapped) or 'none'}"
                         + (f"; no gradient (not upstream of {node}): {', '.join(missing)}"
                            if missing else ""))
        return "\n".join(lines)

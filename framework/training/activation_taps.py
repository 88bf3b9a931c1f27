"""Activation gradient taps: ∂loss/∂(output of a named layer), from the step's own backprop.

The gradients of the loss with respect to a hidden layer's activations are intermediate
results of the backward pass that computes the weight gradients. An activation gradient tap
reads them there instead of computing them again: during the training step's forward pass the
named layer's output goes through an identity whose gradient function is the identity too,
except that it also hands the incoming gradient (∂loss/∂output, one value per element, the
batch axis included) to the tap. The optimizer's `minimize` differentiates the loss as usual;
no second forward or backward pass runs, and the weight updates are bit for bit the same.

Recorded, for each tapped layer, in the steps whose global step (`optimizer.iterations` after
the step) is a multiple of `every_n_steps` (under a `tf.cond` inside the compiled step, with
and without XLA):

    norms[row, k]       ‖∂loss/∂output_k‖₂ over every element of the batch (float64; NaN
                        when the loss does not depend on the layer)
    histograms[row, k]  `BUCKETS` equal-width buckets between the gradient's min and max, as
                        [left edge, right edge, count] rows (TensorBoard's histogram format)

Each recording fills one row of a ring buffer of `capacity` rows tagged with its global step,
as `graphfit.training.node_taps` does; `read(after_step)` returns the rows not yet read.
A layer that returns several floating tensors is tapped on all of them together. The layer
must run once per forward pass, and the optimizer must differentiate the step's own first
forward pass in the step itself (every first-order graphfit optimizer does; a per-example
clipping transform or LevenbergMarquardt's Jacobian does not: a clear error at trace time).
"""

from __future__ import annotations

import warnings
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from graphfit.core import layer_outputs, validation
from graphfit.training import node_taps
from graphfit.training.recorders import StepRecorder

__all__ = ["ActivationTaps", "BUCKETS"]

BUCKETS = 30  # TensorBoard's default bucket count for histograms


def _current_graph():
    return None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()


def _buckets(values: tf.Tensor) -> tf.Tensor:
    """[BUCKETS, 3] float64 rows (left, right, count) of equal-width buckets over `values`."""
    lo, hi = tf.reduce_min(values), tf.reduce_max(values)
    # All values equal: one unit-wide range around them, as TensorBoard draws it.
    same = tf.equal(lo, hi)
    lo, hi = tf.where(same, lo - 0.5, lo), tf.where(same, hi + 0.5, hi)
    width = (hi - lo) / BUCKETS
    index = tf.clip_by_value(tf.cast(tf.floor((values - lo) / width), tf.int32), 0, BUCKETS - 1)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(values), index, BUCKETS)
    edges = lo + width * tf.range(BUCKETS + 1, dtype=tf.float64)
    return tf.stack([edges[:-1], edges[1:], counts], axis=1)


class ActivationTaps(StepRecorder):
    """Tap variables for ∂loss/∂(layer output) of named layers, and the code that fills them.

    A step recorder (`model.add_step_recorder(taps)`), created once, outside any trace: the
    default train step passes its loss function through `wrap_loss_fn`, and the step records
    the gradients after `minimize`. See the module docstring for what is recorded, and when.

    Args:
        model: the built model (the names are checked against its layers).
        names: the layers to tap.
        every_n_steps: record in the steps whose global step is a multiple of this.
        capacity: rows of the ring buffer (recordings kept between two reads).

    Attributes:
        names, every_n_steps, capacity: as given.
        norms: float64 variable [capacity, len(names)].
        histograms: float64 variable [capacity, len(names), BUCKETS, 3].
        steps: int64 variable [capacity], the global step of each row (-1: empty).
        count, last_step: int64 variables, the recordings so far and the latest one's step.

    Raises:
        ValueError: for a name that is not a layer of the model (with a "did you mean"), a
            repeated name, or a non-positive `every_n_steps` / `capacity`.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> model = gf.Sequential([gf.layers.Dense(4, name="hidden"), gf.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0)
        >>> taps = ActivationTaps(model, ["hidden"], every_n_steps=1)
        >>> model.add_step_recorder(taps)
        >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0)
        >>> [(step, list(values), values["hidden"][1].shape)
        ...  for step, values in taps.read()]
        [(2, ['hidden'], (30, 3))]
    """

    needs_default_step = True

    def __init__(self, model, names, every_n_steps: int, capacity: int = 1):
        self._pending = None  # the loss function wrapped in the step being traced
        self._step = None
        self.names = node_taps.check_layer_names(names, model)
        self.every_n_steps = validation.positive_int("every_n_steps", every_n_steps)
        self.capacity = validation.positive_int("capacity", capacity)
        by_name = {layer.name: layer for layer in model.flatten_layers(include_self=False)}
        self.layers = [by_name[n] for n in self.names]
        with tf.init_scope():
            self.norms = tf.Variable(tf.fill([self.capacity, len(self.names)],
                                             tf.constant(np.nan, tf.float64)),
                                     trainable=False, name="activation_tap_norms")
            self.histograms = tf.Variable(
                tf.zeros([self.capacity, len(self.names), BUCKETS, 3], tf.float64),
                trainable=False, name="activation_tap_histograms")
            self.steps = tf.Variable(tf.fill([self.capacity], tf.constant(-1, tf.int64)),
                                     trainable=False, name="activation_tap_steps")
            self.count = tf.Variable(0, dtype=tf.int64, trainable=False,
                                     name="activation_tap_count")
            self.last_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                         name="activation_tap_last_step")

    def matches(self, names, every_n_steps: int, capacity: int) -> bool:
        """Whether these taps were made for the same arguments (no retrace needed)."""
        return (list(names) == self.names and every_n_steps == self.every_n_steps
                and capacity == self.capacity)

    # ------------------------------------------------------------------ inside the trace
    def wrap_loss_fn(self, loss_fn: Callable, model) -> _TappedLossFn:
        """The train step's `loss_fn`: its first call, in the step's own graph, routes the
        named layers' outputs through the recording identity."""
        self._step = model.optimizer.iterations + 1  # the global step this step will have
        self._pending = _TappedLossFn(self, loss_fn)
        return self._pending

    def after_step(self, context) -> None:
        """Records the gradients the step's backward pass brought, the loss scale it was
        differentiated with (`context.loss_scale`) divided out."""
        self._pending.record(self._step, context.loss_scale)

    def _record(self, gradients: Sequence[list], step) -> None:
        def record():
            norms, histograms = [], []
            for parts in gradients:
                if not parts:  # the loss does not depend on this layer
                    norms.append(tf.constant(np.nan, tf.float64))
                    histograms.append(tf.zeros([BUCKETS, 3], tf.float64))
                    continue
                flat = tf.concat([tf.reshape(tf.cast(g, tf.float64), [-1]) for g in parts], 0)
                norms.append(tf.norm(flat))
                histograms.append(_buckets(flat))
            slot = self.count % self.capacity
            self.norms.scatter_nd_update([[slot]], [tf.stack(norms)])
            self.histograms.scatter_nd_update([[slot]], [tf.stack(histograms)])
            self.steps.scatter_nd_update([[slot]], [step])
            self.count.assign_add(1)
            self.last_step.assign(step)
            return tf.constant(True)

        if self.every_n_steps == 1:
            record()
        else:
            tf.cond(tf.equal(step % self.every_n_steps, 0), record, lambda: tf.constant(False))

    # ------------------------------------------------------------------ outside the trace
    def read(self, after_step: int = 0) -> list[tuple[int, dict[str, tuple[float, np.ndarray]]]]:
        """The recordings with a global step above `after_step`, oldest first.

        Returns:
            [(global step, {layer: (norm, histogram [BUCKETS, 3])})], without the layers
            whose gradient was not recorded (NaN norm: the loss does not depend on them).
        """
        if int(self.last_step.numpy()) <= after_step:
            return []  # the common case: one scalar read per call of the loop
        steps, norms, histograms = (self.steps.numpy(), self.norms.numpy(),
                                    self.histograms.numpy())
        return [(int(steps[slot]), {name: (float(norms[slot, k]), histograms[slot, k])
                                    for k, name in enumerate(self.names)
                                    if not np.isnan(norms[slot, k])})
                for slot in np.argsort(steps) if steps[slot] > after_step]


class _TappedLossFn:
    """`loss_fn` whose first call in the step's graph taps the layers' output gradients."""

    reads_backward_pass = True  # see core.step_types.reads_backward_pass

    def __init__(self, taps: ActivationTaps, loss_fn: Callable):
        self._taps = taps
        self._loss_fn = loss_fn
        self._graph = _current_graph()
        self._tapped = False
        # Gradients that reach the identities while the forward pass still runs are not the
        # loss's: gradient taps differentiate the nodes inside it (node_taps).
        self._forward_done = False
        self._calls: dict[str, int] = {}
        # Per layer, per floating output tensor: the gradient the backward pass brought.
        self._gradients: list[dict[int, tf.Tensor]] = [{} for _ in taps.names]

    def __call__(self):
        if self._tapped or _current_graph() is not self._graph:
            return self._loss_fn()  # later passes (LM's trials), or inside a loop / vmap
        self._tapped = True
        with layer_outputs.transform_outputs(self._taps.layers, self._route):
            result = self._loss_fn()
        self._forward_done = True
        return result

    def _route(self, layer, outputs):
        k = self._taps.names.index(layer.name)
        self._calls[layer.name] = self._calls.get(layer.name, 0) + 1
        flat = tf.nest.flatten(outputs)
        routed = [self._identity(k, i, t) if isinstance(t, tf.Tensor) and t.dtype.is_floating
                  else t for i, t in enumerate(flat)]
        return tf.nest.pack_sequence_as(outputs, routed)

    def _identity(self, k: int, i: int, tensor: tf.Tensor) -> tf.Tensor:
        @tf.custom_gradient
        def tap(x):
            def gradient(upstream):
                # Called while minimize differentiates the loss: keep the step graph's
                # first one.
                if (self._forward_done and _current_graph() is self._graph
                        and i not in self._gradients[k]):
                    self._gradients[k][i] = tf.convert_to_tensor(upstream)
                return upstream

            return tf.identity(x), gradient

        return tap(tensor)

    def record(self, step, loss_scale=None) -> None:
        """Records the gradients the backward pass brought (after `minimize`).

        `loss_scale`: the factor `minimize` multiplied the loss by before differentiating it
        (`step_context.record_loss_scale`), divided out; None: 1.

        Raises:
            ValueError: for a layer that ran more or less than once in the forward pass.
            RuntimeError: when the optimizer differentiated none of the tapped outputs in
                the step itself.
        """
        taps = self._taps
        if not self._tapped:
            raise RuntimeError(_NO_PASS)
        for name in taps.names:
            calls = self._calls.get(name, 0)
            if calls != 1:
                raise ValueError(
                    f"Activation gradient taps: the layer {name!r} ran {calls} times in one "
                    "training forward pass, so it has no single output to tap. Tap a layer "
                    "that runs exactly once per pass"
                    + (" (wrap each use of a shared layer in a layer of its own)."
                       if calls else " (this one is not used in training)."))
        if not any(self._gradients):
            raise RuntimeError(_NO_PASS)
        missing = [n for n, g in zip(taps.names, self._gradients) if not g]
        if missing:
            warnings.warn(f"Activation gradient taps: the loss does not depend on the layers "
                          f"{missing}, so they have no gradient to record.", stacklevel=4)
        gradients = [[g[i] for i in sorted(g)] for g in self._gradients]
        if loss_scale is not None:
            # In float64: 2**16 is inf in float16, and small quotients would lose digits.
            gradients = [[tf.cast(g, tf.float64) / tf.cast(loss_scale, tf.float64)
                          for g in parts] for parts in gradients]
        taps._record(gradients, step)


_NO_PASS = ("Activation gradient taps read ∂loss/∂(layer output) from the backward pass the "
            "optimizer's minimize() runs in the training step, but this optimizer "
            "differentiated none of the tapped outputs there (it differentiates inside a loop "
            "or a vectorized map, as per-example clipping and LevenbergMarquardt do, or not at "
            "all). Turn activation_gradient_taps off for this optimizer.")

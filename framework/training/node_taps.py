"""Gradient taps of named nodes: the norms of ∂(node)/∂(variables), recorded inside training.

TF1 answered "how does this hidden layer depend on each weight?" with
`tf.gradients(node, variables)`: the gradient of the node's output *summed* over all its
elements (the batch included) with respect to each variable. A gradient tap records exactly
that, inside graphfit's compiled training step, every N steps, and keeps its L2 norm per
(node, variable) pair in tap variables that a callback (TensorBoard's `gradient_taps`) reads
between calls of the compiled loop.

Semantics, for a tap on node `n` (a layer name, "output" for the model's output or "loss"
for the training loss) and a trainable variable `v`:

    norm(n, v) = ‖ ∂( Σ n(x) ) / ∂v ‖₂        Σ over every element of the node's output on
                                               the step's batch (every floating tensor of it
                                               when the layer returns several)

- The SAME forward pass as the step: the first forward pass the optimizer's `minimize` runs
  in the step (the only one of a first-order optimizer; LevenbergMarquardt's pass at the
  step's starting point, before its trials), so `training=True` (dropout masks, batch-norm
  batch statistics as the loss saw them) and the variable values BEFORE the step's update.
  No extra forward pass runs and no update hook is added: moving averages move once per step.
- A variable the node does not depend on (a layer after it) has no gradient, so no tap:
  `NodeTaps.connected` / `NodeTaps.unconnected` say which pairs exist once the step is traced.
- Recorded in the steps whose global step (`optimizer.iterations` after the step: 1 for the
  first step of a fresh optimizer) is a multiple of `every_n_steps`, under a `tf.cond` inside
  the compiled step (with and without XLA); other steps only test the condition.
- Each recording writes one row of a ring buffer of `capacity` rows, tagged with its global
  step, and sets `last_step`. A reader that runs after a call of k steps sees every row of
  that call when `capacity >= ceil(k / every_n_steps)`; older rows are overwritten.

A layer must run once per forward pass (a shared layer called twice has no single output:
a clear error at trace time), and the optimizer must run a forward pass in the step itself
(not only inside a loop or a vectorized map), which every graphfit optimizer does.
"""

from __future__ import annotations

import warnings
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from graphfit.core import layer_outputs, validation
from graphfit.core.registry import did_you_mean
from graphfit.training.recorders import StepRecorder

__all__ = ["NodeTaps", "SPECIAL_NODES", "check_layer_names", "check_names"]

# Nodes that are not layers; a layer with the same name takes precedence.
SPECIAL_NODES = ("output", "loss")


def check_names(names, model) -> list[str]:
    """The tap names, checked against the model's layers (a recipe's `validate` uses it).

    Raises:
        ValueError: for a name that is neither a layer of `model` nor "output" or "loss".
    """
    return _check_names(names, _layer_names(model))


def check_layer_names(names, model, what: str = "activation gradient taps") -> list[str]:
    """Like `check_names`, for taps of layers only ("output" and "loss" are not layers).

    Raises:
        ValueError: for a bad list, a repeated name, or a name that is not a layer of
            `model` (with a "did you mean" and the model's layers), naming `what`.
    """
    return _check_names(names, _layer_names(model), special=(), what=what)


def _layer_names(model) -> list[str]:
    return [layer.name for layer in model.flatten_layers(include_self=False)]


def _check_names(names, layer_names: Sequence[str], special: Sequence[str] = SPECIAL_NODES,
                 what: str = "gradient tap nodes") -> list[str]:
    others = f" (or {', '.join(map(repr, special))})" if special else ""
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names or not all(
            isinstance(n, str) and n for n in names):
        raise ValueError(f"{what} must be a non-empty list of layer names{others}. "
                         f"Received: names={names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} must not repeat. Received: names={list(names)!r}")
    unknown = [n for n in names if n not in layer_names and n not in special]
    if unknown:
        hints = "".join(did_you_mean(n, [*layer_names, *special], f" For {n!r}, did you "
                                     "mean {!r}?") for n in unknown)
        raise ValueError(
            f"The model has no layer named {', '.join(map(repr, unknown))} to tap.{hints} Its "
            f"layers: {list(layer_names)}"
            + (f"; or tap {' or '.join(map(repr, special))}." if special else "."))
    return list(names)


def _current_graph():
    return None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()


def _floating(output) -> list[tf.Tensor]:
    """The floating tensors of a layer's output (a tensor, or a nest of them)."""
    return [t for t in tf.nest.flatten(output)
            if isinstance(t, tf.Tensor) and t.dtype.is_floating]


def _norm(gradient) -> tf.Tensor:
    """‖gradient‖₂ as float64, NaN for None. `tf.IndexedSlices` (an embedding's gradient) is
    densified first, so rows of a token seen twice add up before the norm, as in the dense
    gradient."""
    if gradient is None:
        return tf.constant(np.nan, tf.float64)
    return tf.cast(tf.norm(tf.convert_to_tensor(gradient)), tf.float64)


class NodeTaps(StepRecorder):
    """Tap variables for the gradient norms of named nodes, and the code that fills them.

    A step recorder (`model.add_step_recorder(taps)`): created once, outside any trace; the
    default training step passes its loss function through `wrap_loss_fn`. See the module
    docstring for what is recorded, and when.

    Args:
        model: the built model (its layer names are checked).
        variables: the trainable variables the step trains, in order.
        names: the nodes to tap: layer names, "output" or "loss".
        every_n_steps: record in steps whose global step is a multiple of this.
        capacity: rows of the ring buffer (recordings kept between two reads).

    Attributes:
        names: the tapped nodes, in order.
        variables: the variables, in order.
        norms: float64 variable [capacity, len(names), len(variables)]; NaN where no tap.
        steps: int64 variable [capacity], the global step of each row (-1: empty).
        count: int64 variable, the recordings made so far (the next row is count % capacity).
        last_step: int64 variable, the global step of the latest recording (0: none yet).
        connected: {node: [variable index]} of the pairs with a gradient, set when the train
            step is traced (empty before).

    Raises:
        ValueError: for an unknown node name (the message lists the model's layers), a
            repeated name, or a non-positive `every_n_steps` / `capacity`.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> model = gf.Sequential([gf.layers.Dense(4, name="hidden"), gf.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0)
        >>> taps = NodeTaps(model, model.trainable_variables, ["hidden"], every_n_steps=1)
        >>> model.add_step_recorder(taps)
        >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0)
        >>> [(step, sorted(values["hidden"])) for step, values in taps.read()]
        [(2, ['...hidden/bias:0', '...hidden/kernel:0'])]
    """

    needs_default_step = True

    def __init__(self, model, variables: Sequence[tf.Variable], names, every_n_steps: int,
                 capacity: int = 1):
        layer_names = _layer_names(model)
        self._model = model
        self._pending = None  # the loss function wrapped in the step being traced
        self.names = _check_names(names, layer_names)
        self.every_n_steps = validation.positive_int("every_n_steps", every_n_steps)
        self.capacity = validation.positive_int("capacity", capacity)
        self.variables = list(variables)
        # Layer names win over the special nodes: a graph model's layer called "output".
        self._special = {n for n in self.names if n in SPECIAL_NODES and n not in layer_names}
        self.connected: dict[str, list[int]] = {}
        with tf.init_scope():
            self.norms = tf.Variable(
                tf.fill([self.capacity, len(self.names), len(self.variables)],
                        tf.constant(np.nan, tf.float64)),
                trainable=False, name="node_tap_norms")
            self.steps = tf.Variable(tf.fill([self.capacity], tf.constant(-1, tf.int64)),
                                     trainable=False, name="node_tap_steps")
            self.count = tf.Variable(0, dtype=tf.int64, trainable=False, name="node_tap_count")
            self.last_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                         name="node_tap_last_step")

    def matches(self, names, every_n_steps: int, capacity: int) -> bool:
        """Whether these taps were made for the same arguments (no retrace needed)."""
        return (list(names) == self.names and every_n_steps == self.every_n_steps
                and capacity == self.capacity)

    @property
    def unconnected(self) -> dict[str, list[tf.Variable]]:
        """{node: [variables without a gradient]}: the pairs that have no tap (empty before
        the train step is traced)."""
        return {node: [v for i, v in enumerate(self.variables) if i not in indices]
                for node, indices in self.connected.items()}

    # ------------------------------------------------------------------ inside the trace
    def wrap_loss_fn(self, loss_fn: Callable, model) -> Callable:
        """The train step's `loss_fn`, recording the taps at its first call.

        The recordings carry the global step this training step will have (the optimizer's
        `iterations` + 1); "output" and "loss" are read from `loss_fn`'s result.
        """
        step = model.optimizer.iterations + 1
        self._pending = _TappedLossFn(
            self, loss_fn, step, lambda result: {"loss": result[0], "output": result[1].y_pred})
        return self._pending

    def after_step(self, context) -> None:
        """Raises when `minimize` ran no forward pass that could be tapped."""
        del context
        self._pending.finish()

    def _record(self, tape, nodes: dict, step) -> None:
        def record():
            rows = []
            for node in self.names:
                targets = _floating(nodes[node])
                # Seeded with ones: the gradient of the sum of every element, as
                # tf.gradients(node, variables) gives it.
                gradients = tape.gradient(targets, self.variables,
                                          output_gradients=[tf.ones_like(t) for t in targets]
                                          ) if targets else [None] * len(self.variables)
                # Python, once per trace: which pairs this trace fills.
                self.connected[node] = [i for i, g in enumerate(gradients) if g is not None]
                rows.append(tf.stack([_norm(g) for g in gradients]))
            slot = self.count % self.capacity
            self.norms.scatter_nd_update([[slot]], tf.expand_dims(tf.stack(rows), 0))
            self.steps.scatter_nd_update([[slot]], [step])
            self.count.assign_add(1)
            self.last_step.assign(step)
            return tf.constant(True)

        if self.every_n_steps == 1:
            record()
        else:
            tf.cond(tf.equal(step % self.every_n_steps, 0), record, lambda: tf.constant(False))
        without = [n for n in self.names if n in self.connected and not self.connected[n]]
        if without and self.variables:
            warnings.warn(f"Gradient taps: the nodes {without} depend on no trainable variable "
                          "(no gradient), so their taps stay empty.", stacklevel=4)

    # ------------------------------------------------------------------ outside the trace
    def read(self, after_step: int = 0) -> list[tuple[int, dict[str, dict[str, float]]]]:
        """The recordings with a global step above `after_step`, oldest first.

        Returns:
            [(global step, {node: {variable name: norm}})], only the (node, variable) pairs
            with a gradient.
        """
        if int(self.last_step.numpy()) <= after_step:
            return []  # the common case: one scalar read per call of the loop
        steps, norms = self.steps.numpy(), self.norms.numpy()
        rows = []
        for slot in np.argsort(steps):
            if steps[slot] > after_step:
                rows.append((int(steps[slot]), {
                    node: {self.variables[i].name: float(norms[slot, k, i])
                           for i in self.connected.get(node, [])}
                    for k, node in enumerate(self.names)}))
        return rows


class _TappedLossFn:
    """`loss_fn` with the taps: its first call in the step's own graph records them."""

    def __init__(self, taps: NodeTaps, loss_fn: Callable, step, special):
        self._taps = taps
        self._loss_fn = loss_fn
        self._step = step
        self._special = special
        self._graph = _current_graph()
        self._tapped = False

    def __call__(self):
        if self._tapped or _current_graph() is not self._graph:
            # Later passes (LM's trials), or a pass inside a loop or a vectorized map, whose
            # tensors the step cannot read: only the first pass of the step itself is tapped.
            return self._loss_fn()
        self._tapped = True
        taps = self._taps
        with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
            tape.watch(taps.variables)
            with layer_outputs.capture_outputs(taps._model, taps.names) as captured:
                result = self._loss_fn()
        nodes = {}
        special = self._special(result) if taps._special else {}
        for node in taps.names:
            if node in taps._special:
                nodes[node] = special[node]
                continue
            calls = captured.calls.get(node, 0)
            if calls != 1:
                raise ValueError(
                    f"Gradient taps: the layer {node!r} ran {calls} times in one training "
                    "forward pass, so it has no single output to differentiate. Tap a layer "
                    "that runs exactly once per pass"
                    + (" (a shared layer's uses can be wrapped in layers of their own)."
                       if calls else " (this one is not used in training)."))
            nodes[node] = captured[node]
        taps._record(tape, nodes, self._step)
        return result

    def finish(self) -> None:
        """Raises when `minimize` ran no forward pass that could be tapped."""
        if not self._tapped:
            raise RuntimeError(
                "Gradient taps differentiate the first forward pass the optimizer's minimize() "
                "runs in the training step itself, but this optimizer ran none there (only "
                "inside a loop or a vectorized map, or none at all). Turn gradient taps off "
                "for this optimizer.")

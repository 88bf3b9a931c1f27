"""What a training step shares with the code it runs, and what that code reports back.

One context is open per training step (`training_step`); layers, losses and optimizers deep
inside read it with `current()` instead of having it passed down through the model's `call`.
It is the one channel between a step and its parts:

- **labels in**: a layer that needs the batch's labels while training (`layers.ClassMeans`)
  reads them with `labels_for(layer, labels_of)`; the labels never become a model input, so
  `predict` needs none.
- **losses out**: a layer adds a loss of its own with `add_loss`; the step adds every loss
  added during its forward pass to the compiled loss.
- **gradients out**: `minimize` reports the gradients it computed with `record_gradients`
  when something records them (TensorBoard's gradient histograms), and the scale it
  multiplied the loss by with `record_loss_scale` (a `LossScaleOptimizer`).
- **observers**: an `observing(observer)` block lets `graphfit.inspect` watch a step traced
  inside without changing it: the default `train_step` marks its phases for the observer,
  and the gradients `minimize` reports reach it without being asked for.
- **recorders**: what the step records besides its update (`graphfit.training.recorders`).
- **what `fit` knows of the step**: the most examples its batches hold
  (`step_types.BatchBound`) and the steps one pass over the training data takes; and the
  step's `StepBatch`, which the default `train_step` puts here for a gradient transform that
  needs the batch (`PerExampleClipping`).
- **checks**: while `checking()` is open, every layer called reports what it requires of
  the batch's data (`Layer.batch_checks`), which the loops test before the step runs.

A pass that re-runs a slice of the batch (Levenberg–Marquardt's Jacobian chunks) opens its own
context with that slice's labels; it shares the step's records, recorders and bound. With no
context open (a layer called outside `fit`) `labels_for` returns None and nothing is recorded.

Example:

    >>> import tensorflow as tf
    >>> from graphfit.core import step_context
    >>> with step_context.training_step(tf.constant([0, 2])) as context:
    ...     labels = step_context.labels_for("class_means", None)
    ...     added = step_context.add_loss("class_means_center_loss", tf.constant(0.5))
    >>> labels.numpy().tolist(), [name for name, _ in context.added_losses]
    ([0, 2], ['class_means_center_loss'])
    >>> step_context.labels_for("class_means", None) is None  # no step open
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Sequence

import tensorflow as tf

from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.context_stack import ContextStack
from graphfit.core.variables import as_tf_variable

__all__ = ["StepContext", "training_step", "checking", "current", "labels_for", "add_loss",
           "record_gradients", "record_loss_scale", "records_gradients", "observing",
           "current_observer"]


@dataclasses.dataclass
class StepContext:
    """One open training step (or a pass inside it), as the code it runs sees it.

    Attributes:
        labels: the batch's labels: a tensor, a dict by output name, or None (no labels).
        added_losses: `(name, scalar)` pairs the layers added with `add_loss`.
        gradients: `{variable.ref(): gradient}` that `record_gradients` fills, or None when
            nothing records them.
        loss_scale: the factor `minimize` multiplied the loss by before differentiating it
            (`record_loss_scale`), or None for 1.
        recorders: the step's `graphfit.training.recorders.StepRecorder`s.
        bound: the step's `step_types.BatchBound`, or None (no promise).
        steps_per_pass: the steps one pass over the training data takes (an int64 scalar
            tensor, 0 or less when unknown), or None outside `fit`.
        batch: the step's `StepBatch`, once the default `train_step` has made it.
        checks: while checking a batch, the `(layer, ok, message)` the layers reported;
            None otherwise.
        training: while checking, whether the batch is for a training step.
        seen: the keys `first_time` was asked, in this context.
    """

    labels: Any = None
    added_losses: list = dataclasses.field(default_factory=list)
    gradients: dict | None = None
    loss_scale: Any = None
    recorders: tuple = ()
    bound: Any = None
    steps_per_pass: Any = None
    batch: Any = None
    checks: list | None = None
    training: bool = True
    seen: set = dataclasses.field(default_factory=set)

    def total_added_loss(self, dtype: tf.DType):
        """The sum of the added losses in `dtype`, or None when no layer added one."""
        if not self.added_losses:
            return None
        return tf.add_n([tf.cast(value, dtype) for _, value in self.added_losses])

    def first_time(self, key) -> bool:
        """True the first time `key` is asked in this context (one pass), False after: a
        layer shared by several nodes adds its weight penalties once per pass."""
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


_contexts: ContextStack[StepContext] = ContextStack()
# The observers of the open `observing` blocks, innermost last.
_observers: ContextStack[Any] = ContextStack()


@contextlib.contextmanager
def training_step(labels, *, record_gradients: bool = False, recorders: Sequence = (),
                  bound=None, steps_per_pass=None) -> Iterator[StepContext]:
    """Opens a step's context for the code run inside the block; yields it.

    Inside an open step (a pass over a slice of its batch) the new context shares the step's
    gradient record, loss scale, recorders and bound; only the labels and added losses are
    its own.

    Args:
        labels: the batch's labels (`y` of the step's data): a tensor, a dict by output
            name, or None.
        record_gradients: collect the gradients `minimize` reports (`context.gradients`).
        recorders: the step's recorders.
        bound: the step's `BatchBound`, or None.
        steps_per_pass: the steps of one pass over the training data, or None.
    """
    parent = current()
    if parent is not None and parent.checks is None:
        context = StepContext(labels, gradients=parent.gradients, recorders=parent.recorders,
                              bound=parent.bound, steps_per_pass=parent.steps_per_pass,
                              batch=parent.batch)
        context.loss_scale = parent.loss_scale
    else:
        context = StepContext(labels, gradients={} if record_gradients else None,
                              recorders=tuple(recorders), bound=bound,
                              steps_per_pass=steps_per_pass)
    with _contexts.push(context):
        try:
            yield context
        finally:
            if parent is not None and context.loss_scale is not None:
                parent.loss_scale = context.loss_scale


@contextlib.contextmanager
def checking(labels, training: bool) -> Iterator[StepContext]:
    """Collects, for a forward pass run inside the block, what each layer called requires of
    the batch (`Layer.batch_checks`) into `context.checks`.

    Args:
        labels: the batch's labels, for checks that read them (`labels_for`).
        training: whether the batch is for a training step.
    """
    with _contexts.push(StepContext(labels, checks=[], training=training)) as context:
        yield context


def current() -> StepContext | None:
    """The innermost open context, or None outside any training step."""
    return _contexts.top()


@graphfit_api
def labels_for(layer_name: str, labels_of: str | None):
    """The labels a layer reads: those of output `labels_of` (None: the only output).

    Returns None when no step is open. Raises ValueError when one is open but holds no labels
    for the layer (no labels at all, an unknown output, or several outputs and `labels_of`
    unset), naming the layer and the outputs that have labels.
    """
    context = current()
    if context is None:
        return None
    labels = context.labels
    if labels is None:
        raise ValueError(
            f"Layer {layer_name!r} reads the batch's labels in training, but this training "
            f"step has none. Give fit() labels: fit(x, y) or a dataset of (x, y) batches.")
    if not isinstance(labels, dict):
        if labels_of is not None:
            raise ValueError(
                f"Layer {layer_name!r} has labels_of={labels_of!r}, but the model has a single "
                f"output: leave labels_of unset.")
        return labels
    names = sorted(labels)
    if labels_of is None:
        if len(labels) != 1:
            raise ValueError(
                f"Layer {layer_name!r} reads labels, but the batch has labels for several "
                f"outputs {names}: say which with labels_of=<output name>.")
        return next(iter(labels.values()))
    if labels_of not in labels:
        raise ValueError(
            f"Layer {layer_name!r} has labels_of={labels_of!r}, but the batch has labels only "
            f"for the outputs {names}. Set labels_of to one of them.")
    return labels[labels_of]


@graphfit_api
def add_loss(name: str, value) -> bool:
    """Adds a scalar loss to the open training step; returns False (adding nothing) when no
    step is open, so a layer called outside `fit` computes it for nothing."""
    context = current()
    if context is None or context.checks is not None:
        return False
    context.added_losses.append((name, tf.convert_to_tensor(value)))
    return True


def records_gradients() -> bool:
    """Whether the open step records the gradients `minimize` computes: a `minimize` that
    could skip computing the loss gradient (Levenberg–Marquardt has it from its Jacobian)
    computes it only then."""
    context = current()
    return context is not None and context.gradients is not None


@graphfit_api
def record_gradients(gradients: Sequence[Any], variables: Sequence[tf.Variable]) -> None:
    """Reports the gradients of the loss a `minimize` computed; a no-op unless the open step
    records them or an `observing` block is open.

    The base `minimize` reports the raw gradients, as the tape returns them (before clipping
    and weight decay). A custom `train_step`, or a `minimize` override with a gradient of the
    loss, may report it the same way; None gradients are skipped.
    """
    context = current()
    records = [] if context is None or context.gradients is None else [context.gradients]
    observer = _observers.top()
    if observer is not None:
        records.append(observer.gradients)
    for gradient, variable in zip(gradients, variables):
        if gradient is not None:
            for record in records:
                record[as_tf_variable(variable).ref()] = gradient


@contextlib.contextmanager
def observing(observer) -> Iterator[Any]:
    """Lets `observer` watch the training steps traced inside the block, without changing
    them; yields it. The default `train_step` calls `observer.mark(phase)` where each of its
    phases starts (a `graphfit.training.steps.StepProbe`), and the gradients `minimize`
    reports go into `observer.gradients` (a dict, `{variable.ref(): gradient}`) without
    asking for any: `records_gradients()` answers as without the block, so the step traced is
    the one `fit` runs (Levenberg–Marquardt computes no loss gradient it does not need).
    `graphfit.inspect` observes the trace of a compiled step this way, to count its FLOPs on
    its own graph.

    Example:

        >>> import types
        >>> import tensorflow as tf
        >>> from graphfit.core import step_context
        >>> w = tf.Variable(1.0)
        >>> watcher = types.SimpleNamespace(gradients={}, mark=lambda phase: None)
        >>> with step_context.observing(watcher):
        ...     with step_context.training_step(None):
        ...         asked = step_context.records_gradients()
        ...         step_context.record_gradients([tf.constant(2.0)], [w])
        >>> asked, float(watcher.gradients[w.ref()])
        (False, 2.0)
    """
    with _observers.push(observer):
        yield observer


def current_observer():
    """The observer of the innermost open `observing` block, or None."""
    return _observers.top()


def record_loss_scale(scale) -> None:
    """Reports the factor the loss was multiplied by before it was differentiated, so that
    what reads the backward pass (activation gradient taps) can divide it out."""
    context = current()
    if context is not None:
        context.loss_scale = scale

"""What a training step shares with the layers of its forward pass: labels in, losses out.

Some layers need the batch's labels while training (`layers.ClassMeans` keeps per-class running
means), yet the labels must not become a model input, or `predict` would need them. The
training step publishes the batch's labels (`y`: one tensor, or a dict by output name) around
its forward pass with `training_step(y)`; a layer that sets `uses_labels = True` reads them with
`labels_for(layer, labels_of)` when `training=True`. Layers may also add a loss of their own
(`add_loss`): the step adds every collected loss to the compiled loss.

Passes that re-run a slice of the batch (Levenberg–Marquardt's Jacobian chunks) open their own
context with that slice's labels, so a layer never pairs features with another slice's labels.
With no context open (a layer called outside `fit`), `labels_for` returns None.

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
from typing import Any, Iterator

import tensorflow as tf

from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.context_stack import ContextStack

__all__ = ["StepContext", "training_step", "current", "labels_for", "add_loss"]


@dataclasses.dataclass
class StepContext:
    """One open training step, as its layers see it.

    Attributes:
        labels: the batch's labels: a tensor, a dict by output name, or None (no labels).
        added_losses: `(name, scalar)` pairs the layers added with `add_loss`.
    """

    labels: Any
    added_losses: list = dataclasses.field(default_factory=list)

    def total_added_loss(self, dtype: tf.DType):
        """The sum of the added losses in `dtype`, or None when no layer added one."""
        if not self.added_losses:
            return None
        return tf.add_n([tf.cast(value, dtype) for _, value in self.added_losses])


_contexts: ContextStack[StepContext] = ContextStack()


@contextlib.contextmanager
def training_step(labels) -> Iterator[StepContext]:
    """Publishes `labels` to the layers called inside the block; yields the `StepContext`.

    Args:
        labels: the batch's labels (`y` of the step's data): a tensor, a dict by output
            name, or None.
    """
    with _contexts.push(StepContext(labels)) as context:
        yield context


def current() -> StepContext | None:
    """The innermost open step's context, or None outside any training step."""
    return _contexts.top()


@graphfit_api
def labels_for(layer_name: str, labels_of: str | None):
    """The labels a layer reads: those of output `labels_of` (None: the only output).

    Returns None when no training step is open. Raises ValueError when one is open but holds
    no labels for the layer (no labels at all, an unknown output, or several outputs and
    `labels_of` unset), naming the layer and the outputs that have labels.
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
    if context is None:
        return False
    context.added_losses.append((name, tf.convert_to_tensor(value)))
    return True

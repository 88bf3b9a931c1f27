"""The typed values that pass between a training step, the optimizer and the loops.

`Model.train_step(data)` hands its optimizer a `StepBatch` (what a second-order optimizer or
per-example clipping needs to re-run the model: the model, the compiled loss and the batch),
its loss function returns a `ForwardPass` as the auxiliary value, and every step returns a
`StepResult` that the compiled loops feed to the stage's metrics.

Example:

    >>> import tensorflow as tf
    >>> from graphfit.core.step_types import StepResult
    >>> result = StepResult(loss=tf.constant(0.5), logs={"d_loss": tf.constant(0.25)})
    >>> float(result.loss), result.y_pred is None, sorted(result.logs)
    (0.5, True, ['d_loss'])
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

__all__ = ["BatchBound", "StepBatch", "ForwardPass", "StepResult", "unpack_data",
           "loss_and_aux", "reads_backward_pass"]


@dataclasses.dataclass
class BatchBound:
    """The most examples the batches of a traced training step hold, and what it relied on.

    One trace of the training step serves every batch size (its batch axis is unknown), so
    the step cannot see how large its batches get. `fit` knows for in-memory arrays (its batch
    size) and promises it to the step it traces; code in the step that does less work for
    batches up to some size (Levenberg–Marquardt's linearization in one piece, without its
    loop over Jacobian chunks) reads `largest` and reports what it relied on with `rely_on`.
    `fit` traces the step again before feeding it larger batches (or a dataset).

    Attributes:
        largest: the most examples a batch will hold, or None (no promise).
        relied_on: the smallest batch size a part of the step relied on not being exceeded,
            or None when nothing specialized.

    Example:

        >>> bound = BatchBound(1000)
        >>> bound.rely_on(4096); bound.rely_on(2048)
        >>> bound.relied_on
        2048
    """

    largest: int | None = None
    relied_on: int | None = None

    def rely_on(self, limit: int) -> None:
        """Records that the traced step is only as cheap as it is for batches of at most
        `limit` examples (larger ones still compute the same numbers, with more memory)."""
        self.relied_on = limit if self.relied_on is None else min(self.relied_on, limit)


@dataclasses.dataclass(frozen=True)
class StepBatch:
    """One training batch, with what it takes to run the model on it again.

    Attributes:
        model: the model being trained.
        loss_set: the compiled loss (`graphfit.training.losses.LossSet`).
        x: the inputs (a tensor, or a structure of tensors).
        y: the labels, or None.
        sample_weight: per-sample weights, or None.
        replicas: None on one device. Under a `tf.distribute` strategy, for an optimizer
            whose step runs in cross-replica context (`steps_across_replicas`), the
            `graphfit.training.cross_replica.Replicas` that runs work on each replica's
            slice of this (global) batch.
        bound: the `BatchBound` `fit` promised the traced step, or None.
        steps_per_pass: the steps one pass over the training data takes in this `fit` (an
            int64 scalar tensor, 0 or less when the data cannot say), or None outside `fit`;
            state that should forget at the pace of passes over the data reads it.
        skip_non_finite: skip a step whose start or linearization is not finite, leaving
            every variable, state and update hook as it was (a `LossScaleOptimizer` asks it of
            the second-order optimizer it wraps).
    """

    model: Any
    loss_set: Any
    x: Any
    y: Any = None
    sample_weight: Any = None
    replicas: Any = None
    bound: BatchBound | None = None
    steps_per_pass: Any = None
    skip_non_finite: bool = False

    @property
    def num_examples(self):
        """The number of examples in the batch (a scalar int32 tensor)."""
        import tensorflow as tf  # keeps this module importable without TensorFlow's cost

        return tf.shape(tf.nest.flatten(self.x)[0])[0]


class ForwardPass(NamedTuple):
    """The auxiliary value of a training loss function: one forward pass's results.

    A NamedTuple, so `tf.nest`, `tf.cond` and `tf.while_loop` see its tensors.

    Attributes:
        y_pred: the model's outputs.
        output_losses: {output name: loss} for a model with several outputs, else {}.
        updates: the `PendingUpdate`s (update hooks) the pass collected, not yet applied.
        skip_updates: None (apply them), or a scalar bool tensor that is True when the
            optimizer skipped this step (`LossScaleOptimizer` on a non-finite gradient), so
            its update hooks must not move either (`update_hooks.apply_updates`'s `skip`).
        added_losses: {name: loss} the layers added in this pass (`regularization_loss`,
            ...), logged apart; a second-order optimizer's last trial pass gives the values
            at the point the step ends on, as its loss.
    """

    y_pred: Any
    output_losses: dict
    updates: list
    skip_updates: Any = None
    added_losses: dict = {}

    def skipping_updates(self, skip) -> "ForwardPass":
        """This pass with its update hooks skipped where `skip` (a scalar bool tensor) is
        True, as well as where they were skipped already."""
        skip = skip if self.skip_updates is None else (self.skip_updates | skip)
        return self._replace(skip_updates=skip)


class StepResult(NamedTuple):
    """What a train or test step returns to the compiled loop.

    Attributes:
        loss: the scalar loss of the batch (averaged over the stage as "loss").
        y_pred: the model's outputs, for the compiled metrics; None skips them (a step
            whose outputs are not predictions of `y`, such as a GAN's).
        output_losses: {output name: loss} for several outputs ("{name}_loss" in the logs).
        logs: more scalars to report, {name: tensor}; each is averaged over the stage's
            batches, weighted by batch size, like the loss.
    """

    loss: Any
    y_pred: Any = None
    output_losses: dict = {}
    logs: dict = {}


def unpack_data(data) -> tuple:
    """(x,), (x, y) or (x, y, sample_weight), or x alone -> (x, y, sample_weight), with None
    for what is absent (Keras's `unpack_x_y_sample_weight`)."""
    if not isinstance(data, tuple):
        return data, None, None
    if not 1 <= len(data) <= 3:
        raise ValueError(
            "A batch must be x, (x,), (x, y) or (x, y, sample_weight). Received a tuple of "
            f"length {len(data)}."
        )
    data = data + (None,) * (3 - len(data))
    return data[0], data[1], data[2]


def loss_and_aux(result) -> tuple[Any, Any]:
    """What an optimizer's `loss_fn` returned, checked to be the pair `(loss, aux)`.

    Raises:
        TypeError: for anything else, saying how to return it.
    """
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError("loss_fn must return a pair (loss, aux); return (loss, None) when there "
                        f"is nothing else. Received: {result!r}")
    return tuple(result)


def reads_backward_pass(loss_fn) -> bool:
    """Whether `loss_fn` reads the backward pass of its first call (activation gradient taps
    do: they set `loss_fn.reads_backward_pass = True`), so an optimizer that could do without
    differentiating the loss (Levenberg–Marquardt, which has the gradient from its Jacobian)
    must differentiate it anyway."""
    return bool(getattr(loss_fn, "reads_backward_pass", False))

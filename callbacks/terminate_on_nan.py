"""`TerminateOnNaN`: stop training at the training step whose loss is NaN or infinite."""

from __future__ import annotations

import math

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.early_stopping import clear_stop_reason, set_stop_reason
from graphfit.callbacks.stop_reasons import UnsuccessfulStop
from graphfit.core.registry import CALLBACKS

__all__ = ["TerminateOnNaN"]


@CALLBACKS.register
class TerminateOnNaN(Callback):
    """Stops training as soon as the loss is NaN or infinite (Keras's `TerminateOnNaN`).

    It listens to every training batch, so `fit` with `steps_per_execution="auto"` (the
    default) runs one step per compiled call while it is present and it hears each step:
    the batch logs hold the epoch's running mean loss, which turns non-finite at exactly the
    first step whose loss is non-finite. With a fixed `steps_per_execution=N` it hears once
    per N steps and names the range of batches and steps that ran together.

    When the loss is non-finite it prints the reason and, as in Keras, sets
    `model.stop_training = True` (the rest of the epoch is skipped; its validation and
    `on_epoch_end` still run, so `History` records the non-finite epoch), or raises
    `RuntimeError` when `raise_error=True`. It also sets, on the model:

    - `model.stop_reason`: "TerminateOnNaN: the loss became nan at epoch 1, batch 5
      (step 5)"; epochs and batches count from 1, as the progress bar does, and the step is
      the optimizer's step count (`optimizer.iterations`) after the step that produced it;
    - `model.nonfinite_step`: that step number (None until a non-finite loss is seen; reset
      at the start of each `fit`). Checkpoint callbacks read it and refuse to save weights
      from then on, so the last good checkpoint is kept.

    Nothing is restored: the model keeps the weights of the last step run, which are
    usually non-finite themselves (the step applied non-finite gradients). Weights from
    before are never put back silently; to end with good weights, add
    `EarlyStopping(restore_best_weights=True)`, which puts back its best epoch's weights
    when training ends, or load the last checkpoint.

    Args:
        raise_error: raise `RuntimeError` at once instead of stopping gracefully (the other
            callbacks' `on_train_end` then does not run).

    Attributes:
        stopped_epoch, stopped_batch, stopped_step: where the loss was first seen
            non-finite (0-based epoch and batch, 1-based step), or None.

    Raises:
        ValueError: if `raise_error` is not a bool.

    Example:

        >>> import graphfit as gf
        >>> class FakeModel:
        ...     stop_training = False
        >>> model = FakeModel()
        >>> guard = gf.callbacks.TerminateOnNaN()
        >>> guard.set_model(model)
        >>> guard.on_train_begin()
        >>> guard.on_epoch_begin(0)
        >>> guard.on_train_batch_end(0, {"loss": 0.5})
        >>> guard.on_train_batch_end(1, {"loss": float("nan")})
        TerminateOnNaN: the loss became nan at epoch 1, batch 2 (step 2)
        >>> model.stop_training, model.nonfinite_step
        (True, 2)
    """

    def __init__(self, raise_error: bool = False):
        super().__init__()
        if not isinstance(raise_error, bool):
            raise ValueError(f"raise_error must be True or False. "
                             f"Received: raise_error={raise_error!r}")
        self.raise_error = raise_error
        self._reset()

    def _reset(self) -> None:
        self.stopped_epoch: int | None = None
        self.stopped_batch: int | None = None
        self.stopped_step: int | None = None
        self._epoch = 0
        self._first_batch: int | None = None
        self._steps_seen = 0  # the step count when the optimizer keeps none

    def on_train_begin(self, logs=None):
        self._reset()
        clear_stop_reason(self.model)
        if self.model is not None:
            self.model.nonfinite_step = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        self._first_batch = batch  # the first batch of this compiled call

    def on_train_batch_end(self, batch, logs=None):
        first = self._first_batch
        if first is None or first > batch:
            first = batch
        self._first_batch = None
        self._steps_seen += batch - first + 1
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(loss)) or self.stopped_step is not None:
            return
        step = self._step()
        if first == batch:
            where = f"batch {batch + 1} (step {step})"
        else:
            where = (f"one of batches {first + 1}-{batch + 1} (steps {step - (batch - first)}-"
                     f"{step}), which ran in one compiled call; compile with "
                     "steps_per_execution=1 or 'auto' to name the exact step")
        reason = (f"TerminateOnNaN: the loss became {float(loss)} at epoch {self._epoch + 1}, "
                  f"{where}")
        self.stopped_epoch, self.stopped_batch, self.stopped_step = self._epoch, batch, step
        self.model.nonfinite_step = step
        if self.raise_error:
            raise RuntimeError(reason)
        print(reason)
        self.model.stop_training = True
        # Not a success: TensorBoard's HParams session of the run ends as FAILURE.
        set_stop_reason(self.model, UnsuccessfulStop(reason))

    def _step(self) -> int:
        iterations = getattr(getattr(self.model, "optimizer", None), "iterations", None)
        if iterations is None:
            return self._steps_seen
        return int(iterations)

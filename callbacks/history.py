"""`History`: the per-epoch record of train, validation and test metrics that `fit` returns."""

from __future__ import annotations

from typing import Any

from graphfit.callbacks.callback import Callback
from graphfit.core.registry import CALLBACKS

__all__ = ["History"]


@CALLBACKS.register
class History(Callback):
    """Records the metrics of every epoch, and test results with the epoch they belong to.

    Train and validation metrics come from `on_epoch_end`, under the keys given there
    ("loss", "val_loss", "val_accuracy", ...). Test metrics come from
    `on_test_end(logs, stage="test")` and are stored with a "test_" prefix
    (`history["test_accuracy"]`); `test_epoch` holds, for each test result, the index of
    the epoch it ran in or after (the latest `on_epoch_begin`; None when no epoch ran).
    "test_" keys in the epoch logs are skipped, so a test result is never recorded twice,
    and validation results reported through `on_test_end(stage="val")` are ignored for the
    same reason.

    As in Keras, `history` keeps accumulating when one `History` is reused across `fit`
    calls, while `epoch` and `test_epoch` restart at each `on_train_begin`. The model's
    `history` attribute is set to this callback (Keras' convention).

    Attributes:
        history: dict from metric name to the list of its values, one per epoch (or per
            test run for "test_" keys).
        epoch: the epoch indices recorded by `on_epoch_end` in the current `fit`.
        test_epoch: the epoch index of each entry of the "test_" lists.
        stop_reason: why the last `fit` stopped early (set by EarlyStopping, TerminateOnNaN,
            ...), or None when it ran all its epochs.

    Example:

        >>> import graphfit as gf
        >>> history = gf.callbacks.History()
        >>> history.on_train_begin()
        >>> for epoch in range(2):
        ...     history.on_epoch_begin(epoch)
        ...     history.on_epoch_end(epoch, {"loss": 1.0 / (epoch + 1), "val_loss": 2.0})
        >>> history.on_test_end({"loss": 3.0}, stage="test")
        >>> history.history
        {'loss': [1.0, 0.5], 'val_loss': [2.0, 2.0], 'test_loss': [3.0]}
        >>> history.epoch, history.test_epoch
        ([0, 1], [1])
    """

    def __init__(self):
        super().__init__()
        self.history: dict[str, list[Any]] = {}
        self.epoch: list[int] = []
        self.test_epoch: list[int | None] = []
        self.stop_reason: str | None = None
        self._current_epoch: int | None = None

    def on_train_begin(self, logs=None):
        self.epoch = []
        self.test_epoch = []
        self._attach_to_model()

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self._current_epoch = epoch
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            if not key.startswith("test_"):
                self.history.setdefault(key, []).append(value)
        # Again here, as Keras does, so that the model points at the latest record.
        self._attach_to_model()

    def on_train_end(self, logs=None):
        # Why fit stopped before its last epoch (EarlyStopping, TerminateOnNaN, ...), or None.
        self.stop_reason = getattr(self.model, "stop_reason", None)

    def on_test_end(self, logs=None, stage="test"):
        if stage != "test" or not logs:
            return
        self.test_epoch.append(self._current_epoch)
        for key, value in logs.items():
            self.history.setdefault(f"test_{key}", []).append(value)

    def _attach_to_model(self) -> None:
        if self.model is not None:
            self.model.history = self

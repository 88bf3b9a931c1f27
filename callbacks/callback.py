"""`Callback`: the hooks a training loop calls.

The hooks and their arguments follow Keras (`keras.callbacks.Callback`), plus the stage: the
evaluation hooks receive `stage="val"` (validation during `fit`) or `stage="test"` (test data
during `fit`, or `evaluate`), so a callback can keep validation and test results apart.
`CallbackList` (in `callback_list`) calls every hook on all of a model's callbacks.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["Callback", "STAGES"]

#: The evaluation stages a test hook can receive.
STAGES = ("val", "test")
_BATCH_HOOKS = {
    "train": ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end"),
    "test": ("on_test_batch_begin", "on_test_batch_end"),
    "predict": ("on_predict_batch_begin", "on_predict_batch_end"),
}


class Callback:
    """Base class of callbacks: override the hooks you need, the others do nothing.

    Logs are dicts of Python floats. Batch hooks get the running (epoch-to-date) metrics;
    with `steps_per_execution=N` they are called once per N batches, with `batch` the index
    of the last batch run. `on_epoch_end` gets the training metrics unprefixed and the other
    stages' metrics prefixed (`val_loss`, `test_accuracy`); the evaluation hooks get
    unprefixed keys and the `stage` ("val" or "test") they belong to.

    Attributes:
        model: the model being trained, evaluated or run (set by `set_model`), or None.
        params: dict with "epochs", "steps" (int, or None when unknown) and "verbose"; for
            `evaluate` and `predict`, "steps" is that run's step count.

    Example:

        >>> import graphfit as gf
        >>> class CountEpochs(gf.callbacks.Callback):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.seen = 0
        ...     def on_epoch_end(self, epoch, logs=None):
        ...         self.seen += 1
        >>> counter = CountEpochs()
        >>> counter.on_epoch_end(0, {"loss": 0.5})
        >>> counter.seen
        1
    """

    def __init__(self):
        self.model = None
        self.params: dict[str, Any] = {}

    def set_model(self, model) -> None:
        """Sets the model the hooks refer to."""
        self.model = model

    def set_params(self, params: dict[str, Any] | None) -> None:
        """Sets the run parameters ("epochs", "steps", "verbose").

        The dict is shared, not copied (as in Keras), so the loop may update it in place.
        """
        self.params = params if params is not None else {}

    def check_model(self, model) -> None:
        """Raises a ValueError when the callback cannot work with `model` (built and
        compiled), before any training: `graphfit validate` and `graphfit train` call it for
        a recipe's callbacks, so a run that would fail later fails first. Nothing by default.
        """
        del model

    # Whole runs.
    def on_train_begin(self, logs=None):
        """Called once at the start of `fit`."""

    def on_train_end(self, logs=None):
        """Called once at the end of `fit`."""

    #: Whether the callback may set the weights training keeps once it ends (EarlyStopping's
    #: restore_best_weights): `fit` then runs its last test after `restore_final_weights`.
    restores_weights: bool = False

    def restore_final_weights(self) -> bool:
        """Called by `fit` once the epochs end, before its last test evaluation and
        `on_train_end`: sets the weights training keeps, if the callback chooses them.
        Returns whether it changed the model's weights."""
        return False

    def on_epoch_begin(self, epoch: int, logs=None):
        """Called at the start of epoch `epoch` (0-based)."""

    def on_epoch_end(self, epoch: int, logs=None):
        """Called at the end of an epoch with train metrics and prefixed val/test metrics."""

    def on_test_begin(self, logs=None, stage: str = "test"):
        """Called at the start of an evaluation stage ("val" or "test")."""

    def on_test_end(self, logs=None, stage: str = "test"):
        """Called at the end of an evaluation stage with its (unprefixed) metrics."""

    def on_predict_begin(self, logs=None):
        """Called at the start of `predict`."""

    def on_predict_end(self, logs=None):
        """Called at the end of `predict`."""

    # Batches.
    def on_train_batch_begin(self, batch: int, logs=None):
        """Called before a training execution; calls `on_batch_begin` as Keras does."""
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch: int, logs=None):
        """Called after a training execution with the running metrics."""
        self.on_batch_end(batch, logs=logs)

    def on_batch_begin(self, batch: int, logs=None):
        """Keras' backwards-compatible alias of `on_train_batch_begin`."""

    def on_batch_end(self, batch: int, logs=None):
        """Keras' backwards-compatible alias of `on_train_batch_end`."""

    def on_test_batch_begin(self, batch: int, logs=None, stage: str = "test"):
        """Called before an evaluation execution of stage `stage`."""

    def on_test_batch_end(self, batch: int, logs=None, stage: str = "test"):
        """Called after an evaluation execution with the stage's running metrics."""

    def on_predict_batch_begin(self, batch: int, logs=None):
        """Called before a prediction execution."""

    def on_predict_batch_end(self, batch: int, logs=None):
        """Called after a prediction execution with `{"outputs": ...}`: the execution's
        predictions, numpy arrays in the structure of the model's outputs (as Keras)."""

    # Whether the loop must call (and read metrics for) the batch hooks (Keras 2's
    # `_implements_*_batch_hooks`, public here). A subclass that overrides batch hooks but
    # sometimes ignores them (a silent progress bar) overrides these to say so.
    def implements_train_batch_hooks(self) -> bool:
        """Whether the training loop must call this callback's training batch hooks.

        True when the class overrides any of them; the loop skips them (and reading metrics
        every batch) when no callback needs them.
        """
        return _overrides_any(self, _BATCH_HOOKS["train"])

    def implements_test_batch_hooks(self) -> bool:
        """Whether evaluation must call this callback's test batch hooks."""
        return _overrides_any(self, _BATCH_HOOKS["test"])

    def implements_predict_batch_hooks(self) -> bool:
        """Whether prediction must call this callback's predict batch hooks."""
        return _overrides_any(self, _BATCH_HOOKS["predict"])


def _overrides_any(callback: Callback, names: Iterable[str]) -> bool:
    for name in names:
        method = getattr(callback, name)
        # A bound method compares by its function; a function set on the instance
        # (a lambda-style callback) is an override by construction.
        if getattr(method, "__func__", method) is not getattr(Callback, name):
            return True
    return False

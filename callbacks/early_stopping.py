"""`EarlyStopping`, and `MonitorCallback`: watching one logged quantity for improvement.

`MonitorCallback` holds what `EarlyStopping` and `ReduceLROnPlateau` share with Keras's class
of the same name: the direction of the monitored quantity ("min", "max", or inferred from its
name and the compiled metrics), what counts as an improvement (by more than `min_delta`), and
a single warning when the key is missing from the logs.

When `EarlyStopping` stops training it says why in `model.stop_reason` (a string); numbers in
that message count epochs from 1, as the progress bar does, while the attributes
(`stopped_epoch`, `best_epoch`) are 0-based epoch indices, as in Keras.
"""

from __future__ import annotations

import warnings

import numpy as np

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.progress import format_value
from graphfit.core import validation
from graphfit.core.registry import CALLBACKS, did_you_mean

__all__ = ["EarlyStopping", "MonitorCallback"]

_MODES = ("auto", "min", "max")


def set_stop_reason(model, reason: str) -> None:
    """Records why training stops; the first reason of a run wins (`on_train_begin` clears it)."""
    if not getattr(model, "stop_reason", None):
        model.stop_reason = reason


def clear_stop_reason(model) -> None:
    """Forgets the reason of an earlier `fit` (called from `on_train_begin`)."""
    if model is not None and getattr(model, "stop_reason", None) is not None:
        model.stop_reason = None


def _compiled_metric(model, key: str):
    """The Keras metric object logged under `key` (without stage prefix), or None."""
    names = getattr(model, "metrics_names", None) or []
    metrics = getattr(model, "metrics", None) or []
    for name, metric in zip(names, metrics):
        if name == key:
            return metric
    # A model that lists its metric objects in `metrics` alone (Keras's custom models).
    for metric in metrics:
        if getattr(metric, "name", None) == key:
            return metric
    return None


class MonitorCallback(Callback):
    """Base class of callbacks that watch one logged quantity (Keras's `MonitorCallback`).

    In "auto" mode the direction comes from the name: a loss ("loss", "val_loss",
    "out_loss") is minimized; any other key is looked up among the model's compiled metrics
    (Keras metric objects know whether higher is better). Resolved at the first epoch end,
    once the metrics exist, whether or not the logs hold the key (as Keras 3): a monitor that
    is neither fails there, a missing key with an explicit mode only warns.

    Args:
        monitor: the log key to watch, e.g. "val_loss" or "val_accuracy".
        mode: "auto", "min" or "max".
        min_delta: an improvement must exceed the best value by more than this.

    Raises:
        ValueError: for a bad argument; at the first epoch end in "auto" mode, when the
            direction of `monitor` cannot be inferred (pass mode="min" or "max").

    Example:

        >>> watcher = MonitorCallback("val_accuracy", mode="max", min_delta=0.01)
        >>> watcher.is_improvement(0.9, None), watcher.is_improvement(0.905, 0.9)
        (True, False)
    """

    def __init__(self, monitor: str = "val_loss", mode: str = "auto", min_delta: float = 0.0):
        super().__init__()
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"monitor must be a log key such as 'val_loss'. "
                             f"Received: monitor={monitor!r}")
        if mode not in _MODES:
            raise ValueError(f"mode must be one of 'auto', 'min', 'max'. Received: mode={mode!r}")
        validation.finite_number("min_delta", min_delta, minimum=0.0)
        self.monitor = monitor
        self.mode = mode
        self.min_delta = float(min_delta)
        self.direction: str | None = None if mode == "auto" else mode
        self._warned_missing = False

    def resolve_direction(self, logs=None) -> str:
        """"min" or "max": the explicit mode, or the one inferred for `monitor` (`logs`, when
        given, suggest the closest key in the error)."""
        if self.direction is not None:
            return self.direction
        name = self.monitor
        for prefix in ("val_", "test_"):
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        if name == "loss" or name.endswith("_loss"):
            self.direction = "min"
            return self.direction
        direction = getattr(_compiled_metric(self.model, name), "_direction", None)
        if direction not in ("up", "down"):
            missing = "" if logs is None or self.monitor in logs else (
                f" The logs hold no {self.monitor!r}" + did_you_mean(
                    self.monitor, logs, template="; did you mean {!r}?", otherwise=".")
                + f" They hold: {', '.join(logs)}.")
            raise ValueError(
                f"{type(self).__name__} callback received monitor={self.monitor!r}, but cannot "
                "tell whether that quantity should be maximized or minimized. Pass mode='max' "
                f"to look for the highest value, or mode='min' for the lowest.{missing}")
        self.direction = "max" if direction == "up" else "min"
        return self.direction

    def is_improvement(self, value: float, reference: float | None) -> bool:
        """Whether `value` beats `reference` by more than `min_delta` (None: always)."""
        if reference is None:
            return True
        if self.resolve_direction() == "min":
            return value + self.min_delta < reference
        return value - self.min_delta > reference

    def monitored_value(self, logs, what: str) -> float | None:
        """`logs[monitor]` as a float (a one-element array too, as Keras compares it), or None
        with one warning (per run) listing the available keys."""
        logs = logs or {}
        value = logs.get(self.monitor)
        if value is None and not self._warned_missing:
            self._warned_missing = True
            hint = did_you_mean(self.monitor, logs)
            warnings.warn(
                f"{what} conditioned on metric `{self.monitor}` which is not available. "
                f"Available metrics are: {','.join(logs)}.{hint}", stacklevel=3)
        if value is None:
            return None
        values = np.asarray(value).reshape(-1)
        if values.size != 1:  # a metric with one value per threshold or class
            raise ValueError(
                f"{what} monitors `{self.monitor}`, which has {values.size} values (one per "
                f"threshold or class), but it needs one number: give the metric a single "
                f"threshold or class_id (or an average), or monitor another key.")
        return float(values[0])

    def on_train_begin(self, logs=None):
        self._warned_missing = False


@CALLBACKS.register
class EarlyStopping(MonitorCallback):
    """Stops training when a monitored quantity has stopped improving (Keras semantics).

    At each epoch end from `start_from_epoch` on, a value better than the best so far by more
    than `min_delta` is an improvement. After `patience` epochs in a row without one (and not
    before the second epoch), `model.stop_training` is set and `model.stop_reason` says why,
    e.g. "EarlyStopping: val_loss did not improve for 3 epochs (best 0.1234 at epoch 5)".
    With a `baseline`, the count of epochs without improvement restarts only when the value
    also beats the baseline. With `restore_best_weights`, the weights of the best epoch are
    copied (`model.get_weights()`) when it ends, and put back (`model.set_weights`) when
    training ends, whether or not it stopped early (as in Keras 3); the stop reason then adds
    "; restored the weights of epoch 5".

    Args:
        monitor: the log key to watch.
        min_delta: the smallest change that counts as an improvement (>= 0).
        patience: epochs without improvement before stopping (>= 0).
        verbose: 0 silent; 1 or 2 print the reason when training ends.
        mode: "auto", "min" or "max" (see `MonitorCallback`).
        baseline: a value the monitored quantity must beat, or None.
        restore_best_weights: put back the weights of the best epoch at the end.
        start_from_epoch: epochs to wait (warm-up) before watching.

    Attributes:
        stopped_epoch: the 0-based epoch at whose end training was stopped (0 if it was not).
        best: the best value seen; best_epoch: its 0-based epoch.
        wait: epochs since the last improvement.
        best_weights: the copy to restore, or None.

    Raises:
        ValueError: for a bad argument (named, with the value received).

    Example:

        >>> import numpy as np
        >>> import graphfit as gf
        >>> x, y = gf.datasets.make_moons(n_samples=64)
        >>> model = gf.Sequential([gf.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse", jit_compile=False)
        >>> stopper = gf.callbacks.EarlyStopping(monitor="loss", min_delta=10.0)
        >>> history = model.fit(x, y, epochs=10, verbose=0, callbacks=[stopper])
        >>> len(history.history["loss"]), stopper.stopped_epoch
        (2, 1)
        >>> model.stop_reason
        'EarlyStopping: loss did not improve by more than 10.0 for 1 epoch (best ... at epoch 1)'
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int = 0,
        verbose: int = 0,
        mode: str = "auto",
        baseline: float | None = None,
        restore_best_weights: bool = False,
        start_from_epoch: int = 0,
    ):
        super().__init__(monitor, mode, min_delta)
        validation.non_negative_int("patience", patience)
        validation.verbosity(verbose)
        if baseline is not None:
            validation.finite_number("baseline", baseline)
        if not isinstance(restore_best_weights, bool):
            raise ValueError(f"restore_best_weights must be True or False. "
                             f"Received: restore_best_weights={restore_best_weights!r}")
        validation.non_negative_int("start_from_epoch", start_from_epoch)
        self.patience = int(patience)
        self.verbose = verbose
        self.baseline = None if baseline is None else float(baseline)
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = int(start_from_epoch)
        self._reset()

    def _reset(self) -> None:
        self._last_epoch = None
        self.wait = 0
        self.stopped_epoch = 0
        self.best: float | None = None
        self.best_weights = None
        self.best_epoch = 0
        self.restored_epoch: int | None = None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._reset()  # the instance may be reused across fit calls, as in Keras
        clear_stop_reason(self.model)

    def on_epoch_end(self, epoch, logs=None):
        # As Keras 3: in "auto" mode a monitor whose direction cannot be told (a key that
        # is no loss and no compiled metric, e.g. a typo) fails at the first epoch end,
        # whether the logs hold it or not; a key missing from the logs only warns.
        self.resolve_direction(logs)
        current = self.monitored_value(logs, "Early stopping")
        if current is None or epoch < self.start_from_epoch:
            return
        current = float(current)
        if self.restore_best_weights and self.best_weights is None:
            # Nothing was better yet: this epoch's weights are the best so far.
            self.best_weights = self.model.get_weights()
            self.best_epoch = epoch
        self.wait += 1
        if self.is_improvement(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            # Only an epoch that also beats the baseline restarts the count.
            if self.baseline is None or self.is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            set_stop_reason(self.model, self._reason())

    def _reason(self) -> str:
        epochs = f"{self.wait} epoch{'s' if self.wait != 1 else ''}"
        by = f" by more than {self.min_delta}" if self.min_delta else ""
        best = f"best {format_value(self.best)} at epoch {self.best_epoch + 1}"
        if self.baseline is not None and not self.is_improvement(self.best, self.baseline):
            return (f"EarlyStopping: {self.monitor} did not improve{by} on the baseline "
                    f"{format_value(self.baseline)} in {epochs} ({best})")
        return f"EarlyStopping: {self.monitor} did not improve{by} for {epochs} ({best})"

    @property
    def restores_weights(self) -> bool:
        return self.restore_best_weights

    def restore_final_weights(self) -> bool:
        """Sets the best epoch's weights (with `restore_best_weights`), before `fit`'s last
        test evaluation, so that its test numbers describe the weights kept. Returns whether
        they differ from the last epoch's."""
        if not self.restore_best_weights or self.best_weights is None:
            return False
        if self.restored_epoch is None:
            self.model.set_weights(self.best_weights)
            self.restored_epoch = self.best_epoch
        return self.restored_epoch != self._last_epoch

    def on_epoch_begin(self, epoch, logs=None):
        self._last_epoch = epoch

    def on_train_end(self, logs=None):
        stopped_here = self.stopped_epoch > 0
        if self.restore_best_weights and self.best_weights is not None:
            self.restore_final_weights()  # fit has called it already; a custom loop may not
            restored = f"restored the weights of epoch {self.best_epoch + 1}"
            reason = getattr(self.model, "stop_reason", None)
            if reason and stopped_here and reason.startswith("EarlyStopping:"):
                self.model.stop_reason = f"{reason}; {restored}"
            elif reason:  # another callback stopped training (TerminateOnNaN, ...)
                self.model.stop_reason = (
                    f"{reason}; EarlyStopping {restored} (best {self.monitor} "
                    f"{format_value(self.best)})")
            elif self.verbose:
                print(f"EarlyStopping: {restored}, the best {self.monitor} "
                      f"({format_value(self.best)}).")
        if self.verbose and stopped_here:
            print(self.model.stop_reason)

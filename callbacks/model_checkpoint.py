"""`ModelCheckpoint`: TensorFlow training checkpoints at epoch ends, latest and best.

Keras's names and arguments, but the files are `tf.train.Checkpoint`s written through
`graphfit.saving.checkpoints.Checkpointer`: the model, the optimizer's slots and iterations, and the
fit state (epochs completed, shuffle seed), so a fit resumes exactly:

    state = graphfit.saving.checkpoints.restore_latest(model, "checkpoints")
    model.fit(x, y, epochs=10, initial_epoch=state["epoch"] if state else 0,
              callbacks=[ModelCheckpoint("checkpoints")])
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.chief import is_chief
from graphfit.core import validation
from graphfit.core.registry import CALLBACKS
from graphfit.saving.checkpoints import Checkpointer, fit_state
from graphfit.saving.input_position import input_position

__all__ = ["ModelCheckpoint"]

_MODES = ("auto", "min", "max")
# mode="auto": names (without the val_/test_ prefix) that are better when larger.
_LARGER_IS_BETTER = ("acc", "auc", "precision", "recall", "f1", "fbeta", "iou", "r2",
                     "correlation")
_SMALLER_IS_BETTER = ("loss", "error", "mse", "mae", "mape", "msle", "crossentropy",
                      "hinge", "divergence", "poisson", "cosh")


def _direction(monitor: str, mode: str) -> str:
    """'min' or 'max' for `monitor` under `mode`."""
    if mode != "auto":
        return mode
    name = monitor.lower()
    for prefix in ("val_", "test_"):
        name = name.removeprefix(prefix)
    if any(part in name for part in _LARGER_IS_BETTER):
        return "max"
    if any(part in name for part in _SMALLER_IS_BETTER):
        return "min"
    raise ValueError(
        f"mode='auto' cannot tell whether monitor={monitor!r} is better when larger or "
        f"smaller. Pass mode='max' or mode='min'."
    )


@CALLBACKS.register
class ModelCheckpoint(Callback):
    """Writes training checkpoints to `filepath/latest` and, on improvement, `filepath/best`.

    At the end of every epoch the model, its optimizer's state and the fit state are written
    to `filepath/latest` (unless `save_best_only`), and to `filepath/best` when the monitored
    value improved on the best so far. A resumed fit (`initial_epoch > 0`) reads the best so
    far from the latest checkpoint, so `best/` keeps the best of the whole run.

    Every checkpoint also holds the logs of every epoch so far (`records`: a list of
    {key: value} per epoch, non-finite values as None), so a resumed run rebuilds exactly the
    history of the checkpoint it resumes from.

    An epoch whose losses are not finite is never saved (and TerminateOnNaN's
    `model.nonfinite_step`, set during the epoch, counts as such), so the last good
    checkpoint stays the newest.

    Args:
        filepath: the folder that holds `latest/` and `best/` (created at the first save).
        monitor: the log key compared for `best/`, e.g. "val_loss" or "val_accuracy".
        mode: "min", "max", or "auto" (from the name: max for accuracy, AUC, precision,
            recall; min for losses and errors).
        save_best_only: write only `best/` (then there is no `latest/` to resume from).
        save_freq: "epoch", or a number of batches between saves to `latest/` within the
            epochs too (`best/` is written at epoch ends only). A checkpoint written
            mid-epoch holds the input position (the batches done and the `tf.data`
            iterator, `graphfit.saving.input_position`), so a fit resumed from it starts
            there, reading the batch the interrupted fit would have read next.
        save_input_position: save the input position at epoch ends too (implied by a
            number `save_freq`): a `tf.data` iterator read across epochs (a dataset that
            repeats, with `steps_per_epoch`) then carries on where it stood. The dataset's
            iterator must be one TensorFlow can checkpoint (no `from_generator` or
            `py_function`).
        max_to_keep: checkpoints kept in each of `latest/` and `best/`; None keeps all.
        verbose: 0 silent, 1 a line per save.
        save_weights_only: accepted for Keras's scripts and changes nothing: a checkpoint
            always holds the weights and the optimizer's state (a resume needs both), and
            `model.load_weights(filepath + "/best")` reads only the weights from it.
        initial_value_threshold: the monitored value `best/` must beat at its first save
            (Keras's), or None: the first epoch's value is saved.

    Raises:
        ValueError: for a bad argument, or `mode="auto"` with a monitor whose direction
            cannot be told from its name.

    Example:

        >>> import tempfile
        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers
        >>> folder = tempfile.mkdtemp()
        >>> model = gf.Sequential([layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> checkpoint = gf.callbacks.ModelCheckpoint(folder, monitor="loss")
        >>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=3, verbose=0,
        ...               callbacks=[checkpoint])
        >>> gf.checkpoints.resume_point(folder)
        3
    """

    def __init__(self, filepath: str, monitor: str = "val_loss", mode: str = "auto",
                 save_best_only: bool = False, save_freq="epoch", max_to_keep: int | None = 3,
                 verbose: int = 0, save_input_position: bool = False,
                 save_weights_only: bool = False, initial_value_threshold: float | None = None):
        super().__init__()
        if not isinstance(filepath, (str, os.PathLike)) or not os.fspath(filepath):
            raise ValueError(f"filepath must be a folder path. Received: filepath={filepath!r}")
        filepath = os.fspath(filepath)
        if filepath.endswith((".h5", ".keras")) or "{" in filepath:
            raise ValueError(
                "filepath is the folder that holds the TensorFlow checkpoints (latest/ and "
                "best/), not a Keras file name or pattern. Received: "
                f"filepath={filepath!r}"
            )
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"monitor must be a log key such as 'val_loss'. Received: "
                             f"monitor={monitor!r}")
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {list(_MODES)}. Received: mode={mode!r}")
        if not isinstance(save_best_only, bool):
            raise ValueError(f"save_best_only must be True or False. Received: "
                             f"save_best_only={save_best_only!r}")
        every = isinstance(save_freq, int) and not isinstance(save_freq, bool)
        if save_freq != "epoch" and not (every and save_freq >= 1):
            raise ValueError(
                "save_freq must be 'epoch' or a positive number of batches between saves. "
                f"Received: save_freq={save_freq!r}")
        if not isinstance(save_weights_only, bool):
            raise ValueError(f"save_weights_only must be True or False. Received: "
                             f"save_weights_only={save_weights_only!r}")
        if initial_value_threshold is not None and not (
                isinstance(initial_value_threshold, (int, float, np.number))
                and not isinstance(initial_value_threshold, bool)
                and math.isfinite(float(initial_value_threshold))):
            raise ValueError(f"initial_value_threshold must be a finite number or None. "
                             f"Received: initial_value_threshold={initial_value_threshold!r}")
        if not isinstance(save_input_position, bool):
            raise ValueError(f"save_input_position must be True or False. Received: "
                             f"save_input_position={save_input_position!r}")
        validation.positive_int("max_to_keep", max_to_keep, allow_none=True,
                                none_means="to keep every checkpoint")
        if verbose not in (0, 1) or isinstance(verbose, bool):
            raise ValueError(f"verbose must be 0 or 1. Received: verbose={verbose!r}")
        self.filepath = filepath
        self.monitor = monitor
        self.mode = mode
        self.direction = _direction(monitor, mode)
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.initial_value_threshold = (None if initial_value_threshold is None
                                        else float(initial_value_threshold))
        self.save_freq = save_freq
        self.save_input_position = save_input_position or save_freq != "epoch"
        self.max_to_keep = max_to_keep
        self.verbose = verbose
        self.best: float | None = None
        self.records: list[dict] = []
        self.checkpointer = None
        self._warned_missing = False
        self._nonfinite_at_begin = None
        self._batches_since_save = 0
        self._last_batch = -1

    def implements_train_batch_hooks(self) -> bool:
        return self.save_freq != "epoch"

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch" or self.save_best_only:
            return
        # The hooks come once per execution of steps_per_execution batches: count them all.
        self._batches_since_save += batch - self._last_batch
        self._last_batch = batch
        if self._batches_since_save >= self.save_freq:
            self._batches_since_save = 0
            if is_chief(self.model) and self._finite_epoch({}):
                epoch = int(fit_state(self.model).epoch.numpy())
                path = self.checkpointer.save_latest(epoch)
                if self.verbose:
                    print(f"\nEpoch {epoch + 1}, batch {batch + 1}: saved {path}")

    def on_epoch_begin(self, epoch, logs=None):
        self._last_batch = int(input_position(self.model).batch.numpy()) - 1

    def on_train_begin(self, logs=None):
        self.checkpointer = Checkpointer(self.filepath, self.model, self.max_to_keep,
                                         input_position=self.save_input_position)
        self.best = self.initial_value_threshold
        self.records = []
        self._warned_missing = False
        # A flag left by an earlier fit is not this fit's (TerminateOnNaN resets it anyway).
        self._nonfinite_at_begin = getattr(self.model, "nonfinite_step", None)
        if int(fit_state(self.model).epoch.numpy()) > 0:
            # Resuming: the best so far is the one the interrupted run recorded.
            recorded_best = self.checkpointer.recorded_best(
                "best" if self.save_best_only else "latest")
            if recorded_best is not None:
                self.best = recorded_best
            self.checkpointer.best_value = self.best
            epoch = int(fit_state(self.model).epoch.numpy())
            recorded = self.checkpointer.recorded_records(
                "best" if self.save_best_only else "latest")
            # Older checkpoints hold no logs: empty entries keep the epochs in place.
            self.records = list(recorded or [])[:epoch]
            self.records += [{}] * (epoch - len(self.records))

    def _record(self, logs: dict) -> None:
        entry = {}
        for key, value in logs.items():
            if isinstance(value, (int, float, np.number)):
                value = float(value)
                entry[key] = value if math.isfinite(value) else None
        self.records.append(entry)
        self.checkpointer.records = self.records

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self._batches_since_save = 0
        self._record(logs)
        if not self._finite_epoch(logs):
            if self.verbose:
                print(f"\nEpoch {epoch + 1}: the loss is not finite; no checkpoint written.")
            return
        value = self._monitored(logs)
        improved = value is not None and (
            self.best is None
            or (value < self.best if self.direction == "min" else value > self.best)
        )
        writes = is_chief(self.model)  # under several workers, the chief writes
        if improved:
            previous, self.best = self.best, value
            if not writes:
                return
            path = self.checkpointer.save_best(epoch + 1, value)
            if self.verbose:
                print(f"\nEpoch {epoch + 1}: {self.monitor} improved from "
                      f"{'-' if previous is None else f'{previous:.5f}'} to {value:.5f}, "
                      f"saved {path}")
        if not self.save_best_only and writes:
            path = self.checkpointer.save_latest(epoch + 1)
            if self.verbose:
                print(f"\nEpoch {epoch + 1}: saved {path}")

    def _finite_epoch(self, logs: dict) -> bool:
        flagged = getattr(self.model, "nonfinite_step", None)
        if flagged is not None and flagged != self._nonfinite_at_begin:
            return False
        return all(
            math.isfinite(float(v)) for k, v in logs.items()
            if k.endswith("loss") and isinstance(v, (int, float, np.number))
        )

    def _monitored(self, logs: dict) -> float | None:
        value = logs.get(self.monitor)
        if value is None:
            if not self._warned_missing:
                self._warned_missing = True
                warnings.warn(
                    f"ModelCheckpoint monitors {self.monitor!r}, which is not in the logs "
                    f"(available: {sorted(logs)}); best/ is not written"
                    + ("." if self.save_best_only else ", latest/ still is."), stacklevel=2)
            return None
        value = float(value)
        return value if math.isfinite(value) else None

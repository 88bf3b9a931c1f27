"""`BackupAndRestore`: Keras's callback for carrying on an interrupted `fit`.

What `graphfit train --resume` does for a recipe's run, in Python: the backups are graphfit's
training checkpoints (`graphfit.saving.checkpoints.Checkpointer`: the weights, the optimizer's
slots and iterations, and the fit state, i.e. the epochs completed and the shuffle seed), and
restoring one (`restore_latest`) is the same call the resume makes. `fit` then carries on
from the restored fit state: its epoch, and the sample orders of the interrupted fit.
"""

from __future__ import annotations

import numbers
import os
import shutil

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.chief import is_chief
from graphfit.saving.checkpoints import Checkpointer, fit_state, restore_latest

__all__ = ["BackupAndRestore"]


def _check_flag(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False. Received: {name}={value!r}")


class BackupAndRestore(Callback):
    """Backs up the training state while `fit` runs and restores it when `fit` starts again
    (Keras's `BackupAndRestore`, with its arguments).

    At the end of every epoch (or every `save_freq` batches) the state is saved in
    `backup_dir/latest`, overwriting the previous backup. When a `fit` with this callback
    starts and a backup exists, the model, its optimizer and the fit state are restored and
    the fit carries on from the epoch saved (a backup taken within an epoch restarts that
    epoch, as in Keras, with the weights of the backup). When `fit` finishes, the backups are
    deleted (unless `delete_checkpoint=False`), so the next `fit` starts afresh.

    Differences from Keras (none changes which epoch is resumed): the backup is a
    TensorFlow training checkpoint, not `latest.weights.h5` and `training_metadata.json`,
    and it also holds the optimizer's state and the fit's shuffle seed, so a fit resumed at
    an epoch's end continues exactly as the uninterrupted fit would have. `double_checkpoint`
    keeps the previous backup too; a damaged newest one is skipped for it with a warning.
    Under several workers the chief writes the backups and every worker restores them.

    Args:
        backup_dir: the folder of the backups, used by this callback alone (it is deleted
            at the end with `delete_checkpoint`).
        save_freq: "epoch", or a positive number of batches between backups.
        double_checkpoint: keep the two newest backups (the older one is restored when the
            newest cannot be read).
        delete_checkpoint: delete `backup_dir` when `fit` ends normally.

    Raises:
        ValueError: for an empty `backup_dir` or a bad argument; in `fit`, when a backup
            cannot be restored into the model (another model, or every backup damaged).

    Example:

        >>> import tempfile
        >>> import numpy as np, graphfit as gf
        >>> class Interrupt(gf.callbacks.Callback):
        ...     def on_epoch_begin(self, epoch, logs=None):
        ...         if epoch == 4:
        ...             raise RuntimeError("Interrupting!")
        >>> backup = BackupAndRestore(backup_dir=tempfile.mkdtemp())
        >>> model = gf.Sequential([gf.layers.Dense(10)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.arange(100.0).reshape(5, 20) / 100, np.zeros((5, 10))
        >>> try:
        ...     _ = model.fit(x, y, epochs=10, batch_size=1, verbose=0,
        ...                   callbacks=[backup, Interrupt()])
        ... except RuntimeError:
        ...     pass
        >>> history = model.fit(x, y, epochs=10, batch_size=1, verbose=0, callbacks=[backup])
        >>> history.epoch  # the interrupted fit had finished epochs 0 to 3
        [4, 5, 6, 7, 8, 9]
    """

    def __init__(self, backup_dir, save_freq="epoch", double_checkpoint: bool = False,
                 delete_checkpoint: bool = True):
        super().__init__()
        if backup_dir is None or not isinstance(backup_dir, (str, os.PathLike)) \
                or not os.fspath(backup_dir):
            raise ValueError(f"Empty `backup_dir` argument passed: backup_dir must be the "
                             f"folder to keep the backups in. Received: backup_dir={backup_dir!r}")
        every = isinstance(save_freq, numbers.Integral) and not isinstance(save_freq, bool)
        if save_freq != "epoch" and not (every and save_freq >= 1):
            raise ValueError(
                f"Invalid value for argument `save_freq`: it must be 'epoch' or a positive "
                f"number of batches between backups. Received: save_freq={save_freq!r}")
        _check_flag("double_checkpoint", double_checkpoint)
        _check_flag("delete_checkpoint", delete_checkpoint)
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.double_checkpoint = double_checkpoint
        self.delete_checkpoint = delete_checkpoint
        self.restored_epoch: int | None = None  # the epoch the last fit resumed at, or None
        self._checkpointer = None
        self._batches_since_backup = 0
        self._last_batch = -1

    def implements_train_batch_hooks(self) -> bool:
        return self.save_freq != "epoch"  # backups at epoch ends need no batch hooks

    def on_train_begin(self, logs=None):
        self._checkpointer = Checkpointer(self.backup_dir, self.model,
                                          max_to_keep=2 if self.double_checkpoint else 1)
        self._batches_since_backup, self._last_batch = 0, -1
        try:
            state = restore_latest(self.model, self.backup_dir)
        except ValueError as error:
            raise ValueError(f"BackupAndRestore cannot restore the backup in "
                             f"{self.backup_dir}: {error} Delete that folder to start the fit "
                             f"afresh.") from None
        self.restored_epoch = None if state is None else state["epoch"]

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        # The hooks come once per execution of steps_per_execution batches: count them all.
        self._batches_since_backup += batch - self._last_batch
        self._last_batch = batch
        if self._batches_since_backup >= self.save_freq:
            self._batches_since_backup = 0
            self._save()

    def on_epoch_end(self, epoch, logs=None):
        self._last_batch = -1
        if self.save_freq == "epoch":
            self._save()

    def _save(self) -> None:
        if is_chief(self.model):
            # The fit state's epoch is the epochs completed: a backup within an epoch
            # restarts it.
            self._checkpointer.save_latest(int(fit_state(self.model).epoch.numpy()))

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and is_chief(self.model) and os.path.isdir(self.backup_dir):
            shutil.rmtree(self.backup_dir)

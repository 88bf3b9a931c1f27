"""Training checkpoints and exact resume, through `tf.train.CheckpointManager`.

A training checkpoint holds everything a fit needs to carry on as if it had never stopped:

- the model's variables, Dropout generators' states and moving statistics included, and the
  seed state of the Keras layers inside it (`graphfit.saving.random_state`);
- the optimizer's `iterations`, learning rate and slots (momentum, Adam moments);
- the model's `FitState`: the epochs completed and the shuffle seed of the fit, so a resumed
  fit draws the same per-epoch sample orders;
- the best monitored value so far, so a resumed `ModelCheckpoint` keeps the best of the
  whole run;
- the per-epoch logs of the run so far (`records`), so the history rebuilt on resume is the
  one of the checkpoint resumed from, never a file written a moment before or after it.

A damaged newest checkpoint (or a garbled `checkpoint` state file) is skipped with a warning
for the newest intact one (see `graphfit.saving.checkpoint_files`). A state file that the
manager would read a shorter list from (garbled, cut short, without timestamps, written on a
clock ahead) is rewritten before the manager opens the folder, so a save after it drops only
what `max_to_keep` drops.

`Checkpointer(directory, model)` keeps two `tf.train.CheckpointManager`s, `directory/latest`
and `directory/best`. Resuming is two calls:

    state = graphfit.saving.checkpoints.restore_latest(model, "run/checkpoints")
    model.fit(x, y, epochs=10, initial_epoch=state["epoch"] if state else 0)

Why a save is never half-visible: TensorFlow writes a checkpoint's data and index files
first and only then rewrites the manager's `checkpoint` state file atomically, so
`latest_checkpoint` names a complete checkpoint at every instant. A save killed midway leaves
at most unreferenced files (a `ckpt-N_temp` folder, or files the state file does not list),
which the next `Checkpointer` save in that folder deletes; a listed number is never reused
(an in-place overwrite would not be atomic). TensorFlow does not fsync: against a power cut
only the operating system's write-back protects.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import warnings
import weakref

import tensorflow as tf

from graphfit.core import validation
from graphfit.saving import checkpoint_files, weights_io
from graphfit.saving.input_position import input_position, share_input_position
from graphfit.saving.random_state import random_state

__all__ = ["Checkpointer", "FitState", "fit_state", "optimizer_parts", "restore_latest",
           "resume_point", "share_fit_state"]

_WHICH = ("latest", "best")
_EPOCH_KEY = checkpoint_files.EPOCH_KEY
_BEST_KEY = "best_value/.ATTRIBUTES/VARIABLE_VALUE"
_RECORDS_KEY = "records/.ATTRIBUTES/VARIABLE_VALUE"


class FitState(tf.Module):
    """Where a fit stands: the epochs completed and the shuffle seed, as int64 variables.

    `fit` keeps it up to date (see `fit_state`); a training checkpoint saves it, so a resumed
    fit knows where to start and shuffles as the interrupted one would have.

    Attributes:
        epoch: epochs completed by the current fit (its `initial_epoch`, then one more at
            the end of every epoch).
        shuffle_seed: the seed of the per-epoch sample orders; -1 before any fit.

    Example:

        >>> state = FitState()
        >>> int(state.epoch), int(state.shuffle_seed)
        (0, -1)
    """

    def __init__(self):
        super().__init__(name="fit_state")
        with tf.init_scope():  # created eagerly even when first asked for inside a trace
            self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
            self.shuffle_seed = tf.Variable(-1, dtype=tf.int64, trainable=False,
                                            name="shuffle_seed")


# model -> its FitState. Kept here, not on the model, so that tf.Module does not track it and
# `save_weights` (which writes `tf.train.Checkpoint(model=model)`) leaves the fit state out, as
# it leaves the optimizer; weak, so a dropped model takes its fit state with it.
_FIT_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fit_state(model) -> FitState:
    """The model's `FitState`, created on first use.

    Example:

        >>> import graphfit as gf
        >>> from graphfit import layers
        >>> model = gf.Sequential([layers.Dense(1)])
        >>> fit_state(model) is fit_state(model)
        True
    """
    state = _FIT_STATES.get(model)
    if state is None:
        state = _FIT_STATES[model] = FitState()
    return state


def share_fit_state(stand_in, model) -> None:
    """Makes `stand_in` (a model that trains in `model`'s place: the tail of a cached fit)
    read and write `model`'s `FitState` (and input position), so its epochs and shuffling
    carry on as the model's and the model's checkpoints record them."""
    _FIT_STATES[stand_in] = fit_state(model)
    share_input_position(stand_in, model)


def _check_max_to_keep(max_to_keep) -> None:
    validation.positive_int("max_to_keep", max_to_keep, allow_none=True,
                            none_means="to keep every checkpoint")


def _check_directory(directory) -> str:
    if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory):
        raise ValueError(f"directory must be a folder path. Received: directory={directory!r}")
    return os.fspath(directory)


class Checkpointer:
    """Saves and restores training checkpoints in `directory/latest` and `directory/best`.

    Each checkpoint is `tf.train.Checkpoint(model=model, optimizer=model.optimizer,
    fit_state=fit_state(model), best_value=...)`: weights, optimizer slots and iterations,
    the fit's epoch and shuffle seed, and the best monitored value. Nothing is written or
    created until the first save.

    Args:
        directory: the folder holding `latest/` and `best/`.
        model: the graphfit `Model` to save or restore (compiled, for the optimizer state).
        max_to_keep: how many checkpoints each of `latest/` and `best/` keeps (the newest);
            None keeps all.
        input_position: also save where the training data stands inside the epoch (the
            batches done and the `tf.data` iterator; `graphfit.saving.input_position`), so
            a checkpoint written mid-epoch resumes there. Restoring reads it whenever the
            checkpoint holds it.

    Raises:
        ValueError: for a bad `directory` or `max_to_keep`.

    Example:

        >>> import tempfile
        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers
        >>> model = gf.Sequential([layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=2, verbose=0)
        >>> folder = tempfile.mkdtemp()
        >>> path = Checkpointer(folder, model).save_latest(2)
        >>> restore_latest(model, folder)["epoch"]
        2
    """

    def __init__(self, directory, model, max_to_keep: int | None = 3,
                 input_position: bool = False):
        self.directory = _check_directory(directory)
        _check_max_to_keep(max_to_keep)
        if not isinstance(input_position, bool):
            raise ValueError(f"input_position must be True or False. Received: "
                             f"input_position={input_position!r}")
        self.model = model
        self.input_position = input_position
        self.max_to_keep = max_to_keep
        self.fit_state = fit_state(model)
        with tf.init_scope():
            # NaN: no best value recorded yet.
            self._best_value = tf.Variable(math.nan, dtype=tf.float64, trainable=False,
                                           name="best_value")
            # JSON list of per-epoch logs; "" when none were given.
            self._records = tf.Variable("", dtype=tf.string, trainable=False, name="records")
        self._warned: set[str] = set()
        self._managers: dict[str, tf.train.CheckpointManager] = {}
        self._optimizer = None
        self._swept: set[str] = set()

    def _manager(self, which: str) -> tf.train.CheckpointManager:
        _check_which(which)
        optimizer = getattr(self.model, "optimizer", None)
        if self._managers and optimizer is not self._optimizer:
            self._managers = {}  # recompiled: checkpoint the new optimizer
        if which not in self._managers:
            checkpoint = tf.train.Checkpoint(**self._objects(
                optimizer, records=True, position=self.input_position))
            for name in _WHICH:
                checkpoint_files.repair_state_file(os.path.join(self.directory, name))
                self._managers[name] = tf.train.CheckpointManager(
                    checkpoint, os.path.join(self.directory, name), max_to_keep=self.max_to_keep)
            self._optimizer = optimizer
        return self._managers[which]

    def _objects(self, optimizer, records: bool, position: bool = False) -> dict:
        objects = {"model": self.model, "fit_state": self.fit_state,
                   "best_value": self._best_value}
        if records:
            objects["records"] = self._records
        if position:
            objects["input_position"] = input_position(self.model)
        objects["random_state"] = random_state(self.model)
        objects.update(optimizer_parts(optimizer))
        return objects

    def latest_path(self, which: str = "latest") -> str | None:
        """The prefix of the newest checkpoint in `directory/which` that reads in full, or
        None; a damaged newer one is skipped with a warning naming both."""
        _check_which(which)
        return checkpoint_files.newest_intact(os.path.join(self.directory, which),
                                              self._warned)

    def _readable_path(self, which: str) -> str | None:
        """`latest_path`, but the `best/` one restore_latest fell back to (it warned)."""
        if which != "latest":
            return self.latest_path(which)
        path = checkpoint_files.newest_intact(os.path.join(self.directory, which),
                                              self._warned, warn_when_none=False)
        try:
            return path or checkpoint_files.best_instead_of_latest(self.directory, self._warned,
                                                                   quiet=True)
        except ValueError:
            return None  # nothing readable at all

    @property
    def records(self) -> list[dict] | None:
        """The per-epoch logs saved with the checkpoints (None: none given or restored)."""
        text = self._records.numpy().decode("utf-8")
        return json.loads(text) if text else None

    @records.setter
    def records(self, value: list[dict] | None) -> None:
        self._records.assign("" if value is None else json.dumps(value))

    def _save(self, which: str, step: int) -> str:
        validation.non_negative_int("step", step)
        manager = self._manager(which)
        listed = [checkpoint_files.checkpoint_number(path) for path in manager.checkpoints]
        if which not in self._swept:
            folder = os.path.join(self.directory, which)
            # The state file's list too: a checkpoint it names is no leftover, even were the
            # manager not to manage it (see checkpoint_files.repair_state_file).
            paths, damage = checkpoint_files.candidates(folder)
            if damage == "missing":  # not rebuilt: no intact one, only a killed save's files
                paths = [p for p in paths if checkpoint_files.unreadable_reason(p) is None]
            listed += [checkpoint_files.checkpoint_number(path) for path in paths]
            checkpoint_files.remove_leftovers(folder, max(listed, default=0))
            self._swept.add(which)
        # Never overwrite a listed checkpoint in place: that write would not be atomic.
        number = int(step) if not listed or step > max(listed) else max(listed) + 1
        return manager.save(checkpoint_number=number)

    def save_latest(self, step: int) -> str:
        """Writes a checkpoint to `directory/latest` and drops the oldest beyond
        `max_to_keep`. It is numbered `step`, or one past the highest number listed there
        when `step` is not above it.

        Args:
            step: the number in the checkpoint's name (ModelCheckpoint: epochs completed).
                The epoch to resume from is read from the fit state, not from the name.

        Returns:
            The new checkpoint's prefix.
        """
        return self._save("latest", step)

    def save_best(self, step: int, value: float | None = None) -> str:
        """Writes a checkpoint to `directory/best`, recording `value` as the best so far.

        Args:
            step: as for `save_latest`.
            value: the monitored value that made this checkpoint the best.

        Returns:
            The new checkpoint's prefix.
        """
        if value is not None:
            self.best_value = value
        return self._save("best", step)

    @property
    def best_value(self) -> float | None:
        """The best monitored value given to `save_best` (or restored), or None."""
        value = float(self._best_value.numpy())
        return None if math.isnan(value) else value

    @best_value.setter
    def best_value(self, value: float | None) -> None:
        self._best_value.assign(math.nan if value is None else float(value))

    def recorded_best(self, which: str = "latest") -> float | None:
        """The best value recorded in the newest checkpoint of `directory/which`, read from
        the file without restoring anything; None when there is none."""
        path = self._readable_path(which)
        if path is None:
            return None
        reader = tf.train.load_checkpoint(path)
        if not reader.has_tensor(_BEST_KEY):
            return None
        value = float(reader.get_tensor(_BEST_KEY))
        return None if math.isnan(value) else value

    def recorded_records(self, which: str = "latest") -> list[dict] | None:
        """The per-epoch logs saved in the newest intact checkpoint of `directory/which`
        (read from the file, nothing restored); None when there are none."""
        path = self._readable_path(which)
        if path is None:
            return None
        reader = tf.train.load_checkpoint(path)
        text = reader.get_tensor(_RECORDS_KEY) if reader.has_tensor(_RECORDS_KEY) else b""
        return json.loads(text.decode("utf-8")) if text else None

    def restore(self, which: str = "latest") -> dict | None:
        """Restores the newest checkpoint of `directory/which` into the model, its optimizer
        and its fit state.

        On a built model the optimizer's slots are created first (as `fit` would; unless the
        checkpoint holds none) and every variable must match the checkpoint. On a model not
        built yet each variable takes its saved value when `fit` (or a call) creates it.

        Args:
            which: "latest" or "best".

        Returns:
            {"epoch": epochs completed, "path": the checkpoint's prefix, "records": the
            per-epoch logs saved with it or None}, or None when `directory/which` holds no
            intact checkpoint.

        Raises:
            ValueError: when the checkpoint does not match the built model (the model's and
                optimizer's variables are then left as they were).
        """
        path = self.latest_path(which)
        return None if path is None else self._restore_path(which, path)

    def _restore_path(self, which: str, path: str) -> dict:
        """Restores the checkpoint at `path` (of `directory/which`); see `restore`."""
        self._manager(which)
        model, optimizer = self.model, self._optimizer
        self._records.assign("")
        saved = tf.train.load_checkpoint(path).get_variable_to_shape_map()  # read once
        # Checkpoints written before records were saved have none: do not ask for them.
        objects = _present_in(saved, self._objects(optimizer, records=_RECORDS_KEY in saved,
                                                   position=True),
                              optional=set(optimizer_parts(optimizer)) - {"optimizer"})
        if "input_position" not in objects:  # saved at an epoch's end: start it afresh
            input_position(model).batch.assign(0)
        if "random_state" not in objects and random_state(model).seeds:
            warnings.warn(
                f"The checkpoint {path!r} holds no random state for the Keras layers of model "
                f"{model.name!r} (written by a graphfit that did not save it): their dropout "
                f"starts from its initial seeds, so the resumed fit will not end with the "
                f"weights of an uninterrupted one.", stacklevel=4)
        checkpoint = tf.train.Checkpoint(**objects)
        slots = optimizer is not None and _holds_slots(saved)
        if slots:
            _check_slot_names(saved, optimizer, path)
        built = getattr(model, "built_input_spec", None) is not None
        if not built:
            checkpoint.read(path).expect_partial()
            return self._restored(path)
        if slots:  # restore fills these slots; mirrored, as the model's variables are
            strategy = getattr(getattr(model, "compile_state", None), "strategy", None)
            with strategy.scope() if strategy is not None else contextlib.nullcontext():
                optimizer.build(model.trainable_variables)
        variables = _variables_of(model, optimizer, self.fit_state, self._best_value) + [
            input_position(model).batch]
        before = [v.numpy() for v in variables]
        try:
            status = checkpoint.read(path)
            status.assert_existing_objects_matched()
            status.expect_partial()  # the manager's save counter is not ours to restore
        except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as error:
            for variable, value in zip(variables, before):
                variable.assign(value)  # a failed restore leaves nothing half overwritten
            raise ValueError(
                f"The checkpoint {path!r} does not match model {model.name!r}"
                f"{' and its optimizer' if optimizer is not None else ''}: "
                f"{weights_io.mismatch_reason(error, model)} Restore into "
                f"a model built and compiled exactly like the one that saved it."
            ) from None
        return self._restored(path)

    def _restored(self, path: str) -> dict:
        return {"epoch": int(self.fit_state.epoch.numpy()), "path": path,
                "records": self.records}


def optimizer_parts(optimizer) -> dict:
    """{name: trackable} of the optimizer's state: its `checkpoint_parts()` where it has one
    (a `LossScaleOptimizer`: the inner optimizer as "optimizer", the scale as "loss_scale",
    so a checkpoint with loss scaling restores without it and back), else {"optimizer": it}."""
    parts = getattr(optimizer, "checkpoint_parts", None)
    return {} if optimizer is None else dict(parts()) if parts else {"optimizer": optimizer}


def _present_in(saved: dict, objects: dict, optional=()) -> dict:
    """`objects` less an optional part ("input_position", "random_state" (a checkpoint
    written before seed state was saved), and the optimizer's parts other than itself,
    `optional`: a loss scale, evaluation counts) that the checkpoint (`saved`: its variable
    names) does not hold: it keeps its value."""
    return {k: v for k, v in objects.items()
            if k not in ("loss_scale", "input_position", "random_state", *optional)
            or any(key.startswith(k + "/") for key in saved)}


def _holds_slots(saved: dict) -> bool:
    """Whether the checkpoint (`saved`: its variable names) holds optimizer slots (not so if
    the optimizer never ran), its own or those of optimizers inside it (a MultiOptimizer's)."""
    return any(name.startswith("optimizer/") and "/_slots/" in name for name in saved)


def _check_slot_names(saved: dict, optimizer, path: str) -> None:
    """Refuses a checkpoint whose optimizer kept other slots per variable than `optimizer`.

    Slots are saved by position, so Adam's `momentum` would restore into SGD's `momentum`
    and its `velocity` be dropped, silently: the optimizer that saved it was another.
    """
    kept = {name.split("/")[3] for name in saved if name.startswith("optimizer/_slots/")}
    part = optimizer_parts(optimizer)["optimizer"]  # a LossScaleOptimizer's inner optimizer
    expected = set(getattr(part, "slot_names", ()))
    if kept != expected:
        raise ValueError(
            f"The checkpoint {path!r} was saved by an optimizer with the slots "
            f"{', '.join(sorted(kept))} per variable, but this model's optimizer "
            f"({type(part).__name__}) keeps {', '.join(sorted(expected)) or 'none'}. Compile "
            f"the model with the optimizer that saved it to resume training, or read only "
            f"the weights with model.load_weights({path!r}).")


def _variables_of(model, optimizer, state, best) -> list[tf.Variable]:
    variables = list(model.variables)
    for layer in model.flatten_layers():
        generator = getattr(layer, "_generator", None)
        if isinstance(generator, tf.random.Generator):
            variables.append(generator.state)
    if optimizer is not None:
        variables += list(optimizer.variables)
    return variables + [state.epoch, state.shuffle_seed, best]


def _check_which(which) -> None:
    if which not in _WHICH:
        raise ValueError(f"which must be 'latest' or 'best'. Received: which={which!r}")


def restore_latest(model, directory) -> dict | None:
    """Restores the newest checkpoint of `directory/latest` into `model` (see
    `Checkpointer.restore`); then `model.fit(..., initial_epoch=state["epoch"])` carries on
    exactly where the saved run was.

    When no checkpoint of `latest/` can be read, or `latest/` holds none (a
    `ModelCheckpoint(save_best_only=True)` folder), the newest intact one of `best/` is
    restored instead, with a warning.

    Args:
        model: the graphfit `Model`, built and compiled like the one that saved it (or
            compiled and not built yet: the restore is then deferred).
        directory: the folder holding `latest/` (a `ModelCheckpoint`'s `filepath`).

    Returns:
        {"epoch": epochs completed, "path": the checkpoint's prefix}, or None when there is
        no checkpoint.

    Raises:
        ValueError: when no checkpoint there can be read, or it does not match the model.
    """
    checkpointer = Checkpointer(directory, model)
    latest = os.path.join(checkpointer.directory, "latest")
    path = checkpoint_files.newest_intact(latest, checkpointer._warned, warn_when_none=False)
    if path is not None:
        return checkpointer._restore_path("latest", path)
    best = checkpoint_files.best_instead_of_latest(checkpointer.directory, checkpointer._warned)
    if best is None:  # no latest/ at all: a ModelCheckpoint(save_best_only=True) folder
        best = checkpoint_files.newest_intact(os.path.join(checkpointer.directory, "best"),
                                              checkpointer._warned, warn_when_none=False)
        if best is not None:
            epoch = int(tf.train.load_checkpoint(best).get_tensor(_EPOCH_KEY))
            warnings.warn(f"{latest} holds no checkpoint (ModelCheckpoint(save_best_only=True) "
                          f"writes only best/): restoring the best one, {best}, after epoch "
                          f"{epoch}; the fit resumes from there.", RuntimeWarning, stacklevel=2)
    return None if best is None else checkpointer._restore_path("best", best)


def resume_point(directory) -> int | None:
    """The epochs completed in the newest intact checkpoint of `directory/latest` (the
    folder holding `latest/`), read from the file (no model needed): the `initial_epoch` to
    pass to `fit`, or None when there is no checkpoint."""
    path = checkpoint_files.newest_intact(os.path.join(_check_directory(directory), "latest"))
    if path is None:
        return None
    return int(tf.train.load_checkpoint(path).get_tensor(_EPOCH_KEY))

"""Training a recipe into a run directory, and resuming an interrupted run.

A run's callbacks are the recipe's own, plus a `TensorBoard` writing `logs/` (with the resolved
recipe as text and its hyperparameters) and a `ModelCheckpoint` writing `checkpoints/latest`
and `checkpoints/best` after every epoch, unless the recipe lists its own. Relative paths in
callback arguments (`log_dir`, `filepath`, `filename`) are read inside the run directory.
`history.json` is rewritten after every epoch, so an interrupted run keeps its record, and
`resume` continues from the latest checkpoint (weights, optimizer slots, data order) to the
weights an uninterrupted run would reach.

Example (Python, the same as `graphfit train`):

    >>> import os, tempfile
    >>> import graphfit as gf
    >>> recipe = gf.recipes.recipe_from_text(
    ...     "data: {source: moons, n_samples: 200}\\n"
    ...     "model: [{type: Dense, units: 8, activation: relu}, {type: Dense, units: 1}]\\n"
    ...     "loss: {type: BinaryCrossentropy, from_logits: true}\\n"
    ...     "metrics: [accuracy]\\n"
    ...     "training: {epochs: 2}\\n", "moons.yaml", default_name="moons")
    >>> run = gf.recipes.train(recipe, run_dir=os.path.join(tempfile.mkdtemp(), "run"), verbose=0)
    >>> sorted(run.metrics)
    ['test', 'train', 'val']
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import warnings
from typing import Any

import numpy as np

from graphfit.callbacks.callback import Callback
from graphfit.core.log_values import scalar_logs
from graphfit.recipes.reading.problems import Position, Problem, RecipeError
from graphfit.recipes.reading.recipe import Recipe, load_recipe
from graphfit.recipes.running import (
    disk_faults,
    distribution,
    origins,
    run_directory,
    workers,
)
from graphfit.recipes.running.run_callbacks import (
    CHECKPOINTS,
    hyperparameters,
    run_callbacks,
    table_summary,
    trial_id,
)
from graphfit.recipes.running.runner import Prepared, prepare, sample_dtype, sample_shape
from graphfit.recipes.running.stream_loading import check_same_deal

__all__ = ["RunResult", "train", "resume", "hyperparameters", "trial_id",
           "checkpoint_folder"]



@dataclasses.dataclass
class RunResult:
    """What a training run produced: its directory, the final numbers and the trained model."""

    run_dir: str
    metrics: dict[str, dict[str, float]]
    history: dict[str, list]
    model: Any
    #: the 0-based epoch whose weights EarlyStopping restored (the final weights), or None
    restored_epoch: int | None = None
    #: the `graphfit.fitting.FitReport` of a curve-fit run (`fitting.run_report`), or None
    fit_report: Any = None


class _HistoryFile(Callback):
    """Rewrites history.json after every epoch (earlier epochs of a resumed run included).

    The file is a convenience copy: the record a resume trusts is the one saved inside the
    checkpoint it resumes from (`ModelCheckpoint.records`), so a kill between the two writes
    cannot shift the epochs.
    """

    def __init__(self, path: str, earlier: list[dict], writes: bool = True):
        super().__init__()
        self.path = path
        self.records = [dict(entry) for entry in earlier]
        self.writes = writes  # False on a worker other than the chief

    @property
    def history(self) -> dict[str, list]:
        return _history_of(self.records)

    def on_epoch_end(self, epoch, logs=None):
        self.records.append({key: float(value) for key, value in scalar_logs(logs).items()})
        self.write()

    def write(self) -> None:
        if not self.writes:
            return
        run_directory.write_json(self.path, {
            key: [v if v is not None and math.isfinite(v) else None for v in values]
            for key, values in self.history.items()})


class _StopWhenNotFinite(Callback):
    """Stops a recipe run at the end of the first epoch whose training loss is NaN or infinite:
    later epochs cannot recover, and the checkpoints skip them anyway.

    A non-finite validation or test loss says something about that data (NaN or inf that
    `training.check_finite: false` let through), not about training: it is warned about, once
    per key, and the run goes on to save its weights.
    """

    def __init__(self):
        super().__init__()
        self.epoch: int | None = None
        self._warned: set[str] = set()

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            if not key.endswith("loss") or math.isfinite(float(value)):
                continue
            if key.startswith(("val_", "test_")):
                self._warn(key, float(value), epoch)
                continue
            self.epoch = epoch
            self.model.stop_training = True
            return

    def _warn(self, key: str, value: float, epoch: int) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        split = "validation" if key.startswith("val_") else "test"
        warnings.warn(f"{key} is {value} after epoch {epoch + 1}, while training's loss is "
                      f"finite: the {split} data holds NaN or inf (training.check_finite: "
                      f"false lets them through). Training goes on.", stacklevel=2)


def _history_of(records: list[dict]) -> dict[str, list]:
    """{key: [value per epoch that has it]} from per-epoch logs (None for non-finite)."""
    history: dict[str, list] = {}
    for entry in records:
        for key, value in entry.items():
            history.setdefault(key, []).append(math.nan if value is None else value)
    return history


class TrainingFailed(RuntimeError):
    """Training went non-finite: no final weights were saved (exit code 1)."""


def _fit_into(run: str, prepared: Prepared, initial_epoch: int, verbose: int,
              earlier: list[dict], extra: tuple = ()) -> RunResult:
    """Trains and finishes the run; under several workers, a failed worker's error becomes
    a `WorkerLost` saying how to resume."""
    try:
        return _fit_and_finish(run, prepared, initial_epoch, verbose, earlier, extra)
    except workers.COLLECTIVE_ERRORS as error:
        strategy = prepared.strategy
        if workers.own_role(strategy) is None:
            raise
        chief = distribution.is_chief(strategy)
        folder = checkpoint_folder(prepared.recipe.config, run)
        from graphfit.saving import checkpoints

        saved = (checkpoints.resume_point(folder) or 0) if os.path.isdir(run) else None
        shown = run if chief or os.path.isdir(run) else workers.shown_run(None)
        raise workers.WorkerLost(workers.lost_worker_message(
            error, strategy, shown, shown, saved)) from None


def _is_dataset(data) -> bool:
    import tensorflow as tf

    return isinstance(data, tf.data.Dataset)


def _fit_and_finish(run: str, prepared: Prepared, initial_epoch: int, verbose: int,
                    earlier: list[dict], extra: tuple = ()) -> RunResult:
    config, model, splits = prepared.recipe.config, prepared.model, prepared.splits
    training = config["training"]
    x, y = splits.train if isinstance(splits.train, tuple) else (splits.train, None)
    monitor = "val_loss" if splits.val is not None else "loss"
    writes = distribution.is_chief(prepared.strategy)
    recorder = _HistoryFile(os.path.join(run, "history.json"), earlier, writes)
    stopper = _StopWhenNotFinite()
    model.nonfinite_step = None
    callbacks = run_callbacks(prepared.recipe, run, monitor, initial_epoch, writes,
                              table_summary(splits.table)) + list(extra)
    streamed = splits.steps_per_epoch is not None  # a dataset that repeats, read across epochs
    for callback in callbacks:
        if streamed and hasattr(callback, "save_input_position"):
            callback.save_input_position = True  # the batches of the epoch done
    steps = training.get("steps_per_epoch") or splits.steps_per_epoch
    if splits.start_at is not None:  # the stream starts where the restored position says
        from graphfit.saving.input_position import input_position

        position = input_position(model)
        position.replays = True
        splits.start_at(initial_epoch, int(position.batch.numpy()), steps)
    try:
        # a dataset (a stream, an image folder) was batched by training.batch_size already
        model.fit(x, y, batch_size=None if _is_dataset(x) else training["batch_size"],
                  epochs=training["epochs"],
                  verbose=verbose, callbacks=callbacks + [recorder, stopper],
                  validation_data=splits.val, test_data=splits.test,
                  shuffle=training["shuffle"],
                  # prepare() already ran every input check, the full-data NaN scan included.
                  check_finite=False, initial_epoch=initial_epoch,
                  test_freq=training.get("test_freq"),
                  steps_per_epoch=steps,
                  class_weight=splits.class_weight, sample_weight=splits.train_weight,
                  cache_frozen=training.get("cache_frozen", False))
    except Exception as error:
        found = splits.diagnose(error) if splits.diagnose is not None else None
        if found is None:
            raise
        raise DataFailed(_bad_data_message(run, prepared.recipe.config, found)) from error
    losses = recorder.history.get("loss") or [0.0]
    if (model.nonfinite_step is not None or stopper.epoch is not None
            or not math.isfinite(losses[-1])):
        raise TrainingFailed(_nonfinite_message(run, config, model, stopper.epoch))
    # EarlyStopping(restore_best_weights): the final weights are an earlier epoch's.
    restored = next((c.restored_epoch for c in callbacks
                     if getattr(c, "restored_epoch", None) is not None), None)
    if restored is not None and restored >= len(losses) - 1:
        restored = None  # the best epoch was the last: its weights are the final ones anyway
    result = _finish(run, prepared, recorder, restored)
    for callback in callbacks:  # the finished run's files are all written now
        if writes and hasattr(callback, "on_run_end"):
            callback.on_run_end(result)
    return result


class DataFailed(RuntimeError):
    """Training met a record it cannot read; the checkpoints saved before stay (exit 1)."""


def _bad_data_message(run: str, config: dict, found: Exception) -> str:
    """The bad record, and the last checkpoint the run can resume from once it is fixed."""
    from graphfit.saving import checkpoint_files

    folder = checkpoint_folder(config, run)
    good = checkpoint_files.newest_intact(os.path.join(folder, "latest"))
    state = (f"the last checkpoint, {good}, is intact: fix or remove the file, then "
             f"`graphfit train --resume {run}`" if good else
             "no checkpoint was written before it; fix or remove the file and train again")
    return f"training stopped at a record it cannot read: {found}. {state}"


def _nonfinite_message(run: str, config: dict, model, epoch: int | None) -> str:
    """Why the run failed, and which checkpoint (if any) holds its last good state."""
    from graphfit.saving import checkpoint_files, checkpoints

    where = (f" at step {model.nonfinite_step}" if model.nonfinite_step is not None
             else f" in epoch {epoch + 1}" if epoch is not None else "")
    folder = checkpoint_folder(config, run)
    good = [path for path in (checkpoint_files.newest_intact(os.path.join(folder, which))
                              for which in ("latest", "best")) if path]
    if good:
        state = f"the last good state is the checkpoint {good[0]} (after " \
                f"{checkpoints.resume_point(folder) or 0} epochs)" if good[0].startswith(
                    os.path.join(folder, "latest")) else f"the best state is {good[0]}"
    else:
        state = (f"no checkpoint was written (every epoch's loss was non-finite, so "
                 f"{folder} holds no good state)")
    # An optimizer that solves for its step length (LevenbergMarquardt) has no rate to lower.
    remedy = ("Lower the learning rate (or check the data and the loss)"
              if hasattr(model.optimizer, "learning_rate") else
              "Check the data (NaN or inf pass with training.check_finite: false) and the loss")
    return (f"the loss became non-finite{where}; training stopped there and no final weights "
            f"were saved: {state}. {remedy}, then train again")


def _finish(run: str, prepared: Prepared, recorder: _HistoryFile,
            restored_epoch: int | None = None) -> RunResult:
    """Writes the final files: metrics.json, then the final weights, whose index file marks
    the run finished (a kill before it leaves a run that `resume` finishes)."""
    model, splits = prepared.model, prepared.splits
    recorder.write()
    metrics = _final_metrics(recorder.history, restored_epoch)
    # The saved weights may be an earlier epoch's (EarlyStopping restores the best): the
    # final validation and test numbers are measured on them.
    batch_size = prepared.recipe.config["training"]["batch_size"]
    for stage, data in (("val", splits.val), ("test", splits.test)):
        if data is not None:
            sx, sy = data if isinstance(data, tuple) else (data, None)
            batch_size = batch_size if isinstance(data, tuple) else None  # batched already
            # Checked when the data loaded, as training.check_finite says (as for fit).
            metrics[stage] = scalar_logs(model.evaluate(
                sx, sy, batch_size=batch_size, stage=stage,
                verbose=0, return_dict=True, check_finite=False))
    from graphfit import plots  # matplotlib loads only when drawing

    # The test split's predicted classes, for the confusion matrix: under several workers
    # predicting is a collective, so every worker takes part; the chief draws.
    labels = plots.labels_of_split(model, splits.test)
    if not recorder.writes:  # a worker other than the chief: the chief writes the files
        return RunResult(run, metrics, recorder.history, model, restored_epoch)
    run_directory.write_json(os.path.join(run, "metrics.json"), _finite_or_null(metrics))
    fit_report = _write_fit_report(run, model, splits.train, splits.train_weight,
                                   prepared.recipe.config["training"]["absolute_sigma"])
    model.save_weights(os.path.join(run, run_directory.CHECKPOINT))
    if os.path.basename(os.path.dirname(run)) == prepared.recipe.config["name"]:
        run_directory.update_latest(run)  # runs/<name>/latest -> this run
    # Last, once the run is complete: learning_curves.png, and confusion_matrix.png of the
    # test split for a classifier (a warning, not a failure, without matplotlib).
    plots.plot_finished_run(run, model, labels=labels,
                            class_names=splits.class_names or splits.record.get("class_names"))
    return RunResult(run, metrics, recorder.history, model, restored_epoch, fit_report)


def _write_fit_report(run: str, model, train, sample_weight=None,
                      absolute_sigma: bool = False):
    """fit_report.json / .txt (and fitted_curve.json) of a curve-fit run, else None; a report
    that cannot be computed warns instead of failing a run that trained well. The training
    rows' sample weights (a table's `sample_weight` column, read as 1/σ²) weigh the report
    as they weighed the fit; `absolute_sigma` (`training.absolute_sigma`) reads them as
    known errors."""
    from graphfit.fitting import run_report

    x, y = train if isinstance(train, tuple) else (train, None)
    if not run_report.is_curve_fit(model, x, y):
        return None
    try:
        return run_report.write_run_report(run, model, x, y, sample_weight=sample_weight,
                                           absolute_sigma=absolute_sigma)
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as error:
        warnings.warn(f"no fit report for {run}: {error}", stacklevel=2)
        return None


def _finite_or_null(metrics: dict) -> dict:
    """JSON has no NaN or Infinity: write them as null."""
    return {stage: {k: (v if math.isfinite(v) else None) for k, v in values.items()}
            for stage, values in metrics.items()}


def train(recipe: Recipe, run_dir: str | None = None, verbose: int = 2,
          runs_root: str = "runs", callbacks=()) -> RunResult:
    """Trains a recipe into a new run directory (see `graphfit.recipes.running.run_directory`).

    Args:
        recipe: a loaded `Recipe`.
        run_dir: where to write the run (default: the recipe's `run_dir`, else
            `<runs_root>/<name>/<timestamp>`). It must not hold files yet.
        verbose: 0 silent, 1 progress bar, 2 one line per epoch.
        callbacks: more callbacks for this run, after the recipe's (a search's pruning,
            a tracker); a callback with `on_run_end(result)` is called with the `RunResult`
            once the run's files are all written.

    Raises:
        RecipeError: for anything wrong with the recipe, before any training.
    """
    prepared = prepare(recipe)
    config, splits = recipe.config, prepared.splits
    workers.check_same_training(recipe, splits, prepared.strategy, initial_epoch=0)
    if not distribution.is_chief(prepared.strategy):
        return _train_as_worker(prepared, run_dir or config["run_dir"])
    wanted = run_dir or config["run_dir"]
    existed = wanted is not None and os.path.isdir(os.path.expanduser(wanted))
    try:
        lock = run_directory.claim_new_run(config["name"], wanted, runs_root)
    except (ValueError, OSError) as error:
        where = (Position(f"--run-dir {run_dir}", 0, 0) if run_dir
                 else recipe.position(("run_dir",)))
        raise RecipeError([Problem(() if run_dir else ("run_dir",), str(error), where)]) \
            from None
    try:
        with lock:
            return _train_into(lock.run, prepared, verbose, tuple(callbacks))
    except Exception as error:
        _discard_unstarted(lock.run, existed)
        kept = lock.run if os.path.isdir(lock.run) and not existed else None
        fault = disk_faults.describe(error, kept)
        if fault:
            raise disk_faults.DiskFault(fault) from error
        raise


def _train_into(run: str, prepared: Prepared, verbose: int, extra: tuple = ()) -> RunResult:
    """Writes the run's record (recipe, versions, preprocessing), then trains into it."""
    recipe, splits = prepared.recipe, prepared.splits
    config = recipe.config
    run_directory.write_yaml(os.path.join(run, "recipe.yaml"), config)
    run_directory.write_yaml(os.path.join(run, "overrides.yaml"), list(recipe.overrides))
    run_directory.write_json(os.path.join(run, "versions.json"), run_directory.versions())
    run_directory.record_user_modules(run, config, recipe.source)
    run_directory.write_json(os.path.join(run, "preprocessing.json"), {
        "input_shape": sample_shape(prepared.model),
        "input_dtype": sample_dtype(prepared.model),
        "feature_names": splits.feature_names,
        "standardize": splits.standardizer.to_json() if splits.standardizer else None,
        **splits.record,
        **({"table": splits.table} if splits.table is not None else {}),
    })
    with origins.reported(recipe, before_training=False):
        return _fit_into(run, prepared, 0, verbose, [], extra)


def _discard_unstarted(run: str, existed: bool) -> None:
    """A run that failed before its first epoch ended has nothing to keep or resume: its
    folder goes (emptied only, when it was an existing empty `--run-dir`), so no half-made
    run is left behind to be mistaken for one."""
    import shutil

    if os.path.exists(os.path.join(run, "history.json")) or run_directory.holds_checkpoint(run):
        return  # an epoch ended: the run keeps what it wrote (resume continues it)
    if not existed:
        shutil.rmtree(run, ignore_errors=True)
        return
    for name in os.listdir(run) if os.path.isdir(run) else []:
        full = os.path.join(run, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(full)


def _train_as_worker(prepared: Prepared, run_dir: str | None) -> RunResult:
    """A worker other than the chief: the same training, silent, writing no file."""
    print(workers.notice(prepared.strategy, run_dir), file=sys.stderr)
    run = workers.shown_run(run_dir)
    return _fit_into(run, prepared, 0, 0, [])


def resume(run: str, epochs: int | None = None, verbose: int = 2,
           distribute=(), dtype: str | None = None) -> RunResult:
    """Continues an interrupted run from its latest intact checkpoint, or finishes a run
    killed after its last epoch but before its final files.

    The run directory is locked meanwhile; the history is the one saved in the checkpoint
    resumed from.

    Args:
        run: the run directory.
        epochs: train up to this many epochs in all (default: the recipe's).
        distribute: `distribute...=value` overrides (["distribute=null"]: continue on one
            device); a checkpoint loads under any strategy. Not recorded in the run.
        dtype: another dtype policy with the same variable dtype (float32 and the mixed
            policies: the checkpoint holds float32 variables under each); recorded in the
            run's recipe and overrides.

    Raises:
        ValueError: if `run` has no checkpoint to resume from, or is already complete.
        RunBusy: (a ValueError) if another process is writing the run.
    """
    # The concrete run: `runs/<name>/latest` is a link, which the finished run would
    # otherwise point at itself.
    run = os.path.realpath(os.path.abspath(os.path.expanduser(run)))
    recipe_file = run_directory.read_recipe(run)
    if not os.path.isfile(recipe_file):
        raise ValueError(f"{run} is not a graphfit run directory (it has no recipe.yaml)")
    run_directory.check_writable(run)  # before anything is loaded, locked or written
    overrides = _resume_overrides(recipe_file, epochs, dtype)
    where = list(distribute)
    if not distribution.is_chief(distribution.start_early(recipe_file, overrides + where)):
        # Another worker than the chief: it reads the run (the chief locks and writes it).
        run_directory.use_recorded_modules(run)
        return _resume_locked(run, recipe_file, overrides, verbose, where)
    with run_directory.lock_run(run):
        run_directory.use_recorded_modules(run)
        return _resume_locked(run, recipe_file, overrides, verbose, where)


def _resume_overrides(recipe_file: str, epochs: int | None, dtype: str | None) -> list[str]:
    """The overrides a resume records: the epochs, and a policy whose variables are of the
    dtype the checkpoint holds."""
    overrides = [f"training.epochs={epochs}"] if epochs is not None else []
    if dtype is None:
        return overrides
    from graphfit.core.dtype_policy import dtype_policy

    recorded = run_directory.read_yaml(recipe_file, dict).get("training", {}).get("dtype",
                                                                                 "float32")
    wanted = dtype_policy(dtype, "training.dtype")
    if wanted.variable_dtype != dtype_policy(recorded).variable_dtype:
        raise ValueError(
            f"--set training.dtype={dtype}: the run trained with training.dtype={recorded}, "
            f"whose checkpoint holds {dtype_policy(recorded).variable_dtype.name} variables; "
            f"a resumed run may switch only between float32, mixed_bfloat16 and "
            f"mixed_float16 (all keep float32 variables)")
    return overrides + [f"training.dtype={dtype}"]


def _resume_locked(run: str, recipe_file: str, overrides: list[str],
                   verbose: int, where: list) -> RunResult:
    from graphfit.saving import checkpoints

    recipe = load_recipe(recipe_file, overrides + where)
    folder = checkpoint_folder(recipe.config, run)
    record = os.path.join(run, "preprocessing.json")  # the statistics it trained with
    record = run_directory.read_json(record) if os.path.isfile(record) else None
    prepared = prepare(recipe, record=record)
    # A stream dealt among another number of workers would repeat and skip records.
    check_same_deal((record or {}).get("stream_deal"),
                    prepared.splits.record.get("stream_deal"), run)
    state = checkpoints.restore_latest(prepared.model, folder)
    if state is None:
        raise ValueError(f"the run {run} has no intact checkpoint in {folder}/latest to resume "
                         f"from (it stopped before its first epoch ended, its loss was "
                         f"non-finite from the start, or its ModelCheckpoint has "
                         f"save_best_only); train it again instead")
    workers.check_same_training(recipe, prepared.splits, prepared.strategy, state["epoch"])
    total = recipe.config["training"]["epochs"]
    finished = os.path.isfile(os.path.join(run, run_directory.CHECKPOINT + ".index"))
    if state["epoch"] >= total and finished:
        raise ValueError(f"the run {run} has already trained {state['epoch']} epochs (its "
                         f"recipe asks for {total}); give --set training.epochs=N with "
                         f"N > {state['epoch']} to train longer")
    earlier = _earlier_records(run, state)
    if state["epoch"] >= total:
        # Killed after its last checkpoint, before its final files: finish it.
        return _finish(run, prepared, _HistoryFile(os.path.join(run, "history.json"), earlier,
                                                   distribution.is_chief(prepared.strategy)))
    _warn_stateful_callbacks(recipe.config)
    if not distribution.is_chief(prepared.strategy):
        print(workers.notice(prepared.strategy, run), file=sys.stderr)
        verbose = 0
    elif overrides:  # recorded with the strategy the run was written for
        recorded_where = run_directory.read_yaml(recipe_file, dict).get("distribute")
        run_directory.write_yaml(recipe_file, {**recipe.config, "distribute": recorded_where})
        overrides_file = os.path.join(run, "overrides.yaml")
        recorded = (run_directory.read_yaml(overrides_file)
                    if os.path.isfile(overrides_file) else []) or []
        run_directory.write_yaml(overrides_file, recorded + overrides)
    try:
        with origins.reported(recipe, before_training=False):
            return _fit_into(run, prepared, state["epoch"], verbose, earlier)
    except Exception as error:
        fault = disk_faults.describe(error, run)
        if fault:
            raise disk_faults.DiskFault(fault) from error
        raise


def _earlier_records(run: str, state: dict) -> list[dict]:
    """The per-epoch logs up to the checkpoint resumed from: saved in it; for checkpoints
    without them, history.json cut at its epoch (test numbers dropped: they are per-run)."""
    epoch, records = state["epoch"], state.get("records")
    if records is not None and len(records) >= epoch and all(records[:epoch]):
        return [dict(entry) for entry in records[:epoch]]
    path = os.path.join(run, "history.json")
    history = run_directory.read_json(path) if os.path.isfile(path) else {}
    return [{key: values[index] for key, values in history.items()
             if not key.startswith("test_") and index < len(values)} for index in range(epoch)]


__all__ += ["TrainingFailed", "DataFailed"]


def checkpoint_folder(config: dict, run: str) -> str:
    """Where this run's ModelCheckpoint writes: the recipe's own, or checkpoints/."""
    for entry in config["callbacks"]:
        if entry.get("type") == "ModelCheckpoint" and isinstance(entry.get("filepath"), str):
            return os.path.join(run, entry["filepath"])  # join keeps an absolute path
    return os.path.join(run, CHECKPOINTS)


def _warn_stateful_callbacks(config: dict) -> None:
    stateful = [e.get("type") for e in config["callbacks"]
                if e.get("type") in ("EarlyStopping", "ReduceLROnPlateau")]
    if stateful:
        import warnings
        warnings.warn(f"{', '.join(stateful)} start afresh on resume (their patience counters "
                      f"and best values are not checkpointed), so the resumed run may stop or "
                      f"lower the learning rate at other epochs than an uninterrupted one.",
                      stacklevel=3)


def _final_metrics(history: dict, epoch: int | None = None) -> dict[str, dict[str, float]]:
    """The training numbers of the epoch whose weights are saved: the last one's, or
    `epoch`'s (0-based) when EarlyStopping restored an earlier epoch's weights (val and test
    are measured on the saved weights)."""
    train = {key: values for key, values in history.items()
             if values and not key.startswith(("val_", "test_"))}
    if epoch is not None and all(len(values) > epoch for values in train.values()):
        return {"train": {key: float(values[epoch]) for key, values in train.items()}}
    return {"train": {key: float(values[-1]) for key, values in train.items()}}

"""The Python side of `fit`, `evaluate` and `predict`: epochs, stages, chunks and callbacks.

Everything per batch happens inside the compiled loops (`compiled_steps`); this module runs
once per chunk of steps: it asks the feed for the next chunk, calls the loop, times it, and
tells the callbacks. The data is made ready for the first step in `stage_data`.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import tensorflow as tf

from graphfit.callbacks import CallbackList
from graphfit.core import validation
from graphfit.saving import checkpoints
from graphfit.saving.input_position import input_position
from graphfit.saving.random_state import random_state
from graphfit.training import distribution
from graphfit.training.batch_hooks import HookSchedule
from graphfit.training.feeds import make_feed, refuse_python_iterators
from graphfit.training.stage_data import (
    eval_feed,
    first_batches,
    prepare,
    require_loss,
    stage_data,
)
from graphfit.training.stage_metrics import reset_model_metrics, stage_prefix

__all__ = ["fit", "evaluate", "predict", "run_stage"]


def run_stage(model, state, stage: str, feed, epoch: int, callbacks: CallbackList,
              skip: int = 0) -> dict:
    """Runs one pass of `stage` over `feed`; returns the stage's results (unprefixed).

    Training keeps the model's input position (`saving.input_position`) current: the
    batches of the epoch done, and the dataset's iterator; `skip` batches were done before
    (a fit resumed mid-epoch: a restored iterator already stands after them).

    The batch hooks are called once per execution of `steps_per_execution` batches, and
    `model.stop_training` (training) or `model.stop_evaluating` (evaluation), set by a
    callback, ends the pass after the execution, as in Keras.

    Raises:
        ValueError: when the data yields no batch, or a dataset batch fails its checks.
    """
    metrics = state.stage_metrics[stage]
    metrics.reset()
    reset_model_metrics(model, state.stage_metrics)  # a custom step's own, as in Keras
    training = stage == "train"
    sizer = state.sizers[stage]
    hooks = _hook_schedule(callbacks, stage, sizer.setting)
    one_at_a_time = callbacks.wants_every_batch("train" if training else "test")
    sizes = hooks.aligned(distribution.chunk_sizes(state.strategy, sizer, one_at_a_time))
    capacity = sizer.capacity(feed.steps, one_at_a_time)
    # Reading the metrics of several workers is a collective: every worker reads them after
    # every chunk, whether its own callbacks want them or not (the chief's progress bar does).
    read_each_chunk = hooks.enabled or distribution.is_multi_worker(state.strategy)
    iterator = feed.epoch_iterator() if feed.is_dataset else None
    position = input_position(model) if training else None
    if position is not None and iterator is not None:
        position.track(iterator)  # unless the data replays its position
    total, results = 0, {}
    for chunk in feed.chunks(epoch, sizes, skip):
        hooks.chunk_begins(chunk.first_batch)
        started = time.perf_counter()
        if feed.is_dataset:
            ran, iterator = _run_dataset_chunk(state.steps, stage, feed, chunk, iterator)
        else:  # a pass's last, smaller batch runs as a chunk of its own
            full = chunk.index_batches.shape[1] == feed.batch_size
            ran = state.steps.run_arrays(stage, stage_data(feed), chunk.index_batches,
                                         capacity if full else 1)
        if feed.is_dataset or chunk.index_batches.shape[1] == feed.batch_size:
            sizer.record(ran, time.perf_counter() - started)
        total += ran
        if position is not None:
            position.batch.assign(skip + total)
        if ran and read_each_chunk:
            results = metrics.results()
        ended = hooks.chunk_ran(chunk.first_batch, ran, results)
        converged = training and ran and _ask_optimizer_to_stop(model, state.optimizer)
        stop = model.stop_training if training else model.stop_evaluating
        if ran < chunk.num_batches or converged or (stop and (ended or not hooks.enabled)):
            break
    hooks.close(results)
    if not total and not skip:
        raise ValueError(f"{feed.names[0]} yielded no batches: there is nothing to {stage} on.")
    if feed.is_dataset and feed.steps is None:
        feed.steps = total  # learned on the first pass: the progress bar can show a total
    return metrics.results()


def _hook_schedule(callbacks, stage: str, setting) -> HookSchedule:
    """When `stage`'s batch hooks are called (see `batch_hooks`)."""
    if stage == "train":
        return HookSchedule(callbacks.on_train_batch_begin, callbacks.on_train_batch_end,
                            setting, callbacks.needs_train_batch_hooks)
    return HookSchedule(lambda batch: callbacks.on_test_batch_begin(batch, stage=stage),
                        lambda batch, logs: callbacks.on_test_batch_end(batch, logs, stage=stage),
                        setting, callbacks.needs_test_batch_hooks)


def _run_dataset_chunk(steps, stage, feed, chunk, iterator):
    """Runs one chunk of a dataset; returns (steps run, the iterator to go on with). A
    dataset that runs out ends the epoch (the next one starts a new pass, as in Keras)."""
    ran = steps.run_dataset(stage, iterator, chunk.num_batches, chunk.first_batch,
                            feed.per_worker)
    feed.record(ran, chunk.num_batches)
    return ran, iterator


def _ask_optimizer_to_stop(model, optimizer) -> bool:
    """Stops training when the optimizer asks (LevenbergMarquardt converged), saying why;
    returns whether it asked."""
    reason = optimizer.stop_reason() if optimizer is not None else None
    if reason:
        model.stop_training = True
        model.stop_reason = reason
    return bool(reason)


def _evaluate_stage(model, state, stage, feed, epoch, callbacks) -> dict:
    model.stop_evaluating = False  # Keras's flag, about this evaluation
    callbacks.on_test_begin(stage=stage)
    logs = run_stage(model, state, stage, feed, epoch, callbacks)
    callbacks.on_test_end(logs, stage=stage)
    return logs


def _prefixed(stage: str, logs: dict) -> dict:
    return {stage_prefix(stage) + key: value for key, value in logs.items()}


def _layer_counters(model) -> dict[str, int]:
    """The running totals layers report at each epoch's end (`Layer.epoch_counters`)."""
    counters: dict[str, int] = {}
    for layer in model.flatten_layers(include_self=False):
        counters.update(layer.epoch_counters())
    return counters


def _check_fit_arguments(epochs, initial_epoch, validation_freq, test_freq, shuffle,
                         **steps) -> None:
    validation.non_negative_int("epochs", epochs)  # 0 trains nothing, as Keras
    _check_validation_freq(validation_freq)
    if shuffle not in (True, False, "batch"):
        raise validation.invalid("shuffle", shuffle, "True, False or 'batch'")
    validation.positive_int("test_freq", test_freq, allow_none=True)
    for name, value in steps.items():
        validation.positive_int(name, value, allow_none=True)
    # initial_epoch >= epochs trains nothing, as Keras (a finished run resumed).
    if not isinstance(initial_epoch, (int, np.integer)) or initial_epoch < 0:
        raise ValueError(
            f"initial_epoch must be an integer >= 0. Received: initial_epoch={initial_epoch!r}")


def _check_validation_freq(validation_freq) -> None:
    """An int (every so many epochs) or a list of the epochs to validate after, counted
    from 1 (Keras's two forms)."""
    if isinstance(validation_freq, (list, tuple)):
        if not all(validation.is_integer(e) and e >= 1 for e in validation_freq):
            raise validation.invalid("validation_freq", validation_freq,
                                     "a positive integer or a list of epochs counted from 1")
        return
    validation.positive_int("validation_freq", validation_freq)


def _validates_after(epoch: int, validation_freq) -> bool:
    """Whether the epoch `epoch` (counted from 0) ends with a validation (Keras's rule)."""
    if isinstance(validation_freq, (list, tuple)):
        return epoch + 1 in validation_freq
    return (epoch + 1) % validation_freq == 0


def _shuffle_seed(state, state_of_fit, initial_epoch: int) -> int:
    """A new seed for the epochs' sample orders; a resumed fit (initial_epoch > 0) keeps the
    saved one, so its epochs shuffle exactly as those of an uninterrupted fit."""
    seed = int(state_of_fit.shuffle_seed.numpy())
    if initial_epoch == 0 or seed < 0:
        seed = int(np.random.randint(0, 2**31 - 1))
    return distribution.agreed_seed(state.strategy, seed)


def _fit_feeds(model, x, y, sample_weight, *, batch_size, shuffle, steps_per_epoch, seed,
               validation_data, validation_batch_size, validation_steps, test_data,
               test_steps, check_finite) -> dict:
    """The feeds of fit's stages ("train", "val", "test"; None for a stage without data)."""
    validation.positive_int("validation_batch_size", validation_batch_size, allow_none=True)
    return {"train": make_feed(model, x, y, sample_weight, batch_size=batch_size,
                               shuffle=shuffle, steps=steps_per_epoch,
                               check_finite=check_finite, seed=seed),
            "val": eval_feed(model, validation_data, "validation_data",
                             validation_batch_size or batch_size, validation_steps,
                             check_finite),
            "test": eval_feed(model, test_data, "test_data", batch_size, test_steps,
                              check_finite)}


def _start_after_callbacks(state_of_fit, train_feed) -> int:
    """The epoch the fit starts at once `on_train_begin` ran: a callback that restored an
    interrupted fit (`BackupAndRestore`, as Keras's sets `model._initial_epoch`) left the
    fit state it saved, whose epoch and shuffle seed the fit carries on from."""
    if not train_feed.is_dataset:  # a dataset shuffles itself
        train_feed.seed = int(state_of_fit.shuffle_seed.numpy())
    return int(state_of_fit.epoch.numpy())


def fit(model, x, y, *, batch_size, epochs, verbose, callbacks, validation_data, test_data,
        shuffle, initial_epoch, sample_weight, steps_per_epoch, validation_steps, test_steps,
        validation_freq, test_freq, check_finite, validation_batch_size=None):
    """`Model.fit` (see its docstring)."""
    state = model.compiled_for("fit")
    default_step = require_loss(model, state, "train")
    verbose = validation.verbosity(verbose, allow_auto=True)
    _check_fit_arguments(epochs, initial_epoch, validation_freq, test_freq, shuffle,
                         steps_per_epoch=steps_per_epoch, validation_steps=validation_steps,
                         test_steps=test_steps)
    refuse_python_iterators(x, "x")
    if y is None and default_step and state.loss_set is not None and not isinstance(
            x, tf.data.Dataset):
        raise ValueError("fit() needs labels: pass y, or a tf.data.Dataset of (x, y) batches.")
    state_of_fit = checkpoints.fit_state(model)
    seed = _shuffle_seed(state, state_of_fit, initial_epoch)
    feeds = _fit_feeds(model, x, y, sample_weight, batch_size=batch_size, shuffle=shuffle,
                       steps_per_epoch=steps_per_epoch, seed=seed,
                       validation_data=validation_data,
                       validation_batch_size=validation_batch_size,
                       validation_steps=validation_steps, test_data=test_data,
                       test_steps=test_steps, check_finite=check_finite)
    for stage, feed in feeds.items():
        if feed is not None:
            prepare(model, state, feed, stage)
    # Built now: the seeds its Keras layers made when built join the model's random state,
    # filled by a checkpoint restored before (`saving.random_state`).
    random_state(model)
    # The optimizer's own first (`fit_callbacks`: the end-of-fit finalization of use_ema).
    own = state.optimizer.fit_callbacks() if state.optimizer is not None else []
    callbacks = CallbackList(
        [*own, callbacks], model=model, add_history=True, add_progress_bar=verbose > 0,
        verbose=verbose,
        params={"epochs": epochs, "steps": feeds["train"].steps, "verbose": verbose})
    model.stop_training = False
    model.stop_reason = None  # a reason is about the fit that set it
    state_of_fit.shuffle_seed.assign(seed)
    state_of_fit.epoch.assign(initial_epoch)
    callbacks.on_train_begin()
    train = feeds["train"]
    initial_epoch = _start_after_callbacks(state_of_fit, train)
    # Once, so a resumed fit's steps are those of an unbroken one.
    state.steps.expect_fit(None if train.is_dataset else train.batch_size,
                           train.batches_per_pass)
    skip = int(input_position(model).batch.numpy())  # a restored mid-epoch checkpoint's
    try:
        logs, epoch, tested = _epochs(model, state, feeds, callbacks, initial_epoch, epochs,
                                      validation_freq, test_freq, skip)
    finally:  # steps outside fit (model.train_step) are passes of their own
        state.steps.expect_fit(None if train.is_dataset else train.batch_size, None)
        input_position(model).batch.assign(0)
        input_position(model).forget()
    restored = callbacks.restore_final_weights()
    if feeds["test"] is not None and initial_epoch < epochs and (tested != epoch or restored):
        # Training stopped early, or a callback restored other weights: the test numbers
        # must describe the final weights.
        logs.update(_prefixed("test", _evaluate_stage(model, state, "test", feeds["test"],
                                                      epoch, callbacks)))
    callbacks.on_train_end(logs)
    return callbacks.history


def _epochs(model, state, feeds, callbacks, initial_epoch, epochs, validation_freq,
            test_freq, skip=0):
    """Runs the epochs, the first from batch `skip`; returns (the last epoch's logs, the
    last epoch, the last tested)."""
    logs: dict = {}
    tested = None
    epoch = initial_epoch
    for epoch in range(initial_epoch, epochs):
        callbacks.on_epoch_begin(epoch)
        logs = run_stage(model, state, "train", feeds["train"], epoch, callbacks,
                         skip if epoch == initial_epoch else 0)
        if feeds["val"] is not None and _validates_after(epoch, validation_freq):
            logs.update(_prefixed("val", _evaluate_stage(model, state, "val", feeds["val"],
                                                         epoch, callbacks)))
        # A callback that chooses the kept weights (EarlyStopping's restore_best_weights)
        # does so once the epochs end: the last test waits for them.
        last = epoch == epochs - 1
        periodic = test_freq and (epoch + 1) % test_freq == 0
        if (feeds["test"] is not None and (last or periodic)
                and not (last and callbacks.restores_weights)):
            logs.update(_prefixed("test", _evaluate_stage(model, state, "test", feeds["test"],
                                                          epoch, callbacks)))
            tested = epoch
        logs.update(_layer_counters(model))
        checkpoints.fit_state(model).epoch.assign(epoch + 1)  # before callbacks save it
        input_position(model).batch.assign(0)
        callbacks.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    return logs, epoch, tested


def evaluate(model, x, y, *, batch_size, verbose, sample_weight, steps, callbacks, return_dict,
             stage, check_finite):
    """`Model.evaluate` (see its docstring)."""
    state = model.compiled_for("evaluate")
    default_step = require_loss(model, state, stage if stage in ("val", "test") else "test")
    if stage not in ("val", "test"):
        raise ValueError(f"stage must be 'val' or 'test'. Received: stage={stage!r}")
    verbose = validation.verbosity(verbose, allow_auto=True)
    refuse_python_iterators(x, "x")
    if y is None and default_step and state.loss_set is not None and not isinstance(
            x, tf.data.Dataset):
        raise ValueError("evaluate() needs labels: pass y, or a tf.data.Dataset of (x, y) batches.")
    validation.positive_int("steps", steps, allow_none=True)
    feed = first_batches(make_feed(model, x, y, sample_weight, batch_size=batch_size,
                                   steps=steps, check_finite=check_finite,
                                   steps_argument="steps"), steps, "steps")
    prepare(model, state, feed, stage)
    callbacks = CallbackList(callbacks, model=model, add_progress_bar=verbose > 0,
                             verbose=verbose,
                             params={"epochs": 1, "steps": feed.steps, "verbose": verbose})
    logs = _evaluate_stage(model, state, stage, feed, 0, callbacks)
    return logs if return_dict else state.stage_metrics[stage].as_keras_list(logs)


def predict(model, x, *, batch_size, verbose, steps, callbacks):
    """`Model.predict` (see its docstring)."""
    validation.positive_int("steps", steps, allow_none=True)
    dataset = isinstance(x, tf.data.Dataset)
    feed = first_batches(make_feed(model, x, batch_size=None if dataset else batch_size,
                                   steps=steps, check_finite=False, steps_argument="steps"),
                         steps, "steps")
    state = model.state_for_predict()
    prepare(model, state, feed, "predict")
    verbose = validation.verbosity(verbose, allow_auto=True)
    callbacks = CallbackList(callbacks, model=model, add_progress_bar=verbose > 0,
                             verbose=verbose,
                             params={"epochs": 1, "steps": feed.steps, "verbose": verbose})
    model.stop_predicting = False  # Keras's flag, about this prediction
    callbacks.on_predict_begin()
    parts = _predict_chunks(model, state, feed, callbacks)
    callbacks.on_predict_end()
    flat = [np.concatenate(column) for column in zip(*parts)]
    if not flat or not len(flat[0]):
        raise ValueError(f"{feed.names[0]} yielded no batches: there is nothing to predict.")
    return tf.nest.pack_sequence_as(model.output_spec, flat)


def _predict_chunks(model, state, feed, callbacks) -> list[list[np.ndarray]]:
    """Runs `predict`'s chunks, calling the batch hooks once per execution with the
    execution's outputs (`{"outputs": ...}`, as Keras), until the data ends or a callback
    sets `model.stop_predicting`. Returns each chunk's outputs, flat."""
    sizer, parts, execution = state.sizers["predict"], [], []

    def begin(batch):
        execution.clear()
        callbacks.on_predict_batch_begin(batch)

    def end(batch, _):
        outputs = [np.concatenate(column) for column in zip(*execution)]
        callbacks.on_predict_batch_end(
            batch, {"outputs": tf.nest.pack_sequence_as(model.output_spec, outputs)})

    hooks = HookSchedule(begin, end, sizer.setting, callbacks.needs_predict_batch_hooks)
    sizes = hooks.aligned(distribution.chunk_sizes(state.strategy, sizer,
                                                   callbacks.wants_every_batch("predict")))
    if feed.is_dataset and not hooks.enabled:
        sizes = itertools.repeat(2**31 - 1)  # nobody listens: one call reads the dataset
    iterator = feed.epoch_iterator() if feed.is_dataset else None
    for chunk in feed.chunks(0, sizes):
        hooks.chunk_begins(chunk.first_batch)
        started = time.perf_counter()
        if feed.is_dataset:
            ran, outputs = state.steps.predict_dataset(iterator, chunk.num_batches,
                                                       chunk.first_batch)
        else:
            ran = chunk.num_batches
            outputs = state.steps.predict_arrays(feed.tensors()[0], chunk.index_batches)
        if feed.is_dataset or chunk.index_batches.shape[1] == feed.batch_size:
            sizer.record(ran, time.perf_counter() - started)
        if ran:
            parts.append([o.numpy() for o in outputs])
            execution.append(parts[-1])
        ended = hooks.chunk_ran(chunk.first_batch, ran, {})
        if ran < chunk.num_batches or (model.stop_predicting and (ended or not hooks.enabled)):
            break
    hooks.close({})
    return parts

"""The Python side of `fit`, `evaluate` and `predict`: epochs, stages, chunks and callbacks.

Everything per batch happens inside the compiled loops (`compiled_steps`); this module runs
once per chunk of steps: it asks the feed for the next chunk, calls the loop, times it, and
tells the callbacks.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import tensorflow as tf

from graphfit.callbacks import CallbackList
from graphfit.core import validation
from graphfit.saving import checkpoints
from graphfit.training.compiled_steps import overrides_step
from graphfit.training.feeds import make_feed
from graphfit.training.frozen_cache import check_cache_frozen, start_cached_fit
from graphfit.training.input_checks import OptimizerMismatch
from graphfit.training.stage_metrics import stage_prefix

__all__ = ["fit", "evaluate", "predict", "is_multi_worker", "agreed_seed", "MULTI_WORKER_CHUNK"]


def _split(data, argument: str):
    """validation_data / test_data: a Dataset, (x, y) or (x, y, sample_weight)."""
    if data is None or isinstance(data, tf.data.Dataset):
        return data, None, None
    if isinstance(data, (list, tuple)) and len(data) in (2, 3):
        return data[0], data[1], data[2] if len(data) == 3 else None
    raise ValueError(
        f"{argument} must be a tf.data.Dataset, (x, y) or (x, y, sample_weight). Received a "
        f"{type(data).__name__}" + (f" of length {len(data)}" if hasattr(data, "__len__") else "")
        + "."
    )


def _layer_counters(model) -> dict[str, int]:
    """The running totals layers report at each epoch's end (`Layer.epoch_counters`)."""
    counters: dict[str, int] = {}
    for layer in model.flatten_layers(include_self=False):
        counters.update(layer.epoch_counters())
    return counters


def _eval_feed(model, data, argument, batch_size, steps, check_finite):
    x, y, sample_weight = _split(data, argument)
    if x is None:
        return None
    steps_argument = "validation_steps" if argument == "validation_data" else "test_steps"
    feed = make_feed(
        model, x, y, sample_weight,
        batch_size=None if isinstance(x, tf.data.Dataset) else batch_size,
        steps=steps, check_finite=check_finite, names=(f"{argument}[0]", f"{argument}[1]"),
        steps_argument=steps_argument,
    )
    return _first_batches(feed, steps, steps_argument)


def _first_batches(feed, steps, steps_argument):
    """An evaluation or a prediction over arrays runs their first `steps` batches every time
    (Keras's count); a dataset's iterator carries on (see `DatasetFeed`)."""
    if steps is not None and not feed.is_dataset:
        feed.keep_first_batches(steps, steps_argument)
    return feed


def _prepare(model, state, feed, stage: str) -> None:
    """`CompileState.prepare`, then the labels checked against the outputs; before any step."""
    state.prepare(model, feed)
    state.check_labels(model, feed, stage)
    if stage == "train" and state.optimizer is not None and not overrides_step(model,
                                                                             "train_step"):
        # What the optimizer cannot minimise is refused now, not at the first step's trace.
        weights = None if feed.is_dataset else feed.sample_weight
        try:
            state.optimizer.check_training(state.loss_set.losses, state.strategy is not None,
                                           weights)
        except ValueError as error:
            raise OptimizerMismatch(str(error)) from None
    if not feed.is_dataset:  # the layers' checks of every batch, before any step
        state.steps.check_arrays(stage, _stage_data(feed), feed.batches_in_order(),
                                 feed.names[0])


def _require_loss(model, state, stage: str) -> bool:
    """The default steps need the compiled loss; an overridden step computes its own.
    Returns whether the stage runs the default step."""
    step = "train_step" if stage == "train" else "test_step"
    default = not overrides_step(model, step)
    if default:
        state.require_loss("fit" if stage == "train" else "evaluate")
    return default


def check_inputs(model, x, y, *, stage: str, batch_size, check_finite: bool = True) -> None:
    """Runs every check `fit` or `evaluate` makes before its first step, and builds what
    they build (model, losses, metrics, optimizer slots), without running a step."""
    state = model.compiled_for("fit" if stage == "train" else "evaluate")
    _require_loss(model, state, stage)
    argument = {"train": "x", "val": "validation_data", "test": "test_data"}[stage]
    if stage == "train" or isinstance(x, tf.data.Dataset):
        dataset = isinstance(x, tf.data.Dataset)
        feed = make_feed(model, x, y, None, batch_size=None if dataset else batch_size,
                         check_finite=check_finite)
    else:
        feed = _eval_feed(model, (x, y), argument, batch_size, None, check_finite)
    _prepare(model, state, feed, stage)


def _run_chunk(state, stage, feed, chunk, iterator, capacity: int = 1):
    """Runs one chunk; a dataset with fixed steps that runs out starts a new pass.
    `capacity`: the largest chunk of full batches this stage runs (`ExecutionSizer.capacity`);
    the last, smaller batch is a chunk of one."""
    steps = state.steps
    if not feed.is_dataset:
        full = chunk.index_batches.shape[1] == feed.batch_size
        return steps.run_arrays(stage, _stage_data(feed), chunk.index_batches,
                                capacity if full else 1), iterator
    ran = steps.run_dataset(stage, iterator, chunk.num_batches, chunk.first_batch)
    while feed.cycles and ran < chunk.num_batches:
        iterator = feed.restart()
        more = steps.run_dataset(stage, iterator, chunk.num_batches - ran,
                                 chunk.first_batch + ran)
        if not more:
            break
        ran += more
    return ran, iterator


def _stage_data(feed):
    return tuple(t for t in feed.tensors() if t is not None)


def run_stage(model, state, stage: str, feed, epoch: int, callbacks: CallbackList) -> dict:
    """Runs one pass of `stage` over `feed`; returns the stage's results (unprefixed).

    Raises:
        ValueError: when the data yields no batch, or a dataset batch holds bad labels.
    """
    metrics = state.stage_metrics[stage]
    metrics.reset()
    training = stage == "train"
    sizer = state.sizers[stage]
    wants_batches = (
        callbacks.needs_train_batch_hooks if training else callbacks.needs_test_batch_hooks
    )
    one_at_a_time = training and callbacks.wants_every_train_batch
    sizes = _chunk_sizes(state, sizer, one_at_a_time)
    capacity = sizer.capacity(feed.steps, one_at_a_time)
    # Reading the metrics of several workers is a collective: every worker reads them after
    # every chunk, whether its own callbacks want them or not (the chief's progress bar does).
    read_each_chunk = wants_batches or is_multi_worker(getattr(state, "strategy", None))
    iterator = feed.epoch_iterator() if feed.is_dataset else None
    total = 0
    for chunk in feed.chunks(epoch, sizes):
        if wants_batches:
            _batch_hook(callbacks, stage, "begin", chunk.first_batch, None)
        started = time.perf_counter()
        ran, iterator = _run_chunk(state, stage, feed, chunk, iterator, capacity)
        if feed.is_dataset or chunk.index_batches.shape[1] == feed.batch_size:
            sizer.record(ran, time.perf_counter() - started)
        total += ran
        if ran and read_each_chunk:
            results = metrics.results()
            if wants_batches:
                _batch_hook(callbacks, stage, "end", chunk.first_batch + ran - 1, results)
        if training and ran:
            _ask_optimizer_to_stop(model, state.optimizer)
        if ran < chunk.num_batches or (training and model.stop_training):
            break
    if not total:
        raise ValueError(f"{feed.names[0]} yielded no batches: there is nothing to {stage} on.")
    if feed.is_dataset and feed.steps is None:
        feed.steps = total  # learned on the first pass: the progress bar can show a total
    return metrics.results()


def is_multi_worker(strategy) -> bool:
    """Whether `strategy` runs replicas in several processes (MultiWorkerMirroredStrategy)."""
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


# Steps per loop call under MultiWorkerMirroredStrategy with steps_per_execution="auto".
MULTI_WORKER_CHUNK = 16


def _chunk_sizes(state, sizer, one_at_a_time: bool):
    """The sizer's chunk sizes; under several workers, the same sizes on every worker.

    "auto" sizes chunks from each process's own timings, but every worker must call the
    compiled loop the same number of times with the same steps (each call's collectives
    meet those of the same call on the other workers, or the workers wait for each other
    forever): a fixed size is used instead.
    """
    if not is_multi_worker(getattr(state, "strategy", None)):
        return sizer.sizes(one_at_a_time=one_at_a_time)
    size = MULTI_WORKER_CHUNK if sizer.setting == "auto" else int(sizer.setting)
    return itertools.repeat(size)


def agreed_seed(strategy, seed: int) -> int:
    """`seed` as the chief has it, on every worker (each worker must shuffle the same way:
    each takes its slice of the same global batches). Unchanged without several workers."""
    if not is_multi_worker(strategy):
        return seed

    def chief_only(context):
        return tf.constant(seed if context.replica_id_in_sync_group == 0 else 0, tf.int64)

    values = strategy.experimental_distribute_values_from_function(chief_only)
    return int(strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None))


def _ask_optimizer_to_stop(model, optimizer) -> None:
    """Stops training when the optimizer asks (LevenbergMarquardt converged), saying why."""
    reason = optimizer.stop_reason() if optimizer is not None else None
    if reason:
        model.stop_training = True
        model.stop_reason = reason


def _batch_hook(callbacks, stage, when, batch, logs):
    if stage == "train":
        getattr(callbacks, f"on_train_batch_{when}")(batch, logs)
    else:
        getattr(callbacks, f"on_test_batch_{when}")(batch, logs, stage=stage)


def _evaluate_stage(model, state, stage, feed, epoch, callbacks, cached=None) -> dict:
    callbacks.on_test_begin(stage=stage)
    run_state, run_feed = (state, feed) if cached is None else cached.stage(stage, state, feed)
    logs = run_stage(model, run_state, stage, run_feed, epoch, callbacks)
    callbacks.on_test_end(logs, stage=stage)
    return logs


def _prefixed(stage: str, logs: dict) -> dict:
    return {stage_prefix(stage) + key: value for key, value in logs.items()}


def fit(model, x, y, *, batch_size, epochs, verbose, callbacks, validation_data, test_data,
        shuffle, initial_epoch, sample_weight, steps_per_epoch, validation_steps, test_steps,
        validation_freq, test_freq, check_finite, cache_frozen=False):
    state = model.compiled_for("fit")
    cache_frozen = check_cache_frozen(cache_frozen)
    if cache_frozen and state.strategy is not None:
        raise ValueError("fit(cache_frozen=True) is not supported under a tf.distribute "
                         "strategy yet; leave cache_frozen off to train under the strategy.")
    default_step = _require_loss(model, state, "train")
    verbose = validation.verbosity(verbose, allow_auto=True)
    validation.positive_int("epochs", epochs)
    validation.positive_int("validation_freq", validation_freq)
    validation.positive_int("test_freq", test_freq, allow_none=True)
    for name, value in (("steps_per_epoch", steps_per_epoch),
                        ("validation_steps", validation_steps),
                        ("test_steps", test_steps)):
        validation.positive_int(name, value, allow_none=True)
    if not isinstance(initial_epoch, (int, np.integer)) or not 0 <= initial_epoch < epochs:
        raise ValueError(
            f"initial_epoch must be an integer in [0, epochs). Received: "
            f"initial_epoch={initial_epoch!r}, epochs={epochs}"
        )
    if y is None and default_step and not isinstance(x, tf.data.Dataset):
        raise ValueError("fit() needs labels: pass y, or a tf.data.Dataset of (x, y) batches.")
    state_of_fit = checkpoints.fit_state(model)
    seed = int(state_of_fit.shuffle_seed.numpy())
    if initial_epoch == 0 or seed < 0:
        # A resumed fit (initial_epoch > 0) keeps the saved seed, so its epochs shuffle
        # exactly as those of an uninterrupted fit.
        seed = int(np.random.randint(0, 2**31 - 1))
    seed = agreed_seed(state.strategy, seed)
    train = make_feed(model, x, y, sample_weight, batch_size=batch_size, shuffle=shuffle,
                      steps=steps_per_epoch, check_finite=check_finite, seed=seed)
    val = _eval_feed(model, validation_data, "validation_data", batch_size, validation_steps,
                     check_finite)
    test = _eval_feed(model, test_data, "test_data", batch_size, test_steps, check_finite)
    for feed, stage in ((train, "train"), (val, "val"), (test, "test")):
        if feed is not None:
            _prepare(model, state, feed, stage)

    callbacks = CallbackList(
        callbacks, model=model, add_history=True, add_progress_bar=verbose > 0, verbose=verbose,
        params={"epochs": epochs, "steps": train.steps, "verbose": verbose},
    )
    model.stop_training = False
    model.stop_reason = None  # a reason is about the fit that set it
    state_of_fit.shuffle_seed.assign(seed)
    state_of_fit.epoch.assign(initial_epoch)
    callbacks.on_train_begin()
    # After on_train_begin: the cache stays off when a callback turned gradient taps on.
    cached = (start_cached_fit(model, state, {"train": train, "val": val, "test": test})
              if cache_frozen else None)
    logs: dict = {}
    tested_epoch = None
    epoch = initial_epoch
    # The training step this fit runs (the cache's, when it trains on cached features) is
    # promised the fit's batch size.
    training_steps = state.steps if cached is None else cached.state.steps
    # Once, so a resumed fit's steps are those of an unbroken one.
    training_steps.expect_fit(None if train.is_dataset else train.batch_size,
                              train.batches_per_pass)
    try:
        for epoch in range(initial_epoch, epochs):
            callbacks.on_epoch_begin(epoch)
            if cached is not None:
                cached.refresh()  # a callback may have changed a frozen weight
            train_state, train_feed = (state, train) if cached is None else cached.stage(
                "train", state, train)
            logs = run_stage(model, train_state, "train", train_feed, epoch, callbacks)
            if val is not None and (epoch + 1) % validation_freq == 0:
                val_logs = _evaluate_stage(model, state, "val", val, epoch, callbacks, cached)
                logs.update(_prefixed("val", val_logs))
            # A callback that chooses the kept weights (EarlyStopping's restore_best_weights)
            # does so once the epochs end: the last test waits for them.
            last = epoch == epochs - 1
            periodic = test_freq and (epoch + 1) % test_freq == 0
            if (test is not None and (last or periodic)
                    and not (last and callbacks.restores_weights)):
                test_logs = _evaluate_stage(model, state, "test", test, epoch, callbacks, cached)
                logs.update(_prefixed("test", test_logs))
                tested_epoch = epoch
            logs.update(_layer_counters(model))
            state_of_fit.epoch.assign(epoch + 1)  # before the callbacks: checkpoints save it
            callbacks.on_epoch_end(epoch, logs)
            if model.stop_training:
                break
    finally:  # steps outside fit (model.train_step) are passes of their own
        training_steps.expect_fit(None if train.is_dataset else train.batch_size, None)
    restored = callbacks.restore_final_weights()
    if test is not None and (tested_epoch != epoch or restored):
        # Training stopped early, or a callback restored other weights: the test numbers
        # must describe the final weights.
        test_logs = _evaluate_stage(model, state, "test", test, epoch, callbacks, cached)
        logs.update(_prefixed("test", test_logs))
    callbacks.on_train_end(logs)
    return callbacks.history


def evaluate(model, x, y, *, batch_size, verbose, sample_weight, steps, callbacks, return_dict,
             stage, check_finite):
    state = model.compiled_for("evaluate")
    default_step = _require_loss(model, state, stage if stage in ("val", "test") else "test")
    if stage not in ("val", "test"):
        raise ValueError(f"stage must be 'val' or 'test'. Received: stage={stage!r}")
    verbose = validation.verbosity(verbose, allow_auto=True)
    if y is None and default_step and not isinstance(x, tf.data.Dataset):
        raise ValueError("evaluate() needs labels: pass y, or a tf.data.Dataset of (x, y) batches.")
    validation.positive_int("steps", steps, allow_none=True)
    feed = _first_batches(make_feed(model, x, y, sample_weight, batch_size=batch_size,
                                    steps=steps, check_finite=check_finite,
                                    steps_argument="steps"), steps, "steps")
    _prepare(model, state, feed, stage)
    callbacks = CallbackList(callbacks, model=model, add_progress_bar=verbose > 0,
                             verbose=verbose, params={"steps": feed.steps, "verbose": verbose})
    logs = _evaluate_stage(model, state, stage, feed, 0, callbacks)
    if return_dict:
        return logs
    values = list(logs.values())
    return values[0] if len(values) == 1 else values


def predict(model, x, *, batch_size, verbose, steps, callbacks):
    validation.positive_int("steps", steps, allow_none=True)
    dataset = isinstance(x, tf.data.Dataset)
    feed = _first_batches(make_feed(model, x, batch_size=None if dataset else batch_size,
                                    steps=steps, check_finite=False, steps_argument="steps"),
                          steps, "steps")
    state = model.state_for_predict()
    state.prepare(model, feed)
    if not feed.is_dataset:  # the layers' checks of every batch, before any step
        state.steps.check_arrays("predict", (feed.tensors()[0],), feed.batches_in_order(),
                                 feed.names[0])
    verbose = validation.verbosity(verbose, allow_auto=True)
    callbacks = CallbackList(callbacks, model=model, add_progress_bar=verbose > 0,
                             verbose=verbose, params={"steps": feed.steps, "verbose": verbose})
    callbacks.on_predict_begin()
    parts = []
    if feed.is_dataset:
        callbacks.on_predict_batch_begin(0)
        outputs = state.steps.predict_dataset(feed.epoch_iterator(), feed.steps or 2**31 - 1)
        parts.append([o.numpy() for o in outputs])
        callbacks.on_predict_batch_end(max((feed.steps or 1) - 1, 0), None)
    else:
        x_tensors = feed.tensors()[0]
        sizer = state.sizers["predict"]
        for chunk in feed.chunks(0, _chunk_sizes(state, sizer, False)):
            callbacks.on_predict_batch_begin(chunk.first_batch)
            started = time.perf_counter()
            outputs = state.steps.predict_arrays(x_tensors, chunk.index_batches)
            parts.append([o.numpy() for o in outputs])
            if chunk.index_batches.shape[1] == feed.batch_size:
                sizer.record(chunk.num_batches, time.perf_counter() - started)
            callbacks.on_predict_batch_end(chunk.first_batch + chunk.num_batches - 1, None)
    callbacks.on_predict_end()
    flat = [np.concatenate(column) for column in zip(*parts)]
    if not flat or not len(flat[0]):
        raise ValueError(f"{feed.names[0]} yielded no batches: there is nothing to predict.")
    return tf.nest.pack_sequence_as(model.output_spec, flat)

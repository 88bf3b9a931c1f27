"""Running the compiled steps under a `tf.distribute` strategy (several replicas, one process).

A model compiled inside `strategy.scope()` keeps that strategy (`CompileState.strategy`). Its
variables (weights, optimizer slots) are then mirrored: one copy per replica, created with
`tf.VariableAggregation.ONLY_FIRST_REPLICA`, so an assignment made identically on every replica
is applied once, from the first replica's value. The compiled loops stay in cross-replica
context; each step

    splits the global batch into contiguous slices, one per replica (`split_batch`; replica r
        gets rows [n*r//R, n*(r+1)//R), so equal halves for an even batch)
    runs the model's step on every replica (`run_step`); the replica's loss is a mean over its
        own rows, so its share of the global mean is `local rows / global rows`
        (`replica_share`): the optimizer sums `share * gradient` over the replicas
        (`sum_gradients`, an all-reduce) before any gradient transform, so clipping by global
        norm sees the global gradient, and every replica applies the same update
    combines the replicas' results (`combine`): loss and logs as the share-weighted sum (the
        global batch mean), outputs gathered in batch order, so the per-stage metrics update
        once, in cross-replica context, from the whole batch: accuracy and AUC equal those of
        one device.

Update hooks are combined over the replicas by what their values are
(`update_hooks.reduce_over_replicas`): a batch mean (batch-norm moving statistics) by the
share-weighted mean of the replicas' values, exact for a moving mean, while a moving variance
becomes the mean of the replicas' variances unless the layer is synchronized
(`BatchNormalization(synchronized=True)` all-reduces its statistics in the forward pass);
sums over the rows (`ClassMeans`'s per-class sums and counts) by adding them up.

An optimizer that decides for all replicas at once (Levenberg–Marquardt) runs its step in
cross-replica context instead: see `graphfit.training.cross_replica`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref

import tensorflow as tf

from graphfit.core.step_types import StepResult

__all__ = ["on_replicas", "check_not_distributed", "current_strategy", "strategy_scope",
           "SUPPORTED_STRATEGIES", "check_strategy",
           "check_created_in_scope", "split_batch", "run_step", "replica_share",
           "sum_gradients", "combine", "gather_outputs", "check_losses", "undo_keras_scaling",
           "replica_rows", "weighted", "run_on_slices", "is_multi_worker", "chunk_sizes",
           "agreed_seed", "MULTI_WORKER_CHUNK", "per_worker", "reads_per_worker",
           "gather_worker_batches"]

# One process, several replicas with synchronous all-reduce: what this engine implements.
SUPPORTED_STRATEGIES = (tf.distribute.MirroredStrategy,
                        tf.distribute.MultiWorkerMirroredStrategy,
                        tf.distribute.OneDeviceStrategy)

_local = threading.local()  # the replica threads of MirroredStrategy each see their own


def current_strategy():
    """The strategy whose `scope()` is open, or None outside any (the default strategy)."""
    return tf.distribute.get_strategy() if tf.distribute.has_strategy() else None


def strategy_scope(strategy):
    """`strategy.scope()`, or a block that does nothing when `strategy` is None."""
    return contextlib.nullcontext() if strategy is None else strategy.scope()


def check_strategy(strategy) -> None:
    """Refuses a strategy this engine does not run (parameter servers, TPUs)."""
    if not isinstance(strategy, SUPPORTED_STRATEGIES):
        names = ", ".join(f"tf.distribute.{s.__name__}" for s in SUPPORTED_STRATEGIES)
        raise ValueError(
            f"model.compile() was called inside the scope of a {type(strategy).__name__}, which "
            f"graphfit does not support. Supported strategies: {names}.")


def check_created_in_scope(strategy, variables, what: str) -> None:
    """Every variable in `variables` was created under `strategy.scope()`.

    A variable created outside it exists once, on one device; each replica would then update
    it in turn, and the updates would race.

    Raises:
        ValueError: naming the first such variable and `what` owns it.
    """
    for variable in variables:
        if not strategy.extended.variable_created_in_scope(variable):
            raise ValueError(
                f"{what} variable {variable.name!r} was created outside the scope of the "
                f"{type(strategy).__name__} the model was compiled under. Create the model and "
                f"its optimizer inside `with strategy.scope():` (build the model there too, or "
                f"let fit build it), then compile there.")


def split_batch(strategy, data):
    """The global batch `data` as per-replica values: (rows of replica r, global row count).

    Runs in cross-replica context, in the compiled loop.
    """
    rows = tf.shape(tf.nest.flatten(data)[0])[0]

    def local(context):
        r, count = context.replica_id_in_sync_group, context.num_replicas_in_sync
        start, end = rows * r // count, rows * (r + 1) // count
        part = tf.nest.map_structure(lambda t: None if t is None else t[start:end], data)
        return part, rows

    return strategy.experimental_distribute_values_from_function(local)


def replica_share(dtype):
    """local rows / global rows of the step running on this replica, in `dtype`; None when
    no distributed step is running (one device)."""
    share = getattr(_local, "share", None)
    return None if share is None else tf.cast(share, dtype)


@contextlib.contextmanager
def replica_rows(local_rows, global_rows):
    """Inside a replica's function: sets `replica_share` to local rows / global rows."""
    previous = getattr(_local, "share", None)
    _local.share = tf.cast(local_rows, tf.float64) / tf.cast(global_rows, tf.float64)
    try:
        yield
    finally:
        _local.share = previous


def weighted(value, share):
    """`value * share`, and 0 for a replica with no rows (whose mean is NaN)."""
    value = tf.convert_to_tensor(value)
    return tf.math.multiply_no_nan(value, tf.cast(share, value.dtype))


def run_on_slices(strategy, slices, fn):
    """`fn(local_data)` on every replica, on its slice of a global batch (`slices`, as
    `split_batch` gives them), with `replica_share` set; returns the per-replica values."""
    def replica_fn(values):
        local_data, rows = values
        local_rows = tf.shape(tf.nest.flatten(local_data)[0])[0]
        with replica_rows(local_rows, rows):
            return fn(local_data)

    return strategy.run(replica_fn, args=(slices,))


def run_step(strategy, step, data):
    """Runs `step(local_data) -> StepResult` (or outputs, for predict) on every replica.

    Returns `(per-replica values, whether the step returned a StepResult)`: for a
    `StepResult`, a dict with the share-weighted "loss", "output_losses" and "logs" and the
    replica's "y_pred"; otherwise the outputs.
    """
    results = []  # set while tracing: what kind of value the step returned

    def local_step(local_data):
        result = step(local_data)
        results.append(isinstance(result, StepResult))
        if not results[-1]:  # predict: the outputs
            return result
        share = replica_share(tf.float64)
        weigh = lambda v: weighted(v, share)  # noqa: E731
        return {"loss": weigh(result.loss), "y_pred": result.y_pred,
                "output_losses": {k: weigh(v) for k, v in (result.output_losses or {}).items()},
                "logs": {k: weigh(v) for k, v in (result.logs or {}).items()}}

    per_replica = run_on_slices(strategy, split_batch(strategy, data), local_step)
    return per_replica, all(results)


def on_replicas(strategy, step, data, across_replicas: bool = False):
    """`step(data)`; under a strategy, run on every replica and combined for the whole batch
    (a `StepResult` as `combine` makes it, or the gathered outputs of a predict step).

    `across_replicas`: the step runs once, in cross-replica context, and splits the batch
    over the replicas itself (an optimizer with `steps_across_replicas`, see
    `graphfit.training.cross_replica`).
    """
    if strategy is None or across_replicas:
        return step(data)
    per_replica, is_result = run_step(strategy, step, data)
    if is_result:
        return combine(strategy, per_replica)
    return gather_outputs(strategy, per_replica)


def check_not_distributed(model) -> None:
    """Refuses steps without a strategy for a model whose weights are mirrored (a cached
    tail model under `cache_frozen`, or a model compiled again outside the scope)."""
    if any(isinstance(v, tf.distribute.DistributedValues) for v in model.trainable_variables):
        raise ValueError(
            f"Model {model.name!r} has weights created under a tf.distribute strategy, but "
            f"these steps would run without it: compile the model inside strategy.scope() "
            f"(cache_frozen is not supported under a strategy).")


def combine(strategy, per_replica):
    """The `StepResult` of the global batch, from `run_step`'s per-replica dict."""
    def total(values):
        return tf.nest.map_structure(
            lambda v: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None), values)

    y_pred = per_replica["y_pred"]
    return StepResult(total(per_replica["loss"]),
                      None if y_pred is None else gather_outputs(strategy, y_pred),
                      total(per_replica["output_losses"]), total(per_replica["logs"]))


def gather_outputs(strategy, per_replica):
    """The replicas' outputs concatenated in batch order (the rows `split_batch` gave out).

    In one process every replica's part is local: a plain concatenation, which (unlike the
    collective all-gather of `strategy.gather`) may sit inside the loop's conditionals.
    """
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return tf.nest.map_structure(lambda v: strategy.gather(v, axis=0), per_replica)
    return tf.nest.map_structure(
        lambda v: tf.concat(strategy.experimental_local_results(v), axis=0), per_replica)


def sum_gradients(gradients: list) -> list:
    """Inside a distributed step: the sum over replicas of `share * gradient` (the gradient of
    the global batch mean), by one all-reduce; unchanged on one device. None stays None."""
    context = tf.distribute.get_replica_context()
    share = getattr(_local, "share", None)
    if share is None or context is None or context.num_replicas_in_sync == 1:
        return gradients
    present = [i for i, g in enumerate(gradients) if g is not None]
    dense = [weighted(tf.convert_to_tensor(gradients[i]), share) for i in present]
    reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, dense)
    gradients = list(gradients)
    for i, gradient in zip(present, reduced):
        gradients[i] = gradient
    return gradients


# Reductions whose value is a mean over the batch's rows: the replicas' share-weighted sum of
# them is the global batch's mean.
_MEAN_REDUCTIONS = ("sum_over_batch_size", "mean")


def check_losses(loss_set) -> None:
    """Refuses a compiled loss whose reduction is not a mean over the batch ("sum" would need
    a plain sum over replicas, a mean weighted by sample weights a weighted share)."""
    for output, loss in loss_set.losses.items():
        reduction = getattr(loss, "reduction", None)
        if reduction not in _MEAN_REDUCTIONS:
            where = "" if output is None else f" of output {output!r}"
            raise ValueError(
                f"The loss{where} ({getattr(loss, 'name', loss)!r}) has reduction "
                f"{reduction!r}; under a tf.distribute strategy graphfit supports losses "
                f"averaged over the batch only (reduction='sum_over_batch_size', the default).")


def undo_keras_scaling(loss, output_losses: dict):
    """Inside a distributed step: the compiled losses as means over the replica's own rows.

    Keras divides a mean loss by the number of replicas when it runs in a replica (it then
    sums the replicas, assuming equal slices); graphfit weighs each replica by its share of
    the rows instead (exact for uneven slices too), so the division is undone here, before
    the losses layers add (which Keras never divides) join the total.
    """
    if getattr(_local, "share", None) is None:
        return loss, output_losses
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas == 1:
        return loss, output_losses

    def undo(value):
        return value * tf.cast(replicas, value.dtype)

    return undo(loss), {name: undo(value) for name, value in output_losses.items()}


def is_multi_worker(strategy) -> bool:
    """Whether `strategy` runs replicas in several processes (MultiWorkerMirroredStrategy)."""
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


# Steps per loop call under MultiWorkerMirroredStrategy with steps_per_execution="auto".
MULTI_WORKER_CHUNK = 16


def chunk_sizes(strategy, sizer, one_at_a_time: bool):
    """The sizer's chunk sizes; under several workers, the same sizes on every worker.

    "auto" sizes chunks from each process's own timings, but every worker must call the
    compiled loop the same number of times with the same steps (each call's collectives
    meet those of the same call on the other workers, or the workers wait for each other
    forever): a fixed size is used instead.
    """
    if not is_multi_worker(strategy):
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


# Datasets whose batches are each worker's own (`per_worker`), not one global batch.
_PER_WORKER: weakref.WeakSet = weakref.WeakSet()


def per_worker(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Marks `dataset` as this worker's own part of every global batch (a dataset made for
    a `tf.distribute.InputContext`, as `strategy.distribute_datasets_from_function` calls
    it): under several workers each step then gathers the workers' batches, in worker
    order, into the global batch (`gather_worker_batches`). Every worker's dataset must
    yield the same number of batches (an empty batch is fine). Returns `dataset`."""
    _PER_WORKER.add(dataset)
    return dataset


def reads_per_worker(dataset) -> bool:
    """Whether `dataset` was marked by `per_worker`."""
    try:
        return dataset in _PER_WORKER
    except TypeError:  # not weakly referable: not a dataset
        return False


def gather_worker_batches(strategy, data):
    """The global batch of a step whose data is each worker's own batch: the workers'
    batches concatenated in worker order (replica order), the same on every worker, by one
    all-gather per tensor (batches of different sizes, or empty, too). Unchanged without
    several workers. Runs in cross-replica context, in the compiled loop."""
    if not is_multi_worker(strategy):
        return data
    local = len(strategy.extended.worker_devices)

    def own_rows(context):
        index = context.replica_id_in_sync_group % local
        rows = tf.shape(tf.nest.flatten(data)[0])[0]
        start, end = rows * index // local, rows * (index + 1) // local
        return tf.nest.map_structure(lambda t: None if t is None else t[start:end], data)

    parts = strategy.experimental_distribute_values_from_function(own_rows)
    return tf.nest.map_structure(
        lambda v: None if v is None else strategy.gather(v, axis=0), parts)

"""Each worker's own part of a `Stream` under several workers (a `tf.distribute.InputContext`).

Under `MultiWorkerMirroredStrategy` every worker runs its own input pipeline
(`InputContext.input_pipeline_id` of `num_input_pipelines`) and reads only its part of a
split, so the union of the parts is every record of the split exactly once:

- by file, when the split has at least as many files as there are workers: the files
  shuffled from the seed (the same order on every worker) and dealt round-robin, file i to
  worker i mod W. The deal is fixed for the run, so each worker's part holds the same
  records on every pass (each pass reshuffles its own files and records from (seed, pass));
- by record otherwise: every worker reads the split's records in the same order (the same
  per-pass shuffle) and keeps record i when i mod W is its index (read, not parsed, by the
  others).

Each worker batches its part by the per-worker batch (the global batch over the replicas,
as `InputContext.get_per_replica_batch_size`, times the worker's replicas), and every
worker's pass holds the same number of batches, `steps` (that of the largest part): the
shorter parts end with empty batches, since every step is a collective that all workers
take. The step gathers the workers' batches into the global batch
(`graphfit.training.distribution.gather_worker_batches`).

Example:

    >>> import tempfile
    >>> import numpy as np
    >>> import tensorflow as tf
    >>> from graphfit.datasets.streams import Stream, write_tfrecord_shards
    >>> files = write_tfrecord_shards(np.arange(6.0)[:, None], np.arange(6), tempfile.mkdtemp(), 3)
    >>> stream = Stream(files, {"x": {"dtype": "float32", "shape": [1]}, "y": "int64"}, target="y")
    >>> context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
    ...                                      num_replicas_in_sync=2)
    >>> shards = worker_shards(stream, stream.files, 4, context, seed=0)
    >>> shards.batch_size, shards.steps, sum(shards.records)
    (2, 2, 6)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import tensorflow as tf

__all__ = ["WorkerShards", "worker_shards", "NotShardable"]


class NotShardable(ValueError):
    """A split that cannot be divided among the workers (fewer records than workers, a
    global batch that the replicas cannot share evenly)."""


@dataclasses.dataclass(frozen=True)
class WorkerShards:
    """One worker's part of a split: which worker of how many, its batch, its files (None:
    it keeps every `workers`-th record), the batches of every pass on every worker
    (`steps`), the records of each worker's part and every worker's files (`deal`, one
    tuple a worker; empty when dealt by record)."""

    workers: int
    index: int
    batch_size: int
    files: tuple | None
    steps: int
    records: tuple
    deal: tuple = ()

    def own(self, records: tf.data.Dataset) -> tf.data.Dataset:
        """This worker's records of a pass read from its files (by file: all of them)."""
        return records if self.files is not None else records.shard(self.workers, self.index)

    def batches(self, records: tf.data.Dataset, skip=None) -> tf.data.Dataset:
        """This worker's records of one pass in `steps` batches (empty ones at the end of a
        shorter part), less the first `skip` batches (a tensor, or None)."""
        empty = tf.data.Dataset.from_tensors(tf.constant([], records.element_spec.dtype))
        batches = records.batch(self.batch_size).concatenate(empty.repeat()).take(self.steps)
        return batches if skip is None else batches.skip(skip)


def _worker_batch(batch_size: int, context) -> int:
    """The per-worker batch: the per-replica batch times the worker's replicas."""
    try:
        per_replica = context.get_per_replica_batch_size(batch_size)
    except ValueError:
        raise NotShardable(
            f"batch_size={batch_size} cannot be divided among the "
            f"{context.num_replicas_in_sync} replicas of {context.num_input_pipelines} "
            f"workers: give a global batch_size that is a multiple of "
            f"{context.num_replicas_in_sync}") from None
    return per_replica * (context.num_replicas_in_sync // context.num_input_pipelines)


def worker_shards(stream, part, batch_size: int, context, seed: int,
                  name: str = "split") -> WorkerShards:
    """This worker's part of `part` (a `StreamPart` or files) under `context`, a
    `tf.distribute.InputContext`. Counts every worker's records (one pass over the split's
    records, read, not parsed), so that every worker knows every part's batches. `name`:
    the split, for messages ("training split").

    Raises:
        NotShardable: for a split with fewer records than workers, or a `batch_size` the
            replicas cannot share evenly.
    """
    from graphfit.datasets.streams import StreamPart

    part = part if isinstance(part, StreamPart) else StreamPart(tuple(part))
    workers, index = int(context.num_input_pipelines), int(context.input_pipeline_id)
    batch = _worker_batch(batch_size, context)
    if len(part.files) >= workers:
        order = [part.files[i] for i in np.random.default_rng(
            [seed, workers]).permutation(len(part.files))]
        dealt = [tuple(sorted(order[w::workers])) for w in range(workers)]
        records = tuple(stream.count(StreamPart(files, part.buckets)) for files in dealt)
        files, deal = dealt[index], tuple(dealt)
    else:
        total = stream.count(part)
        records = tuple(len(range(w, total, workers)) for w in range(workers))
        files, deal = None, ()
    if sum(records) < workers:
        raise NotShardable(
            f"the {name} of {len(part.files)} file(s) holds {sum(records)} record(s) for "
            f"{workers} workers: every worker needs records of its own; train on fewer "
            f"workers or on more data")
    steps = max(math.ceil(n / batch) for n in records)
    return WorkerShards(workers, index, batch, files, steps, records, deal)

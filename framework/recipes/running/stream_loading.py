"""The `stream` data source: CSV, TFRecord or Parquet shards read by `tf.data`, never loaded
whole.

The splits come from `datasets.Stream.split` (by file, or by a hash of `key`), the
standardization statistics from one streaming pass over the training split (or its first
`statistics_sample` records), saved in the run's preprocessing.json as for in-memory data.
The training dataset repeats its pass forever, reshuffled from the seed at every pass, and an
epoch is one pass (`steps_per_epoch` from the records counted, unless the recipe gives it):
one iterator serves every epoch, so the run's checkpoints hold its position
(`graphfit.saving.input_position`: the epochs and batches done) and `--resume` starts the
stream there, in the middle of an epoch too when a `ModelCheckpoint` saves every `save_freq`
batches: pass p of the stream is a stateless function of the seed and p, so the resumed run
rebuilds it and skips the records already trained on (read, not parsed). Under several workers
(`distribute: {strategy: multi_worker}`) each worker reads its own part of each split
(`graphfit.datasets.stream_shards`), an epoch is one pass of the largest part, and the
position restored is each worker's batches done of its own part of that pass. The run's
preprocessing.json records how the training split was dealt (`stream_deal`: the workers, and
each worker's files), and `--resume` with another number of workers (or another deal) is
refused: the position restored counts batches of each worker's own part, so a new deal would
repeat some records and skip others.

Without `columns:`, the columns and their types are inferred from a sample of the training
files (`stream_inference`); `class_weight: balanced` counts the training split's classes in
one pass (`stream_weights`); a `sample_weight:` column makes the batches (x, y, weight).

Example:

    >>> options = {"source": "stream", "files": "x.tfrecord", "columns": {"x": "float32"}}
    >>> sorted(stream_options(options))
    ['columns', 'files']
"""

from __future__ import annotations

import numpy as np

from graphfit.recipes.running import typed_streams

__all__ = ["stream_options", "stream_splits", "whole_stream", "STREAM_KEYS", "deal_record",
           "check_same_deal"]

# The keys of `source: stream` that the `Stream` itself takes.
STREAM_KEYS = ("files", "columns", "target", "key", "format", "compression", "delimiter",
               "sample_weight")


def stream_options(source: dict) -> dict:
    """The `Stream(...)` arguments of a resolved `source: stream` mapping (typed columns
    read raw: `typed_streams.stream_columns`)."""
    from graphfit.recipes.running.typed_streams import stream_columns

    options = {key: source[key] for key in STREAM_KEYS if key in source}
    if "columns" in options:
        options["columns"] = stream_columns(options["columns"])
    return options


def _stream(source: dict):
    from graphfit import datasets

    return datasets.Stream(**stream_options(source))


def with_columns(data: dict, seed: int = 0, validation: float = 0.0, test: float = 0.0):
    """`data` with its columns inferred from the training files when it declares none."""
    if data.get("columns") is not None:
        return data
    from graphfit.recipes.running.data_loading import DataError
    from graphfit.recipes.running.stream_inference import infer_columns

    try:
        return dict(data, columns=infer_columns(data, seed, validation, test))
    except (OSError, ValueError) as error:
        text = str(error)
        key = "columns" if text.startswith("columns") else "files"
        raise DataError(("data", key), text.split(": ", 1)[-1] if text.startswith(
            key + ":") else text) from None


def whole_stream(source: dict, batch_size: int, standardizer=None):
    """Every record of a stream, one pass in file order (a separate validation or test
    source), standardized by `standardizer` (the training split's) when given."""
    stream = _stream(with_columns(source))
    return stream.dataset(stream.files, batch_size, cycle_length=source["cycle_length"],
                          standardizer=standardizer)


def stream_splits(config: dict, splits_type, standardizer_type, separate: dict,
                  load_separate, table: dict | None = None, strategy=None):
    """The `Splits` of a recipe whose `data:` is a stream.

    Args:
        config: the resolved recipe.
        splits_type, standardizer_type: `Splits` and `Standardizer` (passed in, so this
            module imports nothing of the loader that calls it).
        separate: {"val"/"test": the source of training.validation_data / test_data, or None}.
        load_separate: `(source, key) -> data` for those.
        table: a finished run's `table` record (typed columns), whose statistics are
            reused instead of adapted again.
        strategy: the run's strategy; under several workers each worker reads its own part
            of each split (`datasets.stream_shards`).

    Raises:
        ValueError: for files, columns or fractions that do not fit.
    """
    seed, data, training = config["seed"], config["data"], config["training"]
    batch = training["batch_size"]
    fractions = {"val": training["validation_split"], "test": training["test_split"]}
    fractions = {k: v if separate[k] is None else 0.0 for k, v in fractions.items()}
    data = with_columns(data, seed, fractions["val"], fractions["test"])
    stream = _stream(data)
    parts = stream.split(fractions["val"], fractions["test"], seed,
                         by_key=data["key"] is not None)
    names = None
    if typed_streams.is_typed(data):  # typed columns: a table's preprocessing, streamed
        table, names, count = typed_streams.typed_statistics(stream, parts["train"], data,
                                                             table)
        count, standardizer = count or stream.count(parts["train"]), None
    elif data["standardize"]:
        table = None
        count, mean, std = stream.statistics(parts["train"], data["statistics_sample"])
        standardizer = standardizer_type(mean, std)
    else:
        count, standardizer, table = stream.count(parts["train"]), None, None
    if count == 0:
        raise ValueError(f"the training split of {len(stream.files)} file(s) holds no record")
    shuffle = data["shuffle"]
    shards = _worker_shards(stream, parts, batch, seed, strategy)
    import tensorflow as tf

    with tf.init_scope():
        start = tf.Variable([0, 0], dtype=tf.int64, trainable=False, name="stream_start")
    train = stream.dataset(parts["train"], batch, shuffle_buffer=data["shuffle_buffer"]
                           if shuffle else 0, seed=seed, repeat=True,
                           standardizer=standardizer, cycle_length=data["cycle_length"],
                           start=start, shards=shards.get("train"))
    train = _own(train, shards.get("train"))
    stages = {}
    for stage in ("val", "test"):
        if separate[stage] is not None:
            stages[stage] = _separate(separate[stage], stage, load_separate, data, stream,
                                      table, standardizer, batch)
        elif parts[stage] is not None:
            stages[stage] = _own(stream.dataset(
                parts[stage], batch, standardizer=standardizer,
                cycle_length=data["cycle_length"], shards=shards.get(stage)), shards.get(stage))
        else:
            stages[stage] = None
    from graphfit.datasets.streams import steps_per_pass

    splits = splits_type(train, stages["val"], stages["test"], standardizer,
                         [c.name for c in stream.features], table=table,
                         class_names=None if names is None else names.names)
    own = shards.get("train")
    splits.record["stream_deal"] = deal_record(own)
    per_pass = splits.steps_per_epoch = own.steps if own else steps_per_pass(count, batch)
    batch = own.batch_size if own else batch  # records of its own part per batch
    from graphfit.recipes.running.stream_weights import stream_class_weight

    splits.class_weight = stream_class_weight(training.get("class_weight"), stream,
                                              parts["train"], names)
    splits.diagnose = lambda error: _diagnosis(stream, parts, error)

    def start_at(epoch: int, batch_in_epoch: int, steps_per_epoch: int) -> None:
        """Starts the training data after `epoch` epochs and `batch_in_epoch` batches."""
        done = epoch * steps_per_epoch + batch_in_epoch
        start.assign([done // per_pass, (done % per_pass) * batch])

    splits.start_at = start_at
    return splits


def _separate(source: dict, stage: str, load_separate, data: dict, stream, table,
              standardizer, batch: int):
    """A separate `validation_data` / `test_data` source through the training split's
    preprocessing: a typed stream's table preprocessor and class names (`table`: its
    record) for a stream or a table, else the training's standardizer (a stream's records
    as they are read, arrays' features at once).

    Raises:
        DataError: a source that the typed preprocessing cannot read (another kind, other
            columns, another target), or a dataset where the training is standardized.
    """
    from graphfit.recipes.running.data_loading import DataError

    name = {"val": "validation_data", "test": "test_data"}[stage]
    key = ("training", name)
    if table is None:
        if standardizer is None:
            return load_separate(source, stage)
        if source["source"] == "stream":
            return whole_stream(source, batch, standardizer)
        loaded = load_separate(source, stage)
        if not isinstance(loaded, tuple):
            raise DataError(key + ("source",), (
                f"{source['source']!r} gives a tf.data.Dataset, which the training stream's "
                f"standardization (data.standardize) cannot reach; give {name} as arrays "
                f"(npz, csv, a function returning (x, y)) or as a stream"))
        x, y = loaded
        return standardizer(np.asarray(x)), y
    for option in ("target", "sample_weight"):
        if source.get(option) not in (None, data.get(option)):
            raise DataError(key + (option,), (
                f"{source[option]!r}: a separate source of a typed stream is read with the "
                f"training data's {option} {data.get(option)!r}; give the same or leave it "
                f"out"))
    if source["source"] == "table":
        return _separate_table(dict(source, target=data["target"]), key, table)
    if source["source"] != "stream":
        raise DataError(key + ("source",), (
            f"{source['source']!r}: the training data is a stream with typed columns, whose "
            f"preprocessing (from the training split) reads only another stream or a table "
            f"of the same columns; give {name} as source: stream or source: table"))
    own = source.get("columns")
    if own is not None and _read_as(own) != _read_as(data["columns"]):
        raise DataError(key + ("columns",), (
            f"{', '.join(own)}: a separate source of a typed stream is read with the training "
            f"data's columns ({', '.join(data['columns'])}) and preprocessing; leave columns "
            f"out (the training data's are used) or give the same"))
    separate = _stream(dict(source, columns=data["columns"], target=data["target"],
                            sample_weight=data.get("sample_weight")))
    separate.transform = stream.transform  # the training split's statistics and class names
    return separate.dataset(separate.files, batch, cycle_length=source["cycle_length"])


def _read_as(columns: dict) -> dict:
    """{column: (dtype, shape)} as the `Stream` reads `columns:`."""
    from graphfit.recipes.running.typed_streams import stream_columns

    read = stream_columns(columns)
    return {name: (value.get("dtype"), value.get("shape")) if isinstance(value, dict)
            else (value, None) for name, value in read.items()}


def _separate_table(source: dict, key: tuple, table: dict):
    """(x, y) of a separate table through a typed stream's preprocessing (`table`)."""
    from graphfit.recipes.running.table_loading import separate_table
    from graphfit.tabular.columns import Column
    from graphfit.tabular.preprocessor import TablePreprocessor
    from graphfit.tabular.targets import ClassNames

    columns = [Column.from_record(c) for c in table["preprocessor"]["columns"]]
    names = table.get("class_names")
    return separate_table(source, key, columns,
                          TablePreprocessor.from_record(table["preprocessor"]),
                          None if names is None else ClassNames(list(names)))[0]


def _worker_shards(stream, parts: dict, batch: int, seed: int, strategy) -> dict:
    """{stage: this worker's `WorkerShards` of the split} under several workers, else {}."""
    from graphfit.recipes.running.workers import input_context

    context = input_context(strategy)
    if context is None:
        return {}
    import sys

    from graphfit.datasets.stream_shards import worker_shards
    from graphfit.recipes.running.distribution import describe_worker

    names = {"train": "training split", "val": "validation split", "test": "test split"}
    shards = {stage: worker_shards(stream, part, batch, context, seed, names[stage])
              for stage, part in parts.items() if part is not None}
    own = shards["train"]
    part = (f"{len(own.files)} of the {len(parts['train'].files)} training files"
            if own.files is not None else
            f"the training records i with i mod {own.workers} = {own.index}")
    print(f"graphfit: {describe_worker(strategy)} reads its own part of the stream: {part} "
          f"({own.records[own.index]} records, {own.steps} batches of {own.batch_size} a "
          f"pass)", file=sys.stderr, flush=True)
    return shards


def _own(dataset, shards):
    """`dataset`, marked as this worker's own batches when it reads `shards`."""
    if shards is None:
        return dataset
    from graphfit.training.distribution import per_worker

    return per_worker(dataset)


def _diagnosis(stream, parts: dict, error: Exception):
    """The `BadRecordError` of the first unreadable record of the run's files, or None."""
    from graphfit.datasets import BadRecordError

    files = sorted({f for part in parts.values() if part is not None for f in part.files})
    found = stream.bad_record(files, error)
    return found if isinstance(found, BadRecordError) else None


def deal_record(shards) -> dict:
    """How the training split is dealt among the workers, for the run's preprocessing.json:
    {"workers": W, "by": "file" or "record", "files": each worker's file names} ({"workers":
    1} on one process)."""
    if shards is None:
        return {"workers": 1}
    import os

    if shards.files is None:
        return {"workers": shards.workers, "by": "record"}
    return {"workers": shards.workers, "by": "file",
            "files": [[os.path.basename(f) for f in files] for files in shards.deal]}


def check_same_deal(recorded: dict | None, current: dict | None, run: str) -> None:
    """Refuses to resume a stream run whose training split would be dealt otherwise than it
    was (another number of workers, or other files per worker). Nothing happens for a run
    that recorded no deal (one from before deals were recorded, or not a stream).

    Raises:
        ValueError: what the run recorded, what runs now, and what to do.
    """
    if not recorded or current is None or recorded == current:
        return
    was, now = recorded.get("workers", 1), current.get("workers", 1)
    if was == now:
        raise ValueError(
            f"the run {run} dealt its stream's training files among {was} workers otherwise "
            f"than this resume does ({_describe(recorded)}; now {_describe(current)}): the "
            f"training files or their names changed. Resume it with the files it trained on, "
            f"or train the recipe again into a new run (graphfit train RECIPE --run-dir NEW)")
    how = ("on one process: graphfit train --resume " + run + " --set distribute=null"
           if was == 1 else
           f"on {was} workers: start {was} processes, each with its TF_CONFIG, running "
           f"graphfit train --resume {run}")
    raise ValueError(
        f"the run {run} was trained with its stream read by {_describe(recorded)}, and this "
        f"resume runs {_describe(current)}: its checkpoint's position counts batches of each "
        f"worker's own part of the training split, so with {now} worker(s) the resumed "
        f"epoch would repeat some records and skip others. Resume it {how}; or, to train on "
        f"{now} worker(s), train the recipe again into a new run (graphfit train RECIPE "
        f"--run-dir NEW)")


def _describe(deal: dict) -> str:
    """'1 process' / '2 workers (by file: worker 0 reads a, b; worker 1 reads c)'."""
    workers = deal.get("workers", 1)
    if workers == 1:
        return "1 process (every training file)"
    if deal.get("by") != "file":
        return f"{workers} workers (by record: worker i keeps record j when j mod {workers} = i)"
    parts = "; ".join(f"worker {i} reads {', '.join(files)}"
                      for i, files in enumerate(deal.get("files", [])))
    return f"{workers} workers (by file: {parts})"

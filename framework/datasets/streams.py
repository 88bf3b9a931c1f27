"""Data larger than memory: CSV, TFRecord or Parquet shards read by `tf.data`, never loaded whole.

A `Stream` names the files (a glob or a list) and the columns they hold (name -> dtype and
shape), which column is the target and, optionally, a key column. Its datasets read the files
through `tf.data`: the files interleaved (several read at once, in a fixed order), the records
shuffled through a buffer, batched, parsed a whole batch at a time in parallel, and prefetched.

The stages of one batch, each a seam:

    records (serialized strings)  ->  a batch of records  ->  a dict of columns (`parse`)
        ->  `transform(dict) -> dict` (optional: a preprocessor built on Keras
            preprocessing layers plugs in here, inside `dataset.map`)
        ->  (x, y) (`to_xy`; the standardization, when given, in float64 as `Standardizer`)

Splits are by file (a seeded shuffle of the sorted file list, then the last fractions) or by a
hash of the key column (`tf.strings.to_hash_bucket_fast` into 1000 buckets), so a record is in
the same split on every pass and on every worker. The training dataset repeats its pass
forever, each pass reshuffled from the seed (files and records), so one iterator serves every
epoch; `tf.train.Checkpoint` can hold that iterator (`graphfit.saving.checkpoints.input_state`),
which is how a run resumes in the middle of an epoch. Under several workers each worker reads
its own part of a split (`shards=`, `graphfit.datasets.stream_shards`).

Example:

    >>> import os, tempfile
    >>> import numpy as np
    >>> folder = tempfile.mkdtemp()
    >>> x, y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10)
    >>> files = write_tfrecord_shards(x, y, folder, 2)  # rows 0-4, rows 5-9
    >>> stream = Stream(os.path.join(folder, "*.tfrecord"),
    ...                 {"x": {"dtype": "float32", "shape": [2]}, "y": "int64"}, target="y")
    >>> [(a.shape, b.tolist()) for a, b in stream.dataset(stream.files, 4).as_numpy_iterator()]
    [((4, 2), [0, 5, 1, 6]), ((4, 2), [2, 7, 3, 8]), ((2, 2), [4, 9])]
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os
from typing import Callable

import numpy as np
import tensorflow as tf

from graphfit.datasets import parquet_shards
from graphfit.datasets.pipeline_functions import own_function, user_function
from graphfit.datasets.stream_files import (
    check_csv_headers,
    csv_header,
    first_bad_record,
    write_csv_shards,
    write_tfrecord_shards,
)

__all__ = ["Stream", "Column", "StreamPart", "BadRecordError", "HASH_BUCKETS",
           "steps_per_pass", "write_tfrecord_shards", "write_csv_shards", "resolve_files",
           "format_of"]

HASH_BUCKETS = 1000
_DTYPES = ("float32", "float64", "int32", "int64", "string")
_FORMATS = {".tfrecord": "tfrecord", ".tfrec": "tfrecord", ".tfrecords": "tfrecord",
            ".csv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet"}


class BadRecordError(ValueError):
    """A record of a stream that cannot be read or parsed: `file` and `record` (from 0)."""

    def __init__(self, file: str, record: int, message: str):
        self.file, self.record = file, record
        super().__init__(message)


@dataclasses.dataclass(frozen=True)
class Column:
    """One declared column: its dtype and the shape of one record's value."""

    name: str
    dtype: str = "float32"
    shape: tuple = ()
    #: a CSV's empty cell becomes this (None: an empty cell is a bad record)
    default: object = None

    @property
    def tf_dtype(self) -> tf.DType:
        return tf.as_dtype(self.dtype)

    @property
    def stored_dtype(self) -> tf.DType:
        """How a TFRecord `Example` holds it: float32, int64 or bytes."""
        if self.dtype == "string":
            return tf.string
        return tf.float32 if self.tf_dtype.is_floating else tf.int64


@dataclasses.dataclass(frozen=True)
class StreamPart:
    """The records of one split: `files`, and when splitting by key the hash buckets
    [low, high) of the key whose records belong to it."""

    files: tuple
    buckets: tuple | None = None


def _columns(columns) -> list[Column]:
    if not isinstance(columns, dict) or not columns:
        raise ValueError(f"columns must be a mapping of column name -> dtype or {{dtype, "
                         f"shape}}. Received: columns={columns!r}")
    parsed = []
    for name, value in columns.items():
        value = dict(value or {}) if isinstance(value, (dict, type(None))) else {"dtype": value}
        dtype, shape = value.pop("dtype", "float32"), value.pop("shape", [])
        default = value.pop("default", None)
        if value or dtype not in _DTYPES or not isinstance(shape, (list, tuple)) or not all(
                isinstance(n, int) and n > 0 for n in shape):
            raise ValueError(
                f"columns[{name!r}] must be a dtype ({', '.join(_DTYPES)}) or {{dtype, shape: "
                f"[positive sizes], default}}. Received: {columns[name]!r}")
        parsed.append(Column(str(name), dtype, tuple(shape), default))
    return parsed


def resolve_files(files) -> list[str]:
    patterns = [files] if isinstance(files, (str, os.PathLike)) else files
    if not isinstance(patterns, (list, tuple)) or not patterns:
        raise ValueError(f"files must be a glob pattern or a list of files or patterns. "
                         f"Received: files={files!r}")
    found: list[str] = []
    for pattern in patterns:
        pattern = os.path.expanduser(os.fspath(pattern))
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else (
            [pattern] if os.path.isfile(pattern) else [])
        if not matches:
            raise ValueError(f"files: no file matches {pattern!r}; give existing files or a "
                             f"glob such as 'shards/*.tfrecord'")
        found += [m for m in matches if m not in found]
    return found


def format_of(path: str) -> tuple[str | None, str | None]:
    """(format, compression) from a file name: "x.tfrecord.gz" -> ("tfrecord", "GZIP")."""
    stem, extension = os.path.splitext(path.lower())
    compression = None
    if extension in (".gz", ".gzip", ".zz"):
        compression = "GZIP" if extension != ".zz" else "ZLIB"
        stem, extension = os.path.splitext(stem)
    return _FORMATS.get(extension), compression


class Stream:
    """Shards of CSV, TFRecord or Parquet files with a declared schema, read by `tf.data`.

    Args:
        files: a glob pattern, or a list of files and patterns (matches sorted by name).
        columns: {name: dtype} or {name: {"dtype": ..., "shape": [...]}} (dtypes float32,
            float64, int32, int64, string; shape [] by default). x holds the columns other
            than `target` and `key`, in this order: one column as it is, several flattened
            and concatenated (as float32).
        target: the label column, or None (no labels).
        key: a column whose hash chooses each record's split (`split(..., by_key=True)`);
            it is not a feature.
        format: "auto" (from the extension: .tfrecord/.tfrec, .csv, .parquet; a further .gz
            means GZIP), "tfrecord", "csv" or "parquet". TFRecord files hold
            `tf.train.Example`s; Parquet files are read a record batch at a time (pyarrow,
            `graphfit.datasets.parquet_shards`), a null cell becoming the column's `default`.
        compression: "auto" (from the extension), "none", "GZIP" or "ZLIB".
        delimiter: the CSV separator. A CSV file starts with a header row naming its columns.
        sample_weight: a numeric column weighting each record's loss (finite, >= 0; needs a
            target): the batches are then (x, y, weight); it is not a feature.
        transform: `dict -> dict` on a batch of parsed columns, before (x, y) (inside
            `dataset.map`), or `dict -> (x, y)`: the model's input and labels themselves
            (a `graphfit.tabular.TablePreprocessor` of typed columns). AutoGraph converts
            it, as `tf.data` converts the functions it is given (a Python `if` on a tensor
            works); graphfit's own functions around it are traced as written.

    Raises:
        ValueError: naming the argument, for a bad schema, missing files, or CSV headers
            without a declared column.

    Example:

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "part-0.csv")
        >>> with open(path, "w") as f:
        ...     _ = f.write("a,b,label\\n1,2,0\\n3,4,1\\n")
        >>> stream = Stream(path, {"a": "float32", "b": "float32", "label": "int64"},
        ...                 target="label")
        >>> x, y = next(iter(stream.dataset(stream.files, 2)))
        >>> x.numpy().tolist(), y.numpy().tolist()
        ([[1.0, 2.0], [3.0, 4.0]], [0, 1])
    """

    def __init__(self, files, columns, target: str | None = None, key: str | None = None,
                 format: str = "auto", compression: str = "auto", delimiter: str = ",",
                 transform: Callable | None = None, sample_weight: str | None = None):
        self.columns = _columns(columns)
        names = [c.name for c in self.columns]
        for argument, name in (("target", target), ("key", key),
                               ("sample_weight", sample_weight)):
            if name is not None and name not in names:
                raise ValueError(f"{argument} must be one of the declared columns "
                                 f"({', '.join(names)}). Received: {argument}={name!r}")
        self.target, self.key, self.transform = target, key, transform
        self.sample_weight = parquet_shards.weight_column(self, sample_weight)
        self.features = [c for c in self.columns if c.name not in (target, key, sample_weight)]
        if not self.features:
            raise ValueError(f"columns: no feature column left besides target={target!r} and "
                             f"key={key!r}; declare the columns x is made of")
        self.files = resolve_files(files)
        guessed, packed = format_of(self.files[0])
        if format not in ("auto", "tfrecord", "csv", "parquet"):
            raise ValueError(f"format must be 'auto', 'tfrecord', 'csv' or 'parquet'. "
                             f"Received: format={format!r}")
        self.format = guessed if format == "auto" else format
        if self.format is None:
            raise ValueError(f"format='auto' cannot tell the format of {self.files[0]!r} from "
                             f"its extension; pass format='tfrecord' or format='csv'")
        if compression not in ("auto", "none", None, "GZIP", "ZLIB"):
            raise ValueError(f"compression must be 'auto', 'none', 'GZIP' or 'ZLIB'. "
                             f"Received: compression={compression!r}")
        self.compression = packed if compression == "auto" else (
            None if compression in ("none", None) else compression)
        self.delimiter = delimiter
        if self.format == "csv":
            self._check_csv()
        else:  # every shard holds records and the declared columns (parquet_shards)
            self.stored_dtypes = parquet_shards.check_shards(self)

    # ------------------------------------------------------------------ reading records
    def _check_csv(self) -> None:
        wrong = [c.name for c in self.columns if c.shape]
        if wrong:
            raise ValueError(f"columns {wrong}: a CSV column holds one value per row; declare "
                             f"shape [] (or write TFRecord shards)")
        header = csv_header(self.files[0], self.compression, self.delimiter)
        check_csv_headers(self.files, header, self.compression, self.delimiter)
        missing = [c.name for c in self.columns if c.name not in header]
        if missing:
            raise ValueError(f"columns {missing} are not in the header of {self.files[0]} "
                             f"(it has: {', '.join(header)})")
        self._header = header

    def file_records(self, path):
        """The records of one file: serialized Examples, or CSV lines after the header."""
        compression = self.compression or ""
        if self.format == "tfrecord":
            return tf.data.TFRecordDataset(path, compression_type=compression)
        if self.format == "parquet":  # rows re-encoded as Examples, a record batch at a time
            return parquet_shards.parquet_records(self, path)
        return tf.data.TextLineDataset(path, compression_type=compression).skip(1)

    def records(self, part, cycle_length: int = 4, order_seed=None):
        """One pass over the records of `part` (a `StreamPart` or a list of files):
        `cycle_length` files read at once, their records interleaved in a fixed order.
        `order_seed`: a shape [2] int64 tensor from which the file order is drawn (a
        stateless shuffle, so a checkpointed iterator replays it exactly)."""
        part = part if isinstance(part, StreamPart) else StreamPart(tuple(part))
        names = tf.constant(list(part.files))
        if order_seed is not None and len(part.files) > 1:
            names = tf.random.experimental.stateless_shuffle(names, seed=order_seed)
        files = tf.data.Dataset.from_tensor_slices(names)
        cycle = max(1, min(cycle_length, len(part.files)))
        parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True} \
            if cycle > 1 else {}
        records = files.interleave(own_function(self.file_records), cycle_length=cycle,
                                   block_length=1, **parallel)
        if part.buckets is not None:
            low, high = part.buckets
            records = records.filter(own_function(lambda r: self._in_buckets(r, low, high)))
        return records

    def _in_buckets(self, record, low: int, high: int):
        bucket = tf.strings.to_hash_bucket_fast(self._key_text(record), HASH_BUCKETS)
        return (bucket >= low) & (bucket < high)

    def _key_text(self, record):
        column = next(c for c in self.columns if c.name == self.key)
        if self.format != "csv":
            value = parquet_shards.parse_examples(self, record, [column], single=True)[
                column.name]
        else:
            index = self._header.index(column.name)
            value = tf.io.decode_csv(record, [tf.constant([], column.tf_dtype)],
                                     field_delim=self.delimiter, select_cols=[index])[0]
        value = tf.reshape(value, [-1])[0]
        return value if value.dtype == tf.string else tf.strings.as_string(value)

    # ------------------------------------------------------------------ parsing
    def csv_field_column(self, field: int):
        """The column that `parse` reads as CSV field `field` (TensorFlow's error counts the
        fields it was asked for, in the file's order)."""
        return sorted(self.columns, key=lambda c: self._header.index(c.name))[field]

    def parse(self, records) -> dict:
        """A batch of records (a string vector) -> {column: batched tensor}."""
        if self.format != "csv":
            return parquet_shards.parse_examples(self, records, self.columns)
        chosen = sorted(self.columns, key=lambda c: self._header.index(c.name))
        values = tf.io.decode_csv(records, [tf.constant([] if c.default is None else
                                              [c.default], c.tf_dtype) for c in chosen],
                                  field_delim=self.delimiter,
                                  select_cols=[self._header.index(c.name) for c in chosen])
        by_name = dict(zip((c.name for c in chosen), values))
        return {c.name: by_name[c.name] for c in self.columns}

    def to_xy(self, features: dict, standardizer=None):
        """(x, y) of a batch of columns (y left out without a target). `standardizer`:
        anything with `mean` and `std` per flattened feature (`Standardizer`)."""
        parts = [features[c.name] for c in self.features]
        if any(p.dtype == tf.string for p in parts):
            raise ValueError("a string column reaches x: give the Stream a transform that "
                             "turns it into numbers, or leave it out of the columns")
        if len(parts) == 1:  # a scalar column is one feature per record: [batch, 1]
            x = parts[0] if parts[0].shape.rank != 1 else tf.reshape(parts[0], [-1, 1])
            x = tf.cast(x, tf.float32) if x.dtype.is_floating else x
        else:  # scalar columns side by side: a static width, so a Dense layer can build
            x = tf.concat([tf.reshape(tf.cast(p, tf.float32), [-1, _width(p)]) for p in parts],
                          axis=1)
        if standardizer is not None:
            static, shape = x.shape, tf.shape(x)
            flat = tf.reshape(tf.cast(x, tf.float64), [shape[0], -1])
            flat = (flat - tf.constant(standardizer.mean, tf.float64)) / tf.constant(
                standardizer.std, tf.float64)
            x = tf.ensure_shape(tf.reshape(tf.cast(flat, tf.float32), shape), static)
        if self.target is None:
            return x
        y = features[self.target]
        if y.dtype.is_integer:
            y = tf.cast(y, tf.int32)
        elif y.dtype.is_floating:
            y = tf.cast(y, tf.float32)
        return parquet_shards.weighed(self, features, (x, y))

    def converter(self, standardizer):
        """records -> (x, y): graphfit's own `tf.data` function, the user's `transform`
        inside it converted by AutoGraph (`pipeline_functions`)."""
        @own_function
        def convert(records):
            features = self.parse(records)
            if self.transform is not None:
                features = user_function(self.transform)(features)
                if not isinstance(features, dict):  # the model's (x, y) already
                    return features
            return self.to_xy(features, standardizer)

        return convert

    # ------------------------------------------------------------------ datasets
    def feature_batches(self, part, batch_size: int, cycle_length: int = 4,
                        sample: int | None = None):
        """One pass of batches of parsed columns ({name: tensor}), in file order: the
        dataset a per-column preprocessor adapts on (`adapt(dataset)`); `sample`: its first
        `sample` records only."""
        records = self.records(part, cycle_length)
        if sample is not None:
            records = records.take(sample)
        records = records.batch(batch_size)
        return records.map(own_function(self.parse), num_parallel_calls=tf.data.AUTOTUNE,
                           deterministic=True).prefetch(tf.data.AUTOTUNE)

    def dataset(self, part, batch_size: int, *, shuffle_buffer: int = 0, seed: int = 0,
                repeat: bool = False, standardizer=None, cycle_length: int = 4, start=None,
                shards=None):
        """Batches of (x, y): one pass over `part` (a `StreamPart` or files), or passes
        forever with `repeat`. A pass ends with a smaller batch when `batch_size` does not
        divide it, as `fit` over arrays does.

        With `shuffle_buffer` > 0, pass p is shuffled from (`seed`, p): the file order, then
        the records in consecutive windows of `shuffle_buffer` records (as they come from
        the interleaved files), each window permuted. Every draw is a stateless function
        of (seed, pass, window), never a random generator's state: pass p holds the same
        records in the same order whenever and wherever it is read (tf.data's `shuffle`
        reseeds each pass from a generator's state instead).

        `start`: an int64 variable [first pass, records to skip in it], read when an
        iterator starts: the iterator then yields what an iterator from the beginning would
        yield after those records (read, not parsed), which is how a run resumes mid-epoch.

        `shards`: this worker's part under several workers (`stream_shards.worker_shards`):
        batches of its own records only, by its per-worker batch (`batch_size` is then the
        global batch), `shards.steps` of them every pass; `start[1]` counts this worker's
        records done (whole batches of its own).

        Iterating it stops at a record that cannot be read or parsed with a
        `tf.errors.InvalidArgumentError` (a Parquet cell that does not fit its column names
        its file, row and column); `bad_record(part, error)` turns that into the
        `BadRecordError` of its file and record, in words.
        """
        shuffled = shuffle_buffer > 0
        convert = self.converter(standardizer)
        read = part if shards is None or shards.files is None else StreamPart(
            shards.files, (part if isinstance(part, StreamPart) else StreamPart(
                tuple(part))).buckets)

        @own_function
        def one_pass(number):
            pass_seed = tf.stack([tf.constant(seed, tf.int64), number])
            records = self.records(read, cycle_length, pass_seed if shuffled else None)
            parse = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
            skip = None if start is None else tf.where(number == start[0], start[1], 0)
            if shuffled:
                windows = records.batch(shuffle_buffer).enumerate().map(own_function(
                    lambda window, block: tf.random.experimental.stateless_shuffle(
                        block, seed=pass_seed * 1_000_003 + tf.stack([window, window]))))
                if shards is None:
                    if skip is not None:
                        windows = _skip_records(windows, skip, shuffle_buffer)
                    # rebatch(n): the batches of unbatch().batch(n), across windows, without
                    # a tf.data element per record (a per-record cost)
                    return windows.rebatch(batch_size).map(convert, **parse)
                records = windows.unbatch()  # a worker keeps its own records of each window
            if shards is not None:  # its own records, in as many batches as every worker's
                batches = shards.batches(shards.own(records), None if skip is None
                                         else skip // shards.batch_size)
            else:
                batches = (records if skip is None else records.skip(skip)).batch(batch_size)
            return batches.map(convert, **parse)

        if start is None:
            passes = tf.data.Dataset.counter() if repeat else tf.data.Dataset.range(1)
        else:
            passes = tf.data.Dataset.range(1).flat_map(own_function(  # the start, read as
                lambda _: tf.data.Dataset.counter(start[0]) if repeat  # iteration begins
                else tf.data.Dataset.range(start[0], start[0] + 1)))
        return passes.flat_map(one_pass).prefetch(tf.data.AUTOTUNE)

    # ------------------------------------------------------------------ splits
    def split(self, validation: float, test: float, seed: int, by_key: bool = False):
        """{"train", "val", "test"} -> `StreamPart` (None for an empty fraction).

        By file: the files shuffled from `seed`, the last `test` fraction (rounded, at least
        one file when the fraction is above 0) the test files, the `validation` fraction
        before them the validation files. By key: buckets [0, test*1000) test,
        [test*1000, (test+validation)*1000) validation, the rest training.

        Raises:
            ValueError: when a fraction above 0 gets no file, or no file is left to train on.
        """
        if by_key:
            if self.key is None:
                raise ValueError("split(by_key=True) needs the stream's key column")
            cut_test = int(round(test * HASH_BUCKETS))
            cut_val = cut_test + int(round(validation * HASH_BUCKETS))
            files = tuple(self.files)
            return {"train": StreamPart(files, (cut_val, HASH_BUCKETS)),
                    "val": StreamPart(files, (cut_test, cut_val)) if validation else None,
                    "test": StreamPart(files, (0, cut_test)) if test else None}
        order = [self.files[i] for i in np.random.default_rng(seed).permutation(len(self.files))]
        count = len(order)
        n_test = max(1, int(round(count * test))) if test > 0 else 0
        n_val = max(1, int(round(count * validation))) if validation > 0 else 0
        if n_test + n_val >= count:
            raise ValueError(
                f"validation_split {validation} and test_split {test} of {count} file(s) leave "
                f"no file to train on: a split by file needs more files (write more shards), "
                f"or split by a key column")
        train, val, rest = order[:count - n_test - n_val], order[count - n_test - n_val:
                                                                   count - n_test], order[
            count - n_test:]
        return {"train": StreamPart(tuple(sorted(train))),
                "val": StreamPart(tuple(sorted(val))) if val else None,
                "test": StreamPart(tuple(sorted(rest))) if rest else None}

    # ------------------------------------------------------------------ statistics
    def statistics(self, part, sample: int | None = None, batch_size: int = 4096):
        """One pass over `part` in file order: (records counted, mean, std) of x per
        flattened feature, over finite values, as `Standardizer.fit` computes them (std 0
        becomes 1). `sample`: the statistics of the first `sample` records only (the
        count is still that of every record).

        Raises:
            BadRecordError: for a record that cannot be read, naming its file and index.
        """
        count, total, mean, m2 = 0, None, None, None
        try:
            for features in self.feature_batches(part, batch_size):
                x = self.to_xy(features)[0] if self.target else self.to_xy(features)
                flat = x.numpy().reshape(len(x), -1).astype(np.float64)
                rows = len(flat)
                if sample is not None and count < sample:
                    flat = flat[: sample - count]
                elif sample is not None:
                    flat = flat[:0]
                count += rows
                total, mean, m2 = _merged(total, mean, m2, flat)
        except tf.errors.OpError as error:
            raise self.bad_record(part, error) from None
        if mean is None:
            raise ValueError(f"the files {list(_files_of(part))} hold no record for this split")
        std = np.sqrt(m2 / np.maximum(total, 1))
        return count, np.where(total > 0, mean, 0.0), np.where(std > 0, std, 1.0)

    def count(self, part) -> int:
        """How many records `part` holds (one pass, nothing parsed but a key)."""
        try:
            return int(self.records(part).reduce(np.int64(0),
                                                 own_function(lambda n, _: n + 1)))
        except tf.errors.OpError as error:
            raise self.bad_record(part, error) from None

    # ------------------------------------------------------------------ bad records
    def bad_record(self, part, error: Exception | None = None) -> Exception:
        """The `BadRecordError` naming the first record of `part` (in file order) that
        cannot be read or parsed, or `error` itself when every record reads."""
        found = first_bad_record(self, _files_of(part))
        if found is None:
            return error if error is not None else ValueError("every record reads")
        file, index, reason = found
        line = f"; line {index + 2} of the file" if self.format == "csv" else ""
        # a Parquet cell's own message names its file and row already: said once
        reason = reason.removeprefix(f"{file}, row {index} (counting from 0), ")
        return BadRecordError(file, index, f"{file}, record {index} (counting from 0{line}): "
                                           f"{reason}")


def _files_of(part) -> tuple:
    return part.files if isinstance(part, StreamPart) else tuple(part)


def _merged(total, mean, m2, flat: np.ndarray):
    """Chan's parallel update of per-feature count, mean and sum of squared deviations with
    one batch, over its finite values."""
    finite = np.isfinite(flat)
    n = finite.sum(axis=0).astype(np.float64)
    values = np.where(finite, flat, 0.0)
    batch_mean = values.sum(axis=0) / np.maximum(n, 1)
    batch_m2 = np.where(finite, (flat - batch_mean) ** 2, 0.0).sum(axis=0)
    if total is None:
        return n, batch_mean, batch_m2
    combined = total + n
    delta = batch_mean - mean
    safe = np.maximum(combined, 1)
    mean = mean + delta * n / safe
    m2 = m2 + batch_m2 + delta ** 2 * total * n / safe
    return combined, mean, m2


def steps_per_pass(records: int, batch_size: int) -> int:
    """Batches in one pass over `records` records (the last one smaller)."""
    return max(1, math.ceil(records / batch_size))


def _width(part: tf.Tensor) -> int:
    """Values per record of a parsed column batch: 1 for a scalar column, else the product of
    its declared (static) shape."""
    width = 1
    for size in part.shape[1:]:
        if size is None:
            raise ValueError("a column without a fixed shape cannot join the feature vector; "
                             "declare its shape")
        width *= size
    return width


def _skip_records(windows, count, window_size: int):
    """`windows` (record blocks of `window_size`, the last one shorter) less their first
    `count` records: the whole windows they cover, then the head of the next window."""
    head = count % window_size
    return windows.skip(count // window_size).enumerate().map(own_function(
        lambda index, block: block[tf.where(index == 0, head, 0):])).filter(own_function(
        lambda block: tf.size(block) > 0))

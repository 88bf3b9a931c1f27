"""Writing shards for a `Stream` (TFRecord or CSV), reading CSV headers, and finding the first
record of a set of files that cannot be read.

Example:

    >>> import tempfile
    >>> import numpy as np
    >>> files = write_csv_shards(np.ones((5, 2)), np.arange(5), tempfile.mkdtemp(), 2)
    >>> [os.path.basename(f) for f in files]
    ['shard-00000-of-00002.csv', 'shard-00001-of-00002.csv']
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
import re

import numpy as np
import tensorflow as tf

__all__ = ["write_tfrecord_shards", "write_csv_shards", "csv_header", "check_csv_headers",
           "first_bad_record"]


def _check_shards(x, y, directory, num_shards) -> tuple[np.ndarray, np.ndarray | None]:
    x = np.asarray(x)
    if x.ndim == 0 or not len(x):
        raise ValueError(f"x must hold at least one sample. Received x of shape {x.shape}")
    if y is not None:
        y = np.asarray(y)
        if len(y) != len(x):
            raise ValueError(f"x has {len(x)} samples but y has {len(y)}; give one label per "
                             f"sample")
    if isinstance(num_shards, bool) or not isinstance(num_shards, (int, np.integer)) or not (
            1 <= num_shards <= len(x)):
        raise ValueError(f"num_shards must be an integer from 1 to the number of samples "
                         f"({len(x)}). Received: num_shards={num_shards!r}")
    if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory):
        raise ValueError(f"directory must be a folder path. Received: directory={directory!r}")
    os.makedirs(directory, exist_ok=True)
    return x, y


def _shard_rows(count: int, num_shards: int):
    """Contiguous row ranges, one per shard: rows in file order are the rows of x."""
    size = math.ceil(count / num_shards)
    return [(start, min(start + size, count)) for start in range(0, count, size)]


def _feature(value: np.ndarray) -> tf.train.Feature:
    flat = value.reshape(-1)
    if np.issubdtype(flat.dtype, np.floating):
        return tf.train.Feature(float_list=tf.train.FloatList(value=flat.astype(np.float32)))
    if np.issubdtype(flat.dtype, np.integer) or flat.dtype == np.bool_:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=flat.astype(np.int64)))
    return tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[str(v).encode("utf-8") for v in flat]))


def write_tfrecord_shards(x, y, directory, num_shards: int, *, x_name: str = "x",
                          y_name: str = "y", compression: str | None = None,
                          prefix: str = "shard") -> list[str]:
    """Writes (x, y) as `num_shards` TFRecord files of `tf.train.Example`s, rows in order
    (shard 0 holds the first rows), for a `Stream` or `source: stream`.

    Floats are stored as float32, integers and booleans as int64, anything else as bytes.

    Args:
        x: the features, one row per sample (any shape per sample).
        y: the labels, or None.
        directory: the folder to write into (created if missing).
        num_shards: how many files.
        x_name, y_name: the feature names in each Example (the stream's column names).
        compression: None or "GZIP" (files end in ".tfrecord.gz").
        prefix: the start of each file name.

    Returns:
        The files written, in row order.

    Raises:
        ValueError: for mismatched lengths or a bad `num_shards` or `compression`.
    """
    x, y = _check_shards(x, y, directory, num_shards)
    if compression not in (None, "GZIP"):
        raise ValueError(f"compression must be None or 'GZIP'. Received: "
                         f"compression={compression!r}")
    ranges = _shard_rows(len(x), num_shards)
    ending = ".tfrecord.gz" if compression else ".tfrecord"
    options = tf.io.TFRecordOptions(compression_type=compression or "")
    written = []
    for index, (start, stop) in enumerate(ranges):
        path = os.path.join(directory, f"{prefix}-{index:05d}-of-{len(ranges):05d}{ending}")
        with tf.io.TFRecordWriter(path, options) as writer:
            for row in range(start, stop):
                features = {x_name: _feature(x[row])}
                if y is not None:
                    features[y_name] = _feature(np.asarray(y[row]))
                writer.write(tf.train.Example(features=tf.train.Features(
                    feature=features)).SerializeToString())
        written.append(path)
    return written


def write_csv_shards(x, y, directory, num_shards: int, *, names: list[str] | None = None,
                     y_name: str = "y", compression: str | None = None,
                     prefix: str = "shard") -> list[str]:
    """Writes (x, y) as `num_shards` CSV files with a header row, rows in order.

    Args:
        x: the features, one row per sample (flattened to columns).
        y: the labels (one column), or None.
        directory: the folder to write into.
        num_shards: how many files.
        names: the feature columns' names (default x0, x1, ...).
        y_name: the label column's name.
        compression: None or "GZIP" (files end in ".csv.gz").
        prefix: the start of each file name.

    Returns:
        The files written, in row order.
    """
    x, y = _check_shards(x, y, directory, num_shards)
    flat = x.reshape(len(x), -1)
    names = list(names) if names is not None else [f"x{i}" for i in range(flat.shape[1])]
    if len(names) != flat.shape[1]:
        raise ValueError(f"names gives {len(names)} names for {flat.shape[1]} feature columns")
    if compression not in (None, "GZIP"):
        raise ValueError(f"compression must be None or 'GZIP'. Received: "
                         f"compression={compression!r}")
    header = names + ([y_name] if y is not None else [])
    ranges = _shard_rows(len(x), num_shards)
    written = []
    for index, (start, stop) in enumerate(ranges):
        path = os.path.join(directory, f"{prefix}-{index:05d}-of-{len(ranges):05d}.csv"
                                       + (".gz" if compression else ""))
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(header)
        for row in range(start, stop):
            cells = [repr(float(v)) if np.issubdtype(flat.dtype, np.floating) else str(v)
                     for v in flat[row]]
            writer.writerow(cells + ([str(np.asarray(y[row]).item())] if y is not None else []))
        opener = gzip.open if compression else open
        with opener(path, "wt", encoding="utf-8", newline="") as handle:
            handle.write(text.getvalue())
        written.append(path)
    return written


def csv_header(path: str, compression: str | None, delimiter: str) -> list[str]:
    """The column names of a CSV shard's first line."""
    first = tf.data.TextLineDataset(path, compression_type=compression or "").take(1)
    lines = [line.decode("utf-8-sig") for line in first.as_numpy_iterator()]
    if not lines or not lines[0].strip():
        raise ValueError(f"{path} is empty: a CSV shard starts with a header row naming its "
                         f"columns")
    return [cell.strip() for cell in next(csv.reader([lines[0]], delimiter=delimiter))]


def check_csv_headers(files, header: list[str], compression, delimiter: str) -> None:
    """Every shard has the same header as the first."""
    for path in files[1:]:
        own = csv_header(path, compression, delimiter)
        if own != header:
            raise ValueError(f"{path} has the header {own}, unlike {files[0]} ({header}): the "
                             f"shards of a stream share one header")


def first_bad_record(stream, files, batch_size: int = 1024):
    """(file, record index, reason) of the first record, in file order, that cannot be read
    or parsed into (x, y), or None. A stream whose string columns reach x only through a
    table's preprocessing (typed columns) is checked by parsing alone: `to_xy` would refuse
    every record for that, not for a bad one."""
    typed = stream.transform is None and any(c.tf_dtype == tf.string for c in stream.features)
    convert = stream.parse if typed else stream.converter(None)
    for path in files:
        records = stream.file_records(path)
        done = 0
        iterator = iter(records.batch(batch_size))
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                break
            except tf.errors.OpError as error:  # the file itself is damaged here
                return path, done + _readable_count(stream, path, done), _reason(error)
            try:
                convert(batch)
            except (tf.errors.OpError, ValueError):
                for offset in range(len(batch)):
                    try:
                        convert(batch[offset:offset + 1])
                    except (tf.errors.OpError, ValueError) as error:
                        record = batch[offset:offset + 1]
                        return path, done + offset, (_explained(stream, record)
                                                     or _field_problem(stream, error)
                                                     or _reason(error))
            done += len(batch)
    return None


def _field_problem(stream, error: Exception) -> str | None:
    """A CSV cell that does not read as its column's dtype, said by the column's name."""
    found = re.search(r"Field (\d+) in record \d+ is not a valid (\w+): (.*)$",
                      _reason(error))
    if found is None or stream.format != "csv":
        return None
    column = stream.csv_field_column(int(found.group(1)))
    return (f"column {column.name!r} holds {found.group(3)!r}, which is not a valid "
            f"{found.group(2)} (the column's type, {column.tf_dtype.name}: declared, or "
            f"inferred from the first records, data.inference_sample); fix the cell, or "
            f"declare the column's type")


def _readable_count(stream, path: str, start: int) -> int:
    """How many records after the first `start` still read one by one before the damage."""
    count = 0
    iterator = iter(stream.file_records(path).skip(start))
    while True:
        try:
            next(iterator)
        except (StopIteration, tf.errors.OpError):
            return count
        count += 1


def _explained(stream, record) -> str | None:
    from graphfit.datasets.parquet_shards import record_problem

    try:
        return record_problem(stream, record)
    except (tf.errors.OpError, ValueError):
        return None


def _reason(error: Exception) -> str:
    """The first line of a TensorFlow error, without its op, node and Python exception name
    (an error raised in a generator reads "ValueError: ...")."""
    text = getattr(error, "message", None) or str(error)
    text = text.split("\n")[0].split(" [Op:")[0]
    if "{{function_node" in text:
        text = text.split("}}", 1)[-1].strip()
    text = re.sub(r"^(ValueError|TypeError): ", "", text)
    failed = re.match(r"^.*?assertion failed: \[(.*)\]$", text)  # a bad Parquet row's mark
    return failed.group(1).replace("\\'", "'").replace('\\"', '"') if failed else text

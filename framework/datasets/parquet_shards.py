"""Parquet and TFRecord shards of a `Stream`: checking them, reading Parquet a record batch at
a time, parsing records into columns, and the sample-weight column.

A Parquet shard is read with `pyarrow.parquet.ParquetFile.iter_batches` (one record batch,
`BATCH_ROWS` rows, in memory at a time, never the whole file) inside
`tf.data.Dataset.from_generator`; each row is re-encoded as a `tf.train.Example`
(`example_encoding`: numbers a batch at a time), so from there
on a Parquet stream is a TFRecord stream: the same interleaving, key-hash splits, shuffle
windows, resume (records skipped, not parsed) and parsing. A null cell becomes the column's
`default` (typed columns: NaN or ""); without one, a null is a bad record. A cell that does not
fit the column's dtype stops the read with the file and the row.

A TFRecord stream's shards are checked when the stream opens: each holds a record, and its
first record has every declared column. The way a column is stored there (float, int64 or
bytes list) is taken from the first shard's first record, so an int64 feature may be declared
float32 or string (a categorical id), and a bytes feature a number (parsed, a bad one failing
with its file and record).

Example:

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> files = write_parquet_shards({"a": [1.0, None, 3.0], "y": ["n", "y", "y"]}, folder, 2)
    >>> from graphfit.datasets import Stream
    >>> stream = Stream(files, {"a": {"dtype": "float32", "default": -1.0}, "y": "string"},
    ...                 target="y")
    >>> [(x.tolist(), y.tolist()) for x, y in stream.dataset(stream.files, 3).as_numpy_iterator()]
    [([[1.0], [3.0], [-1.0]], [b'n', b'y', b'y'])]
"""

from __future__ import annotations

import math
import os

import numpy as np
import tensorflow as tf

from graphfit.datasets.example_encoding import encode_rows
from graphfit.datasets.pipeline_functions import own_function

__all__ = ["check_shards", "parquet_records", "parse_examples", "weight_column", "weighed",
           "write_parquet_shards", "record_problem", "BATCH_ROWS"]

#: rows of a Parquet shard read at once (one record batch in memory)
BATCH_ROWS = 1024
_KINDS = {"float_list": tf.float32, "int64_list": tf.int64, "bytes_list": tf.string}


def _pyarrow():
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise ValueError("files: reading Parquet shards needs pyarrow: "
                         "pip install 'graphfit[tabular]'") from None
    return parquet


# ---------------------------------------------------------------------- checks when opening
def check_shards(stream) -> dict:
    """Checks every shard of a TFRecord or Parquet `stream` (not empty, every declared column
    there) and returns {column: how its records store it (tf.float32, tf.int64, tf.string)}.

    Raises:
        ValueError: naming the shard: unreadable, empty, or without a declared column.
    """
    if stream.format == "parquet":
        for path in stream.files:
            _check_parquet(stream, path)
        return {c.name: c.stored_dtype for c in stream.columns}
    stored = None
    for path in stream.files:
        kinds = _first_example_kinds(stream, path)
        missing = [c.name for c in stream.columns if c.name not in kinds]
        if missing:
            raise ValueError(f"columns {missing} are not in the first record of {path} (it "
                             f"has: {', '.join(sorted(kinds))}); every record of every shard "
                             f"holds the declared columns")
        stored = stored or {c.name: kinds[c.name] for c in stream.columns}
    return stored


def _check_parquet(stream, path: str) -> None:
    parquet = _pyarrow()
    try:
        meta = parquet.ParquetFile(path).metadata
    except Exception as error:  # noqa: BLE001 - pyarrow's errors name the problem
        raise ValueError(f"files: {path} is not a readable Parquet file ({error})") from None
    names = [meta.schema.column(i).path.split(".")[0] for i in range(meta.num_columns)]
    missing = [c.name for c in stream.columns if c.name not in names]
    if missing:
        raise ValueError(f"columns {missing} are not in {path} (it has: "
                         f"{', '.join(dict.fromkeys(names))})")
    if meta.num_rows == 0:
        raise ValueError(f"files: {path} holds no row (an empty shard); remove it from the "
                         f"files or write rows into it")


def _first_example_kinds(stream, path: str) -> dict:
    records = tf.data.TFRecordDataset(path, compression_type=stream.compression or "")
    try:
        first = [r for r in records.take(1).as_numpy_iterator()]
    except tf.errors.OpError as error:
        raise ValueError(f"files: {path} is not a readable TFRecord file "
                         f"({str(error).splitlines()[0]})") from None
    if not first:
        raise ValueError(f"files: {path} holds no record (an empty shard); remove it from the "
                         f"files or write records into it")
    example = tf.train.Example()
    try:
        example.ParseFromString(first[0])
    except Exception as error:  # noqa: BLE001 - protobuf's DecodeError
        raise ValueError(f"files: the first record of {path} is not a tf.train.Example "
                         f"({error})") from None
    return {name: _KINDS.get(feature.WhichOneof("kind"), tf.string)
            for name, feature in example.features.feature.items()}


# ---------------------------------------------------------------------- reading Parquet
@own_function
def parquet_records(stream, path) -> tf.data.Dataset:
    """The rows of one Parquet shard as serialized `tf.train.Example`s of the declared
    columns, a record batch at a time."""
    columns = list(stream.columns)

    def rows(name):
        path = name.decode() if isinstance(name, bytes) else str(name)
        handle = _pyarrow().ParquetFile(path)
        done = 0
        try:
            for batch in handle.iter_batches(batch_size=BATCH_ROWS,
                                             columns=[c.name for c in columns]):
                yield from _encoded(columns, batch, path, done)
                done += batch.num_rows
        except ValueError as error:  # a cell that does not fit: `_stop_at_bad` fails there
            if not str(error).startswith(f"{path}, row "):
                raise
            # not raised here: an exception of a generator reaches the user as a TensorFlow
            # error whose text holds the Python traceback
            yield np.array([_BAD + str(error).encode("utf-8")], dtype=object)

    return tf.data.Dataset.from_generator(
        rows, args=(path,), output_signature=tf.TensorSpec([None], tf.string)).map(
        _stop_at_bad).unbatch()


_BAD = b"\x00graphfit bad row\x00"


@own_function
def _stop_at_bad(rows: tf.Tensor) -> tf.Tensor:
    """`rows`, or an `InvalidArgumentError` whose message is the bad row's own (its file,
    row and column) when they are the mark of a row that could not be encoded."""
    bad = tf.strings.substr(rows, 0, len(_BAD)) == _BAD
    reason = tf.strings.reduce_join(tf.strings.substr(tf.boolean_mask(rows, bad), len(_BAD),
                                                      -1))
    with tf.control_dependencies([tf.debugging.Assert(~tf.reduce_any(bad), [reason])]):
        return tf.identity(rows)


def _encoded(columns, batch, path: str, first: int):
    """The Examples of one record batch (one array); at a row that cannot be encoded, the
    rows before it, then the error (so the bad record is counted where it is)."""
    def fallback(start):
        return lambda column, cells: [
            _feature(column, value, path, start + row).SerializeToString()
            for row, value in enumerate(cells)]

    try:
        yield np.array(encode_rows(columns, batch, fallback(first)), dtype=object)
        return
    except ValueError:
        pass
    good = []
    for row in range(batch.num_rows):
        try:
            good += encode_rows(columns, batch.slice(row, 1), fallback(first + row))
        except ValueError:
            if good:
                yield np.array(good, dtype=object)
            raise


def _feature(column, value, path: str, row: int) -> tf.train.Feature:
    where = f"{path}, row {row} (counting from 0), column {column.name!r}"
    if value is None:
        if column.default is None:
            raise ValueError(f"{where} is empty (null); fill it, or declare the column's "
                             f"default")
        value = column.default
    values = value if isinstance(value, (list, tuple)) else [value]
    size = math.prod(column.shape) if column.shape else 1
    if len(values) != size or (not column.shape and isinstance(value, (list, tuple))):
        raise ValueError(f"{where} holds {len(values)} value(s), but the column is declared "
                         f"with shape {list(column.shape)}")
    if column.dtype == "string":
        return tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[_text(v).encode("utf-8") for v in values]))
    try:
        numbers = [float(v) if column.tf_dtype.is_floating else _integer(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"{where} holds {value!r}, which is not a number of its dtype "
                         f"{column.dtype}") from None
    if column.tf_dtype.is_floating:
        return tf.train.Feature(float_list=tf.train.FloatList(value=numbers))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=numbers))


def _integer(value) -> int:
    number = float(value) if not isinstance(value, (int, np.integer)) else value
    if isinstance(number, float) and not number.is_integer():
        raise ValueError(value)
    return int(number)


def _text(cell) -> str:
    """A cell as text, as a table reads Parquet: booleans true/false, integral floats
    without '.0'."""
    if cell is None:
        return ""
    if isinstance(cell, (bool, np.bool_)):
        return "true" if cell else "false"
    if isinstance(cell, (float, np.floating)) and float(cell).is_integer():
        return str(int(cell))
    return str(cell).strip()


# ---------------------------------------------------------------------- parsing records
def parse_examples(stream, records, columns, single: bool = False) -> dict:
    """Serialized Examples (a batch, or one record with `single`) -> {column: tensor of
    its declared dtype}, read as the shards store each column."""
    stored = getattr(stream, "stored_dtypes", None) or {}
    specs = {c.name: tf.io.FixedLenFeature(c.shape, stored.get(c.name, c.stored_dtype))
             for c in columns}
    parsed = (tf.io.parse_single_example if single else tf.io.parse_example)(records, specs)
    return {c.name: _as_declared(parsed[c.name], c) for c in columns}


def _as_declared(value: tf.Tensor, column) -> tf.Tensor:
    if value.dtype == column.tf_dtype:
        return value
    if column.tf_dtype == tf.string:
        return tf.strings.as_string(value)
    if value.dtype == tf.string:
        return tf.strings.to_number(value, column.tf_dtype)
    return tf.cast(value, column.tf_dtype)


def record_problem(stream, record) -> str | None:
    """Why one record (a batch of one) of `stream` does not convert, in words, or None when
    that is not one of these: a value that is not a number in a column declared a number
    (a TFRecord bytes feature), or a sample weight that is negative or not finite."""
    if stream.format != "csv":
        stored = getattr(stream, "stored_dtypes", None) or {}
        specs = {c.name: tf.io.FixedLenFeature(c.shape, stored.get(c.name, c.stored_dtype))
                 for c in stream.columns}
        try:
            raw = tf.io.parse_example(record, specs)
        except tf.errors.OpError:
            return None
        for column in stream.columns:
            if raw[column.name].dtype != tf.string or column.dtype == "string":
                continue
            for value in raw[column.name].numpy().reshape(-1):
                text = value.decode("utf-8", "replace")
                if not _is_number(text, column.tf_dtype.is_floating):
                    return (f"column {column.name!r} holds {text!r}, which is not a number, but "
                            f"the column is declared a number ({column.dtype}); declare it as "
                            f"text (string, or {{type: categorical}}) or fix the value")
    name = getattr(stream, "sample_weight", None)
    if name is None:
        return None
    try:
        weight = float(np.asarray(stream.parse(record)[name]).reshape(-1)[0])
    except (tf.errors.OpError, ValueError, IndexError):
        return None
    if math.isfinite(weight) and weight >= 0:
        return None
    return (f"the sample_weight column {name!r} holds {weight!r}, a weight that is negative "
            f"or not finite; a weight must be finite and >= 0: fix the value or remove the "
            f"record")


def _is_number(text: str, floating: bool) -> bool:
    try:
        float(text) if floating else int(text.strip())
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------- sample weights
def weight_column(stream, name):
    """The sample-weight column's name, checked: a numeric column of a stream with a target."""
    if name is None:
        return None
    column = next(c for c in stream.columns if c.name == name)
    if stream.target is None or column.dtype == "string" or column.shape:
        raise ValueError(f"sample_weight must be a numeric column of one value per record, in "
                         f"a stream with a target. Received: sample_weight={name!r} "
                         f"(dtype {column.dtype}, target {stream.target!r})")
    return name


def weighed(stream, features: dict, xy: tuple) -> tuple:
    """(x, y), with the sample-weight column's values when the stream has one: (x, y, w).
    A weight that is negative or not finite stops the read (the record is then found by
    `Stream.bad_record`)."""
    if getattr(stream, "sample_weight", None) is None:
        return xy
    weight = tf.cast(features[stream.sample_weight], tf.float32)
    valid = tf.reduce_all(tf.math.is_finite(weight) & (weight >= 0))
    check = tf.debugging.Assert(valid, [f"the sample_weight column {stream.sample_weight!r} "
                                        f"holds a weight that is negative or not finite"])
    with tf.control_dependencies([check]):
        weight = tf.identity(weight)
    return xy + (weight,)


# ---------------------------------------------------------------------- writing
def write_parquet_shards(columns: dict, directory, num_shards: int, *, prefix: str = "shard",
                         row_group_size: int | None = None) -> list[str]:
    """Writes {name: values} (equal lengths; None a null) as `num_shards` Parquet files, rows
    in order (shard 0 holds the first rows), for a `Stream` or `source: stream`.

    Raises:
        ValueError: no columns, unequal lengths, or a bad `num_shards`.
    """
    parquet = _pyarrow()
    import pyarrow

    lengths = {len(values) for values in (columns or {}).values()}
    if not columns or len(lengths) != 1 or not lengths.pop():
        raise ValueError(f"columns must map names to equally long, non-empty lists of "
                         f"values. Received the columns {list(columns or {})}")
    count = len(next(iter(columns.values())))
    if isinstance(num_shards, bool) or not isinstance(num_shards, (int, np.integer)) or not (
            1 <= num_shards <= count):
        raise ValueError(f"num_shards must be an integer from 1 to the number of rows "
                         f"({count}). Received: num_shards={num_shards!r}")
    os.makedirs(directory, exist_ok=True)
    size = math.ceil(count / num_shards)
    starts = range(0, count, size)
    written = []
    for index, start in enumerate(starts):
        path = os.path.join(directory, f"{prefix}-{index:05d}-of-{len(starts):05d}.parquet")
        part = {name: list(values[start:start + size]) for name, values in columns.items()}
        parquet.write_table(pyarrow.table(part), path, row_group_size=row_group_size)
        written.append(path)
    return written

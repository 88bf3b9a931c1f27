"""The columns of a `stream` that declares none: typed as inferred from a sample of its
training files, by the rules a `table` infers with (`graphfit.tabular.columns.infer_type`).

The sample is the first `inference_sample` records of the training split, in file order:
split by file, the training files (the same seeded split the stream then makes); split by
key, the records of every file whose key hashes into the training buckets. Every column but
the target, the key, the sample weight and `ignore:` becomes a feature typed as inferred
(numeric, categorical, text, boolean, date); the target is read as int64 when its values are
whole numbers, float32 for other numbers, else as class names (string). `graphfit validate`
prints the inferred schema, as for a table.

Example:

    >>> target_dtype(["1", "0", "1"]), target_dtype(["0.5", "2"]), target_dtype(["a", "b"])
    ('int64', 'float32', 'string')
"""

from __future__ import annotations

import csv
import gzip

__all__ = ["infer_columns", "sample_table", "target_dtype", "INFERRED"]

#: the option that marks a column's type as inferred (dropped before the column is built)
INFERRED = "inferred"


def target_dtype(cells) -> str:
    """How a target column is read: int64 (whole numbers), float32 (numbers), else string."""
    from graphfit.tabular.columns import infer_type, is_missing

    present = [c for c in cells if not is_missing(c)]
    if present and infer_type(present) == "numeric":
        whole = all(float(c).is_integer() for c in present)
        return "int64" if whole else "float32"
    return "string"


def infer_columns(data: dict, seed: int = 0, validation: float = 0.0,
                  test: float = 0.0) -> dict:
    """The `columns:` of a stream `data` source without any: {name: {type, inferred}} for the
    features, a dtype for the target, key and sample weight.

    Raises:
        ValueError: no file, an unreadable or empty sample, an ignored or named column that
            the files lack.
    """
    from graphfit import datasets
    from graphfit.datasets.streams import format_of, resolve_files
    from graphfit.tabular.schema import feature_columns

    files = resolve_files(data["files"])
    guessed, packed = format_of(files[0])
    kind = guessed if data.get("format", "auto") == "auto" else data["format"]
    if kind is None:
        raise ValueError(f"format='auto' cannot tell the format of {files[0]!r} from its "
                         f"extension; give format: csv | tfrecord | parquet")
    compression = data.get("compression", "auto")
    compression = packed if compression == "auto" else (
        None if compression in ("none", None) else compression)
    delimiter = data.get("delimiter", ",")
    limit = data.get("inference_sample") or 1000
    key, weight = data.get("key"), data.get("sample_weight")
    training = files
    if validation or test:
        names = sample_table(files[:1], kind, compression, delimiter, 1).names
        chosen = ([key] if key else []) + [n for n in names if n != key][:1]
        probe = datasets.Stream(files, {name: "string" for name in chosen}, key=key,
                                format=kind, compression=compression, delimiter=delimiter)
        training = list(probe.split(validation, test, seed, by_key=key is not None)[
            "train"].files)
    table = sample_table(training, kind, compression, delimiter,
                         limit if key is None or not (validation or test) else None,
                         keep=_key_filter(key, validation, test, limit))
    target = data.get("target")
    exclude = [name for name in [key, weight, *data.get("ignore", [])] if name]
    columns = {}
    for column in feature_columns(table, None, target, exclude=exclude):
        columns[column.name] = {"type": column.type, INFERRED: True}
    for name, dtype in ((target, target_dtype(table.columns.get(target, []))),
                        (key, "string"), (weight, "float32")):
        if name:
            columns[name] = dtype
    return {name: columns[name] for name in table.names if name in columns}


def _key_filter(key, validation, test, limit):
    """`rows -> rows` keeping the first `limit` rows whose key falls in the training
    buckets (split by key), or None."""
    if key is None or not (validation or test):
        return None

    def keep(table):
        import numpy as np
        import tensorflow as tf

        from graphfit.datasets.streams import HASH_BUCKETS

        low = int(round(test * HASH_BUCKETS)) + int(round(validation * HASH_BUCKETS))
        text = [_cell_text(c) for c in table.columns[key]]
        buckets = tf.strings.to_hash_bucket_fast(tf.constant(text, tf.string),
                                                 HASH_BUCKETS).numpy()
        return table.take(list(np.flatnonzero(buckets >= low)[:limit]))

    return keep


def _cell_text(cell) -> str:
    if cell is None:
        return ""
    if isinstance(cell, float) and cell.is_integer():
        return str(int(cell))
    return str(cell)


def sample_table(files, kind: str, compression, delimiter: str, limit: int | None,
                 keep=None):
    """The first `limit` records (None: every one) of `files`, in order, as a
    `graphfit.tabular.Table` of raw cells; `keep`: `Table -> Table`, a filter applied
    before the limit is counted. Reads no more than it keeps (plus a record batch)."""
    from graphfit.tabular.readers import Table

    read = {"csv": _csv_rows, "parquet": _parquet_rows, "tfrecord": _tfrecord_rows}[kind]
    names, columns = None, {}
    for path in files:
        for row_names, rows in read(path, compression, delimiter):
            if names is None:
                names, columns = list(row_names), {n: [] for n in row_names}
            part = Table(path, names, {n: [r.get(n) for r in rows] for n in names}, None)
            part = keep(part) if keep is not None else part
            for name in names:
                columns[name] += part.columns[name]
            if limit is not None and len(columns[names[0]]) >= limit:
                return Table(files[0], names, {n: c[:limit] for n, c in columns.items()},
                             None)
    if not names or not columns[names[0]]:
        raise ValueError(f"files: no record to infer the column types from in "
                         f"{', '.join(files[:3])}{' ...' if len(files) > 3 else ''}; declare "
                         f"the columns")
    return Table(files[0], names, columns, None)


def _csv_rows(path: str, compression, delimiter: str):
    opener = gzip.open if compression == "GZIP" else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as text:
        reader = csv.reader(text, delimiter=delimiter)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"files: {path} is empty: a CSV shard starts with a header row")
        header = [cell.strip() for cell in header]
        rows = []
        for row in reader:
            rows.append(dict(zip(header, row)))
            if len(rows) == 1024:
                yield header, rows
                rows = []
        yield header, rows


def _parquet_rows(path: str, compression, delimiter: str):
    import pyarrow.parquet as parquet

    handle = parquet.ParquetFile(path)
    for batch in handle.iter_batches(batch_size=1024):
        yield batch.schema.names, batch.to_pylist()


def _tfrecord_rows(path: str, compression, delimiter: str):
    import tensorflow as tf

    records = tf.data.TFRecordDataset(path, compression_type=compression or "").batch(1024)
    for batch in records.as_numpy_iterator():
        rows = [_example_row(record, path) for record in batch]
        yield (list(rows[0]) if rows else []), rows


def _example_row(record: bytes, path: str) -> dict:
    import tensorflow as tf

    example = tf.train.Example.FromString(record)
    row = {}
    for name, feature in example.features.feature.items():
        values = list(getattr(feature, feature.WhichOneof("kind") or "bytes_list").value)
        if len(values) > 1:
            raise ValueError(f"columns: the feature {name!r} of {path} holds {len(values)} "
                             f"values per record; types are inferred for one value per "
                             f"record: declare the columns (name: {{dtype, shape}})")
        value = values[0] if values else None
        row[name] = value.decode("utf-8") if isinstance(value, bytes) else value
    return dict(sorted(row.items()))

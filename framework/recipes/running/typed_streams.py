"""Typed columns over a `stream` of CSV, TFRecord or Parquet shards: `graphfit.tabular`'s
preprocessing, streamed.

A column of a `stream`'s `columns:` that declares a `type:` (numeric, categorical, text,
boolean, date, with their options and `missing:`) is read raw: numeric as float32 (an empty
cell or a Parquet null NaN), the others as strings (an empty cell or null ""; a TFRecord
feature stored as int64 is turned into its text), the raw form a `table` gives
(`graphfit.tabular.columns`). A `TablePreprocessor` of those columns is adapted on
`Stream.feature_batches` of the training files only (or their first `statistics_sample`
records), the target's class names come from the same files, and `transform` turns each
batch into the model's input inside `dataset.map`. The statistics are saved as a table's
(`table` in preprocessing.json), so `predict` of raw CSV rows, `evaluate`, `--resume` and the
export with raw named columns are a table's own code paths.

Example:

    >>> is_typed({"columns": {"age": {"type": "numeric"}, "y": "string"}})
    True
    >>> stream_columns({"age": {"type": "numeric"}, "y": "string"})["age"]["dtype"]
    'float32'
"""

from __future__ import annotations

from graphfit.recipes.running.stream_inference import INFERRED

__all__ = ["is_typed", "stream_columns", "typed_statistics"]

_TYPE = "type"


def _typed(columns) -> dict:
    return {name: dict(value) for name, value in (columns or {}).items()
            if isinstance(value, dict) and _TYPE in value}


def is_typed(source: dict) -> bool:
    """Whether a `stream` source declares graphfit.tabular types for some column."""
    return isinstance(source.get("columns"), dict) and bool(_typed(source["columns"]))


def stream_columns(columns) -> dict:
    """The `Stream` schema of `columns:`: a typed column read raw (numeric: float32, an empty
    cell NaN; other types: string, an empty cell "")."""
    if not isinstance(columns, dict):
        return columns
    out = dict(columns)
    for name, value in _typed(columns).items():
        value.pop(INFERRED, None)
        numeric = value[_TYPE] == "numeric"
        out[name] = {"dtype": "float32" if numeric else "string",
                     "default": float("nan") if numeric else ""}
    return out


def _error(path: tuple, message: str):
    from graphfit.recipes.running.data_loading import DataError

    return DataError(path, message)


def feature_columns(stream, declared: dict) -> list:
    """The typed feature columns: declared, or from the dtype (numbers numeric, strings
    categorical) for a feature column without a type."""
    from graphfit.tabular.columns import TYPES, Column, option_problems

    typed, columns = _typed(declared), []
    for column in stream.features:
        options = typed.get(column.name, {})
        guessed = options.pop(INFERRED, False)
        kind = options.pop(_TYPE, None)
        if isinstance(options.get("missing"), str) and options["missing"].startswith(
                "constant "):
            options["missing"] = {"constant": options["missing"][len("constant "):]}
        if kind is not None and kind not in TYPES:
            raise _error(("data", "columns", column.name, "type"),
                         f"must be one of {' | '.join(TYPES)}, got {kind!r}")
        chosen = kind or ("categorical" if column.dtype == "string" else "numeric")
        for option, message in option_problems(chosen, options):
            raise _error(("data", "columns", column.name, option), message)
        # a column declared by a dtype alone (`plan: string`) is declared too
        declared_here = kind is not None or column.name in (declared or {})
        columns.append(Column(column.name, chosen, options,
                              inferred=bool(guessed) or not declared_here))
    return columns


def typed_statistics(stream, part, data: dict, record: dict | None):
    """(table record, class names or None, records counted or None): a finished run's
    `record` (its `table`), else adapted on `part` (the training files) in one pass that
    also gathers the target's class names and counts the records (None: not all were read,
    a `statistics_sample` or a record reused). Sets `stream.transform` to the preprocessing
    and the class names' lookup.

    Raises:
        DataError: a column without any training value, a target with fewer than two
            classes.
        BadRecordError: a record that does not read or fit its column's type (its file and
            index).
    """
    import tensorflow as tf

    from graphfit.recipes.running.table_loading import table_run_record
    from graphfit.tabular.columns import TableError
    from graphfit.tabular.preprocessor import TablePreprocessor
    from graphfit.tabular.targets import ClassNames

    count = None
    if record is not None:
        prep = TablePreprocessor.from_record(record["preprocessor"])
        names = record.get("class_names")
        names = None if names is None else ClassNames(list(names))
    else:
        prep = TablePreprocessor(feature_columns(stream, data["columns"]))
        sample = data["statistics_sample"]
        batches = stream.feature_batches(part, 1024, cycle_length=1, sample=sample)
        seen = _Seen(stream)
        try:
            prep.adapt(batches, on_batch=seen)
            names = ClassNames.fit(sorted(seen.names)) if seen.named else None
        except TableError as error:
            where = ("columns", error.column) if error.column else ("target",)
            raise _error(("data",) + where, str(error)) from None
        except tf.errors.OpError as error:  # a record that does not read: its file and index
            raise stream.bad_record(part, error) from None
        count = seen.count if sample is None else None
    stream.transform = _transform(stream, prep, names)
    return table_run_record(prep, stream.target, names, {}), names, count


class _Seen:
    """Called on each batch of the statistics pass: counts its records and gathers the
    distinct names of a string target."""

    def __init__(self, stream):
        target = next((c for c in stream.columns if c.name == stream.target), None)
        self.target, self.named = stream.target, target is not None and target.dtype == "string"
        self.count, self.names = 0, set()

    def __call__(self, batch) -> None:
        import numpy as np

        first = next(iter(batch.values()))
        self.count += int(first.shape[0])
        if self.named:
            self.names.update(v.decode() for v in np.unique(batch[self.target].numpy()))


def _transform(stream, prep, names):
    """`dict -> (x, y)` (or x without a target): the table's preprocessing, the class names'
    ids from a `StringLookup` over the training split's names (an unknown name fails)."""
    import keras
    import tensorflow as tf

    lookup = None if names is None else keras.layers.StringLookup(
        vocabulary=names.names, num_oov_indices=0)

    from graphfit.datasets.parquet_shards import weighed

    def transform(features):
        x = prep.transform(features)
        if stream.target is None:
            return x
        y = features[stream.target]
        if lookup is not None:
            return weighed(stream, features, (x, tf.cast(lookup(tf.strings.strip(y)), tf.int32)))
        return weighed(stream, features, (x, tf.cast(y, tf.int32 if y.dtype.is_integer
                                                     else tf.float32)))

    return transform

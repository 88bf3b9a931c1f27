"""Loading a `table` or `text_folder` source: typed columns, split, then preprocessed.

The order is what keeps validation and test rows out of every statistic: the raw table is
read and each column's cells checked against its type (a bad cell is quoted with its file and
line), the rows are split (stratified when asked), and only then is the `TablePreprocessor`
adapted, on the training rows alone; the class names of the target come from the training
rows too. Every split is then transformed with the same layers. A finished run's statistics
(`preprocessing.json`, key `table`) are reused instead of adapting again (`evaluate`,
`--resume`), so its numbers are the run's own.

A value of a validation or test row that training never saw goes to its column's OOV bucket;
how many did is printed (stderr) and kept in the record (`oov_counts`).
"""

from __future__ import annotations

import sys

import numpy as np

from graphfit.tabular.columns import TableError, option_problems, raw_values
from graphfit.tabular.readers import read_table
from graphfit.tabular.schema import LABEL, TEXT, feature_columns, read_text_folder
from graphfit.tabular.targets import ClassNames, balanced_class_weight, split_indices

__all__ = ["TABLE_SOURCES", "load_table_splits", "read_source_table", "raw_columns",
           "table_columns", "table_run_record", "separate_table"]

TABLE_SOURCES = ("table", "text_folder")


def _data_error(path, message):
    from graphfit.recipes.running.data_loading import DataError

    return DataError(path, message)


def read_source_table(source: dict, key: tuple):
    """The raw `Table` of a resolved `table` / `text_folder` source (DataError at `key`)."""
    try:
        if source["source"] == "text_folder":
            return read_text_folder(source["path"])
        return read_table(source["path"], source.get("format"), source.get("delimiter"))
    except TableError as error:
        raise _data_error(key + ("path",), str(error)) from None
    except OSError as error:
        raise _data_error(key + ("path",), f"cannot read {source['path']}: "
                                           f"{error.strerror or error}") from None


def table_columns(source: dict, table, key: tuple) -> list:
    """The typed feature columns of the source (declared, else inferred), options checked."""
    if source["source"] == "text_folder":
        from graphfit.tabular.columns import Column

        return [Column(TEXT, "text", dict(source.get("text") or {}))]
    exclude = [source.get("sample_weight")] + list(source.get("ignore") or [])
    try:
        columns = feature_columns(table, source.get("columns"), source.get("target"),
                                  source.get("features"), exclude)
    except TableError as error:
        raise _data_error(key + _naming_key(source, error.column), str(error)) from None
    for column in columns:
        for option, message in option_problems(column.type, column.options):
            raise _data_error(key + ("columns", column.name, option),
                              f"{message} (the column's type, {column.type}, was "
                              f"{'inferred' if column.inferred else 'declared'})")
    return columns


def _naming_key(source: dict, column) -> tuple:
    """The recipe key under data that names `column` (where a missing column is reported)."""
    if column in (source.get("columns") or {}):
        return ("columns", column)
    for name in ("target", "sample_weight"):
        if column == source.get(name):
            return (name,)
    for name in ("features", "ignore"):
        if column in (source.get(name) or []):
            return (name,)
    return ("path",)


def raw_columns(table, columns, key: tuple) -> dict:
    """{name: the column's raw form}, every cell checked against its type."""
    out = {}
    for column in columns:
        try:
            out[column.name] = raw_values(column, table.columns[column.name], table.lines,
                                          table.path)
        except TableError as error:
            raise _data_error(key + ("columns", column.name), str(error)) from None
    return out


def _target(source: dict, table, key: tuple):
    """(raw target cells or None, whether they are class names)."""
    name = LABEL if source["source"] == "text_folder" else source.get("target")
    if name is None:
        return None, False
    cells = table.columns[name]
    numeric = all(_is_number(c) for c in cells if c not in (None, ""))
    if any(c in (None, "") for c in cells):
        row = next(i for i, c in enumerate(cells) if c in (None, ""))
        where = f"line {table.lines[row]}" if table.lines else f"row {row + 1}"
        raise _data_error(key + ("target",), f"{table.path}, {where}: the target {name!r} is "
                                             f"empty; every training row needs its label")
    return cells, not numeric


def _is_number(cell) -> bool:
    try:
        float(cell)
    except (TypeError, ValueError):
        return False
    return not isinstance(cell, bool)


def _numeric_target(cells) -> np.ndarray:
    values = np.asarray([float(c) for c in cells])
    if all(str(c).strip().lstrip("-").isdigit() or isinstance(c, int) for c in cells):
        return values.astype(np.int32)
    return values.astype(np.float32)


def _take(columns: dict, rows) -> dict:
    return {name: values[rows] for name, values in columns.items()}


def load_table_splits(config: dict, record: dict | None = None):
    """The `Splits` of a recipe whose data is a table or text folder; `record`: a finished
    run's `table` record, whose statistics are reused."""
    from graphfit.recipes.running.data_loading import Splits

    seed, data, training = config["seed"], config["data"], config["training"]
    table = read_source_table(data, ("data",))
    if record is not None:
        from graphfit.tabular.columns import Column

        columns = [Column.from_record(c) for c in record["preprocessor"]["columns"]]
    else:
        columns = table_columns(data, table, ("data",))
    raw = raw_columns(table, columns, ("data",))
    cells, named = _target(data, table, ("data",))
    weights = _sample_weights(data, table)
    strata = _strata(data, table)
    train, val, test = split_indices(len(table), training["validation_split"],
                                     training["test_split"], seed, data["shuffle"], strata)
    _check_sizes(len(table), training, train, val, test)
    prep, names = _statistics(columns, _take(raw, train), cells, train, named, record)
    stages, oov = {}, {}
    for stage, rows in (("train", train), ("val", val), ("test", test)):
        if len(rows) == 0:
            stages[stage] = None
            continue
        part = _take(raw, rows)
        y = None if cells is None else _labels([cells[i] for i in rows], names, table, rows)
        stages[stage] = (prep.transform_arrays(part), y)
        if stage != "train":
            oov[stage] = _report_oov(prep, part, stage)
    _separate_splits(stages, training, columns, prep, names, oov)
    weight = None if weights is None else weights[train]
    class_weight = _class_weight(training.get("class_weight"), stages["train"], names)
    table_record = table_run_record(prep, data.get("target") or (
        LABEL if data["source"] == "text_folder" else None), names, oov)
    return Splits(stages["train"], stages["val"], stages["test"], None,
                  [c.name for c in columns], table=table_record,
                  class_names=None if names is None else names.names,
                  train_weight=weight, class_weight=class_weight)


def table_run_record(prep, target, names, oov: dict) -> dict:
    """The `table` entry of a run's preprocessing.json (statistics, class names, the model's
    input names), which `predict`, `evaluate`, `--resume` and the export read back; a typed
    `stream` writes the same."""
    return {"preprocessor": prep.to_record(), "target": target,
            "class_names": None if names is None else names.names,
            "input_names": prep.output_names(), "oov_counts": oov,
            "vocabulary_sizes": prep.vocabulary_sizes()}


def _statistics(columns, train_columns, cells, train, named, record):
    """The preprocessor and class names: the record's, else adapted on the training rows."""
    from graphfit.tabular.preprocessor import TablePreprocessor

    if record is not None:
        names = record.get("class_names")
        return (TablePreprocessor.from_record(record["preprocessor"]),
                None if names is None else ClassNames(list(names)))
    prep = TablePreprocessor(columns)
    try:
        prep.adapt_arrays(train_columns)
    except TableError as error:
        raise _data_error(("data", "columns", error.column), str(error)) from None
    names = None
    if named:
        try:
            names = ClassNames.fit([cells[i] for i in train])
        except TableError as error:
            raise _data_error(("data", "target"), str(error)) from None
    return prep, names


def _labels(cells, names, table, rows):
    if names is None:
        return _numeric_target(cells)
    lines = None if table.lines is None else [table.lines[i] for i in rows]
    try:
        return names.ids(cells, lines, table.path)
    except TableError as error:
        raise _data_error(("data", "target"), str(error)) from None


def _report_oov(prep, part: dict, stage: str) -> dict:
    counts = {name: n for name, n in prep.oov_counts(part).items() if n}
    for name, count in counts.items():
        print(f"graphfit: note: data.columns.{name}: {count} {_long(stage)} value(s) unseen in "
              f"training went to the out-of-vocabulary bucket", file=sys.stderr)
    return counts


def _long(stage: str) -> str:
    return {"val": "validation", "test": "test"}.get(stage, stage)


def _sample_weights(data: dict, table):
    name = data.get("sample_weight")
    if not name:
        return None
    if name not in table.columns:
        raise _data_error(("data", "sample_weight"), f"{table.path} has no column {name!r} "
                                                     f"(its columns: {', '.join(table.names)})")
    from graphfit.tabular.columns import Column

    try:
        weights = raw_values(Column(name, "numeric"), table.columns[name], table.lines,
                             table.path)
    except TableError as error:
        raise _data_error(("data", "sample_weight"), str(error)) from None
    bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
    if len(bad):
        where = f"line {table.lines[bad[0]]}" if table.lines else f"row {bad[0] + 1}"
        raise _data_error(("data", "sample_weight"), f"{table.path}, {where}: the sample weight "
                                                     f"{table.columns[name][bad[0]]!r} is not a "
                                                     f"number >= 0")
    return weights


def _strata(data: dict, table):
    stratify = data.get("stratify")
    if data["source"] == "text_folder":
        return table.columns[LABEL] if stratify else None
    if not stratify:
        return None
    if stratify not in table.columns:
        raise _data_error(("data", "stratify"), f"{table.path} has no column {stratify!r} (its "
                                                f"columns: {', '.join(table.names)})")
    return ["" if c is None else str(c) for c in table.columns[stratify]]


def _check_sizes(count, training, train, val, test) -> None:
    if len(train) == 0:
        raise _data_error(("training", "validation_split"),
                          f"no samples left to train on: the data has {count} rows")
    for name, chosen in (("validation", val), ("test", test)):
        if training[f"{name}_split"] > 0 and len(chosen) == 0:
            raise _data_error(("training", f"{name}_split"),
                              f"{name}_split {training[f'{name}_split']} of {count} rows is no "
                              f"row at all; give more data, a larger fraction, or set "
                              f"{name}_split: 0")


def _separate_splits(stages, training, columns, prep, names, oov) -> None:
    """`validation_data` / `test_data` given as tables: the same columns and statistics."""
    for stage, key in (("val", "validation_data"), ("test", "test_data")):
        source = training.get(key)
        if source is None:
            continue
        where = ("training", key)
        if source["source"] not in TABLE_SOURCES:
            raise _data_error(where + ("source",), f"the training data is a table: give "
                                                   f"{key} as a table too (source: table)")
        stages[stage], part = separate_table(source, where, columns, prep, names)
        oov[stage] = _report_oov(prep, part, stage)


def separate_table(source: dict, key: tuple, columns, prep, names):
    """((x, y), raw feature columns) of a separate `validation_data` / `test_data` table at
    `key`, through the training split's `prep` (a fitted `TablePreprocessor` of `columns`)
    and class `names` (a `ClassNames` or None); a typed `stream` uses it too."""
    table = read_source_table(source, key)
    missing = [c.name for c in columns if c.name not in table.columns]
    if missing:
        raise _data_error(key + ("path",), f"{table.path} lacks the feature column(s) "
                                           f"{', '.join(missing)}")
    part = raw_columns(table, columns, key)
    cells, _ = _target(source, table, key)
    rows = np.arange(len(table))
    y = None if cells is None else _labels(cells, names, table, rows)
    return (prep.transform_arrays(part), y), part


def _class_weight(value, train, names):
    """training.class_weight with "balanced" and class names resolved to {id: weight}."""
    if value is None:
        return None
    y = train[1]
    count = len(names.names) if names is not None else int(np.max(y)) + 1
    if value == "balanced":
        return balanced_class_weight(y, count)
    from graphfit.recipes.running.stream_weights import named_class_weight

    return named_class_weight(value, names)

"""`graphfit predict`: reading new inputs for a finished run and writing its predictions.

Inputs are a CSV file (with a header row, or all numbers without one) or an `.npz` file
(array `x`). When the run was trained on named CSV columns, a header's columns are taken by
name (in any order, extra columns ignored); otherwise every column is a feature, in order,
and each row is reshaped to the model's input shape (64 columns become an 8x8x1 image for a
conv net). The run's standardization is applied. A run on graphs reads an .npz file written
by `graphfit.datasets.GraphSet.save_npz` and predicts one row per graph. The output CSV holds,
per row, `class` and one `probability_<k>` column per class for a classifier (`probability`
for a binary one), or `prediction` / `prediction_<k>` for a regression.

Inputs are read in the formats the run trained from: a run trained on a CSV file reads its
delimiter, one trained on an .npz file its `x_key`. `--id-column NAME` copies a column of
the input (a CSV column, or a 1-D array of the .npz file) unchanged to the first column of the
output, and never feeds it to the model.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import os
import stat

import numpy as np

from graphfit import datasets
from graphfit.core.shapes import num_elements
from graphfit.recipes.running.data_loading import Standardizer
from graphfit.training.losses import loss_kind, resolve_loss

__all__ = ["InputFormat", "read_inputs", "read_ids", "check_output", "prediction_table",
           "write_csv", "read_table_inputs", "named_columns"]


@dataclasses.dataclass(frozen=True)
class InputFormat:
    """How `graphfit predict` reads its input file: as the run's training data was read.

    Attributes:
        delimiter: the CSV delimiter.
        x_key: the features array of an .npz file.
        id_column: a column (CSV) or array (.npz) to keep beside the predictions, not a
            feature; None for none.
    """

    delimiter: str = ","
    x_key: str = "x"
    id_column: str | None = None

    @classmethod
    def of_run(cls, data: dict, id_column: str | None = None) -> "InputFormat":
        """The format of a run whose resolved recipe `data` section is `data`."""
        delimiter = data.get("delimiter") if data.get("source") in ("csv", "table", "stream") \
            else None
        x_key = data.get("x_key") if data.get("source") == "npz" else None
        return cls(delimiter or ",", x_key or "x", id_column)


def read_inputs(path: str, preprocessing: dict, form: InputFormat = InputFormat()):
    """The inputs in `path`, as the run's model expects them (shape and standardization).

    A CSV file whose first row is all numbers has no header (as `np.savetxt` writes it): every
    row is data and the columns are taken in order.

    Raises:
        ValueError: for a missing file (or a folder, device...), a file without rows, missing
            columns, a width that does not fit or a value that is not finite.
    """
    _check_input_file(path)
    if isinstance(preprocessing["input_shape"], dict) and \
            "graph_index" in preprocessing["input_shape"]:
        return _read_graphs(path, preprocessing)
    if path.endswith(".npz"):
        x, _ = datasets.load_npz(path, x_key=form.x_key, y_key=None, dtype="float64")
        names = None
    else:
        x, names = _read_csv(path, preprocessing.get("feature_names"), form)
    if len(x) == 0:
        raise ValueError(f"{os.path.abspath(path)} has no rows (only a header or nothing): "
                         f"there is nothing to predict")
    _check_finite(x, names)
    shape = preprocessing["input_shape"]
    if isinstance(shape, dict) and len(shape) == 1:
        shape = next(iter(shape.values()))  # a graph model with one named input
    if isinstance(shape, dict):
        raise ValueError("predict reads one input array; this run's model has several inputs "
                         f"({', '.join(shape)}). Use model.predict from Python.")
    width = num_elements(shape)
    if x.reshape(len(x), -1).shape[1] != width:
        raise ValueError(f"the inputs have {x.reshape(len(x), -1).shape[1]} values per row but "
                         f"the model takes {width} (shape {tuple(shape)})")
    # A float64 model reads its inputs in float64 (float32 keeps about 7 digits).
    floating = np.float64 if preprocessing.get("input_dtype") == "float64" else np.float32
    x = x.reshape((len(x), *shape)).astype(floating)
    record = preprocessing.get("standardize")
    return Standardizer.from_json(record)(x) if record else x


def read_table_inputs(path: str, record: dict, form: InputFormat = InputFormat()):
    """(model input, ids or None) of the raw rows in `path` (CSV, JSON lines or Parquet) for
    a run trained on a table (`record`: its preprocessing.json's `table`): the columns by
    name, each cell checked against its column's type (a bad one quoted with its line), the
    run's statistics applied. Values unseen in training go to the OOV bucket, counted on
    stderr. A text folder's run reads a table with a `text` column.

    Raises:
        ValueError: an unreadable file, no rows, a missing column, a cell of the wrong type.
    """
    import sys

    from graphfit.tabular import Column, TablePreprocessor, raw_values, read_table

    _check_input_file(path)
    delimiter = form.delimiter if path.endswith((".csv", ".csv.gz")) else None
    table = read_table(path, None if not path.endswith(".txt") else "csv", delimiter)
    prep = TablePreprocessor.from_record(record["preprocessor"])
    columns = [Column.from_record(c) for c in record["preprocessor"]["columns"]]
    missing = [c.name for c in columns if c.name not in table.columns]
    if missing:
        raise ValueError(f"it lacks the column(s) {', '.join(missing)}; the run reads "
                         f"{', '.join(c.name for c in columns)} (by name, in any order)")
    raw = {c.name: raw_values(c, table.columns[c.name], table.lines, path, retypable=False)
           for c in columns}
    for name, count in prep.oov_counts(raw).items():
        if count:
            print(f"graphfit: note: column {name}: {count} value(s) unseen in training went "
                  f"to the out-of-vocabulary bucket", file=sys.stderr)
    ids = None
    if form.id_column is not None:
        if form.id_column not in table.columns:
            raise ValueError(f"--id-column {form.id_column}: the file has no column "
                             f"{form.id_column!r} (its columns: {', '.join(table.names)})")
        ids = ["" if v is None else str(v) for v in table.columns[form.id_column]]
    return prep.transform_arrays(raw), ids


def named_columns(names: list[str], class_names: list[str] | None) -> list[str]:
    """The output columns with the classes' names: `probability_<name>` per class (the
    second class's for a binary model with one probability)."""
    if not class_names:
        return names
    if names == ["class", "probability"] and len(class_names) == 2:
        return ["class", f"probability_{class_names[1]}"]
    return [f"probability_{class_names[int(n.split('_')[1])]}"
            if n.startswith("probability_") and n.split("_")[1].isdigit()
            and int(n.split("_")[1]) < len(class_names) else n for n in names]


def _read_graphs(path: str, preprocessing: dict) -> datasets.GraphSet:
    """The graphs in an .npz file written by `GraphSet.save_npz`, standardized as in the run
    (node features only); the predictions are then one row per graph."""
    if not path.endswith(".npz"):
        raise ValueError("this run's model reads batches of graphs (node_features, "
                         "graph_index, senders, ...), which a CSV file cannot hold; give an "
                         ".npz file written by graphfit.datasets.GraphSet.save_npz")
    graphs = datasets.GraphSet.load_npz(path)
    if len(graphs) == 0:
        raise ValueError(f"{os.path.abspath(path)} holds no graphs: there is nothing to "
                         f"predict")
    width = preprocessing["input_shape"]["node_features"][-1]
    if graphs.node_features.shape[1] != width:
        raise ValueError(f"the graphs have {graphs.node_features.shape[1]} node features but "
                         f"the model takes {width}")
    _check_finite(graphs.node_features, None)
    record = preprocessing.get("standardize")
    if record:
        graphs = graphs.with_node_features(
            Standardizer.from_json(record)(graphs.node_features))
    return graphs


def _check_input_file(path: str) -> None:
    """A regular file, or a ValueError saying what `path` really is."""
    where = os.path.abspath(path)
    if not os.path.exists(path):
        raise ValueError(f"input file not found: {where}")
    if os.path.isdir(path):
        raise ValueError(f"{where} is a directory, not a file; give the CSV or .npz file of "
                         f"inputs")
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{where} is not a regular file (a device, pipe or socket); give the "
                         f"CSV or .npz file of inputs")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _read_csv(path: str, names: list[str] | None,
              form: InputFormat) -> tuple[np.ndarray, list[str] | None]:
    """(x, column names or None): by name with a header row, in order without one."""
    first = datasets.csv_columns(path, form.delimiter)
    others = [d for d in ",;\t|" if d != form.delimiter and len(first) == 1 and d in first[0]]
    if others:
        raise ValueError(f"its first line is one field, {first[0][:60]!r}: the run reads fields "
                         f"separated by {form.delimiter!r} (its training data's delimiter), "
                         f"and this file seems to use {others[0]!r}; write it with "
                         f"{form.delimiter!r}")
    if not all(_is_number(cell) for cell in first):
        if names is None:  # every column is a feature, but the id column
            names = [name for name in first if name != form.id_column]
        x = datasets.load_csv(path, features=names, target=None, delimiter=form.delimiter,
                              dtype="float64")[0]
        return x, names
    if form.id_column is not None:
        raise ValueError(f"--id-column {form.id_column}: the file has no header row (its first "
                         f"row is numbers), so no column is called {form.id_column!r}; add a "
                         f"header row naming the columns")
    if names is not None and len(first) != len(names):
        raise ValueError(f"the file has no header row (its first row is numbers) and "
                         f"{len(first)} columns, but the run was trained on {len(names)} "
                         f"named columns ({', '.join(names)}); add a header row naming them")
    return _numeric_rows(path, form.delimiter), names


def read_ids(path: str, form: InputFormat, rows: int) -> list[str]:
    """The values of `form.id_column`, one per input row, as text.

    Raises:
        ValueError: no such column (CSV) or array (.npz, listing what it has), or a count of
            values that is not `rows`.
    """
    name = form.id_column
    if path.endswith(".npz"):
        with np.load(path) as archive:
            if name not in archive.files:
                raise ValueError(f"--id-column {name}: the .npz file has no array {name!r} "
                                 f"(it has {', '.join(archive.files)})")
            values = np.asarray(archive[name])
            if values.ndim == 2 and values.shape[1] == 1:
                values = values[:, 0]
            if values.ndim != 1:
                raise ValueError(f"--id-column {name}: the array has shape {values.shape}; ids "
                                 f"are one value per row (a 1-D array)")
            ids = [str(v) for v in values]
    else:
        header = datasets.csv_columns(path, form.delimiter)
        if name not in header:
            raise ValueError(f"--id-column {name}: the file has no column {name!r} (its "
                             f"columns: {', '.join(header)})")
        ids = _column_text(path, header.index(name), form.delimiter)
    if len(ids) != rows:
        raise ValueError(f"--id-column {name}: {len(ids)} values for {rows} input rows")
    return ids


def _column_text(path: str, index: int, delimiter: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as text:
        rows = [row for row in csv.reader(text, delimiter=delimiter)
                if any(cell.strip() for cell in row)]
    return [row[index].strip() if index < len(row) else "" for row in rows[1:]]


def _numeric_rows(path: str, delimiter: str = ",") -> np.ndarray:
    """Every non-blank row of a headerless CSV file, as numbers."""
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt", encoding="utf-8-sig", newline="") as text:
        for line, row in enumerate(csv.reader(text, delimiter=delimiter), start=1):
            if not any(cell.strip() for cell in row):
                continue
            if rows and len(row) != len(rows[0]):
                raise ValueError(f"line {line} has {len(row)} fields but the first row has "
                                 f"{len(rows[0])}")
            try:
                rows.append([float(cell) for cell in row])
            except ValueError:
                column = next(i for i, c in enumerate(row, 1) if not _is_number(c))
                raise ValueError(f"line {line}, column {column}: {row[column - 1]!r} is not a "
                                 f"number") from None
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)


def _check_finite(x: np.ndarray, names: list[str] | None) -> None:
    """Refuses NaN or infinite inputs (the predictions would be NaN), naming the first."""
    if not np.issubdtype(x.dtype, np.floating) or x.size == 0:
        return  # integers cannot be NaN; no values (all graphs empty), nothing to check
    flat = x.reshape(len(x), -1)
    bad = np.argwhere(~np.isfinite(flat))
    if len(bad):
        row, column = (int(i) for i in bad[0])
        name = f" ({names[column]!r})" if names and column < len(names) else ""
        raise ValueError(
            f"row {row + 1} (of the data rows), column {column + 1}{name} is "
            f"{flat[row, column]}; {len(bad)} value{'s are' if len(bad) > 1 else ' is'} not "
            f"finite in all. Fill or drop them before predicting")


def check_output(path: str) -> None:
    """Raises a ValueError when the predictions cannot be written to `path` (a directory, a
    parent that is a file), before any work is done."""
    where = os.path.abspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{where} is a directory; give a file name for the predictions, such "
                         f"as {os.path.join(path, 'predictions.csv')}")
    parent = os.path.dirname(where)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"cannot write {where}: {parent} is a file, not a folder")


def prediction_table(outputs: np.ndarray, loss) -> tuple[list[str], np.ndarray]:
    """(column names, rows) for the model's outputs, shaped by the kind of loss."""
    import tensorflow as tf

    kind = loss_kind(resolve_loss(loss, tf.float32))
    outputs = np.asarray(outputs).reshape(len(outputs), -1)
    if outputs.dtype.itemsize < 4:  # a mixed policy's 16-bit outputs: probabilities in float32
        outputs = outputs.astype(np.float32)
    if kind.labels in ("sparse_categorical", "categorical"):
        probabilities = tf.nn.softmax(outputs).numpy() if kind.from_logits else outputs
        names = ["class"] + [f"probability_{k}" for k in range(probabilities.shape[1])]
        return names, np.column_stack([probabilities.argmax(axis=1), probabilities])
    if kind.labels == "binary":
        probability = tf.sigmoid(outputs).numpy() if kind.from_logits else outputs
        if probability.shape[1] == 1:
            return ["class", "probability"], np.column_stack(
                [(probability[:, 0] > 0.5).astype(int), probability[:, 0]])
        return [f"probability_{k}" for k in range(probability.shape[1])], probability
    if outputs.shape[1] == 1:
        return ["prediction"], outputs
    return [f"prediction_{k}" for k in range(outputs.shape[1])], outputs


def write_csv(path: str, names: list[str], rows: np.ndarray, ids=None,
              id_column: str | None = None, class_names: list[str] | None = None) -> None:
    """Writes the table; the class column as integers, the rest with full float precision;
    with `ids`, first a column `id_column` holding them as they were read; with
    `class_names` (the run's, id -> name), a `class_name` column after `class`.

    Raises:
        ValueError: when `path` cannot be written (see `check_output`; a permission error...).
    """
    check_output(path)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            named = class_names is not None and "class" in names
            header = [n for name in names for n in (
                [name, "class_name"] if named and name == "class" else [name])]
            writer.writerow(([id_column] if ids is not None else []) + header)
            for index, row in enumerate(rows):
                cells = [cell for name, v in zip(names, row) for cell in (
                    [int(v), class_names[int(v)]] if named and name == "class"
                    else [int(v)] if name == "class" else [repr(float(v))])]
                writer.writerow(([ids[index]] if ids is not None else []) + cells)
    except OSError as error:
        raise ValueError(f"cannot write {os.path.abspath(path)}: "
                         f"{error.strerror or error}") from None

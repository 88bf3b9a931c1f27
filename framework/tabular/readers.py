"""Reading a table's raw cells: CSV (the standard library's csv), JSON lines, Parquet.

`read_table` returns a `Table`: the column names, each column's cells as read (strings for a
CSV, JSON values for JSON lines, Python values for Parquet; missing cells empty or None), and
the file line of each row, so that a bad value is quoted with its line. Parquet needs pyarrow
(`pip install graphfit[tabular]`); its rows are quoted by row number.

Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(path, "w").write("age,country\\n31,FR\\n,DE\\n")
    >>> table = read_table(path)
    >>> table.names, table.columns["age"], table.lines
    (['age', 'country'], ['31', ''], [2, 3])
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import os

from graphfit.datasets.text_encoding import not_utf8_message
from graphfit.tabular.columns import TableError

__all__ = ["Table", "read_table", "table_format", "FORMATS"]

FORMATS = ("csv", "json_lines", "parquet")
_EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".jsonl": "json_lines",
               ".ndjson": "json_lines", ".json": "json_lines", ".parquet": "parquet",
               ".pq": "parquet"}


@dataclasses.dataclass
class Table:
    """A table's raw cells.

    Attributes:
        path: the file read.
        names: the column names, in the file's order.
        columns: {name: list of cells}.
        lines: the file line of each row (None for Parquet: rows are counted from 1).

    Example:

        >>> table = Table("t.csv", ["a"], {"a": ["1", "2", "3"]}, [2, 3, 5])
        >>> len(table), table.take([2]).lines
        (3, [5])
    """

    path: str
    names: list
    columns: dict
    lines: list | None

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def take(self, rows) -> "Table":
        """The table of the rows at `rows` (indices)."""
        return Table(self.path, self.names,
                     {name: [cells[i] for i in rows] for name, cells in self.columns.items()},
                     None if self.lines is None else [self.lines[i] for i in rows])


def table_format(path: str, declared: str | None = None) -> str:
    """The format of `path`: `declared`, else from its extension (.gz ignored)."""
    if declared:
        return declared
    stem = path[:-3] if path.endswith(".gz") else path
    extension = os.path.splitext(stem)[1].lower()
    if extension not in _EXTENSIONS:
        raise TableError(f"cannot tell the format of {path} from its extension "
                         f"{extension or '(none)'}; give format: {' | '.join(FORMATS)}")
    return _EXTENSIONS[extension]


def read_table(path: str, format: str | None = None, delimiter: str | None = None) -> Table:
    """The raw cells of the table at `path` (see the module docstring).

    Raises:
        TableError: an empty file, a file without data rows, a row with the wrong number of
            fields, a JSON line that is not an object, pyarrow missing for Parquet.
    """
    kind = table_format(path, format)
    try:
        if kind == "parquet":
            table = _read_parquet(path)
        elif kind == "json_lines":
            table = _read_json_lines(path)
        else:
            if delimiter is None:
                delimiter = "\t" if path.endswith((".tsv", ".tsv.gz")) else ","
            table = _read_csv(path, delimiter)
    except UnicodeDecodeError:
        raise TableError(not_utf8_message(path)) from None
    if len(table) == 0:
        raise TableError(f"{path} has no data rows (only a header, or nothing): there is "
                         f"nothing to read")
    return table


def _open(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    return opener(path, "rt", encoding="utf-8-sig", newline="")


def _read_csv(path: str, delimiter: str) -> Table:
    with _open(path) as text:
        reader = csv.reader(text, delimiter=delimiter)
        header, rows, lines = None, [], []
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                continue
            if len(row) != len(header):
                raise TableError(f"{path}, line {reader.line_num}: {len(row)} fields, but the "
                                 f"header has {len(header)} ({', '.join(header)})")
            rows.append(row)
            lines.append(reader.line_num)
    if header is None:
        raise TableError(f"{path} is empty: a table needs a header row and data rows")
    _check_unique(header, path)
    return Table(path, header, {name: [row[i] for row in rows] for i, name in
                                enumerate(header)}, lines)


def _check_unique(names, path: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise TableError(f"{path}: the column name {name!r} appears twice in the header")
        seen.add(name)


def _read_json_lines(path: str) -> Table:
    names, records, lines = [], [], []
    with _open(path) as text:
        for line, content in enumerate(text, start=1):
            if not content.strip():
                continue
            try:
                record = json.loads(content)
            except json.JSONDecodeError as error:
                raise TableError(f"{path}, line {line}: not valid JSON ({error})") from None
            if not isinstance(record, dict):
                raise TableError(f"{path}, line {line}: each line must be a JSON object "
                                 f"{{column: value}}, got {type(record).__name__}")
            names += [name for name in record if name not in names]
            records.append(record)
            lines.append(line)
    if not records and os.path.getsize(path) == 0:
        raise TableError(f"{path} is empty: a table needs rows")
    return Table(path, names, {name: [r.get(name) for r in records] for name in names}, lines)


def _read_parquet(path: str) -> Table:
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise TableError("reading Parquet needs pyarrow: pip install 'graphfit[tabular]'") \
            from None
    try:
        data = parquet.read_table(path)
    except Exception as error:  # noqa: BLE001 - pyarrow's errors name the problem
        raise TableError(f"cannot read {path} as Parquet: {error}") from None
    return Table(path, list(data.column_names),
                 {name: data.column(name).to_pylist() for name in data.column_names}, None)

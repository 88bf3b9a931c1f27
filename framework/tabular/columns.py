"""Typed columns: what each column of a table holds, inferred where the recipe says nothing.

A `Column` is a name, a type (numeric, categorical, text, boolean, date) and that type's
options. `infer_type` looks at a column's raw cells; `raw_values` turns the cells into the
column's raw form, the form the preprocessing (and an exported SavedModel) takes:

- numeric: float32, NaN for a missing cell;
- categorical, text, boolean, date: strings, "" for a missing cell (integer categories are
  strings too: "3"; booleans "true"/"false"/"1"/"0"/"yes"/"no"; dates "YYYY-MM-DD", a time
  after it ignored).

A cell that does not fit its column's type is a `TableError` quoting the file, line and value.

Example:

    >>> infer_type(["3.5", "", "7"]), infer_type(["FR", "DE", ""]), infer_type(["yes", "no"])
    ('numeric', 'categorical', 'boolean')
    >>> raw_values(Column("age", "numeric"), ["31", ""]).tolist()
    [31.0, nan]
"""

from __future__ import annotations

import dataclasses
import datetime
import math

import numpy as np

from graphfit.datasets.precision import warn_if_merged

__all__ = ["TYPES", "MISSING", "Column", "TableError", "infer_type", "raw_values", "is_missing",
           "is_number", "TRUE_WORDS", "FALSE_WORDS"]

TYPES = ("numeric", "categorical", "text", "boolean", "date")
# missing: constant VALUE | mean | mode | indicator (see `Column.missing`).
MISSING = ("mean", "mode", "indicator")
TRUE_WORDS = ("true", "t", "yes", "y", "1")
FALSE_WORDS = ("false", "f", "no", "n", "0")
# A text column: a categorical-looking column with more distinct values than this share of
# its rows and at least one space in a value.
_TEXT_SHARE = 0.5


class TableError(ValueError):
    """A table that cannot be used as declared: `column` (or None) names the column to blame.

    Example:

        >>> str(TableError("bad", column="age"))
        'bad'
    """

    def __init__(self, message: str, column: str | None = None):
        self.column = column
        super().__init__(message)


@dataclasses.dataclass(frozen=True)
class Column:
    """One feature column: its name, type and the options of that type.

    Attributes:
        name: the column's name in the table.
        type: one of `TYPES`.
        options: the recipe's options for it (see the README's "tables with types"):
            numeric `standardize`, `bins` (boundaries) or `num_bins`; categorical `max_size`,
            `num_oov_indices`, `encoding` (one_hot | ids | hash), `num_bins` (hash);
            text `max_tokens`, `output_mode`; every type `missing`.
        inferred: whether the type was inferred (not declared).

    Example:

        >>> Column("country", "categorical", {"encoding": "hash", "num_bins": 8}).encoding
        'hash'
    """

    name: str
    type: str
    options: dict = dataclasses.field(default_factory=dict)
    inferred: bool = False

    @property
    def encoding(self) -> str:
        return self.options.get("encoding", "one_hot")

    @property
    def missing(self):
        """How a missing cell is filled: "mean", "mode", "indicator" (the default fill and a
        0/1 column saying it was missing) or {"constant": VALUE}."""
        default = {"numeric": "mean", "date": "mean", "boolean": "mode"}.get(
            self.type, {"constant": ""})
        return self.options.get("missing", default)

    @property
    def raw_dtype(self) -> str:
        """The dtype of the column's raw form: float32 (numeric) or string."""
        return "float32" if self.type == "numeric" else "string"

    def to_record(self) -> dict:
        return {"name": self.name, "type": self.type, "options": dict(self.options),
                "inferred": self.inferred}

    @classmethod
    def from_record(cls, record: dict) -> "Column":
        return cls(record["name"], record["type"], dict(record.get("options") or {}),
                   bool(record.get("inferred", False)))


def is_missing(cell) -> bool:
    """An empty cell, None, or a float NaN."""
    if cell is None:
        return True
    if isinstance(cell, float):
        return math.isnan(cell)
    return isinstance(cell, str) and cell.strip() == ""


def is_number(cell) -> bool:
    """Whether a cell reads as a number (a bool does not; nor "1_000", which Python's float
    reads as 1000 but a CSV means as text)."""
    if isinstance(cell, bool):
        return False
    if isinstance(cell, (int, float, np.number)):
        return True
    if isinstance(cell, str) and "_" in cell:
        return False
    try:
        float(cell)
    except (TypeError, ValueError):
        return False
    return True


def _is_boolean(cell) -> bool:
    return isinstance(cell, (bool, np.bool_)) or str(cell).strip().lower() in (
        "true", "false", "yes", "no")


def _is_date(cell) -> bool:
    try:
        datetime.date.fromisoformat(str(cell).strip()[:10])
    except ValueError:
        return False
    return len(str(cell).strip()) >= 10


def infer_type(cells) -> str:
    """The type of a column from its cells (missing ones ignored): boolean, numeric, date,
    text (many distinct values with spaces), else categorical."""
    present = [cell for cell in cells if not is_missing(cell)]
    if not present:
        return "numeric"
    if all(_is_boolean(cell) for cell in present):
        return "boolean"
    if all(is_number(cell) for cell in present):
        return "numeric"
    if all(_is_date(cell) for cell in present):
        return "date"
    texts = [str(cell) for cell in present]
    if len(set(texts)) > _TEXT_SHARE * len(texts) and any(" " in t.strip() for t in texts):
        return "text"
    return "categorical"


def _text(cell) -> str:
    """A cell as text: booleans as true/false, integral floats without '.0' (a Parquet
    integer column read with gaps becomes float)."""
    if isinstance(cell, (bool, np.bool_)):
        return "true" if cell else "false"
    if isinstance(cell, (float, np.floating)) and float(cell).is_integer():
        return str(int(cell))
    return str(cell).strip()


def _where(lines, index: int, source: str) -> str:
    line = lines[index] if lines is not None else index + 1
    return f"{source}, line {line}" if lines is not None else f"{source}, row {line}"


def raw_values(column: Column, cells, lines=None, source: str = "the table",
               retypable: bool = True) -> np.ndarray:
    """The column's raw form (see the module docstring) of `cells`.

    Args:
        column: the column.
        cells: its cells (strings, numbers, booleans, None).
        lines: the file line of each cell, to quote a bad one (None: rows counted from 1).
        source: the file, to quote with the line.
        retypable: whether the recipe may still declare the column's type (False for a
            finished run's new rows: its types are fixed), for the message.

    Raises:
        TableError: the first cell that does not fit the column's type, with its file, line
            and value.
    """
    def bad(index, what):
        how = "inferred" if column.inferred else "declared"
        fix = ("fix the value, or declare the column's type" if retypable else
               f"fix the value (the run reads the column as {column.type})")
        raise TableError(f"{_where(lines, index, source)}: column {column.name!r} is {how} "
                         f"{column.type} but holds {cells[index]!r}, which is not {what}; "
                         f"{fix}", column.name)

    if column.type == "numeric":
        exact = np.empty(len(cells), np.float64)
        for index, cell in enumerate(cells):
            if is_missing(cell):
                exact[index] = np.nan
            elif not is_number(cell):
                bad(index, "a number")
            else:
                exact[index] = float(cell)
                if math.isinf(exact[index]):  # no statistics or model takes it
                    bad(index, "a finite number")
        out = exact.astype(np.float32)
        warn_if_merged(f"numeric column {column.name!r}", exact, out, source,
                       "read the file with `source: csv` (or npz) under `training.dtype: "
                       "float64`: a table's numbers are float32")
        return out
    out = np.array(["" if is_missing(cell) else _text(cell) for cell in cells], dtype=object)
    if column.type == "boolean":
        words = TRUE_WORDS + FALSE_WORDS
        for index, text in enumerate(out):
            if text and text.lower() not in words:
                bad(index, "a boolean (" + "/".join(words) + ")")
    if column.type == "date":
        for index, text in enumerate(out):
            if text and not _is_date(text):
                bad(index, "a date (YYYY-MM-DD)")
    return out


def _int(low):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _choice(*names):
    return lambda v: v in names


def _numbers(v) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(
        isinstance(b, (int, float)) and not isinstance(b, bool) for b in v) and v == sorted(v)


def _flag(v) -> bool:
    return isinstance(v, bool)


# {type: {option: (accepts(value), what it takes)}}; every type also takes `missing`.
OPTIONS = {
    "numeric": {"standardize": (_flag, "true or false"),
                "bins": (_numbers, "a sorted list of bucket boundaries"),
                "num_bins": (_int(2), "an integer >= 2 (quantile buckets)")},
    "categorical": {"max_size": (_int(1), "an integer >= 1"),
                    "num_oov_indices": (_int(1), "an integer >= 1"),
                    "encoding": (_choice("one_hot", "ids", "hash"), "one_hot, ids or hash"),
                    "num_bins": (_int(2), "an integer >= 2 (hash buckets)")},
    "text": {"max_tokens": (_int(2), "an integer >= 2"),
             "output_mode": (_choice("multi_hot", "count"), "multi_hot or count"),
             "ngrams": (_int(1), "an integer >= 1")},
    "boolean": {},
    "date": {"standardize": (_flag, "true or false")},
}
# The `missing:` fills each type takes (besides {constant: VALUE} and indicator).
_FILLS = {"numeric": ("mean",), "date": ("mean",), "boolean": ("mode",),
          "categorical": ("mode",), "text": ()}

__all__ += ["OPTIONS", "option_problems"]


def _fits(kind: str, value) -> bool:
    """Whether `value` is a (present) cell of a column of type `kind`."""
    if kind == "numeric":
        return is_number(value)
    if kind == "boolean":
        return _is_boolean(value) or str(value).strip().lower() in TRUE_WORDS + FALSE_WORDS
    if kind == "date":
        return _is_date(value)
    return True


def option_problems(kind: str, options: dict) -> list[tuple[str, str]]:
    """[(option, what is wrong)] of a column of type `kind` with `options`."""
    problems = []
    known = OPTIONS[kind]
    for key, value in options.items():
        if key == "missing":
            fills = _FILLS[kind] + ("indicator",)
            constant = isinstance(value, dict) and list(value) == ["constant"] and \
                isinstance(value["constant"], (str, int, float))
            if value not in fills and not constant:
                problems.append((key, f"a {kind} column takes missing: "
                                      f"{' | '.join(fills)} | {{constant: VALUE}}, got "
                                      f"{value!r}"))
            elif constant and not _fits(kind, value["constant"]):
                problems.append((key, f"the constant {value['constant']!r} is not a value of "
                                      f"a {kind} column"))
        elif key not in known:
            takes = ", ".join(list(known) + ["missing"])
            problems.append((key, f"a {kind} column has no option {key!r} (it takes {takes})"))
        elif not known[key][0](value):
            problems.append((key, f"must be {known[key][1]}, got {value!r}"))
    if kind == "numeric" and "bins" in options and "num_bins" in options:
        problems.append(("num_bins", "give bins (boundaries) or num_bins, not both"))
    return problems

"""A table's feature columns: the declared ones as declared, the others inferred; text folders.

Example:

    >>> from graphfit.tabular.readers import Table
    >>> table = Table("t.csv", ["age", "country", "left"],
    ...               {"age": ["31", ""], "country": ["FR", "DE"], "left": ["no", "yes"]}, [2, 3])
    >>> [(c.name, c.type, c.inferred) for c in feature_columns(
    ...     table, {"age": {"type": "numeric", "missing": "indicator"}}, target="left")]
    [('age', 'numeric', False), ('country', 'categorical', True)]
"""

from __future__ import annotations

import os
import warnings

from graphfit.datasets.text_encoding import delimiter_hint, not_utf8_message
from graphfit.tabular.columns import Column, TableError, infer_type, is_missing, is_number
from graphfit.tabular.readers import Table

__all__ = ["feature_columns", "describe", "read_text_folder", "TEXT", "LABEL"]

TEXT, LABEL = "text", "label"  # the columns of a text folder's table


def feature_columns(table: Table, declared: dict | None, target=None, features=None,
                    exclude=()) -> list[Column]:
    """The feature columns of `table`: `features` (default: every column but the target and
    `exclude`), typed as `declared` says ({name: {type: ..., options...}}), else inferred.

    Raises:
        TableError: a declared or listed column that the table does not have.
    """
    declared = dict(declared or {})
    targets = [target] if isinstance(target, str) else list(target or [])
    for name in list(declared) + list(features or []) + targets + [e for e in exclude if e]:
        if name not in table.columns:
            raise TableError(f"{table.path} has no column {name!r} (its columns: "
                             f"{', '.join(table.names)}).{delimiter_hint(table.names)}", name)
    names = list(features) if features else [n for n in table.names if n not in targets
                                             and n not in exclude]
    columns = []
    for name in names:
        options = dict(declared.get(name) or {})
        kind = options.pop("type", None)
        inferred = kind or infer_type(table.columns[name])
        if kind is None and inferred == "categorical":
            _warn_if_nearly_numeric(table, name)
        columns.append(Column(name, inferred, options, inferred=kind is None))
    return columns


# At most this share of a column's cells may be words for the column to look numeric with
# a typo (one "two" among 300 numbers), not categorical on purpose.
_STRAY_SHARE = 0.02


def _warn_if_nearly_numeric(table: Table, name: str) -> None:
    """Warns when a few words make an otherwise numeric column categorical: the model
    changes silently (one-hot columns instead of one number)."""
    present = [(i, cell) for i, cell in enumerate(table.columns[name]) if not is_missing(cell)]
    words = [(i, cell) for i, cell in present if not is_number(cell)]
    if not words or len(present) < 10 or len(words) > _STRAY_SHARE * len(present):
        return
    index, cell = words[0]
    line = table.lines[index] if table.lines is not None else None
    where = f"line {line}" if line is not None else f"row {index + 1}"
    warnings.warn(
        f"{table.path}: column {name!r} is inferred categorical because {len(words)} of its "
        f"{len(present)} cells are not numbers ({where} holds {cell!r}). If it is a number "
        f"column, fix those cells; to keep it categorical, declare it: columns: {{{name}: "
        f"{{type: categorical}}}}", stacklevel=3)


def describe(columns, sizes: dict | None = None) -> list[str]:
    """One line per column: name, type (inferred or declared), options, vocabulary size
    ({name: size}: the lookup's ids run from 0 to size - 1)."""
    lines = []
    for column in columns:
        how = "inferred" if column.inferred else "declared"
        options = ", ".join(f"{k}: {v}" for k, v in column.options.items())
        size = (sizes or {}).get(column.name)
        lines.append(f"  {column.name}: {column.type} ({how})"
                     + (f", {options}" if options else "")
                     + (f", vocabulary_size {size} (OOV included; an Embedding's "
                        f"input_dim)" if size is not None else ""))
    return lines


def read_text_folder(path: str, extensions=(".txt",)) -> Table:
    """A folder of class subfolders of text files as a table: `text` (a file's content) and
    `label` (its subfolder's name); rows in sorted order of class, then file.

    Raises:
        TableError: no such folder, fewer than two class subfolders, or no files.
    """
    if not os.path.isdir(path):
        raise TableError(f"{path} is not a folder; give a folder with one subfolder per class")
    classes = sorted(d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))
                     and not d.startswith("."))
    if len(classes) < 2:
        raise TableError(f"{path} has {len(classes)} class subfolder(s) "
                         f"({', '.join(classes) or 'none'}); a classifier needs at least two")
    texts, labels, files = [], [], []
    for label in classes:
        folder = os.path.join(path, label)
        for name in sorted(os.listdir(folder)):
            if name.endswith(tuple(extensions)):
                file = os.path.join(folder, name)
                try:  # utf-8-sig: a byte-order mark is no part of the first word
                    with open(file, encoding="utf-8-sig") as handle:
                        texts.append(handle.read().strip())
                except UnicodeDecodeError:
                    raise TableError(not_utf8_message(file)) from None
                labels.append(label)
                files.append(os.path.join(label, name))
    if not texts:
        raise TableError(f"{path}: no {' or '.join(extensions)} files in its class subfolders")
    table = Table(path, [TEXT, LABEL], {TEXT: texts, LABEL: labels}, None)
    table.files = files
    return table

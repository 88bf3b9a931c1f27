"""Data for recipes and scripts: small real data sets, synthetic generators and file loaders.

Real data sets shipped with graphfit (no download at run time):

- digits: UCI optical recognition of handwritten digits, 1797 images of 8×8 pixels, 10 classes
  (E. Alpaydin, C. Kaynak, 1998; CC BY 4.0).
- breast cancer: UCI Wisconsin diagnostic breast cancer, 569 samples, 30 features, binary
  (W. Wolberg, W. Street, O. Mangasarian, 1995; CC BY 4.0).

Synthetic generators (re-exported from `graphfit.datasets.synthetic`): `make_moons`, `make_spirals`,
`make_blobs`, `make_sinc`. Your own files: `load_csv` (with `csv_columns`, the header alone) and
`load_npz` (with `npz_keys`).

Example:

    >>> import graphfit as gf
    >>> x, y = gf.datasets.load_digits()
    >>> x.shape, y.shape, float(x.max())
    ((1797, 64), (1797,), 1.0)
"""

from __future__ import annotations

import csv
import errno
import gzip
import importlib.resources
import os
import zipfile
import zlib

import numpy as np

from graphfit.core.registry import did_you_mean
from graphfit.datasets.precision import warn_if_merged
from graphfit.datasets.synthetic import make_blobs, make_moons, make_sinc, make_spirals
from graphfit.datasets.text_encoding import delimiter_hint, not_utf8_message

__all__ = [
    "csv_columns",
    "describe",
    "load_breast_cancer",
    "load_csv",
    "load_digits",
    "load_npz",
    "make_blobs",
    "make_moons",
    "make_sinc",
    "make_spirals",
    "names",
    "npz_keys",
]


def _data_file(name: str):
    return importlib.resources.files("graphfit.datasets").joinpath("data", name)


def load_digits(as_images: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The digits data: (x, y).

    Args:
        as_images: False gives x of shape (1797, 64); True gives (1797, 8, 8, 1) for conv nets.

    Returns:
        x as float32 pixels scaled from 0..16 to [0, 1], y as int32 labels 0..9, in the file's
        order (shuffle or split as you need).
    """
    with _data_file("digits.csv.gz").open("rb") as raw, gzip.open(raw, "rt") as text:
        table = np.loadtxt(text, delimiter=",", dtype=np.float32)
    x = table[:, :64] / 16.0
    y = table[:, 64].astype(np.int32)
    return (x.reshape(-1, 8, 8, 1) if as_images else x), y


def load_breast_cancer() -> tuple[np.ndarray, np.ndarray]:
    """The Wisconsin breast-cancer data: (x, y).

    Returns:
        x as float32 of shape (569, 30), raw features (standardize them before training), and
        y as int32 labels, 0 malignant and 1 benign.
    """
    with _data_file("breast_cancer.csv").open("r") as text:
        table = np.loadtxt(text, delimiter=",", skiprows=1, dtype=np.float64)
    return table[:, :30].astype(np.float32), table[:, 30].astype(np.int32)


def _open_text(path: str, kind: str):
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
        # utf-8-sig drops the byte-order mark that spreadsheet programs put before the header.
        return open(path, encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, f"{kind} file not found", path) from None


def _check_delimiter(delimiter) -> None:
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"delimiter must be a single character. Received: delimiter={delimiter!r}")


def _read_header(reader, path: str) -> list[str]:
    for row in reader:
        if any(cell.strip() for cell in row):
            return [cell.strip() for cell in row]
    raise ValueError(
        f"{path} is empty: graphfit reads CSV files whose first row names the columns."
    )


def csv_columns(path: str | os.PathLike, delimiter: str = ",") -> list[str]:
    """The column names in a CSV file's header row, without reading the rest of the file.

    Args:
        path: the CSV file (a name ending in ".gz" is read through gzip).
        delimiter: the character between fields.

    Returns:
        The names, stripped of surrounding spaces, in file order.

    Raises:
        FileNotFoundError: if there is no such file.
        ValueError: if the file is empty or `delimiter` is not one character.

    Example:

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "table.csv")
        >>> with open(path, "w") as f:
        ...     _ = f.write("a, b,label\\n1,2,0\\n")
        >>> csv_columns(path)
        ['a', 'b', 'label']
    """
    _check_delimiter(delimiter)
    path = os.fspath(path)
    with _open_text(path, "CSV") as text:
        return _read_header(csv.reader(text, delimiter=delimiter), path)


def _column_list(value, name: str) -> list[str]:
    names_ = [value] if isinstance(value, str) else value
    if (not isinstance(names_, (list, tuple)) or not names_
            or not all(isinstance(n, str) for n in names_)):
        raise ValueError(
            f"{name} must be a column name or a non-empty list of column names. "
            f"Received: {name}={value!r}"
        )
    if len(set(names_)) != len(names_):
        raise ValueError(f"{name} names a column more than once. Received: {name}={value!r}")
    return list(names_)


def _column_index(name: str, header: list[str], path: str, delimiter: str = ",") -> int:
    if name not in header:
        hint = did_you_mean(name, header) or delimiter_hint(header, delimiter)
        raise ValueError(
            f"Unknown column {name!r} in {path}.{hint} Available columns: {', '.join(header)}"
        )
    if header.count(name) > 1:
        raise ValueError(f"Column {name!r} appears more than once in the header of {path}.")
    return header.index(name)


def _parse_column(cells: list[str], lines: list[int], name: str, path: str) -> np.ndarray:
    values = np.empty(len(cells), np.float64)
    for i, cell in enumerate(cells):
        try:
            if "_" in cell:  # Python's float reads "1_000" as 1000; a CSV means text
                raise ValueError(cell)
            values[i] = float(cell)
        except ValueError:
            raise ValueError(
                f"{path}, line {lines[i]} (data row {i + 1}), column {name!r}: cannot read "
                f"{cell!r} as a number."
            ) from None
    return values


def _all_int32(cells: list[str]) -> bool:
    info = np.iinfo(np.int32)
    try:
        return all(info.min <= int(cell) <= info.max for cell in cells)
    except ValueError:  # "2.5", "1e3", "nan": not written as an integer
        return False


def load_csv(path: str | os.PathLike, features: list[str] | str | None = None,
             target: list[str] | str | None = None,
             delimiter: str = ",", dtype="float32") -> tuple[np.ndarray, np.ndarray | None]:
    """Reads a CSV file with a header row into (x, y) arrays.

    Only the selected columns must hold numbers, so an id or text column can stay in the file
    as long as it is neither a feature nor a target. Blank lines are skipped.

    Args:
        path: the CSV file (a name ending in ".gz" is read through gzip).
        features: the input columns, in the order x should hold them; None takes every column
            that is not a target.
        target: the label column's name, a list of names, or None for no labels.
        delimiter: the character between fields.
        dtype: the floating dtype of the numbers, "float32" or "float64" (a float64 model:
            float32 holds about 7 digits, so 1700000020 reads as 1700000000).

    Returns:
        (x, y): x of `dtype` and shape (n, len(features)). y is None without a target; for one
        target column it has shape (n,) and is int32 when every cell is written as an integer
        (class labels: "3", not "3.0"), `dtype` otherwise; several target columns give `dtype`
        of shape (n, k).

    Raises:
        FileNotFoundError: if there is no such file.
        ValueError: on an unknown column name (with the available ones), a column that is both
            a feature and a target, a row with the wrong number of fields, or a cell that is
            not a number (with its line and column).

    Example:

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "table.csv")
        >>> with open(path, "w") as f:
        ...     _ = f.write("a,b,label\\n1.5,2,0\\n3,4.25,1\\n")
        >>> x, y = load_csv(path, target="label")
        >>> x.tolist(), y.tolist(), x.dtype, y.dtype
        ([[1.5, 2.0], [3.0, 4.25]], [0, 1], dtype('float32'), dtype('int32'))
    """
    _check_delimiter(delimiter)
    targets = [] if target is None else _column_list(target, "target")
    path = os.fspath(path)
    with _open_text(path, "CSV") as text:
        reader = csv.reader(_utf8_lines(text, path), delimiter=delimiter)
        header = _read_header(reader, path)
        if features is None:
            for name in targets:
                _column_index(name, header, path, delimiter)
            features = [name for name in header if name not in targets]
            if not features:
                raise ValueError(f"{path} has no columns left for the features besides the "
                                 f"target {target!r}.")
        else:
            features = _column_list(features, "features")
        both = [name for name in features if name in targets]
        if both:
            raise ValueError(f"Column {both[0]!r} is both a feature and a target; drop it from "
                             f"one of them. Received: features={features!r}, target={target!r}")
        wanted = [_column_index(name, header, path, delimiter) for name in features + targets]
        cells: list[list[str]] = [[] for _ in wanted]
        lines: list[int] = []
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}, line {reader.line_num}: expected {len(header)} fields "
                                 f"as in the header, found {len(row)}.")
            lines.append(reader.line_num)
            for column, index in zip(cells, wanted):
                column.append(row[index])
    names_ = features + targets
    values = [_parse_column(c, lines, n, path) for c, n in zip(cells, names_)]
    floating = _floating(dtype)
    if floating is np.float32:
        for column, name in zip(values, names_):  # one warning per file is enough
            if warn_if_merged(f"column {name!r}", column, column.astype(np.float32), path,
                              _KEEP_FLOAT64):
                break
    x = np.stack(values[:len(features)], axis=1).astype(floating)
    if not targets:
        return x, None
    if len(targets) == 1:
        label_cells = cells[len(features)]
        return x, values[-1].astype(np.int32 if _all_int32(label_cells) else floating)
    return x, np.stack(values[len(features):], axis=1).astype(floating)


_KEEP_FLOAT64 = ("read it as float64 (`training.dtype: float64` in a recipe, dtype='float64' "
                 "in Python)")


def _utf8_lines(text, path: str):
    """The lines of `text`; a file that is not UTF-8 is named with its line (ValueError)."""
    try:
        yield from text
    except UnicodeDecodeError:
        raise ValueError(not_utf8_message(path)) from None


def _floating(dtype) -> type:
    """np.float32 or np.float64 for `dtype` (a name or a NumPy dtype)."""
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64. Received: dtype={dtype!r}")
    return np.dtype(dtype).type


def _open_npz(path: str):
    try:
        archive = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "NPZ file not found", path) from None
    except (zipfile.BadZipFile, EOFError, ValueError, OSError) as error:  # not what savez wrote
        reason = f": {error}" if isinstance(error, (zipfile.BadZipFile, OSError)) else ""
        raise ValueError(f"{path} is not an .npz archive (a zip of .npy arrays as np.savez "
                         f"writes){reason}") from None
    if not hasattr(archive, "files"):
        raise ValueError(f"{path} is a single .npy array, not an .npz archive of named arrays; "
                         f"save one with np.savez(path, x=x, y=y).")
    return archive


def npz_keys(path: str | os.PathLike) -> list[str]:
    """The names of the arrays in an .npz archive, without loading them.

    Args:
        path: the .npz file (as written by `np.savez` or `np.savez_compressed`).

    Returns:
        The names, in the archive's order.

    Raises:
        FileNotFoundError: if there is no such file.
        ValueError: if the file is a single .npy array.

    Example:

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "data.npz")
        >>> np.savez(path, x=np.zeros((3, 2)), y=np.arange(3))
        >>> npz_keys(path)
        ['x', 'y']
    """
    path = os.fspath(path)
    with _open_npz(path) as archive:
        return list(archive.files)


def load_npz(path: str | os.PathLike, x_key: str = "x",
             y_key: str | None = "y", dtype="float32") -> tuple[np.ndarray, np.ndarray | None]:
    """Reads (x, y) arrays from an .npz archive.

    Args:
        path: the .npz file (as written by `np.savez` or `np.savez_compressed`).
        x_key: the name of the features array.
        y_key: the name of the labels array, or None for no labels.
        dtype: the floating dtype arrays become, "float32" or "float64" (a float64 model).

    Returns:
        (x, y): a floating x becomes `dtype`, an integer x (token ids, raw pixels) keeps its
        dtype and a boolean one becomes `dtype`; an integer or boolean y becomes int32 labels,
        a floating y `dtype`. Shapes are kept. y is None when `y_key` is None.

    Raises:
        FileNotFoundError: if there is no such file.
        ValueError: on a key not in the archive (listing the keys it has), arrays that are not
            numbers, or x and y with different numbers of samples.

    Example:

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "data.npz")
        >>> np.savez(path, x=np.zeros((3, 2)), y=np.arange(3))
        >>> x, y = load_npz(path)
        >>> x.shape, x.dtype, y.dtype
        ((3, 2), dtype('float32'), dtype('int32'))
    """
    for name, key in (("x_key", x_key), ("y_key", y_key)):
        if not (isinstance(key, str) or (key is None and name == "y_key")):
            raise ValueError(f"{name} must be the name of an array. Received: {name}={key!r}")
    path = os.fspath(path)
    with _open_npz(path) as archive:
        for name, key in (("x_key", x_key), ("y_key", y_key)):
            if key is not None and key not in archive.files:
                hint = did_you_mean(key, archive.files)
                raise ValueError(f"{path} has no array {key!r} ({name}).{hint} Keys in the file: "
                                 f"{', '.join(archive.files)}")
        try:
            x = archive[x_key]
            y = None if y_key is None else archive[y_key]
        except (zipfile.BadZipFile, EOFError, ValueError, OSError, zlib.error) as error:
            raise ValueError(f"{path} is damaged: cannot read its arrays ({error})") from None
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_) or x.ndim == 0:
        raise ValueError(f"{path}: {x_key!r} must be an array of numbers with a sample axis; "
                         f"found dtype {x.dtype} and shape {x.shape}.")
    floating = _floating(dtype)
    if np.issubdtype(x.dtype, np.floating) or x.dtype == np.bool_:
        if floating is np.float32 and x.dtype == np.float64:
            flat = x.reshape(len(x), -1) if x.ndim > 1 else x[:, None]
            for j in range(min(flat.shape[1], 64)):  # feature columns; images are float32
                if warn_if_merged(f"{x_key!r}[:, {j}]", flat[:, j],
                                  flat[:, j].astype(np.float32), path, _KEEP_FLOAT64):
                    break
        x = x.astype(floating)
    if y is None:
        return x, None
    if np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_:
        y = y.astype(np.int32)
    elif np.issubdtype(y.dtype, np.floating):
        y = y.astype(floating)
    else:
        raise ValueError(f"{path}: {y_key!r} must be an array of numbers; found dtype {y.dtype}.")
    if y.ndim == 0 or len(y) != len(x):
        raise ValueError(f"{path}: {x_key!r} and {y_key!r} must hold the same number of samples; "
                         f"found shapes {x.shape} and {y.shape}.")
    return x, y


_DESCRIPTIONS = {
    "digits": "UCI handwritten digits: 1797 images of 8x8 pixels, 10 classes (load_digits).",
    "breast_cancer": "UCI Wisconsin breast cancer: 569 samples, 30 features, binary "
                     "(load_breast_cancer).",
    "moons": "Synthetic: two interleaving half circles in 2-D, binary (make_moons).",
    "spirals": "Synthetic: interleaved Archimedean spirals in 2-D, one class per arm "
               "(make_spirals).",
    "blobs": "Synthetic: isotropic Gaussian blobs, one class per blob (make_blobs).",
    "sinc": "Synthetic regression: y = sin(x) / x plus noise, x in 1-D (make_sinc).",
    "graph_classes": "Synthetic graphs: 8 structural classes, 10-30 nodes (make_graph_classes).",
}


def names() -> list[str]:
    """The built-in data sets: the shipped real ones, then the synthetic generators.

    Example:

        >>> names()
        ['digits', 'breast_cancer', 'moons', 'spirals', 'blobs', 'sinc', 'graph_classes']
    """
    return list(_DESCRIPTIONS)


def describe() -> dict[str, str]:
    """A one-line description of each built-in data set, keyed by the names in `names()`.

    Example:

        >>> describe()["moons"]
        'Synthetic: two interleaving half circles in 2-D, binary (make_moons).'
    """
    return dict(_DESCRIPTIONS)

"""Rows of a pyarrow record batch written as serialized `tf.train.Example`s, fast.

The wire format of an Example is written by hand for the common columns (a float or integer
column of one number per row, a string column), a float column a whole batch at once with
numpy; any other column, and any column with a cell that needs a message (a null without a
default, a value of the wrong kind), goes through `fallback` (protobuf, one cell at a time),
which also raises the error that names the file and row. The bytes are those protobuf writes
for the same Example: the features as map entries {key, Feature}, packed number lists.

Example:

    >>> import pyarrow, tensorflow as tf
    >>> from graphfit.datasets.streams import Column
    >>> batch = pyarrow.record_batch({"a": [1.5, 2.0], "s": [" x", "y"]})
    >>> rows = encode_rows([Column("a"), Column("s", "string")], batch, None)
    >>> tf.train.Example.FromString(rows[0]).features.feature["s"].bytes_list.value
    [b'x']
"""

from __future__ import annotations

import numpy as np

__all__ = ["encode_rows"]


def _varint(number: int) -> bytes:
    number &= (1 << 64) - 1  # a negative int64 as protobuf writes it: ten bytes
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        if number:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(payload)) + payload


def _entry(name: str, feature: bytes) -> bytes:
    """One `Features.feature` map entry, wrapped as the Features message's field 1."""
    return _field(0x0A, _field(0x0A, name.encode("utf-8")) + _field(0x12, feature))


def encode_rows(columns, batch, fallback) -> list:
    """The serialized Examples of the rows of `batch` (declared `columns`);
    `fallback(column, cells) -> [Feature bytes]` for a column the fast paths do not take."""
    parts = []
    for column in columns:
        array = batch.column(column.name)
        entries = _fast(column, array)
        if entries is None:
            entries = [_entry(column.name, feature)
                       for feature in fallback(column, array.to_pylist())]
        parts.append(entries)
    return [_field(0x0A, b"".join(row)) for row in zip(*parts)]


def _fast(column, array):
    import pyarrow

    kind = array.type
    nulls = array.null_count > 0
    if column.shape or (nulls and column.default is None):
        return None
    if column.dtype == "string" and pyarrow.types.is_string(kind):
        empty = column.default if column.default is not None else ""
        return [_entry(column.name, _field(0x0A, _field(0x0A, (
            empty if value is None else value).strip().encode("utf-8"))))
            for value in array.to_pylist()]
    numeric = pyarrow.types.is_integer(kind) or pyarrow.types.is_floating(kind)
    if not numeric or column.dtype == "string":
        return None
    values = array.to_numpy(zero_copy_only=False).astype(np.float64)
    if nulls:
        values[array.is_null().to_numpy(zero_copy_only=False)] = float(column.default)
    if column.dtype.startswith("float"):
        return _float_entries(column.name, values)
    if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
        return None  # a fraction in an integer column: the fallback names it
    return [_entry(column.name, _field(0x1A, _field(0x0A, _varint(int(v)))))
            for v in values.tolist()]


def _float_entries(name: str, values: np.ndarray) -> list:
    """Each row's entry of a float32 scalar: a constant head and four bytes, built at once."""
    key = _field(0x0A, name.encode("utf-8"))
    entry = key + b"\x12\x08\x12\x06\x0A\x04"  # value: Feature{float_list{packed, 4 bytes}}
    head = b"\x0A" + _varint(len(entry) + 4) + entry
    width = len(head) + 4
    table = np.empty((len(values), width), np.uint8)
    table[:, :len(head)] = np.frombuffer(head, np.uint8)
    table[:, len(head):] = values.astype("<f4").view(np.uint8).reshape(-1, 4)
    flat = table.tobytes()
    return [flat[i * width:(i + 1) * width] for i in range(len(values))]

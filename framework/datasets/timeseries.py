"""Time series from a CSV file: rows in time order, cut into windows with a target ahead.

A window of `window` consecutive rows (every feature column) starts every `stride` rows; its
target is the target column's value `horizon` rows after the window's last row (horizon 0:
at its last row). These are the windows and targets of
`keras.utils.timeseries_dataset_from_array(data, targets=target[window - 1 + horizon:],
sequence_length=window, sequence_stride=stride)`, as arrays.

Example:

    >>> import numpy as np
    >>> values = np.arange(10, dtype=np.float32).reshape(10, 1)
    >>> x, y = make_windows(values, values[:, 0], window=3, stride=2, horizon=1)
    >>> x[:, :, 0].tolist(), y.tolist()
    ([[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0], [6.0, 7.0, 8.0]], [3.0, 5.0, 7.0, 9.0])
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np

__all__ = ["TimeSeries", "read_timeseries", "make_windows", "window_count"]


def window_count(rows: int, window: int, stride: int = 1, horizon: int = 1) -> int:
    """How many windows (with a target) `rows` consecutive rows hold."""
    span = window + horizon
    return 0 if rows < span else (rows - span) // stride + 1


def make_windows(values: np.ndarray, targets: np.ndarray | None, window: int, stride: int = 1,
                 horizon: int = 1) -> tuple[np.ndarray, np.ndarray | None]:
    """(x, y): windows of shape (n, window, features) and their targets (n,), or y None
    when `targets` is None (windows to predict from: then every window, to the last row)."""
    values = np.asarray(values)
    if targets is None:
        count = 0 if len(values) < window else (len(values) - window) // stride + 1
    else:
        count = window_count(len(values), window, stride, horizon)
    starts = np.arange(count) * stride
    x = values[starts[:, None] + np.arange(window)[None, :]] if count else \
        np.zeros((0, window, values.shape[1]), values.dtype)
    if targets is None:
        return x, None
    return x, np.asarray(targets)[starts + window - 1 + horizon]


@dataclasses.dataclass
class TimeSeries:
    """The columns of a time-series CSV file, in time order.

    Attributes:
        values: float32 (rows, features), the feature columns.
        target: (rows,), the target column (int32 when every cell is an integer).
        feature_names: the feature columns' names.
        target_name: the target column's name.
        window, stride, horizon: how windows are cut (see `make_windows`).

    Example (`read_timeseries` makes one from a CSV file):

        >>> rows = np.arange(6, dtype=np.float32).reshape(6, 1)
        >>> series = TimeSeries(rows, rows[:, 0], ["level"], "level", window=2, stride=2)
        >>> x, y = series.rows(0, 5).windows()
        >>> x[:, :, 0].tolist(), y.tolist()
        ([[0.0, 1.0], [2.0, 3.0]], [2.0, 4.0])
    """

    values: np.ndarray
    target: np.ndarray
    feature_names: list[str]
    target_name: str
    window: int
    stride: int = 1
    horizon: int = 1

    def __len__(self) -> int:
        return len(self.values)

    def rows(self, start: int, stop: int) -> "TimeSeries":
        """The rows [start, stop) (a split by time)."""
        return dataclasses.replace(self, values=self.values[start:stop],
                                   target=self.target[start:stop])

    def windows(self, transform=None) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of this series' windows; `transform` (e.g. a standardization) is applied to
        the rows first."""
        values = self.values if transform is None else transform(self.values)
        return make_windows(values, self.target, self.window, self.stride, self.horizon)


def read_timeseries(path: str | os.PathLike, target: str, features: list[str] | None = None,
                    window: int = 10, stride: int = 1, horizon: int = 1,
                    time_column: str | None = None, delimiter: str = ",") -> TimeSeries:
    """Reads a CSV file of observations in time order (one row per time step).

    Args:
        path: the CSV file, with a header row.
        target: the column to forecast.
        features: the columns a window holds; None takes every column but `time_column`
            (the target included: its past is known when forecasting).
        window, stride, horizon: see `make_windows` (horizon 0: the target at the
            window's last row, for a target that is another column).
        time_column: a column to leave out of the features (a timestamp); its rows must be
            in increasing order when it holds numbers.

    Raises:
        ValueError: unknown columns, cells that are not numbers (with their line), too few
            rows for one window, or a time column out of order.
    """
    from graphfit.datasets.loaders import csv_columns, load_csv

    for name, value, low in (("window", window, 1), ("stride", stride, 1),
                             ("horizon", horizon, 0)):
        if not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer of at least {low}. "
                             f"Received: {name}={value!r}")
    header = csv_columns(path, delimiter)
    for name in [target] + ([time_column] if time_column else []):
        if name not in header:
            raise ValueError(f"{path} has no column {name!r}; its columns: {', '.join(header)}")
    if features is None:
        features = [name for name in header if name != time_column]
    names = list(dict.fromkeys(list(features) + [target]))
    table, _ = load_csv(path, features=names, target=None, delimiter=delimiter)
    y = table[:, names.index(target)]
    if np.all(np.abs(y) < 2 ** 31) and _integer_cells(path, target, delimiter):
        y = y.astype(np.int32)  # class ids, as load_csv reads a target of integers
    if time_column:
        _check_time_order(path, time_column, delimiter)
    series = TimeSeries(table[:, :len(features)], y, list(features), target, int(window),
                        int(stride), int(horizon))
    if window_count(len(series), window, stride, horizon) == 0:
        raise ValueError(f"{path} has {len(series)} rows, too few for one window of {window} "
                         f"rows and a target {horizon} row(s) after it")
    return series


def _integer_cells(path, column: str, delimiter: str) -> bool:
    """Whether every cell of `column` is written as an integer ("3", not "3.0"): class ids."""
    import csv
    import gzip

    opener = gzip.open if os.fspath(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as text:
        reader = csv.reader(text, delimiter=delimiter)
        index = next(reader).index(column)
        return all(row[index].strip().lstrip("+-").isdigit() for row in reader
                   if any(cell.strip() for cell in row))


def _check_time_order(path, column: str, delimiter: str) -> None:
    """The time column runs forward (numbers, or ISO dates and times such as
    "2023-01-03 02:00"); a gap much longer than the usual step is warned about, since
    windows span it. Other text is taken in the file's order."""
    times = _times(path, column, delimiter)
    if times is None or len(times) < 2:
        return
    steps = np.diff(times.astype(np.int64) if times.dtype.kind == "M" else times)
    if (steps < 0).any():
        row = int(np.argmax(steps < 0)) + 2
        raise ValueError(f"{path}: the time column {column!r} goes back at data row {row} "
                         f"({times[row - 2]} then {times[row - 1]}); sort the rows by "
                         f"time")
    usual = np.median(steps)
    if usual > 0 and steps.max() > _GAP * usual:
        row = int(np.argmax(steps)) + 2
        warnings.warn(f"{path}: the time column {column!r} jumps from {times[row - 2]} to "
                      f"{times[row - 1]} at data row {row}, {steps.max() / usual:.0f} times its "
                      f"usual step: windows that span the gap mix the two sides. Fill the gap, "
                      f"or split the file there", stacklevel=4)


_GAP = 5  # a step this many times the median step is a gap in the series


def _times(path, column: str, delimiter: str):
    """The time column as float64 numbers or datetime64 values, or None for other text."""
    import csv
    import gzip

    opener = gzip.open if os.fspath(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as text:
        reader = csv.reader(text, delimiter=delimiter)
        index = [name.strip() for name in next(reader)].index(column)
        cells = [row[index].strip() for row in reader if any(cell.strip() for cell in row)]
    try:
        return np.array(cells, np.float64)
    except ValueError:
        pass
    try:
        return np.array(cells, "datetime64[s]")
    except ValueError:
        return None  # text time stamps of another form: the file's order is taken as given

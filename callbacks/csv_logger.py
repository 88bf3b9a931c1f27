"""`CSVLogger`: one CSV row per epoch, written and flushed as each epoch ends."""

from __future__ import annotations

import collections.abc
import csv
import os

import numpy as np

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.chief import is_chief
from graphfit.core.registry import CALLBACKS

__all__ = ["CSVLogger"]


def _cell(value):
    """A log value as Keras writes it: strings and numbers as they are, sequences as "[a, b]"."""
    if isinstance(value, str) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value
    if isinstance(value, collections.abc.Iterable):
        return f'"[{", ".join(map(str, value))}]"'
    return value


@CALLBACKS.register
class CSVLogger(Callback):
    """Streams the epoch logs to a CSV file (Keras's `CSVLogger`, with a growing header).

    The first row is the header: "epoch", then the log keys in sorted order; each epoch
    appends one row (`epoch` counted from 0) and flushes it, so the file can be read while
    training runs. The parent folder is created when training begins.

    Keys that are missing from an epoch's logs get an empty cell (Keras writes "NA"). Keras
    fixes the columns at the first epoch and drops keys that appear later; here a key that
    appears later (test metrics on the epochs the test stage ran, validation metrics with
    `validation_freq > 1`, a "learning_rate" from a callback added later) extends the header:
    the file is rewritten at once with the new, again sorted, columns and empty cells in the
    earlier rows, so nothing logged is ever lost. With `append=True` the rows already in the
    file are kept (and rewritten under the wider header when one is needed); a header already
    in the file is reused as it is when the new keys fit in it.

    Args:
        filename: the CSV file, e.g. "run/log.csv".
        separator: the one-character delimiter.
        append: add to an existing file instead of overwriting it.

    Raises:
        ValueError: for an empty filename, a separator that is not one character, or a
            non-boolean `append`.

    Example:

        >>> import csv, os, tempfile
        >>> import graphfit as gf
        >>> path = os.path.join(tempfile.mkdtemp(), "logs", "training.csv")
        >>> logger = gf.callbacks.CSVLogger(path)
        >>> logger.on_train_begin()
        >>> logger.on_epoch_end(0, {"loss": 0.5})
        >>> logger.on_epoch_end(1, {"loss": 0.25, "test_loss": 0.75})
        >>> logger.on_train_end()
        >>> with open(path, newline="") as f:
        ...     print([row for row in csv.reader(f)])
        [['epoch', 'loss', 'test_loss'], ['0', '0.5', ''], ['1', '0.25', '0.75']]
    """

    def __init__(self, filename, separator: str = ",", append: bool = False):
        super().__init__()
        if not isinstance(filename, (str, os.PathLike)) or not os.fspath(filename):
            raise ValueError(f"filename must be a file path. Received: filename={filename!r}")
        if not isinstance(separator, str) or len(separator) != 1:
            raise ValueError(f"separator must be a single character. "
                             f"Received: separator={separator!r}")
        if not isinstance(append, bool):
            raise ValueError(f"append must be True or False. Received: append={append!r}")
        self.filename = os.fspath(filename)
        self.sep = separator  # Keras's attribute name
        self.append = append
        self.keys: list[str] | None = None  # the columns after "epoch"
        self.csv_file = None
        self._earlier_rows: list[dict] = []  # rows found in the file when appending
        self._rows: list[dict] = []  # this run's rows, for a rewrite under a wider header

    def _dialect(self):
        separator = self.sep

        class Dialect(csv.excel):  # Keras's: excel with the chosen delimiter
            delimiter = separator

        return Dialect

    def on_train_begin(self, logs=None):
        self.close()
        if self.model is not None and not is_chief(self.model):
            return  # another worker: the chief writes the file
        folder = os.path.dirname(os.path.abspath(self.filename))
        os.makedirs(folder, exist_ok=True)
        self.keys, self._earlier_rows, self._rows = None, [], []
        if self.append and os.path.isfile(self.filename):
            with open(self.filename, newline="") as existing:
                reader = csv.DictReader(existing, dialect=self._dialect())
                if reader.fieldnames:
                    self.keys = [k for k in reader.fieldnames if k != "epoch"]
                    self._earlier_rows = list(reader)
        self.csv_file = open(self.filename, "a" if self.append else "w", newline="")

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.model is not None and not is_chief(self.model):
            return
        if self.csv_file is None:  # used without on_train_begin
            self.on_train_begin()
        row = {"epoch": epoch, **{key: _cell(value) for key, value in logs.items()}}
        self._rows.append(row)
        new_keys = [key for key in logs if key not in (self.keys or ())]
        if self.keys is None:
            self.keys = sorted(logs)
            self._writer().writeheader()
        elif new_keys:
            self.keys = sorted({*self.keys, *new_keys})
            self._rewrite()
            return
        self._writer().writerow(row)
        self.csv_file.flush()

    def _writer(self) -> csv.DictWriter:
        return csv.DictWriter(self.csv_file, fieldnames=["epoch", *self.keys], restval="",
                              extrasaction="ignore", dialect=self._dialect())

    def _rewrite(self) -> None:
        """Writes the whole file again under the current header."""
        self.csv_file.close()
        self.csv_file = open(self.filename, "w", newline="")
        writer = self._writer()
        writer.writeheader()
        writer.writerows(self._earlier_rows)
        writer.writerows(self._rows)
        self.csv_file.flush()

    def close(self) -> None:
        """Closes the file (done at the end of training)."""
        if self.csv_file is not None and not self.csv_file.closed:
            self.csv_file.close()
        self.csv_file = None

    def on_train_end(self, logs=None):
        self.close()

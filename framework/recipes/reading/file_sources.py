"""The `data:` keys of an image folder and a time-series CSV, and their checks at validation.

    data: {source: image_folder, path: shapes/, image_size: [32, 32], color_mode: rgb,
           on_corrupt: skip}
    data: {source: timeseries, path: sensor.csv, target: temperature, window: 24,
           stride: 1, horizon: 1}

`graphfit validate` checks that the folder exists with at least two class subfolders, or that
the CSV file has the columns named; decoding every image waits for the run (where a corrupt
file fails or is skipped, as `on_corrupt` says).
"""

from __future__ import annotations

import os

from graphfit.datasets.image_folder import COLOR_MODES, INTERPOLATIONS, LABEL_MODES
from graphfit.recipes.reading.problems import short_repr
from graphfit.recipes.reading.schema import (
    INVALID,
    Checker,
    Field,
    Integer,
    ListOf,
    Nullable,
    String,
)

__all__ = ["FILE_SOURCES", "check_file_source"]


class _Size(ListOf):
    """[height, width]: two positive integers."""

    def check(self, value, path, checker):
        checked = super().check(value, path, checker)
        if checked is not INVALID and len(checked) != 2:
            checker.report(path, f"must be [height, width] (two integers), got {len(checked)} "
                                 f"values")
            return INVALID
        return checked


FILE_SOURCES = {
    "image_folder": {
        "path": Field(String(), doc="the folder holding one subfolder of images per class"),
        "image_size": Field(_Size(Integer(min=1), min_length=2), [256, 256],
                            "[height, width] every image is resized to"),
        "color_mode": Field(String(tuple(COLOR_MODES)), "rgb",
                            "channels: grayscale (1), rgb (3) or rgba (4)"),
        "interpolation": Field(String(INTERPOLATIONS), "bilinear", "the resize method"),
        "label_mode": Field(String(LABEL_MODES), "int",
                            "labels: int (class ids), categorical (one-hot), binary (2 classes)"),
        "on_corrupt": Field(String(("fail", "skip")), "fail",
                            "an image that does not decode: fail (naming it) or skip (counted "
                            "in the log and in the run's preprocessing.json)")},
    "timeseries": {
        "path": Field(String(), doc="the CSV file: one row per time step, in time order"),
        "target": Field(String(), doc="the column to forecast"),
        "features": Field(Nullable(ListOf(String(), min_length=1)), None,
                          "columns in a window (null: every column but time_column, the "
                          "target included)"),
        "window": Field(Integer(min=1), 10, "rows in a window"),
        "stride": Field(Integer(min=1), 1, "rows from one window's start to the next"),
        "horizon": Field(Integer(min=0), 1, "the target is this many rows after a window's "
                                            "last row (0: at its last row)"),
        "time_column": Field(Nullable(String()), None, "a column left out of the features "
                                                       "(a timestamp); numbers must increase"),
        "delimiter": Field(String(), ",", "the column separator")},
}


def check_file_source(resolved: dict, full: str, path: tuple, checker: Checker) -> None:
    """Checks the folder or file `full` (the source's absolute path) of a resolved source."""
    if resolved["source"] == "image_folder":
        _check_folder(full, path, checker)
    else:
        _check_series_file(resolved, full, path, checker)


def _check_folder(full: str, path: tuple, checker: Checker) -> None:
    if not os.path.isdir(full):
        checker.report(path + ("path",), (f"{full} is a file; give the folder holding one "
                                          f"subfolder per class") if os.path.exists(full)
                       else f"folder not found: {full} (a relative path is read from the "
                            f"recipe's folder)")
        return
    classes = sorted(e for e in os.listdir(full) if os.path.isdir(os.path.join(full, e)))
    if len(classes) < 2:
        checker.report(path + ("path",), f"{full} has {len(classes)} class subfolder(s)"
                                         f"{' (' + classes[0] + ')' if classes else ''}; an "
                                         f"image folder needs one subfolder of images per "
                                         f"class, at least two")


def _check_series_file(resolved: dict, full: str, path: tuple, checker: Checker) -> None:
    from graphfit import datasets
    from graphfit.core.registry import did_you_mean

    if not os.path.isfile(full):
        checker.report(path + ("path",), f"{full} is a folder; give the CSV file in it"
                       if os.path.isdir(full) else f"file not found: {full} (a relative path "
                                                   f"is read from the recipe's folder)")
        return
    delimiter = resolved.get("delimiter")
    try:
        available = datasets.csv_columns(full, delimiter=delimiter if isinstance(
            delimiter, str) else ",")
    except (OSError, ValueError) as error:
        checker.report(path + ("path",), f"cannot read {full}: {error}")
        return
    named = [(("target",), resolved.get("target")), (("time_column",),
                                                     resolved.get("time_column"))]
    named += [(("features", i), name) for i, name in enumerate(resolved.get("features") or [])
              if resolved.get("features") is not INVALID]
    for key, name in named:
        if isinstance(name, str) and name not in available:
            hint = did_you_mean(name, available, "; did you mean {!r}?", otherwise=".")
            checker.report(path + key, f"no column {short_repr(name)} in the file{hint} It "
                                       f"has: {', '.join(available)}")

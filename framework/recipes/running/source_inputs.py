"""`graphfit predict` inputs of runs trained on an image folder or a time series.

An image run reads an image file, or a folder of them (recursively, sorted), decoded and
resized as its training images were (`image_size`, `color_mode`, `interpolation` from the
run's preprocessing.json); the output's first column `file` names each image. A time-series
run reads a CSV file with the run's feature columns (by name), cuts it into windows of the
run's length and stride (every window, up to the file's last row), standardizes them with the
training rows' statistics, and predicts the target `horizon` steps after each window; the
output's first column `last_row` is the data row (from 1) where each window ends.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from graphfit.datasets.image_folder import corrupt_images, image_files, load_images
from graphfit.datasets.loaders import load_csv
from graphfit.datasets.timeseries import make_windows
from graphfit.recipes.running.data_loading import Standardizer

__all__ = ["reads_own_inputs", "read_source_inputs"]


def reads_own_inputs(preprocessing: dict) -> bool:
    """Whether the run's inputs are read here (an image or a time-series run)."""
    return "image_folder" in preprocessing or "timeseries" in preprocessing


def read_source_inputs(path: str, preprocessing: dict, on_corrupt: str = "fail"
                       ) -> tuple[np.ndarray, list[str], str]:
    """(x, ids, id column name) of the inputs in `path` for the run's model. An image that
    does not decode fails, or with `on_corrupt="skip"` (the run's recipe's `data.on_corrupt`,
    as in training) is left out and counted on stderr.

    Raises:
        ValueError: nothing to read, an image that does not decode (or none that does),
            missing columns, or fewer rows than one window.
    """
    if "image_folder" in preprocessing:
        return _images(path, preprocessing["image_folder"], on_corrupt)
    return _windows(path, preprocessing)


def _images(path: str, record: dict, on_corrupt: str = "fail"):
    files = image_files(path)
    if on_corrupt == "skip":
        skipped = set(corrupt_images(files, record["color_mode"]))
        if skipped:
            print(f"graphfit: note: skipped {len(skipped)} corrupt image(s) of {len(files)} "
                  f"(data.on_corrupt: skip): {', '.join(sorted(skipped)[:5])}"
                  f"{' ...' if len(skipped) > 5 else ''}", file=sys.stderr)
            files = [file for file in files if file not in skipped]
        if not files:
            raise ValueError(f"none of the images in {os.path.abspath(path)} can be decoded")
    x = load_images(files, record["image_size"], record["color_mode"],
                    record.get("interpolation", "bilinear"))
    base = os.path.abspath(path) if os.path.isdir(path) else None
    ids = [os.path.relpath(file, base) if base else path for file in files]
    return x, ids, "file"


def _windows(path: str, preprocessing: dict):
    record = preprocessing["timeseries"]
    if not os.path.isfile(path):
        raise ValueError(f"input file not found: {os.path.abspath(path)}")
    values, _ = load_csv(path, features=record["features"], target=None)
    x, _ = make_windows(values, None, record["window"], record["stride"])
    if len(x) == 0:
        raise ValueError(f"{os.path.abspath(path)} has {len(values)} rows, fewer than one "
                         f"window of {record['window']}: there is nothing to predict")
    standardize = preprocessing.get("standardize")
    if standardize:
        x = Standardizer.from_json(standardize)(x)
    ends = np.arange(len(x)) * record["stride"] + record["window"]
    return x.astype(np.float32), [str(int(end)) for end in ends], "last_row"

"""Splits of the sources that split themselves: image folders (by file) and time series (by time).

An image folder is split by file, as arrays are split by sample: the files are shuffled with
the recipe's seed (unless `data.shuffle: false`), the last `test_split` fraction is the test
split and the `validation_split` fraction before it the validation split, so the same seed
always gives the same files to each split. Each split is a `tf.data` pipeline
(`ImageFolder.dataset`): the training one reshuffles its files every epoch (from the seed)
when `training.shuffle` is true; validation and test keep their order. Standardization does
not apply (scale pixels with a `Rescaling` or `Normalization` layer in the model).

A time series is split by time, never shuffled across the boundary: the first rows train, the
next `validation_split` fraction validates and the last `test_split` fraction tests, and the
windows are cut inside each part, so no window straddles two splits. `data.standardize`
scales each feature column with the mean and std of the training rows only. The training
windows are then shuffled by `fit` (`training.shuffle`), inside the training part.
"""

from __future__ import annotations

import sys

import numpy as np

from graphfit.datasets.image_folder import ImageFolder
from graphfit.datasets.timeseries import TimeSeries
from graphfit.recipes.running.data_loading import (
    DataError,
    Splits,
    Standardizer,
    file_dtype,
    load_source,
)

__all__ = ["splits_itself", "source_splits", "file_split_indices", "time_split_rows"]

_STAGES = (("val", "validation"), ("test", "test"))


def splits_itself(loaded) -> bool:
    """Whether a loaded source is split here (an image folder or a time series)."""
    return isinstance(loaded, (ImageFolder, TimeSeries))


def file_split_indices(count: int, validation: float, test: float, seed: int,
                       shuffle: bool = True):
    """(train, val, test) indices: the rule arrays are split by (see `data_loading`)."""
    order = np.random.default_rng(seed).permutation(count) if shuffle else np.arange(count)
    n_test, n_val = int(round(count * test)), int(round(count * validation))
    n_train = count - n_test - n_val
    return order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]


def time_split_rows(rows: int, validation: float, test: float) -> list[tuple[int, int]]:
    """[(start, stop)] of the train, validation and test rows, in time order."""
    n_test, n_val = int(round(rows * test)), int(round(rows * validation))
    n_train = rows - n_test - n_val
    return [(0, n_train), (n_train, n_train + n_val), (n_train + n_val, rows)]


def source_splits(loaded, config: dict) -> Splits:
    """The `Splits` of an image folder or a time series (see the module's docstring).

    Raises:
        DataError: at the recipe key to change (a split too small for a window or a file,
            `standardize` on images, ...).
    """
    if isinstance(loaded, ImageFolder):
        return _image_splits(loaded, config)
    return _series_splits(loaded, config)


def _separate(config: dict, stage: str):
    """A stage's own source (`training.validation_data` / `test_data`) loaded, or None."""
    long = dict(_STAGES)[stage]
    source = config["training"][f"{long}_data"]
    if source is None:
        return None
    return load_source(source, config["seed"], ("training", f"{long}_data"),
                       dtype=file_dtype(config["training"]))


def _image_splits(folder: ImageFolder, config: dict) -> Splits:
    data, training, seed = config["data"], config["training"], config["seed"]
    if data["standardize"]:
        raise DataError(("data", "standardize"),
                        "standardize does not apply to an image folder; scale the pixels in "
                        "the model instead (a Rescaling layer with scale: 0.00392156862745098, "
                        "i.e. 1/255, or a keras.Normalization layer) and set standardize: "
                        "false")
    if folder.skipped:
        print(f"graphfit: note: skipped {len(folder.skipped)} corrupt image(s) of "
              f"{len(folder) + len(folder.skipped)} in {folder.root} (data.on_corrupt: skip): "
              f"{', '.join(folder.skipped[:5])}{' ...' if len(folder.skipped) > 5 else ''}",
              file=sys.stderr)
    indices = file_split_indices(len(folder), training["validation_split"],
                                 training["test_split"], seed, data["shuffle"])
    _check_sizes(len(folder), "images", training, dict(zip(("train", "val", "test"),
                                                           map(len, indices))))
    batch = training["batch_size"] or len(folder)  # null: the whole folder in one batch
    stages = {"train": folder.subset(indices[0]).dataset(batch, training["shuffle"], seed)}
    files = {"train": len(indices[0])}
    for (stage, _), chosen in zip(_STAGES, indices[1:]):
        own = _separate(config, stage)
        if isinstance(own, ImageFolder):  # its own folder
            _check_same_classes(folder, own, stage)
            stages[stage], files[stage] = own.dataset(batch), len(own)
        elif own is not None:
            stages[stage] = own
        else:
            stages[stage] = folder.subset(chosen).dataset(batch) if len(chosen) else None
            files[stage] = len(chosen)
    record = {"class_names": list(folder.class_names),
              "image_folder": {"image_size": list(folder.image_size),
                               "color_mode": folder.color_mode,
                               "interpolation": folder.interpolation,
                               "files": {stage: int(n) for stage, n in files.items()},
                               "skipped": list(folder.skipped)}}
    return Splits(stages["train"], stages["val"], stages["test"], None, None, record)


def _check_same_classes(folder: ImageFolder, own: ImageFolder, stage: str) -> None:
    if own.class_names != folder.class_names or own.image_shape != folder.image_shape:
        long = dict(_STAGES)[stage]
        raise DataError(("training", f"{long}_data"),
                        f"the {long} images must have the training folder's classes and image "
                        f"shape: {own.class_names} {list(own.image_shape)} differ from "
                        f"{folder.class_names} {list(folder.image_shape)}")


def _check_sizes(count: int, what: str, training: dict, sizes: dict) -> None:
    if sizes["train"] == 0:
        raise DataError(("training", "validation_split"),
                        f"no {what} left to train on: the data has {count} {what}")
    for stage, long in _STAGES:
        fraction = training[f"{long}_split"]
        if fraction > 0 and sizes[stage] == 0:
            raise DataError(("training", f"{long}_split"),
                            f"{long}_split {fraction} of {count} {what} is none at all, so "
                            f"there would be no {long} numbers; give more data, a larger "
                            f"fraction, or set {long}_split: 0 to go without")


def _series_splits(series: TimeSeries, config: dict) -> Splits:
    data, training = config["data"], config["training"]
    parts = [series.rows(*bounds) for bounds in
             time_split_rows(len(series), training["validation_split"], training["test_split"])]
    standardizer = Standardizer.fit(parts[0].values) if data["standardize"] else None
    transform = standardizer
    windows = [part.windows(transform) for part in parts]
    _check_sizes(len(series), "windows", training,
                 {stage: len(w[0]) for stage, w in zip(("train", "val", "test"), windows)})
    stages = dict(zip(("train", "val", "test"),
                      [w if len(w[0]) else None for w in windows]))
    for stage, _ in _STAGES:
        own = _separate(config, stage)
        if isinstance(own, TimeSeries):
            stages[stage] = own.windows(transform)
        elif own is not None:
            stages[stage] = own
    # predict and the export read whole windows: the statistics repeated per time step
    windowed = None if standardizer is None else Standardizer(
        np.tile(standardizer.mean, series.window), np.tile(standardizer.std, series.window))
    record = {"timeseries": {"features": list(series.feature_names),
                             "target": series.target_name, "window": series.window,
                             "stride": series.stride, "horizon": series.horizon,
                             "rows": {stage: stop - start for stage, (start, stop) in zip(
                                 ("train", "val", "test"),
                                 time_split_rows(len(series), training["validation_split"],
                                                 training["test_split"]))}}}
    return Splits(stages["train"], stages["val"], stages["test"], windowed, None, record)

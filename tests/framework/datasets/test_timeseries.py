"""Time-series windows equal `keras.utils.timeseries_dataset_from_array`'s; a `source:
timeseries` recipe splits by time (no window straddles two splits, nothing shuffled across the
boundary) and standardizes with the training rows only."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from graphfit.datasets import read_timeseries
from graphfit.datasets.timeseries import make_windows, window_count
from graphfit.recipes import recipe_from_text
from graphfit.recipes.running.data_loading import load_splits
from graphfit.recipes.running.source_splits import time_split_rows


def _keras_windows(values, target, window, stride, horizon):
    dataset = keras.utils.timeseries_dataset_from_array(
        values, target[window - 1 + horizon:], sequence_length=window, sequence_stride=stride,
        batch_size=1000)
    x, y = next(iter(dataset))
    return x.numpy(), y.numpy()


@pytest.mark.parametrize("window, stride, horizon", [(1, 1, 1), (5, 1, 1), (4, 3, 2),
                                                     (6, 2, 0), (10, 7, 5)])
def test_windows_equal_keras(window, stride, horizon):
    rng = np.random.default_rng(window)
    values = rng.normal(size=(37, 3)).astype(np.float32)
    target = rng.normal(size=37).astype(np.float32)
    x, y = make_windows(values, target, window, stride, horizon)
    kx, ky = _keras_windows(values, target, window, stride, horizon)
    assert len(x) == window_count(37, window, stride, horizon)
    np.testing.assert_array_equal(x, kx)
    np.testing.assert_array_equal(y, ky)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """100 rows: time, a (value = row number), b (value = 1000 + row), level (class 0/1)."""
    path = tmp_path_factory.mktemp("series") / "log.csv"
    rows = ["time,a,b,level"] + [f"{t},{t}.0,{1000 + t}.5,{t % 2}" for t in range(100)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_reads_columns_and_refuses_bad_input(log, tmp_path):
    series = read_timeseries(log, target="a", time_column="time", window=4)
    assert series.feature_names == ["a", "b", "level"] and series.target.dtype == np.float32
    assert read_timeseries(log, target="level", features=["a"], window=4).target.dtype == np.int32
    with pytest.raises(ValueError, match="has no column 'c'; its columns: time, a, b, level"):
        read_timeseries(log, target="c")
    with pytest.raises(ValueError, match="has 100 rows, too few for one window of 100 rows and "
                                         "a target 1 row"):
        read_timeseries(log, target="a", window=100)
    with pytest.raises(ValueError, match="window must be an integer of at least 1. Received: "
                                         "window=0"):
        read_timeseries(log, target="a", window=0)
    backwards = tmp_path / "back.csv"
    backwards.write_text("time,a\n1,1\n2,2\n1,3\n4,4\n")
    with pytest.raises(ValueError, match="the time column 'time' goes back at data row 3"):
        read_timeseries(backwards, target="a", time_column="time", window=1)


RECIPE = """
seed: 3
data: {{source: timeseries, path: {path}, target: a, features: [a, b], window: 5, stride: 2,
       horizon: 3, standardize: true}}
model: [{{type: Flatten}}, {{type: Dense, units: 1}}]
loss: mse
training: {{validation_split: 0.2, test_split: 0.1}}
"""


def test_splits_by_time_without_straddling_and_standardizes_on_training_rows(log):
    recipe = recipe_from_text(RECIPE.format(path=log), "series.yaml")
    splits = load_splits(recipe.config)
    bounds = time_split_rows(100, 0.2, 0.1)
    assert bounds == [(0, 70), (70, 90), (90, 100)]
    train_rows = np.arange(70, dtype=np.float64)
    mean, std = train_rows.mean(), train_rows.std()
    for (x, y), (start, stop) in zip((splits.train, splits.val, splits.test), bounds):
        rows = x[:, :, 0] * std + mean  # column a holds the row number: undo the scaling
        np.testing.assert_allclose(rows[:, 0], np.arange(len(x)) * 2 + start, atol=1e-3)
        np.testing.assert_allclose(rows, rows[:, :1] + np.arange(5), atol=1e-3)
        assert rows.min() >= start - 1e-3 and rows.max() <= stop - 1 + 1e-3
        # the target (raw, unscaled) is 3 rows after the window, inside the same split
        np.testing.assert_allclose(y, rows[:, -1] + 3, atol=1e-3)
        assert y.max() <= stop - 1
    # the statistics are the training rows' only, recorded per (step, feature) for predict
    np.testing.assert_allclose(splits.standardizer.mean, np.tile([mean, 1000.5 + mean], 5))
    np.testing.assert_allclose(splits.standardizer.std, np.tile([std, std], 5))
    assert splits.record["timeseries"]["rows"] == {"train": 70, "val": 20, "test": 10}


def test_iso_time_stamps_are_checked_for_order_and_a_gap_warns(tmp_path):
    stamps = ["2023-01-03 00:00", "2023-01-03 01:00", "2023-01-03 03:00", "2023-01-03 02:00"]
    unordered = tmp_path / "unordered.csv"
    unordered.write_text("time,a\n" + "".join(f"{t},{i}\n" for i, t in enumerate(stamps)))
    with pytest.raises(ValueError, match=r"the time column 'time' goes back at data row 4 "
                                         r"\(2023-01-03T03:00:00 then 2023-01-03T02:00:00\)"):
        read_timeseries(unordered, target="a", window=1, time_column="time")
    hours = [0, 1, 2, 3, 13, 14, 15, 16]
    gap = tmp_path / "gap.csv"
    gap.write_text("time,a\n" + "".join(f"2023-01-03 {h:02d}:00,{h}\n" for h in hours))
    with pytest.warns(UserWarning, match=r"jumps from 2023-01-03T03:00:00 to "
                                         r"2023-01-03T13:00:00 at data row 5, 10 times its usual "
                                         r"step"):
        read_timeseries(gap, target="a", window=2, time_column="time")

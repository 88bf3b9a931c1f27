"""graphfit.datasets: synthetic generators, CSV and NPZ loaders, the name list."""

import gzip

import numpy as np
import pytest

from graphfit import datasets
from graphfit.datasets import (
    csv_columns,
    load_csv,
    load_npz,
    make_blobs,
    make_moons,
    make_sinc,
    make_spirals,
    npz_keys,
)

GENERATORS = {
    "moons": (make_moons, {"n_samples": 50}),
    "spirals": (make_spirals, {"n_samples": 60, "classes": 3}),
    "blobs": (make_blobs, {"n_samples": 40, "centers": 4, "features": 5}),
    "sinc": (make_sinc, {"n_samples": 30}),
}


# ---------------------------------------------------------------- synthetic generators


@pytest.mark.parametrize(
    "fn, kwargs, x_shape, y_shape, y_dtype, labels",
    [
        (make_moons, {"n_samples": 51}, (51, 2), (51,), np.int32, {0, 1}),
        (make_spirals, {"n_samples": 61, "classes": 4}, (61, 2), (61,), np.int32, {0, 1, 2, 3}),
        (make_blobs, {"n_samples": 23, "centers": 5, "features": 3}, (23, 3), (23,), np.int32,
         {0, 1, 2, 3, 4}),
        (make_sinc, {"n_samples": 17}, (17, 1), (17, 1), np.float32, None),
    ],
)
def test_shapes_dtypes_and_labels(fn, kwargs, x_shape, y_shape, y_dtype, labels):
    x, y = fn(**kwargs)
    assert x.shape == x_shape and x.dtype == np.float32
    assert y.shape == y_shape and y.dtype == y_dtype
    if labels is not None:
        assert set(y.tolist()) == labels


def test_default_sizes():
    assert make_moons()[0].shape == (500, 2)
    assert make_spirals()[0].shape == (600, 2)
    assert make_blobs()[0].shape == (500, 2)
    assert make_sinc()[0].shape == (500, 1)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_seed_determines_the_data(name):
    fn, kwargs = GENERATORS[name]
    x1, y1 = fn(**kwargs, seed=3)
    x2, y2 = fn(**kwargs, seed=3)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    x3, _ = fn(**kwargs, seed=4)
    assert not np.array_equal(x1, x3)


def test_moons_without_noise_by_hand():
    # 6 points: 3 on the outer half circle at t = 0, pi/2, pi; 3 on the inner one.
    x, y = make_moons(n_samples=6, noise=0.0)
    outer = sorted(map(tuple, np.round(x[y == 0], 6).tolist()))
    inner = sorted(map(tuple, np.round(x[y == 1], 6).tolist()))
    assert outer == [(-1.0, 0.0), (0.0, 1.0), (1.0, 0.0)]
    assert inner == [(0.0, 0.5), (1.0, -0.5), (2.0, 0.5)]


def test_moons_without_noise_lie_on_the_half_circles():
    x, y = make_moons(n_samples=201, noise=0.0, seed=5)
    outer, inner = x[y == 0].astype(np.float64), x[y == 1].astype(np.float64)
    assert len(outer) == 100 and len(inner) == 101
    np.testing.assert_allclose(np.hypot(outer[:, 0], outer[:, 1]), 1.0, atol=1e-6)
    assert outer[:, 1].min() >= -1e-6
    np.testing.assert_allclose(np.hypot(inner[:, 0] - 1.0, inner[:, 1] - 0.5), 1.0, atol=1e-6)
    assert inner[:, 1].max() <= 0.5 + 1e-6
    # The points are shuffled, not in class order.
    assert not np.all(np.diff(y) >= 0)


def test_moons_noise_has_the_requested_spread():
    clean, y = make_moons(n_samples=4000, noise=0.0, seed=1)
    noisy, y_noisy = make_moons(n_samples=4000, noise=0.2, seed=1)
    np.testing.assert_array_equal(y, y_noisy)  # same shuffle, noise added afterwards
    assert np.std(noisy - clean) == pytest.approx(0.2, rel=0.05)


def test_spirals_balanced_classes():
    _, y = make_spirals(n_samples=10, classes=3)
    assert np.bincount(y).tolist() == [4, 3, 3]
    _, y = make_spirals(n_samples=600, classes=2)
    assert np.bincount(y).tolist() == [300, 300]


def test_spirals_without_noise_follow_their_arms():
    classes, turns = 3, 1.5
    x, y = make_spirals(n_samples=90, classes=classes, turns=turns, noise=0.0)
    r = np.hypot(x[:, 0], x[:, 1]).astype(np.float64)
    assert r.min() > 0 and r.max() == pytest.approx(1.0, abs=1e-6)
    # On arm k the angle is 2 pi (turns r + k / classes), modulo a full turn.
    expected = 2 * np.pi * (turns * r + y / classes)
    angle = np.arctan2(x[:, 1], x[:, 0])
    np.testing.assert_allclose(np.cos(angle - expected), 1.0, atol=1e-5)


def test_blobs_points_cluster_around_their_centers():
    # With cluster_std=0 every point sits on its center; same seed, same centers.
    exact, y0 = make_blobs(n_samples=300, centers=3, features=2, cluster_std=0.0, seed=7)
    x, y = make_blobs(n_samples=3000, centers=3, features=2, cluster_std=0.5, seed=7)
    centers = np.stack([exact[y0 == k][0] for k in range(3)])
    for k in range(3):
        np.testing.assert_array_equal(exact[y0 == k], np.broadcast_to(centers[k], (100, 2)))
        members = x[y == k]
        np.testing.assert_allclose(members.mean(axis=0), centers[k], atol=0.05)
        assert members.std(axis=0) == pytest.approx([0.5, 0.5], rel=0.1)
    assert np.all((centers >= -8.0) & (centers <= 8.0))
    assert np.bincount(y).tolist() == [1000, 1000, 1000]


def test_blobs_center_box():
    x, _ = make_blobs(n_samples=200, centers=10, cluster_std=0.0, center_box=(2.0, 3.0))
    assert x.min() >= 2.0 and x.max() <= 3.0


def test_sinc_without_noise():
    x, y = make_sinc(n_samples=200, noise=0.0, low=-4.0, high=6.0, seed=2)
    assert x.min() >= -4.0 and x.max() <= 6.0
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, np.sin(x64) / x64, atol=1e-6)


def test_sinc_noise():
    x, y = make_sinc(n_samples=5000, noise=0.1, seed=2)
    residual = y.astype(np.float64) - np.sin(x.astype(np.float64)) / x
    assert np.std(residual) == pytest.approx(0.1, rel=0.05)


@pytest.mark.parametrize(
    "fn, kwargs, message",
    [
        (make_moons, {"n_samples": 0},
         "n_samples must be a positive integer. Received: n_samples=0"),
        (make_moons, {"n_samples": 2.5}, "Received: n_samples=2.5"),
        (make_moons, {"n_samples": True}, "Received: n_samples=True"),
        (make_moons, {"noise": -0.1}, "noise must be a finite number >= 0. Received: noise=-0.1"),
        (make_spirals, {"classes": 1}, "classes must be an integer >= 2. Received: classes=1"),
        (make_spirals, {"turns": 0}, "turns must be a finite number > 0. Received: turns=0"),
        (make_spirals, {"noise": float("nan")}, "Received: noise=nan"),
        (make_blobs, {"centers": 0}, "centers must be a positive integer. Received: centers=0"),
        (make_blobs, {"features": 0}, "features must be a positive integer. Received: features=0"),
        (make_blobs, {"cluster_std": -1.0}, "Received: cluster_std=-1.0"),
        (make_blobs, {"center_box": (3.0, 3.0)}, "center_box[0] must be less than center_box[1]"),
        (make_blobs, {"center_box": 5.0}, "center_box must be a pair"),
        (make_sinc, {"low": 1.0, "high": -1.0}, "low must be less than high. "
                                               "Received: low=1.0, high=-1.0"),
        (make_sinc, {"n_samples": -3}, "Received: n_samples=-3"),
    ],
)
def test_argument_validation(fn, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(".", r"\.")):
        fn(**kwargs)


# ---------------------------------------------------------------- CSV


def _write(path, text):
    path.write_text(text)
    return path


@pytest.fixture
def table(tmp_path):
    return _write(tmp_path / "table.csv",
                  "id,age,income,label,score\n"
                  "a1,30,1.5,0,0.25\n"
                  "\n"  # blank lines are skipped
                  "a2,41,2.5,2,0.5\n"
                  "a3,25,3.25,1,1.0\n")


def test_csv_round_trip_with_named_columns(table):
    x, y = load_csv(table, features=["income", "age"], target="label")
    assert x.dtype == np.float32 and x.shape == (3, 2)
    np.testing.assert_array_equal(x, [[1.5, 30], [2.5, 41], [3.25, 25]])
    assert y.dtype == np.int32 and y.tolist() == [0, 2, 1]


def test_csv_float_target_and_several_targets(table):
    _, y = load_csv(table, features=["age"], target="score")
    assert y.dtype == np.float32 and y.shape == (3,)
    np.testing.assert_array_equal(y, [0.25, 0.5, 1.0])
    _, y = load_csv(table, features=["age"], target=["label", "score"])
    assert y.dtype == np.float32 and y.shape == (3, 2)
    np.testing.assert_array_equal(y, [[0, 0.25], [2, 0.5], [1, 1.0]])


def test_csv_integer_target_needs_integer_text(tmp_path):
    path = _write(tmp_path / "t.csv", "a,b\n1,0.0\n2,1.0\n")
    _, y = load_csv(path, target="b")
    assert y.dtype == np.float32 and y.tolist() == [0.0, 1.0]


def test_csv_default_features_and_no_target(tmp_path):
    path = _write(tmp_path / "t.csv", "a, b ,c\n1,2,3\n4,5,6\n")
    assert csv_columns(path) == ["a", "b", "c"]
    x, y = load_csv(path, target="b")
    np.testing.assert_array_equal(x, [[1, 3], [4, 6]])
    assert y.tolist() == [2, 5]
    x, y = load_csv(str(path))
    assert y is None and x.shape == (2, 3)


def test_csv_other_delimiter_and_gzip(tmp_path):
    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("a;b\n1;2\n3;4\n")
    assert csv_columns(path, delimiter=";") == ["a", "b"]
    x, y = load_csv(path, features=["a"], target="b", delimiter=";")
    assert x.tolist() == [[1.0], [3.0]] and y.tolist() == [2, 4]


def test_csv_unknown_column_suggests_the_closest(table):
    with pytest.raises(ValueError) as info:
        load_csv(table, features=["agee", "income"], target="label")
    message = str(info.value)
    assert "'agee'" in message and "Did you mean 'age'?" in message
    assert "id, age, income, label, score" in message and str(table) in message
    with pytest.raises(ValueError, match="Did you mean 'label'"):
        load_csv(table, target="labels")


def test_csv_bad_cell_names_line_and_column(table):
    # The text column 'id' is fine until it is selected as a feature.
    with pytest.raises(ValueError) as info:
        load_csv(table, features=["age", "id"], target="label")
    message = str(info.value)
    assert str(table) in message and "line 2" in message and "'id'" in message
    assert "'a1'" in message
    path = _write(table.parent / "bad.csv", "a,b\n1,2\n3,x7\n")
    with pytest.raises(ValueError, match=r"line 3 \(data row 2\), column 'b': cannot read 'x7'"):
        load_csv(path, target="a")


def test_csv_structural_errors(tmp_path, table):
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        load_csv(tmp_path / "missing.csv")
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        csv_columns(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="line 3: expected 2 fields as in the header, found 3"):
        load_csv(_write(tmp_path / "ragged.csv", "a,b\n1,2\n3,4,5\n"))
    with pytest.raises(ValueError, match="is empty"):
        csv_columns(_write(tmp_path / "empty.csv", ""))
    with pytest.raises(ValueError, match="'label' is both a feature and a target"):
        load_csv(table, features=["age", "label"], target="label")
    with pytest.raises(ValueError, match="features must be a column name or a non-empty list"):
        load_csv(table, features=[], target="label")
    with pytest.raises(ValueError, match="delimiter must be a single character"):
        load_csv(table, delimiter=", ")


# ---------------------------------------------------------------- NPZ


def test_npz_round_trip(tmp_path):
    path = tmp_path / "data.npz"
    x = np.arange(12, dtype=np.float64).reshape(4, 3) / 7
    np.savez(path, features=x, labels=np.array([3, 1, 2, 0], np.int64), ids=np.arange(4))
    assert npz_keys(path) == ["features", "labels", "ids"]
    got_x, got_y = load_npz(path, x_key="features", y_key="labels")
    assert got_x.dtype == np.float32 and got_y.dtype == np.int32
    np.testing.assert_allclose(got_x, x, rtol=1e-7)
    assert got_y.tolist() == [3, 1, 2, 0]
    ids, none = load_npz(path, x_key="ids", y_key=None)
    assert none is None and ids.dtype == np.arange(4).dtype  # integer x (token ids) kept


def test_npz_float_targets_keep_their_shape(tmp_path):
    path = tmp_path / "data.npz"
    np.savez_compressed(path, x=np.zeros((5, 2)), y=np.ones((5, 1)))
    _, y = load_npz(path)
    assert y.shape == (5, 1) and y.dtype == np.float32


def test_npz_errors(tmp_path):
    path = tmp_path / "data.npz"
    np.savez(path, x=np.zeros((3, 2)), y=np.zeros(4))
    with pytest.raises(ValueError) as info:
        load_npz(path, y_key="label")
    assert "'label'" in str(info.value) and "Keys in the file: x, y" in str(info.value)
    with pytest.raises(ValueError, match="same number of samples"):
        load_npz(path)
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load_npz(tmp_path / "nope.npz")
    np.save(tmp_path / "single.npy", np.zeros(3))
    with pytest.raises(ValueError, match="not an .npz archive"):
        npz_keys(tmp_path / "single.npy")


# ---------------------------------------------------------------- names


def test_names_and_descriptions():
    assert datasets.names() == ["digits", "breast_cancer", "moons", "spirals", "blobs", "sinc",
                                "graph_classes"]
    descriptions = datasets.describe()
    assert list(descriptions) == datasets.names()
    for text in descriptions.values():
        assert text and "\n" not in text
    descriptions["moons"] = "changed"  # a copy: callers cannot change the module's table
    assert datasets.describe()["moons"] != "changed"

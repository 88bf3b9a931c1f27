"""Streaming: CSV and TFRecord shards read by tf.data (`graphfit.datasets.Stream`).

A fit over shards equals the fit over the same rows in memory in the same order (same
initial weights, XLA and steps_per_execution included), the statistics of one streaming pass
equal `Standardizer.fit` of the rows, splits are disjoint and the same every time, and a fit
stopped mid-epoch and resumed from a `ModelCheckpoint(save_freq=...)` checkpoint (which holds
the tf.data iterator) reaches the weights of an unbroken fit.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import datasets, layers
from graphfit.recipes.running.data_loading import Standardizer
from graphfit.saving import checkpoints
from graphfit.saving.input_position import input_position

ROWS = 320
COLUMNS = {"pixels": {"dtype": "float32", "shape": [64]}, "label": "int64"}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The first 320 digits as 4 TFRecord shards and as 3 CSV shards."""
    x, y = datasets.load_digits()
    x, y = x[:ROWS], y[:ROWS]
    folder = tmp_path_factory.mktemp("shards")
    records = datasets.write_tfrecord_shards(x, y, folder / "tfrecord", 4, x_name="pixels",
                                             y_name="label")
    names = [f"p{i}" for i in range(64)]
    tables = datasets.write_csv_shards(x, y, folder / "csv", 3, names=names, y_name="label",
                                       compression="GZIP")
    return x, y, records, tables, names


def _stream(shards, **options):
    return datasets.Stream(shards[2], COLUMNS, target="label", **options)


def _model(jit_compile=False, steps_per_execution=1):
    gf.set_seed(3)
    model = gf.Sequential([layers.Dense(16, activation="relu"),
                           layers.Dense(10, activation="softmax")], input_shape=(64,))
    model.compile(optimizer=gf.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
                  jit_compile=jit_compile, steps_per_execution=steps_per_execution)
    return model


def _assert_same_weights(a, b):
    for left, right in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(left, right)


def test_a_fit_over_shards_equals_the_fit_over_the_same_rows_in_memory(shards):
    stream = _stream(shards)
    count, mean, std = stream.statistics(stream.files)
    standardizer = Standardizer(mean, std)
    one_pass = list(stream.dataset(stream.files, 32, standardizer=standardizer))
    x = np.concatenate([b[0].numpy() for b in one_pass])
    y = np.concatenate([b[1].numpy() for b in one_pass])
    assert count == ROWS and len(one_pass) == datasets.streams.steps_per_pass(ROWS, 32) == 10
    # The rows are the digits' rows, interleaved from the 4 shards, standardized.
    order = np.concatenate([np.arange(s, ROWS, 80) for s in range(80)])
    np.testing.assert_array_equal(y, shards[1][order])
    np.testing.assert_allclose(x, standardizer(shards[0][order]), atol=1e-6)
    # XLA and several steps per execution (a chunk of 4 steps is one XLA program in memory).
    streamed, in_memory = _model(True, 4), _model(True, 4)
    streamed.fit(stream.dataset(stream.files, 32, repeat=True, standardizer=standardizer),
                 steps_per_epoch=10, epochs=2, verbose=0)
    in_memory.fit(x, y, batch_size=32, shuffle=False, epochs=2, verbose=0)
    _assert_same_weights(streamed, in_memory)


def test_statistics_of_one_pass_equal_those_of_the_rows_in_memory(shards):
    stream = _stream(shards)
    expected = Standardizer.fit(shards[0])
    count, mean, std = stream.statistics(stream.files, batch_size=64)  # 5 merged batches
    assert count == ROWS
    np.testing.assert_allclose(mean, expected.mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(std, expected.std, rtol=1e-12)
    # A declared sample: the first 100 records in the order they are read (interleaved).
    first = np.concatenate([b[0].numpy() for b in stream.dataset(stream.files, 100).take(1)])
    count, mean, _ = stream.statistics(stream.files, sample=100, batch_size=64)
    assert count == ROWS
    np.testing.assert_allclose(mean, Standardizer.fit(first).mean, rtol=1e-12, atol=1e-15)


def test_csv_shards_give_the_rows_of_the_arrays(shards):
    x, y, _, tables, names = shards
    columns = {name: "float32" for name in names} | {"label": "int32"}
    stream = datasets.Stream(os.path.join(os.path.dirname(tables[0]), "*.csv.gz"), columns,
                             target="label")
    got_x, got_y = (np.concatenate(part) for part in zip(
        *stream.dataset(stream.files, 64, cycle_length=1).as_numpy_iterator()))
    np.testing.assert_array_equal(got_y, y)
    np.testing.assert_array_equal(got_x, x)


def test_splits_are_disjoint_and_the_same_every_time(shards):
    stream = _stream(shards)
    by_file = stream.split(0.25, 0.25, seed=1)
    assert by_file == _stream(shards).split(0.25, 0.25, seed=1)
    assert sorted(sum((list(p.files) for p in by_file.values()), [])) == stream.files
    with pytest.raises(ValueError, match="leave no file to train on"):
        stream.split(0.5, 0.5, seed=1)
    keyed = datasets.Stream(shards[2], COLUMNS, target="label", key="label")
    with pytest.raises(ValueError, match="key must be one of"):
        datasets.Stream(shards[2], COLUMNS, target="label", key="nope")
    parts = keyed.split(0.2, 0.2, seed=0, by_key=True)
    labels = {stage: sorted({int(v) for _, batch in keyed.dataset(part, 64)
                             for v in batch.numpy()}) for stage, part in parts.items()}
    # A label's hash puts all its records in one split, the same one for every stream.
    assert sorted(sum(labels.values(), [])) == list(range(10))
    assert parts == datasets.Stream(shards[2], COLUMNS, target="label", key="label").split(
        0.2, 0.2, seed=5, by_key=True)


class _StopAt(gf.callbacks.Callback):
    def __init__(self, epoch, batch):
        super().__init__()
        self.epoch, self.batch = epoch, batch

    def on_epoch_begin(self, epoch, logs=None):
        self.current = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.current == self.epoch and batch >= self.batch:
            raise KeyboardInterrupt


def test_a_fit_stopped_mid_epoch_resumes_with_the_samples_of_an_unbroken_fit(shards, tmp_path):
    stream = _stream(shards)

    def data():  # a new pipeline each time, as in a new process
        return stream.dataset(stream.files, 32, shuffle_buffer=50, seed=7, repeat=True)

    unbroken = _model(steps_per_execution=2)
    unbroken.fit(data(), steps_per_epoch=10, epochs=3, verbose=0)
    cut = _model(steps_per_execution=2)
    saver = gf.callbacks.ModelCheckpoint(str(tmp_path), monitor="loss", save_freq=3)
    with pytest.raises(KeyboardInterrupt):
        cut.fit(data(), steps_per_epoch=10, epochs=3, verbose=0,
                callbacks=[saver, _StopAt(1, 6)])
    resumed = _model(steps_per_execution=2)
    state = checkpoints.restore_latest(resumed, str(tmp_path))
    # Hooks come every 2 batches, a save after >= 3 more: after 4 and 8 of epoch 1's
    # batches, then the stop (at the hook after batch 8).
    assert state["epoch"] == 1 and int(input_position(resumed).batch.numpy()) == 8
    history = resumed.fit(data(), steps_per_epoch=10, epochs=3, verbose=0,
                          initial_epoch=state["epoch"])
    assert history.epoch == [1, 2]
    _assert_same_weights(unbroken, resumed)
    assert int(input_position(resumed).batch.numpy()) == 0


def test_bad_arguments_name_what_to_fix(shards, tmp_path):
    with pytest.raises(ValueError, match="no file matches"):
        datasets.Stream(str(tmp_path / "*.tfrecord"), COLUMNS)
    with pytest.raises(ValueError, match=r"columns\['label'\] must be a dtype"):
        datasets.Stream(shards[2], {"pixels": "float32", "label": "int8"})
    with pytest.raises(ValueError, match="not in the header"):
        datasets.Stream(shards[3], {"pixels": "float32"})
    with pytest.raises(ValueError, match="num_shards must be"):
        datasets.write_tfrecord_shards(np.ones((3, 2)), None, tmp_path, 4)
    with pytest.raises(ValueError, match="save_freq must be"):
        gf.callbacks.ModelCheckpoint(str(tmp_path), save_freq=0)


def test_a_damaged_shard_is_named_with_its_record(shards, tmp_path):
    damaged = tmp_path / "damaged.tfrecord"
    data = bytearray(open(shards[2][1], "rb").read())
    data[-20:-10] = b"\xff" * 10  # inside the last record's bytes: its checksum fails
    damaged.write_bytes(bytes(data))
    stream = datasets.Stream([shards[2][0], str(damaged)], COLUMNS, target="label")
    with pytest.raises(datasets.BadRecordError) as caught:
        stream.count(stream.files)
    assert caught.value.file == str(damaged) and caught.value.record == 79
    assert f"{damaged}, record 79 (counting from 0)" in str(caught.value)
    assert stream.bad_record([shards[2][0]]).__class__ is ValueError  # all read
    with pytest.raises(tf.errors.OpError):
        list(stream.dataset(stream.files, 32))


def test_a_csv_cell_that_is_not_a_number_is_named_with_its_file_and_line(tmp_path):
    good, bad = tmp_path / "a.csv", tmp_path / "b.csv"
    good.write_text("f,label\n1.5,0\n2.5,1\n")
    bad.write_text("f,label\n3.5,0\nabc,1\n")
    stream = datasets.Stream(str(tmp_path / "*.csv"), {"f": "float32", "label": "int64"},
                             target="label")
    with pytest.raises(datasets.BadRecordError, match=r"b\.csv, record 1 \(counting from 0; "
                                                      r"line 3 of the file\): .*abc"):
        stream.statistics(stream.files)


def test_scalar_csv_columns_make_a_feature_vector_of_static_width(tmp_path):
    # Two scalar columns side by side: the width (2) must be known when the dataset is
    # traced, or a Dense layer cannot build ("input shape (None, None)"); standardized too.
    (tmp_path / "a.csv").write_text("f,g,label\n1.0,2.0,0\n3.0,6.0,1\n5.0,4.0,1\n")
    stream = datasets.Stream(str(tmp_path / "*.csv"), {"f": "float32", "g": "float32",
                                                       "label": "int64"}, target="label")
    standardizer = Standardizer(np.array([3.0, 4.0]), np.array([2.0, 2.0]))
    for scale in (None, standardizer):
        x_spec = stream.dataset(stream.files, 2, standardizer=scale).element_spec[0]
        assert x_spec.shape.as_list() == [None, 2], scale
    x, _ = next(iter(stream.dataset(stream.files, 3, standardizer=standardizer)))
    np.testing.assert_allclose(x.numpy(), [[-1.0, -1.0], [0.0, 1.0], [1.0, 0.0]])
    single = datasets.Stream(str(tmp_path / "*.csv"), {"f": "float32", "label": "int64"},
                             target="label")
    assert single.dataset(single.files, 2).element_spec[0].shape.as_list() == [None, 1]


def test_shuffled_batches_are_full_across_windows_and_each_window_is_permuted(shards):
    # One file (80 records), windows of 24 (24, 24, 24, 8), batches of 16: every batch is
    # full (a batch runs across windows, as unbatch().batch(16) gives), and the records of
    # window w are those of the file's window w, in a new order.
    stream = _stream(shards)
    one_file = [shards[2][0]]
    in_order = np.concatenate([x for x, _ in stream.dataset(one_file, 24)])
    batches = [x.numpy() for x, _ in stream.dataset(one_file, 16, shuffle_buffer=24, seed=5)]
    assert [len(b) for b in batches] == [16] * 5
    shuffled = np.concatenate(batches)
    for start in range(0, 80, 24):
        window, expected = shuffled[start:start + 24], in_order[start:start + 24]
        assert sorted(map(bytes, window)) == sorted(map(bytes, expected))
    assert not np.array_equal(shuffled, in_order)


@pytest.mark.parametrize("first_pass,skipped", [(0, 10), (0, 24), (0, 75), (1, 30)])
def test_a_shuffled_stream_started_mid_pass_yields_the_rest_of_the_unbroken_stream(
        shards, first_pass, skipped):
    # Windows of 24 over one file of 80 records: skips inside a window, at a window's end,
    # into the last short window, and in a later pass.
    stream = _stream(shards)
    one_file = [shards[2][0]]

    def rows(dataset, count):
        return np.concatenate([x for x, _ in dataset.take(count)])

    unbroken = rows(stream.dataset(one_file, 16, shuffle_buffer=24, seed=5, repeat=True), 15)
    start = tf.Variable([first_pass, skipped], dtype=tf.int64)
    resumed = rows(stream.dataset(one_file, 16, shuffle_buffer=24, seed=5, repeat=True,
                                  start=start), 6)
    offset = first_pass * 80 + skipped
    np.testing.assert_array_equal(resumed, unbroken[offset:offset + len(resumed)])
    assert len(resumed) > 80 - skipped  # the pass's rest, then the next pass's first

"""AutoGraph converts a user's function in a stream and none of graphfit's own `tf.data`
functions (`graphfit.datasets.pipeline_functions`).

Converting graphfit's pipeline functions cost seconds in the first stream dataset of a
process. The spy below records every function AutoGraph is asked to convert (its entry,
`converted_call`, which runs on every trace, converted code cached or not): building and
reading graphfit's pipelines asks it for nothing, and a stream with a user's `transform`
asks it for that function only. The transforms branch in Python on a tensor, which only
traces when AutoGraph converts them, and the batches are checked against hand-computed
values.
"""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from tensorflow.python.autograph.impl import api, conversion

from graphfit import datasets
from graphfit.datasets.image_folder import load_images
from graphfit.datasets.pipeline_functions import own_function, user_function
from graphfit.training.class_weights import weigh_dataset
from graphfit.training.feeds import DatasetFeed

# a, b and the label of 6 rows, as 2 CSV shards (rows 0-2, rows 3-5)
A = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
B = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], np.float32)
LABELS = np.array([0, 1, 0, 1, 1, 0])
COLUMNS = {"a": "float32", "b": "float32", "label": "int64"}


@pytest.fixture
def converted(monkeypatch):
    """The qualified names of the Python functions AutoGraph is asked to convert meanwhile
    (not TensorFlow's own, nor builtins, which it runs as they are)."""
    names = []
    real = api.converted_call

    def spy(f, args, kwargs, caller_fn_scope=None, options=None):
        if inspect.isroutine(f) and not inspect.isbuiltin(f) and not conversion.is_allowlisted(f):
            names.append(getattr(f, "__qualname__", type(f).__name__))
        return real(f, args, kwargs, caller_fn_scope, options)

    monkeypatch.setattr(api, "converted_call", spy)
    return names


@pytest.fixture(scope="module")
def csv_files(tmp_path_factory):
    return datasets.write_csv_shards(np.stack([A, B], axis=1), LABELS,
                                     tmp_path_factory.mktemp("csv"), 2, names=["a", "b"],
                                     y_name="label")


def _batches(dataset):
    return [tuple(part.tolist() for part in batch) for batch in dataset.as_numpy_iterator()]


def scale_large_batches(features):
    """A user's transform: b tenfold in a batch whose largest a is above 2 (a Python `if`
    on a tensor)."""
    if tf.reduce_max(features["a"]) > 2.0:
        features = dict(features, b=features["b"] * 10.0)
    return features


def test_a_users_transform_branches_on_a_tensor_and_only_it_is_converted(csv_files,
                                                                         converted):
    stream = datasets.Stream(csv_files, COLUMNS, target="label",
                             transform=scale_large_batches)
    assert _batches(stream.dataset(stream.files, 2, cycle_length=1)) == [  # file by file
        ([[1.0, 10.0], [2.0, 20.0]], [0, 1]),  # largest a 2: b as it is
        ([[3.0, 300.0], [4.0, 400.0]], [0, 1]),
        ([[5.0, 500.0], [6.0, 600.0]], [1, 0])]
    assert converted == ["scale_large_batches"]


def test_a_users_transform_runs_converted_under_graphfits_functions_as_written(csv_files):
    """In the shuffled, repeated, resumable training pipeline: the frames of AutoGraph's
    generated code on the stack when the transform runs are the transform's own (converted)
    and none of graphfit's (`one_pass` and `convert` run as written)."""
    generated = []

    def record_frames(features):
        generated.extend(frame.function for frame in inspect.stack()
                         if "__autograph_generated_file" in frame.filename)
        if tf.reduce_max(features["a"]) > 100.0:  # never: a tensor `if` all the same
            features = dict(features, b=-features["b"])
        return features

    stream = datasets.Stream(csv_files, COLUMNS, target="label", transform=record_frames)
    start = tf.Variable([1, 2], dtype=tf.int64)  # pass 1, its first 2 records done
    dataset = stream.dataset(stream.files, 6, shuffle_buffer=3, seed=5, repeat=True,
                             start=start)
    x, _ = next(iter(dataset))
    assert generated == ["tf__record_frames"]
    # the last 4 records of pass 1 (a pass ends with a smaller batch), as an unbroken stream
    assert x.numpy()[:, 0].tolist() == _a_record_by_record(stream, 5)[8:12]


def _a_record_by_record(stream, seed):
    """`a` of the first 3 passes of `stream` shuffled from `seed` in windows of 3, one record
    at a time, from the start."""
    unbroken = stream.dataset(stream.files, 1, shuffle_buffer=3, seed=seed, repeat=True)
    return [float(x[0, 0]) for x, _ in unbroken.take(18)]


def test_graphfits_stream_pipelines_ask_autograph_for_nothing(csv_files, tmp_path, converted):
    stream = datasets.Stream(csv_files, COLUMNS, target="label")
    shuffled = stream.dataset(stream.files, 4, shuffle_buffer=3, seed=1, repeat=True,
                              start=tf.Variable([0, 1], dtype=tf.int64))
    resumed = np.concatenate([x[:, 0] for x, _ in shuffled.take(3)]).tolist()
    assert resumed == _a_record_by_record(stream, 1)[1:10]  # batches of 4, 1 (pass 0 ends), 4
    assert sorted(resumed[:5] + _a_record_by_record(stream, 1)[:1]) == A.tolist()  # pass 0
    assert stream.count(stream.files) == 6
    columns = next(iter(stream.feature_batches(stream.files, 6, cycle_length=1)))
    assert columns["a"].numpy().tolist() == A.tolist()

    keyed = datasets.Stream(csv_files, COLUMNS, target="label", key="b")
    parts = keyed.split(0.0, 0.5, seed=0, by_key=True)  # a filter on the key's hash bucket
    train = [a for x, _ in _batches(keyed.dataset(parts["train"], 6)) for a, in x]
    test = [a for x, _ in _batches(keyed.dataset(parts["test"], 6)) for a, in x]
    buckets = tf.strings.to_hash_bucket_fast(tf.strings.as_string(B), 1000).numpy()
    assert test == [a for a, bucket in zip(A.tolist(), buckets) if bucket < 500] != []
    assert sorted(train + test) == A.tolist()

    files = datasets.write_parquet_shards({"a": A.tolist(), "label": LABELS.tolist()},
                                          tmp_path / "parquet", 2)
    parquet = datasets.Stream(files, {"a": "float32", "label": "int64"}, target="label")
    assert _batches(parquet.dataset(parquet.files, 6, cycle_length=1)) == [
        ([[a] for a in A.tolist()], LABELS.tolist())]
    assert converted == []


def test_graphfits_image_graph_and_feed_pipelines_ask_autograph_for_nothing(tmp_path,
                                                                            converted):
    for label, value in (("dark", 0), ("light", 255)):
        os.makedirs(tmp_path / "images" / label)
        Image.fromarray(np.full((4, 4, 3), value, np.uint8)).save(
            tmp_path / "images" / label / "0.png")
    folder = datasets.read_image_folder(tmp_path / "images", image_size=(2, 2))
    images, labels = next(iter(folder.dataset(2)))
    assert images.numpy().max(axis=(1, 2, 3)).tolist() == [0.0, 255.0]
    assert labels.numpy().tolist() == [0, 1]
    assert load_images(folder.paths, (2, 2)).mean(axis=(1, 2, 3)).tolist() == [0.0, 255.0]

    graphs, graph_labels = datasets.make_graph_classes(n_graphs=4, seed=0)
    batch, batch_labels = next(iter(graphs.to_dataset(4, labels=graph_labels, pad=False)))
    assert batch["node_counts"].numpy().tolist() == list(graphs.node_counts)
    assert batch_labels.numpy().tolist() == list(graph_labels)

    pairs = tf.data.Dataset.from_tensors((tf.constant([[1.0], [2.0]]), tf.constant([0, 1])))
    weights = next(iter(weigh_dataset(pairs, {0: 1.0, 1: 3.0})))[2]
    assert weights.numpy().tolist() == [1.0, 3.0]
    feed = DatasetFeed(tf.data.Dataset.from_tensors(
        (tf.constant([[1.0]]), (tf.constant([[2.0]]), tf.constant([[3.0]])))), None)
    feed.arrange_targets(["first", "second"], ["first", "second"])
    _, targets = next(iter(feed.dataset))
    assert {k: v.numpy().tolist() for k, v in targets.items()} == {"first": [[2.0]],
                                                                   "second": [[3.0]]}
    assert converted == []


def test_the_helpers_mark_graphfits_functions_and_convert_the_users():
    def users(x):
        if tf.reduce_sum(x) > 0:
            return x
        return -x

    assert api.is_autograph_artifact(own_function(users))
    # eagerly, and inside a trace of graphfit's own (AutoGraph off), the user's still converts
    assert user_function(users) is users
    traced = tf.function(own_function(lambda x: user_function(users)(x)), autograph=False)
    assert traced(tf.constant([-2.0])).numpy().tolist() == [2.0]

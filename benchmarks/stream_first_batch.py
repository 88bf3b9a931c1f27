"""Seconds from nothing to the first batch of the first streamed dataset of a process.

A tester found the first stream dataset of a process spending seconds in AutoGraph converting
graphfit's own `tf.data` functions. This times what a user waits for, in fresh processes (so
every cache, AutoGraph's included, starts empty): TensorFlow and graphfit are imported first
(not timed), then the clock runs over building the source and its dataset and reading its
first batch. The median of `--repeats` processes per case is printed, with the lowest and
highest.

Cases (the files written once, before any timed process):

- csv: `Stream` over 4 CSV shards (8 float columns, an int label) as a recipe trains on it:
  a shuffle window, passes repeated, standardized;
- parquet: the same rows as 4 Parquet shards (`from_generator`), one pass;
- tfrecord-key: 4 TFRecord shards of x, y and a string key, the training split by a hash of
  the key (a `filter`), shuffled;
- transform: the CSV stream with a user's `transform` (a Python `if` on a tensor);
- images: `read_image_folder` over 64 PNG files in 2 classes, `dataset(32, shuffle=True)`;
- recipe: `recipes/churn_stream.yaml` (column types inferred from the CSV, key-hash splits,
  balanced class weights, typed preprocessing), `load_splits` and the training split's first
  batch.

`--check` prints a digest of every batch of one pass of each case instead (no timing), to
compare the numbers produced before and after a change.

This is a benchmark, not a test: nothing asserts on time.

Usage:

    python benchmarks/stream_first_batch.py                  # every case, 5 processes each
    python benchmarks/stream_first_batch.py --cases csv recipe --repeats 3
    python benchmarks/stream_first_batch.py --check
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CASES = ("csv", "parquet", "tfrecord-key", "transform", "images", "recipe")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS, SHARDS, BATCH = 4000, 4, 64


def write_files(folder: str) -> None:
    """The shards and images every case reads."""
    import numpy as np
    from PIL import Image

    import graphfit as gf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    gf.datasets.write_csv_shards(x, y, os.path.join(folder, "csv"), SHARDS)
    columns = {f"x{i}": x[:, i].tolist() for i in range(8)}
    gf.datasets.write_parquet_shards({**columns, "y": y.tolist()},
                                     os.path.join(folder, "parquet"), SHARDS)
    for label in ("a", "b"):
        os.makedirs(os.path.join(folder, "images", label))
        for i in range(32):
            pixels = rng.integers(0, 255, size=(12, 12, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, "images", label, f"{i}.png"))


def _columns(names, label="y"):
    return {**{n: "float32" for n in names}, label: "int64"}


def build(case: str, folder: str):
    """The case's first dataset (what the clock runs over, with its first batch)."""
    import numpy as np
    import tensorflow as tf

    import graphfit as gf

    names = [f"x{i}" for i in range(8)]
    if case in ("csv", "transform"):
        transform = None
        if case == "transform":
            def transform(features):  # a user's function: a Python `if` on a tensor
                if tf.reduce_mean(features["x0"]) > 0:
                    features["x1"] = features["x1"] * 2.0
                return features
        stream = gf.datasets.Stream(os.path.join(folder, "csv", "*.csv"), _columns(names),
                                    target="y", transform=transform)
        standardizer = _Standardizer(np.zeros(8), np.full(8, 2.0))
        return stream.dataset(stream.files, BATCH, shuffle_buffer=500, seed=0,
                              repeat=case == "csv", standardizer=standardizer)
    if case == "parquet":
        stream = gf.datasets.Stream(os.path.join(folder, "parquet", "*.parquet"),
                                    _columns(names), target="y")
        return stream.dataset(stream.files, BATCH)
    if case == "tfrecord-key":
        keyed = gf.datasets.Stream(
            os.path.join(folder, "keyed", "*.tfrecord"),
            {"x": {"dtype": "float32", "shape": [8]}, "y": "int64", "id": "string"},
            target="y", key="id")
        part = keyed.split(0.2, 0.2, seed=0, by_key=True)["train"]
        return keyed.dataset(part, BATCH, shuffle_buffer=500, seed=0)
    if case == "images":
        folder_set = gf.datasets.read_image_folder(os.path.join(folder, "images"),
                                                   image_size=(8, 8))
        return folder_set.dataset(32, shuffle=True, seed=0)
    if case == "recipe":
        from graphfit.recipes.reading.recipe import load_recipe
        from graphfit.recipes.running.data_loading import load_splits

        recipe = load_recipe(os.path.join(ROOT, "recipes", "churn_stream.yaml"))
        return load_splits(recipe.config).train
    raise ValueError(f"unknown case {case!r}; one of {', '.join(CASES)}")


class _Standardizer:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std


def write_keyed(folder: str) -> None:
    """TFRecord shards of x, y and a string key (`id`) per record."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(1)
    os.makedirs(os.path.join(folder, "keyed"), exist_ok=True)
    x = rng.normal(size=(ROWS, 8)).astype(np.float32)
    for shard in range(SHARDS):
        path = os.path.join(folder, "keyed", f"shard-{shard}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for row in range(shard, ROWS, SHARDS):
                feature = {
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=x[row])),
                    "y": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[int(x[row, 0] > 0)])),
                    "id": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[f"id{row}".encode()]))}
                writer.write(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString())


def child(case: str, folder: str, check: bool) -> None:
    import tensorflow as tf

    import graphfit  # noqa: F401  (imported before the clock starts)

    tf.constant(0.0)  # the eager context, before the clock
    started = time.perf_counter()
    dataset = build(case, folder)
    first = next(iter(dataset))
    seconds = time.perf_counter() - started
    if not check:
        print(json.dumps({"case": case, "seconds": seconds}))
        return
    del first
    digest, batches = hashlib.sha256(), 0
    take = dataset.take(200) if case in ("csv", "recipe") else dataset
    for batch in take.as_numpy_iterator():
        for part in tf.nest.flatten(batch):
            digest.update(part.tobytes())
        batches += 1
    print(json.dumps({"case": case, "batches": batches, "digest": digest.hexdigest()[:16]}))


def run_child(case: str, folder: str, check: bool) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", case, "--folder", folder]
    if check:
        command.append("--check")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"{case} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--child")
    parser.add_argument("--folder")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.folder, args.check)
        return
    folder = tempfile.mkdtemp(prefix="stream_first_batch-")
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    write_files(folder)
    write_keyed(folder)
    for case in args.cases:
        if args.check:
            print(run_child(case, folder, True))
            continue
        times = [run_child(case, folder, False)["seconds"] for _ in range(args.repeats)]
        print(f"{case:13s} median {statistics.median(times):6.2f} s   (min {min(times):.2f}, "
              f"max {max(times):.2f}; {args.repeats} processes)")


if __name__ == "__main__":
    main()

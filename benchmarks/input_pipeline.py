"""Input pipelines: training samples per second of the digits conv net and MLP fed from memory,
TFRecord shards, CSV shards and a folder of PNG files, in the same run; and the peak memory of
streaming a generated CSV larger than what it is compared with.

Workloads (batch 128, Adam, SparseCategoricalCrossentropy(from_logits=True), graphfit's
default compile: jit_compile="auto", steps_per_execution="auto"):

- conv: Conv2D(16, 3, same, relu) -> MaxPooling2D -> Conv2D(32, 3, same, relu) ->
  GlobalAveragePooling2D -> Dense(10) on the 8x8x1 digits;
- mlp: Dense 64-256-256-10 (relu) on the 64 pixels.

The digits (1797) are replicated to `--samples` rows (default 28 752, 16 copies). Sources:

(a) memory: `fit(x, y, batch_size=128, shuffle=True)` (the compiled loop gathers batches by
    index, no tf.data);
(b) tfrecord: `write_tfrecord_shards` into 8 shards, read by `graphfit.datasets.Stream`
    (4 files interleaved, parallel parsing of whole batches, a 10 000-record shuffle window,
    prefetch), `repeat=True` with `steps_per_epoch` = one pass;
(c) csv: the same rows as 8 CSV shards (64 float columns and the label), the same Stream;
(d) png: one 8x8 grayscale PNG per row in class subfolders (`--png-samples`, default 7 188),
    read with `tf.io.read_file` + `tf.io.decode_png` in parallel, shuffled, batched,
    prefetched. (`source: image_folder` of issue 43 reads such folders in recipes: switch
    `png_dataset` below to it once it lands.)

Each (workload, source) trains one warm-up epoch (tracing, XLA), then `--repeats` timed fits
of `--epochs` epochs, interleaved across sources; the median samples/s is printed with the
ratio to memory. "pipeline alone" is the samples/s of iterating the same dataset without
training (an upper bound on what the source can feed): when it is far above the training
rate the step does not wait on input. `--profile DIR` also writes a TensorBoard profile of
one TFRecord epoch of each workload (`tf.profiler.experimental`), whose input-pipeline
analysis page gives the share of step time spent waiting for input.

Peak memory: a child process streams one epoch of the MLP over a generated CSV of
`--big-csv-gb` GB (default 0.05; the issue's target is 2 GB under 1 GB of peak RSS) in 8
shards and reports its peak resident set (`resource.getrusage`), next to the CSV's size and
the same child over a few MB of CSV (TensorFlow, the traced model and XLA without data).

This is a benchmark, not a test: nothing asserts on time. Targets (the issue's, printed as
such): TFRecord at >= 0.9x memory; peak RSS of streaming a 2 GB CSV under 1 GB.

Usage:

    python benchmarks/input_pipeline.py
    python benchmarks/input_pipeline.py --epochs 2 --repeats 5 --profile /tmp/profile
    python benchmarks/input_pipeline.py --big-csv-gb 2 --workloads mlp
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

BATCH = 128
SHARDS = 8


def _model(workload: str):
    import keras

    import graphfit as gf
    from graphfit import layers

    gf.set_seed(0)
    if workload == "conv":
        stack = [layers.Conv2D(16, 3, padding="same", activation="relu"),
                 layers.MaxPooling2D(2), layers.Conv2D(32, 3, padding="same", activation="relu"),
                 layers.GlobalAveragePooling2D(), layers.Dense(10)]
        shape = (8, 8, 1)
    else:
        stack = [layers.Dense(256, activation="relu"), layers.Dense(256, activation="relu"),
                 layers.Dense(10)]
        shape = (64,)
    model = gf.Sequential(stack, input_shape=shape)
    model.compile(optimizer=gf.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _data(samples: int):
    from graphfit import datasets

    x, y = datasets.load_digits()
    copies = -(-samples // len(x))
    return np.tile(x, (copies, 1))[:samples], np.tile(y, copies)[:samples]


def _shaped(workload: str):
    import tensorflow as tf

    shape = [-1, 8, 8, 1] if workload == "conv" else [-1, 64]
    return lambda x, y: (tf.reshape(x, shape), y)


def _stream_dataset(files, columns, workload: str):
    from graphfit import datasets

    stream = datasets.Stream(files, columns, target="label")
    data = stream.dataset(stream.files, BATCH, shuffle_buffer=10_000, seed=0, repeat=True)
    return data.map(_shaped(workload))


def _write_pngs(x, y, folder: str) -> None:
    import tensorflow as tf

    for label in range(10):
        os.makedirs(os.path.join(folder, str(label)), exist_ok=True)
    pixels = np.round(x.reshape(-1, 8, 8, 1) * 255).astype(np.uint8)
    for index, (image, label) in enumerate(zip(pixels, y)):
        tf.io.write_file(os.path.join(folder, str(label), f"{index:06d}.png"),
                         tf.io.encode_png(image))


def png_dataset(folder: str, workload: str):
    """A folder of class subfolders of PNGs as batches (decoded with tf.io): the place to
    switch to `source: image_folder` once it exists."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(os.path.join(folder, "*", "*.png")))
    labels = [int(os.path.basename(os.path.dirname(f))) for f in files]

    def load(path, label):
        image = tf.io.decode_png(tf.io.read_file(path), channels=1)
        return tf.cast(image, tf.float32) / 255.0, label

    data = tf.data.Dataset.from_tensor_slices((files, labels)).shuffle(
        len(files), seed=0, reshuffle_each_iteration=True)
    data = data.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)
    return data.map(_shaped(workload)).repeat().prefetch(tf.data.AUTOTUNE), len(files)


def _sources(workload: str, folder: str, x, y, png_count: int) -> dict:
    """{source: (fit keyword arguments, samples per epoch)}."""
    pixels = {"pixels": {"dtype": "float32", "shape": [64]}, "label": "int64"}
    columns = {f"p{i}": "float32" for i in range(64)} | {"label": "int64"}
    steps = -(-len(x) // BATCH)
    png, count = png_dataset(os.path.join(folder, "png"), workload)
    return {
        "memory": ({"x": x.reshape(_shape(workload)), "y": y, "batch_size": BATCH}, len(x)),
        "tfrecord": ({"x": _stream_dataset(os.path.join(folder, "tfrecord", "*"), pixels,
                                           workload), "steps_per_epoch": steps}, len(x)),
        "csv": ({"x": _stream_dataset(os.path.join(folder, "csv", "*"), columns, workload),
                 "steps_per_epoch": steps}, len(x)),
        "png": ({"x": png, "steps_per_epoch": -(-count // BATCH)}, count),
    }


def _shape(workload: str):
    return (-1, 8, 8, 1) if workload == "conv" else (-1, 64)


def _pipeline_rate(arguments: dict, samples: int) -> float | None:
    """Samples/s of iterating the dataset alone for one epoch (None for memory)."""
    if "steps_per_epoch" not in arguments:
        return None
    iterator = iter(arguments["x"])
    next(iterator)
    started = time.perf_counter()
    for _ in range(arguments["steps_per_epoch"]):
        next(iterator)
    return samples / (time.perf_counter() - started)


def _measure(workload, folder, x, y, args) -> dict:
    sources = _sources(workload, folder, x, y, args.png_samples)
    models = {name: _model(workload) for name in sources}
    for name, (arguments, _) in sources.items():  # warm-up: tracing and compilation
        models[name].fit(**arguments, epochs=1, verbose=0)
    rates = {name: [] for name in sources}
    for _ in range(args.repeats):
        for name, (arguments, samples) in sources.items():
            started = time.perf_counter()
            models[name].fit(**arguments, epochs=args.epochs, verbose=0)
            rates[name].append(samples * args.epochs / (time.perf_counter() - started))
    if args.profile:
        import tensorflow as tf

        tf.profiler.experimental.start(os.path.join(args.profile, workload))
        models["tfrecord"].fit(**sources["tfrecord"][0], epochs=1, verbose=0)
        tf.profiler.experimental.stop()
    return {name: (statistics.median(values), _pipeline_rate(*sources[name]))
            for name, values in rates.items()}


def _write_sources(folder: str, x, y, png_samples: int) -> None:
    from graphfit import datasets

    datasets.write_tfrecord_shards(x, y, os.path.join(folder, "tfrecord"), SHARDS,
                                   x_name="pixels", y_name="label")
    datasets.write_csv_shards(x, y, os.path.join(folder, "csv"), SHARDS,
                              names=[f"p{i}" for i in range(64)], y_name="label")
    _write_pngs(x[:png_samples], y[:png_samples], os.path.join(folder, "png"))


def _big_csv(folder: str, gigabytes: float) -> int:
    """Writes about `gigabytes` of CSV in 8 shards (64 random pixels and a label per row);
    returns the bytes written."""
    rng = np.random.default_rng(0)
    header = ",".join([f"p{i}" for i in range(64)] + ["label"]) + "\n"
    block_rows = 20_000
    target, written, shard = int(gigabytes * 2**30), 0, 0
    per_shard = target // SHARDS + 1
    os.makedirs(folder, exist_ok=True)
    while written < target:
        with open(os.path.join(folder, f"big-{shard:05d}.csv"), "w") as handle:
            handle.write(header)
            size = len(header)
            while size < per_shard and written + size < target:
                pixels = rng.integers(0, 17, size=(block_rows, 64)) / 16.0
                labels = rng.integers(0, 10, size=(block_rows, 1))
                text = "\n".join(",".join(row) for row in np.char.mod(
                    "%.4g", np.hstack([pixels, labels])).tolist()) + "\n"
                handle.write(text)
                size += len(text)
        written += size
        shard += 1
    return written


def _stream_child(folder: str) -> None:
    """In a child process: one epoch of the MLP over the big CSV; prints the peak RSS."""
    from graphfit import datasets

    columns = {f"p{i}": "float32" for i in range(64)} | {"label": "int64"}
    stream = datasets.Stream(os.path.join(folder, "*.csv"), columns, target="label")
    data = stream.dataset(stream.files, 1024, shuffle_buffer=10_000, seed=0)
    model = _model("mlp")
    started = time.perf_counter()
    model.fit(data, epochs=1, verbose=0)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    print(f"RESULT {peak:.0f} {elapsed:.1f}")


def _peak_memory(folder: str, gigabytes: float) -> tuple[int, float, float]:
    """(bytes of CSV, peak RSS in MB, seconds) of one child streaming `gigabytes` of CSV."""
    size = _big_csv(folder, gigabytes)
    output = subprocess.run([sys.executable, __file__, "--stream-child", folder],
                            capture_output=True, text=True, check=True).stdout
    peak, elapsed = output.split("RESULT")[-1].split()
    return size, float(peak), float(elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=["conv", "mlp"])
    parser.add_argument("--samples", type=int, default=1797 * 16)
    parser.add_argument("--png-samples", type=int, default=1797 * 4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", default=None, help="write a TensorBoard profile here")
    parser.add_argument("--big-csv-gb", type=float, default=0.05)
    parser.add_argument("--stream-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stream_child:
        _stream_child(args.stream_child)
        return
    x, y = _data(args.samples)
    with tempfile.TemporaryDirectory() as folder:
        _write_sources(folder, x, y, args.png_samples)
        print(f"samples/s, batch {BATCH}, median of {args.repeats} x {args.epochs} epoch(s); "
              f"{len(x)} rows ({args.png_samples} for png)")
        print(f"{'workload':8} {'source':9} {'train':>10} {'vs memory':>10} "
              f"{'pipeline alone':>15}")
        for workload in args.workloads:
            results = _measure(workload, folder, x, y, args)
            memory = results["memory"][0]
            for name, (rate, alone) in results.items():
                shown = "-" if alone is None else f"{alone:,.0f}"
                print(f"{workload:8} {name:9} {rate:10,.0f} {rate / memory:9.2f}x "
                      f"{shown:>15}")
        # The same child over a few MB of CSV: TensorFlow, the model and XLA alone.
        for name, gigabytes in (("tiny", 2**-10), ("big", args.big_csv_gb)):
            size, peak, elapsed = _peak_memory(os.path.join(folder, name), gigabytes)
            print(f"streaming {size / 2**30:7.3f} GB of CSV (8 shards) through one MLP epoch "
                  f"(batch 1024): peak RSS {peak:,.0f} MB, {elapsed:.0f} s")
        print("targets (the issue's, not checks): tfrecord >= 0.90x memory; a 2 GB CSV "
              "streams in under 1 GB of peak RSS")
        if args.profile:
            print(f"profiles: tensorboard --logdir {args.profile} (Profile tab, "
                  f"input_pipeline_analyzer)")


if __name__ == "__main__":
    main()

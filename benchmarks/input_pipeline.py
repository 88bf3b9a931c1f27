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

References on the same data: `memory-keras` and `tfrecord-keras` are the same network in
Keras 3 (`keras.Sequential`, its own `fit`, up to 32 steps per execution, XLA as
graphfit's "auto" decides on a CPU) over the same arrays and the same TFRecord dataset object;
`tfrecord-cached` is the Stream's pass parsed once and kept in memory (`cache()`), what
decoded shards in memory would cost.

Each (workload, source) trains one warm-up epoch (tracing, XLA), then `--repeats` timed fits
of `--epochs` epochs, interleaved across sources; the medians are printed: samples/s of wall
time and samples per CPU-second of the process (`time.process_time`, all threads: the rate
the work itself allows, less exposed to other processes on a shared machine), each with the
ratio to memory. "alone" is the same for iterating the dataset without training (what the
source can feed). "wait" is the share of one profiled epoch's wall time
(`tf.profiler.experimental`) that the step spent blocked in the iterator's GetNext op
(`input_wait_share`, read from the trace's xplane: the input-pipeline analyzer's "waiting
for input"), for memory and the TFRecord sources in the same run; `--profile DIR` keeps the
profiles for TensorBoard. Last, per workload, the CPU arithmetic: the step alone (memory)
and the TFRecord pipeline alone, per CPU-second; both on the same cores give at most
1 / (1/step + 1/pipeline) samples per CPU-second.

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
import functools
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


def _stream_dataset(files, columns, workload: str, cached: bool = False):
    """The Stream's batches; `cached`: one pass parsed, then kept in memory and repeated
    (the same order every epoch): what decoded shards held in memory would cost."""
    from graphfit import datasets

    stream = datasets.Stream(files, columns, target="label")
    data = stream.dataset(stream.files, BATCH, shuffle_buffer=10_000, seed=0,
                          repeat=not cached)
    data = data.map(_shaped(workload))
    return data.cache().repeat() if cached else data


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
    memory = {"x": x.reshape(_shape(workload)), "y": y, "batch_size": BATCH}
    records = os.path.join(folder, "tfrecord", "*")
    tfrecord = {"x": _stream_dataset(records, pixels, workload), "steps_per_epoch": steps}
    return {
        "memory": (memory, len(x)),
        "tfrecord": (tfrecord, len(x)),
        "memory-keras": (memory, len(x)),
        "tfrecord-keras": (tfrecord, len(x)),
        "tfrecord-cached": ({"x": _stream_dataset(records, pixels, workload, cached=True),
                             "steps_per_epoch": steps}, len(x)),
        "csv": ({"x": _stream_dataset(os.path.join(folder, "csv", "*"), columns, workload),
                 "steps_per_epoch": steps}, len(x)),
        "png": ({"x": png, "steps_per_epoch": -(-count // BATCH)}, count),
    }


def _shape(workload: str):
    return (-1, 8, 8, 1) if workload == "conv" else (-1, 64)


def _keras_model(workload: str, steps: int):
    """The same network in Keras 3 (the reference loop): XLA as graphfit's "auto" decides
    on a CPU (on for the MLP, off for the conv net); steps per execution the largest
    divisor of an epoch's `steps` up to 32 (Keras runs whole executions: 32 of an epoch
    of 225 steps over a repeating dataset would train 256)."""
    import keras

    keras.utils.set_random_seed(0)
    if workload == "conv":
        stack = [keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
                 keras.layers.MaxPooling2D(2),
                 keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
                 keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)]
    else:
        stack = [keras.layers.Dense(256, activation="relu"),
                 keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)]
    model = keras.Sequential([keras.Input(_shape(workload)[1:]), *stack])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=workload == "mlp",
                  steps_per_execution=max(d for d in range(1, 33) if steps % d == 0))
    return model


def _timed(run) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all its threads) of `run()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def _pipeline_rate(arguments: dict, samples: int) -> tuple[float, float] | None:
    """(samples/s, samples per CPU-second) of iterating the dataset alone for one epoch
    (None for memory)."""
    if "steps_per_epoch" not in arguments:
        return None
    iterator = iter(arguments["x"])
    next(iterator)
    wall, cpu = _timed(lambda: [next(iterator) for _ in range(arguments["steps_per_epoch"])])
    return samples / wall, samples / cpu


# The ops in which a loop's step blocks until the input pipeline hands it a batch (graphfit's
# and Keras's loops read `get_next_as_optional`; a one-step Keras loop `get_next`).
WAIT_EVENTS = ("IteratorGetNextAsOptionalOp::DoCompute", "IteratorGetNextOp::DoCompute")


def input_wait_share(fit, logdir: str) -> float:
    """Runs `fit()` under TensorFlow's profiler; returns the share of its wall time spent in
    the iterator's GetNext ops (`WAIT_EVENTS` in the trace's host plane): the step waiting on
    input, as TensorBoard's input-pipeline analysis counts it. 0 for in-memory arrays, which
    the step gathers itself (no iterator)."""
    import glob

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    tf.profiler.experimental.start(logdir)
    wall, _ = _timed(fit)
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(max(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True),
                  key=os.path.getmtime), "rb") as handle:
        space.ParseFromString(handle.read())
    waited = 0
    for plane in space.planes:
        wait_ids = {key for key, meta in plane.event_metadata.items()
                    if meta.name in WAIT_EVENTS}
        waited += sum(event.duration_ps for line in plane.lines for event in line.events
                      if event.metadata_id in wait_ids)
    return waited / 1e12 / wall


def _profile(workload: str, models: dict, sources: dict, logdir: str) -> dict:
    """{source: input-wait share} of one profiled epoch each of memory, tfrecord and cached
    tfrecord (graphfit), and of tfrecord under Keras's fit, in the same run."""
    shares = {}
    for name in ("memory", "tfrecord", "tfrecord-keras", "tfrecord-cached"):
        shares[name] = input_wait_share(
            functools.partial(models[name].fit, **sources[name][0], epochs=1, verbose=0),
            os.path.join(logdir, workload, name))
    return shares


def _measure(workload, folder, x, y, args) -> dict:
    """{source: (median samples/s, median samples per CPU-second, pipeline alone or None,
    input-wait share or None)}."""
    sources = _sources(workload, folder, x, y, args.png_samples)
    steps = -(-len(x) // BATCH)
    models = {name: _keras_model(workload, steps) if name.endswith("keras")
              else _model(workload) for name in sources}
    for name, (arguments, _) in sources.items():  # warm-up: tracing and compilation
        models[name].fit(**arguments, epochs=1, verbose=0)
    rates = {name: [] for name in sources}
    for _ in range(args.repeats):  # interleaved: the machine's load hits every source alike
        for name, (arguments, samples) in sources.items():
            wall, cpu = _timed(functools.partial(models[name].fit, **arguments,
                                                 epochs=args.epochs, verbose=0))
            rates[name].append((samples * args.epochs / wall, samples * args.epochs / cpu))
    with tempfile.TemporaryDirectory() as scratch:
        shares = _profile(workload, models, sources, args.profile or scratch)
    return {name: (statistics.median(r[0] for r in values),
                   statistics.median(r[1] for r in values),
                   _pipeline_rate(*sources[name]), shares.get(name))
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


def _print_workload(workload: str, results: dict) -> None:
    """The table's rows, then the CPU arithmetic: the step alone (memory) and the pipeline
    alone, each per CPU-second, and what both on the same cores give at most."""
    memory_wall, memory_cpu = results["memory"][:2]
    for name, (wall, cpu, alone, wait) in results.items():
        alone_wall, alone_cpu = ("-", "-") if alone is None else \
            (f"{alone[0]:,.0f}", f"{alone[1]:,.0f}")
        shown = "-" if wait is None else f"{wait:.0%}"
        print(f"{workload:8} {name:15} {wall:8,.0f} {cpu:8,.0f} {wall / memory_wall:7.2f}x "
              f"{cpu / memory_cpu:7.2f}x {alone_wall:>10} {alone_cpu:>10} {shown:>6}")
    pipeline = results["tfrecord"][2][1]
    both = 1 / (1 / memory_cpu + 1 / pipeline)
    print(f"{workload:8} CPU arithmetic: step {memory_cpu:,.0f} + tfrecord pipeline "
          f"{pipeline:,.0f} samples/CPU-s -> at most {both:,.0f} on shared cores "
          f"({both / memory_cpu:.2f}x memory's CPU rate)")


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
        print(f"batch {BATCH}, medians of {args.repeats} x {args.epochs} epoch(s), "
              f"interleaved; {len(x)} rows ({args.png_samples} for png); load average "
              f"{os.getloadavg()[0]:.1f} at the start")
        print("wall: samples/s; cpu: samples per CPU-second of the process (all threads); "
              "wait: share of a profiled epoch's wall time in the iterator's GetNext")
        print(f"{'workload':8} {'source':15} {'wall':>8} {'cpu':>8} {'wall/mem':>8} "
              f"{'cpu/mem':>8} {'alone wall':>10} {'alone cpu':>10} {'wait':>6}")
        for workload in args.workloads:
            results = _measure(workload, folder, x, y, args)
            _print_workload(workload, results)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
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

"""`tf.distribute` with graphfit: samples per second of `fit` on 1 and 2 devices, and the cost
of one all-reduce.

Two problems (`--problems mlp lm`, both by default):

- `mlp`: the MLP 784-256-256-10 (ReLU, SGD with momentum 0.9, sparse cross-entropy from
  logits, accuracy), batch 256, on synthetic data (8192 samples, float32); the all-reduce is
  of tensors the size of its gradients;
- `lm`: Levenberg–Marquardt (defaults) on the sinc problem of `benchmarks/lm.py`
  (sinc(10x), 20 000 points, 1-20-1 tanh MLP, batch 1000, float32); each step all-reduces
  JᵀJ (61 × 61), the gradient and the loss, and every trial's loss.

Each is trained:

- `none`: without a strategy (the reference);
- `mirrored-1`: under `MirroredStrategy` on one CPU device (the strategy's own overhead);
- `mirrored-2`: under `MirroredStrategy` on 2 logical CPU devices (the CPU split in two with
  `tf.config.set_logical_device_configuration`; each replica gets half of the global batch);
- `gpu` (with `--gpu`, where a GPU exists): without a strategy on GPU:0.

Each configuration runs in its own process, since logical devices must be set before
TensorFlow initializes, `--repeats` times interleaved; the medians are printed. Per
configuration: samples per second over `--epochs` timed epochs (after one warm-up epoch that
traces and compiles), and, under a strategy, the time of one all-reduce (sum) of what a step
reduces, in a compiled loop. On a machine
with 2 cores the two logical devices share them: read it as an overhead measurement, not a
speed-up. When `fit` fails under a strategy, the line says so and why.

This is a benchmark, not a test: nothing here asserts.

    python benchmarks/distribute.py [--epochs 3] [--repeats 3] [--problems mlp lm] [--gpu]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SAMPLES, FEATURES, CLASSES, BATCH = 8192, 784, 10, 256
LM_SAMPLES, LM_BATCH, LM_UNITS = 20_000, 1000, 20
CONFIGS = ("none", "mirrored-1", "mirrored-2")
PROBLEMS = ("mlp", "lm")
ALL_REDUCE_REPEATS = 50


def _model(problem: str):
    import tensorflow as tf

    import graphfit as gf
    from graphfit import layers, optimizers

    if problem == "lm":
        model = gf.Sequential([layers.Dense(LM_UNITS, activation="tanh"), layers.Dense(1)])
        model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
        return model
    model = gf.Sequential([layers.Dense(256, activation="relu"),
                           layers.Dense(256, activation="relu"), layers.Dense(CLASSES)])
    model.compile(optimizer=optimizers.SGD(0.01, momentum=0.9),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def _strategy(config: str):
    import tensorflow as tf

    if config in ("none", "gpu"):
        return None
    count = int(config.split("-")[1])
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(count)])


def _reduced_shapes(problem: str, variables) -> list:
    """What one step all-reduces: the gradients (mlp); JᵀJ, the gradient and the loss (lm)."""
    if problem == "lm":
        n = sum(v.shape.num_elements() for v in variables)
        return [(n, n), (n,), ()]
    return [v.shape for v in variables]


def _all_reduce_seconds(strategy, shapes) -> float:
    """Seconds per all-reduce (sum) of one tensor per shape, in a compiled loop."""
    import tensorflow as tf

    @tf.function
    def reduce_many():
        def step():
            context = tf.distribute.get_replica_context()
            return context.all_reduce(tf.distribute.ReduceOp.SUM,
                                      [tf.ones(shape) for shape in shapes])

        total = tf.constant(0.0)
        for _ in tf.range(ALL_REDUCE_REPEATS):
            reduced = strategy.run(step)
            total += tf.add_n([tf.reduce_sum(strategy.experimental_local_results(r)[0])
                               for r in reduced])
        return total

    reduce_many()  # trace
    start = time.perf_counter()
    reduce_many().numpy()
    return (time.perf_counter() - start) / ALL_REDUCE_REPEATS


def _data(problem: str):
    import numpy as np

    rng = np.random.default_rng(0)
    if problem == "lm":  # benchmarks/lm.py's sinc problem
        x = rng.uniform(-1, 1, size=(LM_SAMPLES, 1)).astype(np.float32)
        return x, np.sinc(10 * x).astype(np.float32), LM_BATCH
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    return x, rng.integers(0, CLASSES, size=SAMPLES), BATCH


def child(config: str, epochs: int, problem: str = "mlp") -> dict:
    """Runs one configuration in this process; returns its numbers (or the failure)."""
    import contextlib

    import tensorflow as tf

    import graphfit as gf

    strategy = _strategy(config)
    gf.set_seed(0)
    x, y, batch = _data(problem)
    device = "/gpu:0" if config == "gpu" else None
    result = {"config": config, "problem": problem,
              "replicas": strategy.num_replicas_in_sync if strategy else 1}
    with strategy.scope() if strategy else tf.device(device) if device else \
            contextlib.nullcontext():
        model = _model(problem)
    try:
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)  # warm-up: trace, compile
        start = time.perf_counter()
        history = model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0)
        seconds = time.perf_counter() - start
    except Exception as error:  # a benchmark reports what failed and goes on
        result["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
    else:
        steps = len(history.epoch) * -(-len(x) // batch)  # LM may stop early, converged
        result.update(samples_per_second=len(x) * len(history.epoch) / seconds,
                      ms_per_step=1000 * seconds / steps, loss=history.history["loss"][-1])
    if strategy is not None:
        result["all_reduce_ms"] = 1000 * _all_reduce_seconds(
            strategy, _reduced_shapes(problem, model.trainable_variables))
    return result


def _run_child(config: str, epochs: int, timeout: float, problem: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", config,
               "--epochs", str(epochs), "--problems", problem]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"config": config, "error": f"no result within {timeout:.0f} s (a hang?)"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"config": config, "error": f"the process exited with {done.returncode}: {tail}"}


def _median(runs: list) -> dict:
    """The runs' median samples/s, ms/step, loss and all-reduce time; the first failure if
    any run failed."""
    import statistics

    failed = [run for run in runs if "error" in run]
    if failed:
        return failed[0]
    result = dict(runs[0], repeats=len(runs))
    for key in ("samples_per_second", "ms_per_step", "all_reduce_ms", "loss"):
        if key in result:
            result[key] = statistics.median(run[key] for run in runs)
    return result


def _line(result: dict) -> str:
    name = f"{result['config']:<11s}"
    reduce = (f"  all-reduce {result['all_reduce_ms']:.3f} ms"
              if "all_reduce_ms" in result else "")
    if "error" in result:
        what = ("MirroredStrategy fit FAILED" if result["config"].startswith("mirrored")
                else "fit FAILED")
        return f"{name} {what}: {result['error']}{reduce}"
    return (f"{name} replicas {result['replicas']}  {result['samples_per_second']:9.0f} "
            f"samples/s  {result['ms_per_step']:7.2f} ms/step  final loss "
            f"{result['loss']:.3g}{reduce}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per configuration")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per configuration (interleaved); medians are printed")
    parser.add_argument("--gpu", action="store_true", help="add the single-GPU figure")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per configuration")
    parser.add_argument("--problems", nargs="+", choices=PROBLEMS, default=list(PROBLEMS),
                        help="which problems to time (default: both)")
    parser.add_argument("--child", choices=CONFIGS + ("gpu",), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.epochs, args.problems[0])))
        return
    for problem in args.problems:
        _table(problem, args)


def _table(problem: str, args) -> None:
    if problem == "lm":
        print(f"\nLevenberg-Marquardt on sinc(10x), 1-{LM_UNITS}-1 tanh, batch {LM_BATCH}, "
              f"{LM_SAMPLES} samples, {args.epochs} timed epochs, {os.cpu_count()} CPU cores")
    else:
        print(f"\nMLP {FEATURES}-256-256-{CLASSES}, SGD, batch {BATCH}, {SAMPLES} synthetic "
              f"samples, {args.epochs} timed epochs, {os.cpu_count()} CPU cores")
    configs = CONFIGS + (("gpu",) if args.gpu else ())
    runs = {config: [] for config in configs}
    for _ in range(args.repeats):  # interleaved, so a slow spell hits every configuration
        for config in configs:
            runs[config].append(_run_child(config, args.epochs, args.timeout, problem))
    results = [_median(runs[config]) for config in configs]
    for result in results:
        print(_line(result), flush=True)
    rates = {r["config"]: r.get("samples_per_second") for r in results}
    if rates.get("none") and rates.get("mirrored-2"):
        print(f"2 logical devices / no strategy: {rates['mirrored-2'] / rates['none']:.2f}x "
              f"(the devices share the same cores: an overhead, not a speed-up)")


if __name__ == "__main__":
    main()

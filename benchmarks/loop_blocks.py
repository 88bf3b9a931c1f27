"""Steps per iteration of graphfit's fused XLA loop: samples per second for each setting.

On a GPU an XLA `while` loop with a trip count unknown at compile time reads its condition back
to the host at every iteration, so a loop of one step per iteration waits for the host once a
step. `graphfit.training.fused_loops` therefore runs blocks of `GPU_STEPS_PER_ITERATION` steps
in an inner loop of a known trip count on a GPU (1 on a CPU). This benchmark trains the same
model from the same weights with each setting given by `--steps-per-iteration`, in interleaved
repeats, and prints the median samples per second and the ratio to one step per iteration. The
settings run the same steps in the same order, so the final weights should agree: the table
gives the largest difference from the first setting's (0 on a CPU; a GPU's reductions may
differ in the last bits).

The workloads and their training settings are those of `throughput.py` (batch 128, SGD with
momentum, graphfit's defaults otherwise); `jit_compile="auto"` must choose XLA for the loop to
matter, which it does for both workloads on a GPU and for the MLP on a CPU.

Usage:

    python benchmarks/loop_blocks.py                       # MLP and conv net, float32
    python benchmarks/loop_blocks.py --steps-per-iteration 1 8 32 \
        --dtype-policy float32 mixed_float16                # on a GPU
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import graphfit as gf  # noqa: E402
from graphfit.training import fused_loops  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import GraphfitContender, conv_workload, mlp_workload  # noqa: E402


def measure(workload, policy: str, settings: list[int], epochs: int, repeats: int):
    """{setting: (median samples/s, all runs, largest weight difference, loop kind)}."""
    gf.set_seed(0)
    initial = workload.build_graphfit().get_weights()
    contenders = {}
    for setting in settings:
        model = workload.build_graphfit()
        model.set_weights(initial)
        contender = GraphfitContender(workload, model, policy)
        # The loop reads the setting when it is first traced, in the warm-up's fit.
        fused_loops.steps_per_iteration = lambda setting=setting: setting
        np.random.seed(1)  # the same shuffles for every setting (`fit` draws its seed here;
        # not gf.set_seed: TensorFlow's set_seed clears the kernel caches, costing each call)
        contender.warm_up()
        contenders[setting] = contender
    runs = {setting: [] for setting in settings}
    samples = epochs * len(workload.x)
    for repeat in range(repeats):  # interleaved: a slow spell hits every setting alike
        for setting, contender in contenders.items():
            np.random.seed(2 + repeat)
            started = time.perf_counter()
            contender.train(epochs)
            runs[setting].append(samples / (time.perf_counter() - started))
    reference = contenders[settings[0]].weights()
    results = {}
    for setting, contender in contenders.items():
        difference = max(float(np.max(np.abs(a - b)))
                         for a, b in zip(contender.weights(), reference))
        results[setting] = (statistics.median(runs[setting]), runs[setting], difference,
                            contender.model.compile_state.steps.loop_kind("train"))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps-per-iteration", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--workloads", nargs="+", choices=("mlp", "conv"),
                        default=["mlp", "conv"])
    parser.add_argument("--dtype-policy", nargs="+", default=["float32"],
                        choices=("float32", "mixed_bfloat16", "mixed_float16"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if min(args.steps_per_iteration) < 1:
        parser.error("--steps-per-iteration takes positive integers")
    builders = {"mlp": lambda: mlp_workload(60_000), "conv": lambda: conv_workload(4)}
    device = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    print(f"device: {device[0].name}; TensorFlow {tf.__version__}; {args.epochs} epochs per "
          f"timed fit, median of {args.repeats} interleaved repeats")
    print("| workload | policy | loop | steps per iteration | samples/s | vs 1 per iteration "
          "| largest weight difference |")
    print("|---|---|---|---:|---:|---:|---:|")
    for key in args.workloads:
        workload = builders[key]()
        for policy in args.dtype_policy:
            results = measure(workload, policy, args.steps_per_iteration, args.epochs,
                              args.repeats)
            base = results[args.steps_per_iteration[0]][0]
            for setting, (speed, _, difference, kind) in results.items():
                print(f"| {workload.title} | {policy} | {kind} | {setting} | {speed:,.0f} | "
                      f"{speed / base:.2f}x | {difference:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

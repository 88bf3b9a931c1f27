"""The table `throughput.py` prints: one row per workload and dtype policy, with the targets.

The targets are the project's goals, printed beside the numbers and never asserted:

- float32: graphfit at least `TARGETS_VS_KERAS` x Keras's `fit`, 0.9x the hand-written loop,
  and the MLP's training step at `TARGET_OF_PEAK` of the float32 matmul peak;
- mixed policies: graphfit at least `TARGET_MIXED_VS_FLOAT32` x its own float32 throughput.
"""

from __future__ import annotations

import os
import platform

import keras
import tensorflow as tf
from machine import cpu_model  # beside this module (benchmarks/)

import graphfit as gf

TARGETS_VS_KERAS = {"mlp": 2.5, "conv": 1.0}
TARGET_VS_HAND = 0.9
TARGET_OF_PEAK = {"mlp": 0.6}
TARGET_MIXED_VS_FLOAT32 = 1.5
COMPUTE_DTYPES = {"float32": "float32", "mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}
BATCH_SIZE = 128


def _cell(value: float, target: float | None, unit: str = "x") -> str:
    if target is None:
        return f"{value:.2f}{unit}"
    verdict = "met" if value >= target else "MISSED"
    return f"{value:.2f}{unit} (>= {target:g}{unit} {verdict})"


def _find(results, name: str, policy: str):
    return next((r for r in results if r.name == name and r.policy == policy), None)


def _row(workload, results, policy: str, peaks) -> list[str]:
    graphfit = _find(results, "graphfit", policy)
    keras_result = _find(results, "Keras", policy)
    hand = _find(results, "hand loop", policy)
    f32 = policy == "float32"
    peak, _ = peaks[COMPUTE_DTYPES[policy]].gflops()
    speed = graphfit.samples_per_second
    baseline = _find(results, "graphfit", "float32")
    return [
        workload.title, policy, f"{speed:,.0f}", f"{graphfit.gflops:.0f}",
        _cell(graphfit.gflops / peak, TARGET_OF_PEAK.get(workload.key) if f32 else None, ""),
        f"{keras_result.samples_per_second:,.0f}",
        f"{hand.samples_per_second:,.0f}" if hand else "-",
        _cell(speed / keras_result.samples_per_second,
              TARGETS_VS_KERAS[workload.key] if f32 else None),
        _cell(speed / hand.samples_per_second, TARGET_VS_HAND) if hand else "-",
        "-" if f32 or baseline is None else _cell(
            speed / baseline.samples_per_second, TARGET_MIXED_VS_FLOAT32),
    ]


def machine_line() -> str:
    """The machine and the versions, for a benchmark's header."""
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    gpus = tf.config.list_physical_devices("GPU")
    gpu_names = [tf.config.experimental.get_device_details(gpu).get("device_name", "GPU")
                 for gpu in gpus]
    return (f"{usable} usable CPU cores (of {cpus}; {cpu_model()}), {len(gpus)} GPU(s)"
            f"{' (' + ', '.join(gpu_names) + ')' if gpu_names else ''}, {platform.machine()} "
            f"{platform.system()}; Python {platform.python_version()}, TensorFlow "
            f"{tf.__version__}, Keras {keras.__version__}, graphfit {gf.__version__}")


def _peaks_line(peaks, size: int, repeats: int) -> str:
    parts = []
    for dtype, peak in peaks.items():
        value, path = peak.gflops()
        parts.append(f"{dtype} {value:.0f} GFLOP/s ({path})")
    return (f"matmul peak: {', '.join(parts)}; median of {repeats} {size}x{size} products, "
            f"the faster of TensorFlow's kernel and XLA")


def _print_table(header, rows, markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---", "---"] + ["---:"] * (len(header) - 2)) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
        for row in [header, *rows]:
            print("  ".join(str(c).rjust(w) if i > 1 else str(c).ljust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))
    print()


def report(workloads, all_results, peaks, args) -> None:
    """Prints the table, the machine, the peaks, and every contender's settings and runs."""
    header = ["workload", "policy", "graphfit samples/s", "GFLOP/s", "of matmul peak", "Keras",
              "hand loop", "graphfit / Keras", "graphfit / hand loop", "vs own float32"]
    rows = [_row(w, all_results[w.key], policy, peaks)
            for w in workloads for policy in args.dtype_policy]
    peak_size = next(iter(peaks.values())).size
    caption = (f"fit throughput in samples/s ({args.stat} of {args.repeats} interleaved repeats "
               f"of {args.epochs} epochs; batch {args.batch_size}, SGD(0.01, momentum 0.9), sparse "
               f"CE from logits, accuracy, shuffle on; hand loop float32, XLA {args.hand_jit}); "
               f"GFLOP/s of graphfit's training step (model.flops) and its fraction of the "
               f"matmul peak of the policy's compute dtype ({peak_size} squared)")
    print(f"{caption}\n")
    _print_table(header, rows, args.markdown)
    bullet = "- " if args.markdown else "  "
    print(f"machine: {machine_line()}")
    print(_peaks_line(peaks, peak_size, args.repeats))
    print("settings and checks:")
    for workload in workloads:
        for r in all_results[workload.key]:
            runs = ", ".join(f"{v:,.0f}" for v in r.all_runs)
            trained = "trained" if r.trained else "DID NOT TRAIN"
            flops = "" if r.flops_per_sample is None else \
                f"; {r.flops_per_sample / 1e6:.3f} MFLOP per sample"
            print(f"{bullet}{workload.key} / {r.name} / {r.policy}: {r.settings}{flops}; runs "
                  f"[{runs}] samples/s; epoch loss {r.reported_losses[0]:.3f} -> "
                  f"{r.reported_losses[-1]:.3f}; check loss {r.loss_before:.3f} -> "
                  f"{r.loss_after:.3f} ({trained})")

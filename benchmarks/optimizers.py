"""Throughput of `fit` per optimizer: graphfit next to Keras 3, on the MLP of throughput.py.

For every optimizer registered in graphfit (`graphfit.core.registry.OPTIMIZERS`) that
`keras.optimizers` also has under the same name and that both build with default arguments,
the same MLP (`throughput.mlp_workload`: Dense 784-W-W-10, relu, synthetic 10-class data)
is trained by graphfit's `Model.fit` and by Keras's `Model.fit`, from the same initial
weights, with each framework's default compile settings (graphfit: jit_compile="auto",
steps_per_execution="auto"; Keras: its defaults), batch `--batch-size`,
SparseCategoricalCrossentropy(from_logits=True) and `verbose=0`. New optimizers appear in the
table as soon as they are registered; ones Keras lacks (LevenbergMarquardt) or that need
arguments (LossScaleOptimizer wraps another) are listed as skipped, with the reason.

Each contender is warmed up on one epoch (tracing and compilation excluded), then timed over
`--repeats` calls of `fit(epochs=--epochs)`, interleaved across the two frameworks; the
table gives the median samples/s of each and the ratio graphfit / Keras. A run whose final
loss is not below its first epoch's is flagged, so no one measures a diverged or no-op run.

This is a benchmark, not a test: pytest never runs it and nothing asserts on time.

Usage:

    python benchmarks/optimizers.py                              # all optimizers, defaults
    python benchmarks/optimizers.py --samples 8192 --width 128 --repeats 5
    python benchmarks/optimizers.py --optimizers Adam Muon --markdown
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from graphfit import optimizers  # noqa: E402
from graphfit.core.registry import OPTIMIZERS  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import mlp_workload  # noqa: E402
from throughput_report import BATCH_SIZE  # noqa: E402


def _contenders(name: str):
    """(graphfit optimizer, Keras optimizer) with default arguments, or the reason to skip."""
    if not hasattr(keras.optimizers, name):
        return None, f"keras.optimizers has no {name}"
    cls = OPTIMIZERS.get(name)
    if not issubclass(cls, optimizers.Optimizer):
        return None, "not a first-order optimizer (no default-argument twin)"
    try:
        return (cls(), getattr(keras.optimizers, name)()), None
    except (TypeError, ValueError) as error:
        return None, f"needs arguments ({error})"


class _Fit:
    """One framework's model and its `fit` calls."""

    def __init__(self, model, optimizer, workload, initial):
        model.set_weights(initial)
        model.compile(optimizer=optimizer,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        self.model, self.workload = model, workload
        self.times: list[float] = []
        self.losses: list[float] = []

    def fit(self, epochs: int) -> None:
        start = time.perf_counter()
        history = self.model.fit(self.workload.x, self.workload.y, epochs=epochs,
                                 batch_size=self.workload.batch_size, shuffle=True, verbose=0)
        self.times.append(time.perf_counter() - start)
        self.losses += history.history["loss"]

    def samples_per_second(self, epochs: int) -> float:
        return len(self.workload.x) * epochs / statistics.median(self.times)

    def learned(self) -> bool:
        return bool(np.isfinite(self.losses[-1]) and self.losses[-1] < self.losses[0])


def measure(name: str, workload, epochs: int, repeats: int):
    """Median samples/s of graphfit and Keras for one optimizer, and whether both learned."""
    pair, reason = _contenders(name)
    if pair is None:
        return None, reason
    graphfit_model = workload.build_graphfit()
    initial = graphfit_model.get_weights()
    runs = [_Fit(graphfit_model, pair[0], workload, initial),
            _Fit(workload.build_keras(), pair[1], workload, initial)]
    for run in runs:
        run.fit(1)  # warm-up: tracing and compilation
        run.times.clear()
    for _ in range(repeats):
        for run in runs:  # interleaved, so a slow spell of the machine hits both
            run.fit(epochs)
    ours, theirs = (run.samples_per_second(epochs) for run in runs)
    flags = [who for who, run in zip(("graphfit", "keras"), runs) if not run.learned()]
    return (ours, theirs, flags), None


def _table(rows, markdown: bool) -> str:
    header = ("optimizer", "graphfit samples/s", "keras samples/s", "graphfit/keras", "note")
    lines = [header] + [
        (name, f"{ours:,.0f}", f"{theirs:,.0f}", f"{ours / theirs:.2f}x",
         ("loss did not go down: " + ", ".join(flags)) if flags else "")
        for name, (ours, theirs, flags) in rows]
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(line) + " |" for line in lines[1:]]
        return "\n".join(out)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
                     for line in lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=16_384, help="training samples")
    parser.add_argument("--width", type=int, default=256, help="hidden width of the MLP")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--epochs", type=int, default=1, help="epochs per timed fit call")
    parser.add_argument("--repeats", type=int, default=5, help="timed fit calls per framework")
    parser.add_argument("--optimizers", nargs="+", default=None,
                        help="registered names to run (default: every registered one)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    workload = mlp_workload(args.samples, args.width, args.batch_size)
    names = args.optimizers or OPTIMIZERS.names()
    rows, skipped = [], []
    for name in names:
        result, reason = measure(name, workload, args.epochs, args.repeats)
        if result is None:
            skipped.append(f"{name}: {reason}")
        else:
            rows.append((name, result))
            print(f"# {name}: done", file=sys.stderr, flush=True)
    print(f"{workload.title}, {args.samples} samples, batch {args.batch_size}, "
          f"{args.epochs} epoch(s) x {args.repeats} repeats, medians; "
          f"keras {keras.__version__}")
    print(_table(rows, args.markdown))
    for line in skipped:
        print(f"skipped {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

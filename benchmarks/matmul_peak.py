"""The matmul peak of this machine: GFLOP/s of one large square matrix product, per dtype.

A training step cannot do arithmetic faster than the machine multiplies large matrices, so a
large square product (2048 x 2048 by default: big enough for the libraries' best kernels, small
enough to time in tens of milliseconds) is the yardstick `throughput.py` divides by. It is timed
two ways, TensorFlow's own kernel (oneDNN on CPU) and XLA, and the faster counts: the question
is what the hardware can do, not what one path does.

Used by `throughput.py`, which times one product per dtype in each round of its interleaved
repeats, so that the peak and the contenders see the same load. Alone:

    python benchmarks/matmul_peak.py --dtypes float32 bfloat16 --size 2048 --repeats 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

DEFAULT_SIZE = 2048


class MatmulPeak:
    """Times `size x size` products in `dtype`, TensorFlow's kernel and XLA's.

    Args:
        dtype: "float32", "bfloat16", "float16", ...
        size: the side of the square matrices.
    """

    def __init__(self, dtype: str, size: int = DEFAULT_SIZE):
        self.dtype, self.size = dtype, size
        rng = tf.random.Generator.from_seed(0)
        self.a = tf.cast(rng.normal([size, size]), dtype)
        self.b = tf.cast(rng.normal([size, size]), dtype)
        self.flops = 2 * size ** 3
        self._paths = {"TensorFlow": tf.function(tf.matmul, jit_compile=False),
                       "XLA": tf.function(tf.matmul, jit_compile=True)}
        self.runs: dict[str, list[float]] = {name: [] for name in self._paths}
        for fn in self._paths.values():  # trace, compile, warm the caches
            fn(self.a, self.b).numpy()

    def time_once(self) -> None:
        """One timed product per path; appends its GFLOP/s to `runs`."""
        for name, fn in self._paths.items():
            started = time.perf_counter()
            fn(self.a, self.b).numpy()
            self.runs[name].append(self.flops / (time.perf_counter() - started) / 1e9)

    def gflops(self) -> tuple[float, str]:
        """(the median GFLOP/s of the faster path, its name)."""
        medians = {name: statistics.median(runs) for name, runs in self.runs.items() if runs}
        best = max(medians, key=medians.get)
        return medians[best], best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    peaks = [MatmulPeak(dtype, args.size) for dtype in args.dtypes]
    for _ in range(args.repeats):
        for peak in peaks:
            peak.time_once()
    for peak in peaks:
        value, path = peak.gflops()
        detail = ", ".join(f"{name} {statistics.median(r):.0f}" for name, r in peak.runs.items())
        print(f"{peak.dtype}: {value:.0f} GFLOP/s ({path}; medians: {detail}; "
              f"{args.size}x{args.size}, {args.repeats} repeats)")


if __name__ == "__main__":
    main()

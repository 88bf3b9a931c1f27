"""The matmul peak of this machine: GFLOP/s of one large square matrix product, per dtype.

A training step cannot do arithmetic faster than the machine multiplies large matrices, so a
large square product (by default 2048 x 2048 on a CPU, 8192 x 8192 on a GPU: big enough for the
libraries' best kernels, small enough to time in tens of milliseconds) is the yardstick
`throughput.py` divides by. It is timed two ways, TensorFlow's own kernel (oneDNN on CPU, cuBLAS
on a GPU) and XLA, and the faster counts: the question is what the hardware can do, not what one
path does. On a GPU ten products are queued back to back and timed together, so that neither
the launch nor the fetch of the result counts. On NVIDIA GPUs from Ampere on, TensorFlow runs
float32 products in TF32 unless `tf.config.experimental.enable_tensor_float_32_execution(False)`,
so the float32 peak there is TF32's.

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

DEFAULT_SIZE = 2048  # on a CPU
GPU_SIZE = 8192  # a GPU's tensor cores need larger products to reach their peak
GPU_PRODUCTS = 10


def on_gpu() -> bool:
    return bool(tf.config.list_logical_devices("GPU"))


class MatmulPeak:
    """Times `size x size` products in `dtype`, TensorFlow's kernel and XLA's.

    Args:
        dtype: "float32", "bfloat16", "float16", ...
        size: the side of the square matrices.
    """

    def __init__(self, dtype: str, size: int | None = None):
        gpu = on_gpu()
        size = size or (GPU_SIZE if gpu else DEFAULT_SIZE)
        self.dtype, self.size = dtype, size
        # One product is milliseconds on a GPU: time several, so launch and fetch don't count.
        self.products = GPU_PRODUCTS if gpu else 1
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
        """`products` back-to-back products per path, then one element fetched (which waits for
        them all: a GPU runs them asynchronously); appends the GFLOP/s to `runs`."""
        for name, fn in self._paths.items():
            started = time.perf_counter()
            for _ in range(self.products):
                product = fn(self.a, self.b)
            product[0, 0].numpy()
            elapsed = time.perf_counter() - started
            self.runs[name].append(self.products * self.flops / elapsed / 1e9)

    def gflops(self) -> tuple[float, str]:
        """(the median GFLOP/s of the faster path, its name)."""
        medians = {name: statistics.median(runs) for name, runs in self.runs.items() if runs}
        best = max(medians, key=medians.get)
        return medians[best], best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--size", type=int, default=None,
                        help=f"side of the square product (default {DEFAULT_SIZE} on a CPU, "
                             f"{GPU_SIZE} on a GPU)")
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
              f"{peak.size}x{peak.size}, {args.repeats} repeats)")


if __name__ == "__main__":
    main()

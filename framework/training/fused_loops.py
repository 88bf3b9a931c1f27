"""Array loops compiled whole by XLA: a chunk's gathers, steps and metric updates in one program.

With `jit_compile` on, a chunk of steps over in-memory arrays runs as one XLA computation: a
`while` loop whose body gathers the batch from the arrays, runs the model's train (or test)
step and updates the stage's loss trackers and Keras metrics. Nothing per batch is left to
TensorFlow's executor. Measured on a 2-core CPU (MLP 784-256-256-10, batch 128), the loop with
only the step compiled by XLA and the gather and metric updates between the steps ran about
1.4x slower: each step paid the launch of an XLA program, a gather and a handful of small metric
ops, which together cost a third of the step's time.

XLA compiles a program per input shape, so the chunk's index matrix is padded to a fixed number
of rows (`capacity`, from `ExecutionSizer.capacity`) and the true number of steps is passed as
a scalar: one program serves every chunk size. The arrays themselves are inputs, so arrays of a
new length compile the loop again; after `MAX_DATA_SIZES` lengths a stage goes back to the loop
whose steps alone are compiled, which compiles per batch shape only.

Every Keras metric compiles under XLA; a metric function of the user's that does not (an op
with no XLA kernel) fails the compilation before any step runs, and the stage then goes back to
the step-by-step loop, with the metrics updated outside XLA as before.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.training.batches import gather_batch
from graphfit.training.per_model_functions import per_model_function

__all__ = ["FusedArrayLoops", "pad_rows", "is_unsupported_op_error", "MAX_DATA_SIZES",
           "MIN_FUSED_STEPS"]

# Distinct array lengths one stage's fused loop compiles for before it gives way.
MAX_DATA_SIZES = 4

# The fewest steps per call worth compiling a loop for: a shorter chunk (a small data set, the
# last partial batch) runs the per-step XLA program, which costs less to compile than a loop
# saves on a few steps.
MIN_FUSED_STEPS = 8

# What TensorFlow says when XLA cannot compile a jit-compiled function (before anything ran):
# an op it has no kernel for, or a shape argument it cannot know at compile time (a user's
# `for _ in tf.range(n)` with n computed from the batch).
_COMPILE_FAILURE_MARKS = ("Detected unsupported operations when trying to compile graph",
                          "must be a compile-time constant", "tf2xla conversion failed")


def is_unsupported_op_error(error: Exception) -> bool:
    """Whether `error` is XLA refusing to compile the loop (nothing ran)."""
    return isinstance(error, tf.errors.InvalidArgumentError) and any(
        mark in (error.message or "") for mark in _COMPILE_FAILURE_MARKS)


def pad_rows(index_batches, capacity: int) -> np.ndarray:
    """`index_batches` (steps x batch sample indices) padded with zero rows to `capacity`
    rows (never fewer than it has).

    Example:

        >>> pad_rows(np.array([[3, 4]]), 3).tolist()
        [[3, 4], [0, 0], [0, 0]]
    """
    index_batches = np.asarray(index_batches, np.int32)
    rows = index_batches.shape[0]
    if rows >= capacity:
        return index_batches
    padded = np.zeros((capacity, index_batches.shape[1]), np.int32)
    padded[:rows] = index_batches
    return padded


class FusedArrayLoops:
    """The fused loops of one `CompiledSteps`, per stage and data signature.

    Args:
        run_and_record: `(stage, batch)` -> None: one step and its metric updates, traced
            inside the loop (`CompiledSteps._run_and_record`).
        record_shape: `(stage, data, rows)` -> None: logs the batches' shape for
            `xla_support.ShapeLog`, once per call, outside the compiled loop.
    """

    def __init__(self, run_and_record, record_shape):
        self._run_and_record = run_and_record
        self._record_shape = record_shape
        self._loops: dict = {}
        self._lengths: dict[str, set] = {}
        self.refused: set[str] = set()  # stages whose loop XLA could not compile

    def accepts(self, stage: str, data: tuple, capacity: int = MIN_FUSED_STEPS) -> bool:
        """Whether `stage` runs fused on `data` in chunks of up to `capacity` steps (not
        refused; chunks long enough, `MIN_FUSED_STEPS`; few enough array lengths)."""
        if (stage not in ("train", "val", "test") or stage in self.refused
                or capacity < MIN_FUSED_STEPS):
            return False
        lengths = self._lengths.setdefault(stage, set())
        length = int(tf.nest.flatten(data)[0].shape[0])
        if length not in lengths and len(lengths) >= MAX_DATA_SIZES:
            return False
        lengths.add(length)
        return True

    def run(self, stage: str, data: tuple, index_batches, capacity: int) -> tf.Tensor:
        """Runs one step per row of `index_batches`; returns how many ran (a tensor)."""
        steps = tf.constant(len(index_batches), tf.int32)
        indices = tf.constant(pad_rows(index_batches, capacity))
        return self._loop(stage, data)(data, indices, steps)

    def forget(self, stages=("train", "val", "test")) -> None:
        """Drops the traced loops of `stages` (the steps were traced again)."""
        self._loops = {k: f for k, f in self._loops.items() if k[0] not in stages}

    def tracing_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (stage, _), fn in self._loops.items():
            key = f"{stage}_arrays_fused"  # beside the per-step loop of short chunks
            counts[key] = counts.get(key, 0) + fn.experimental_get_tracing_count()
        return counts

    def _loop(self, stage: str, data: tuple):
        data_spec = tf.nest.map_structure(
            lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), data)
        signature = [data_spec, tf.TensorSpec([None, None], tf.int32),
                     tf.TensorSpec([], tf.int32)]
        key = (stage, str(signature))
        if key not in self._loops:
            self._loops[key] = self._build(stage, signature)
        return self._loops[key]

    def _build(self, stage: str, signature):
        def chunk(data, index_batches, steps):
            def step(i):
                self._run_and_record(stage, gather_batch(data, index_batches[i]))
                return (i + 1,)

            tf.while_loop(lambda i: i < steps, step, (tf.constant(0),))
            return steps

        compiled = per_model_function(chunk, jit_compile=True, autograph=False)

        def loop(data, index_batches, steps):
            # Outside XLA: the shape log's variables see each call once, not each step.
            self._record_shape(stage, data, tf.shape(index_batches)[1])
            return compiled(data, index_batches, steps)

        return per_model_function(loop, input_signature=signature, autograph=False)

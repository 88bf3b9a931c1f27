"""A batch cut into chunks of examples, for the Jacobian passes of Levenberg–Marquardt.

The normal equations (`jacobian.normal_equations`) and the matrix-free products
(`matrix_free.Products`) run the model on one chunk of a batch at a time, so memory is one
chunk's Jacobian or tangents. Every chunk has the same static size (XLA compiles one loop
body), `min(batch, chunk)` examples, and holds only real examples: when the batch is not a
multiple of the chunk, the last chunk is the batch's last `size` examples, overlapping the
one before it, and `kept_rows` gives the rows of the examples an earlier chunk already
counted zero weight. Padding the last chunk with made-up zero examples instead would change
what a layer that mixes the examples of a batch computes there (batch normalization in
training would normalize the chunk's real examples with statistics of mostly zeros).

Example:

    >>> import tensorflow as tf
    >>> chunks = ExampleChunks({"x": tf.range(5)}, tf.constant(5), 2)
    >>> int(chunks.count), [int(v) for v in chunks.part(2)[0]["x"]]
    (3, [3, 4])
    >>> [bool(v) for v in chunks.part(2)[1]]
    [False, True]
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

__all__ = ["ExampleChunks", "kept_rows"]


class ExampleChunks:
    """The chunks of a batch.

    Args:
        data: a structure of tensors whose first axis is the example.
        num_examples: the batch size (a scalar int32 tensor).
        chunk: the most examples per chunk (a Python int, positive).

    Attributes:
        size: examples per chunk, `max(min(num_examples, chunk), 1)` (a scalar tensor).
        count: the number of chunks (0 for an empty batch, as a replica's slice may be;
            outside XLA, which `fit` does not use under a strategy and which cannot compile
            the empty loop).
    """

    def __init__(self, data, num_examples, chunk: int):
        if chunk <= 0:
            raise ValueError(f"chunk must be positive. Received: chunk={chunk}")
        self.data, self.num_examples = data, num_examples
        # Under XLA the batch size is static, so the size and count are constants there.
        self.size = tf.maximum(tf.minimum(num_examples, chunk), 1)
        self.count = (num_examples + self.size - 1) // self.size

    def part(self, i):
        """`(part, keep)`: chunk `i` of the data, and a bool vector that is False for the
        examples an earlier chunk holds (only in the last chunk, when it overlaps)."""
        first = i * self.size
        start = tf.maximum(tf.minimum(first, self.num_examples - self.size), 0)
        indices = start + tf.range(self.size)
        part = tf.nest.map_structure(lambda t: tf.gather(t, indices), self.data)
        return part, indices >= first

    def sum(self, fn: Callable, zeros):
        """`Σ fn((part, keep), i)` over the chunks; `zeros` gives the structure and dtype of
        the sum."""
        def body(i, total):
            return i + 1, tf.nest.map_structure(tf.add, total, fn(self.part(i), i))

        return tf.while_loop(lambda i, _: i < self.count, body, (0, zeros))[1]


def kept_rows(rows_for: Callable) -> Callable:
    """`rows_for(data) -> (rows, rho)` made to take `(data, keep)`: the rows (and rho) of an
    example whose `keep` is False are multiplied by zero, and so are their derivatives (one
    that overflowed becomes NaN there, which `normal_equations` counts as zero, as it does
    any overflowed derivative). The rows are flat, example by example, the same number per
    example; `keep` may hold a single example (a per-example Jacobian vectorizes this
    function over the examples, where a product costs far less than a select to trace and
    to run)."""
    def rows_of_kept(part_and_keep):
        part, keep = part_and_keep
        rows, rho = rows_for(part)
        return _times_kept(rows, keep), _times_kept(rho, keep)

    return rows_of_kept


def _times_kept(values, keep):
    weight = tf.cast(keep, values.dtype)
    if keep.shape.rank == 1 and keep.shape[0] == 1:  # one example: a broadcast product
        return values * weight
    # Each example's rows times its weight: a reshape traces and runs cheaper than a repeat.
    by_example = tf.reshape(values, tf.stack([tf.size(keep), -1]))
    return tf.reshape(by_example * weight[:, None], [-1])

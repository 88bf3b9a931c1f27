"""Jacobians of residual rows, and the normal equations accumulated chunk by chunk.

`jacobian(rows_fn, variables, mode)` returns the Jacobian `C` (rows × n) of the residual rows
that `rows_fn()` computes, with respect to all `variables` flattened and concatenated (in
their order, each in row-major order):

- "reverse": `GradientTape.jacobian` vectorized with pfor: one backward pass per row;
- "forward": `tf.autodiff.ForwardAccumulator`, one forward pass per parameter, vectorized with
  `tf.vectorized_map` over groups of unit tangents.

`per_example_jacobian(rows_for, data, variables)` ("per_example" mode) is reverse mode one
example at a time: each example's rows differentiated on a batch of one, all examples at once
with `tf.vectorized_map` (torch-levenberg-marquardt's `vmap(jacrev)`). Its work grows linearly
with the examples, where whole-batch reverse mode's grows with their square, but it is exact
only when the model treats examples independently. For models of Dense layers
`normal_equations` takes the same Jacobian in closed form instead, where that is exact
(`layerwise_jacobian`).

`choose_mode` and `chunk_examples` pick the mode and the examples per chunk (see there: the
work of reverse mode grows with the rows of a chunk, that of forward mode with the
parameters). `normal_equations` accumulates `A = CᵀC` over the chunks, so memory stays `O(n²)`
plus one chunk's Jacobian; a batch no larger than a chunk is linearized as a whole.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from graphfit.optimizers.levenberg_marquardt import chunks as lm_chunks
from graphfit.optimizers.levenberg_marquardt import dense_forms
from graphfit.optimizers.levenberg_marquardt.layerwise_jacobian import layerwise_jacobian

__all__ = ["MODES", "choose_mode", "chunk_examples", "jacobian", "per_example_jacobian",
           "normal_equations", "check_parameter_count", "CHUNK_BUDGET"]

MODES = ("auto", "forward", "reverse", "per_example")

# The default chunk holds at most this many Jacobian entries (128 MiB in float64).
CHUNK_BUDGET = 2**24
# Forward mode pushes at most this many tangents through one vectorized pass, which bounds the
# memory of the tangent activations.
TANGENT_GROUP = 256


def check_parameter_count(n: int, max_parameters: int) -> None:
    """Raises a ValueError when the n × n system would be too large.

    Raises:
        ValueError: naming n and the memory of JᵀJ, when n > max_parameters.
    """
    if n > max_parameters:
        size = n * n * 8
        raise ValueError(
            f"LevenbergMarquardt solves an n × n linear system each step, and this model has "
            f"n={n} trainable parameters, more than max_parameters={max_parameters}: JᵀJ alone "
            f"would take n²·8 = {size} bytes ({size / 2**30:.2f} GiB) in float64, and the "
            f"Cholesky factorization O(n³) work. Use solver='cg' (or 'auto'): conjugate "
            f"gradients on Jacobian-vector products, O(n) memory; or freeze layers "
            f"(trainable=False) to train fewer parameters, or pass a larger max_parameters."
        )


def choose_mode(mode: str, n: int, rows_per_example: int | None,
                examples_independent: bool, unvectorizable: Sequence[str] = ()) -> str:
    """The Jacobian mode: `mode`, or for "auto": forward mode when one example alone has more
    residual rows than there are parameters; otherwise reverse mode, one example at a time
    ("per_example") when examples are independent and every layer vectorizes per example,
    on whole chunks ("reverse") when a layer or the loss mixes them (batch normalization in
    training) or a layer cannot be vectorized over examples (`unvectorizable`: the names of
    layers with `vectorizes_per_example = False`).

    Raises:
        ValueError: for mode="per_example" with `unvectorizable` layers.
    """
    if mode == "per_example" and unvectorizable:
        raise ValueError(
            f"jacobian_mode='per_example' vectorizes each example's gradients with "
            f"TensorFlow's pfor, which the layer(s) {', '.join(unvectorizable)} cannot go "
            f"through (vectorizes_per_example=False: TensorFlow crashes there). Use "
            f"jacobian_mode='auto', 'reverse' or 'forward'.")
    if mode != "auto":
        return mode
    if (rows_per_example or 1) > n:
        return "forward"
    return "per_example" if examples_independent and not unvectorizable else "reverse"


def chunk_examples(n: int, rows_per_example: int | None, mode: str,
                   chunk_size: int | None) -> int:
    """Examples per chunk: the user's `chunk_size`, or the automatic choice.

    Reverse mode costs one backward pass over the chunk per row, so the work over a batch
    grows with the chunk: `batch · chunk · rows_per_example` backward passes of one example,
    against `batch · n` forward passes of one example in forward mode. A reverse chunk holds
    about `max(n, 256) / rows_per_example` examples, which keeps its work near forward mode's
    (256: small problems gain more from fewer loop iterations than they lose in work). The
    work of forward and per-example mode does not depend on the chunk. Either way a chunk's
    Jacobian stays within `CHUNK_BUDGET` entries.
    """
    if chunk_size is not None:
        return chunk_size
    per_example = max(rows_per_example or 1, 1)
    fits = max(1, CHUNK_BUDGET // (max(n, 1) * per_example))
    if mode in ("forward", "per_example"):
        return fits
    return max(1, min(fits, max(n, 256) // per_example))


class _PforRetracingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("pfor.<locals>.f" in message and "triggered tf.function retracing" in message)


@contextlib.contextmanager
def _quiet_eager_pfor():
    """Run eagerly (`run_eagerly=True`), pfor traces a new function at every call by design,
    and TensorFlow warns that the calls trigger retracing: noise to a user stepping through
    an eager step, so it is filtered out while a Jacobian is taken."""
    if not tf.executing_eagerly():
        yield
        return
    log_filter = _PforRetracingFilter()
    tf.get_logger().addFilter(log_filter)
    try:
        yield
    finally:
        tf.get_logger().removeFilter(log_filter)


def _sizes(variables: Sequence[tf.Variable]) -> list[int]:
    return [int(np.prod(v.shape.as_list())) for v in variables]


def _as_matrix(parts, sizes: list[int], rows, dtype) -> tf.Tensor:
    """The per-variable Jacobians `parts` (rows × *variable shape) as one rows × n matrix."""
    columns = [tf.reshape(tf.cast(p, dtype), [rows, size]) for p, size in zip(parts, sizes)]
    return tf.concat(columns, axis=1)


@_quiet_eager_pfor()  # a contextmanager decorates too: one block per call
def jacobian(rows_fn: Callable[[], tuple[tf.Tensor, tf.Tensor]],
             variables: Sequence[tf.Variable], mode: str) -> tuple[tf.Tensor, tf.Tensor]:
    """The Jacobian of `rows_fn`'s rows with respect to `variables`, and its `rho`.

    Args:
        rows_fn: `() -> (rows, rho)`, both 1-D of the same length k; `rows` depends on the
            variables, `rho` is constant.
        variables: the variables (n scalars in all).
        mode: "forward" or "reverse".

    Returns:
        `(C, rho)`: C of shape (k, n) in the variables' dtype, and `rho`.
    """
    sizes = _sizes(variables)
    if mode == "reverse":
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            rows, rho = rows_fn()
        parts = tape.jacobian(rows, variables, experimental_use_pfor=True,
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
        k = tf.shape(rows)[0]
        return _as_matrix(parts, sizes, k, rows.dtype), rho
    if mode != "forward":
        raise ValueError(f"mode must be 'forward' or 'reverse'. Received: mode={mode!r}")
    n = sum(sizes)
    blocks = []
    for start in range(0, n, TANGENT_GROUP):
        count = min(TANGENT_GROUP, n - start)
        # Unit tangents e_start .. e_(start+count-1), split into the variables' shapes.
        eye = tf.one_hot(tf.range(start, start + count), n, dtype=variables[0].dtype)

        def jvp(tangent):
            pieces = tf.split(tangent, sizes)
            tangents = [tf.cast(tf.reshape(p, v.shape), v.dtype) for p, v in zip(pieces, variables)]
            with tf.autodiff.ForwardAccumulator(variables, tangents) as accumulator:
                block_rows, _ = rows_fn()
            return accumulator.jvp(block_rows, unconnected_gradients=tf.UnconnectedGradients.ZERO)

        blocks.append(tf.transpose(tf.vectorized_map(jvp, eye)))
    _, rho = rows_fn()  # rho from a plain pass
    return (blocks[0] if len(blocks) == 1 else tf.concat(blocks, axis=1)), rho


@_quiet_eager_pfor()  # a contextmanager decorates too: one block per call
def per_example_jacobian(rows_for: Callable, data, variables: Sequence[tf.Variable],
                         dense_layers: Sequence = ()
                         ) -> tuple[tf.Tensor, tf.Tensor]:
    """`(C, rho)` of `rows_for(data)`, each example differentiated on a batch of its own.

    Args:
        rows_for: `rows_for(part) -> (rows, rho)`, flat, example by example (as in
            `normal_equations`).
        data: a structure of tensors whose first axis is the example.
        variables: the variables (n scalars in all).
        dense_layers: the model's `Dense` layers, which compute one example in the form pfor
            vectorizes best (`dense_forms.single_example_forms`).

    Returns:
        `(C, rho)` as `jacobian` returns them, rows in the same order as `rows_for(data)`.
    """
    sizes = _sizes(variables)

    def one_example(example):
        single = tf.nest.map_structure(lambda t: t[None], example)
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            rows, rho = rows_for(single)
        if rows.shape.num_elements() == 1:  # one row: its gradient, without a nested pfor
            parts = tape.gradient(rows, variables,
                                  unconnected_gradients=tf.UnconnectedGradients.ZERO)
        else:
            parts = tape.jacobian(rows, variables, experimental_use_pfor=True,
                                  unconnected_gradients=tf.UnconnectedGradients.ZERO)
        k = tf.size(rows)
        return _as_matrix(parts, sizes, k, rows.dtype), rho

    with dense_forms.single_example_forms(dense_layers):
        c, rho = tf.vectorized_map(one_example, data)
    return tf.reshape(c, [-1, sum(sizes)]), tf.reshape(rho, [-1])


def _products(c, rho):
    """`(CᵀC, Cᵀρ)` of one chunk, in its dtype."""
    return tf.matmul(c, c, transpose_a=True), tf.linalg.matvec(c, rho, transpose_a=True)


def normal_equations(rows_for: Callable, data, num_examples, chunk: int,
                     variables: Sequence[tf.Variable], mode: str, solve_dtype: tf.DType,
                     allow_under: bool = True, layerwise_rows: int | None = None,
                     single_chunk: bool = False, dense_layers: Sequence = (),
                     hooked_layers: Sequence = ()):
    """The linearized least-squares problem of a batch, accumulated over chunks of examples.

    Args:
        rows_for: `rows_for(data_chunk) -> (rows, rho)` for a slice of `data` (a structure of
            tensors whose first axis is the example).
        data: the batch: the model's inputs, labels and per-element weights.
        num_examples: the batch size (a scalar tensor).
        chunk: the most examples per chunk (a Python int). A batch up to this size is one
            chunk; a larger one is cut into chunks of this size (`chunks.ExampleChunks`: the
            last one overlaps the one before, its repeated examples weighted zero).
        variables: the trained variables.
        mode: "forward", "reverse" or "per_example".
        solve_dtype: the dtype of the results.
        allow_under: False: always the overdetermined form (`M = CᵀC`), as for a slice of
            a batch split over replicas.
        layerwise_rows: the rows of one example, for a model whose layers keep the examples
            on the first axis (`layerwise_jacobian.applies_to`): "per_example" mode then takes
            the Jacobian in closed form where that is exact. None: pfor.
        dense_layers: the model's `Dense` layers (`dense_forms.dense_layers`): the closed
            form records them, and pfor computes them in its own form.
        hooked_layers: the model's layers with an `example_jacobian` hook
            (`layerwise_jacobian.hook_layers`), whose part the closed form takes from it.
        single_chunk: True when the caller knows that the batch holds at most `chunk`
            examples (`fit` says how large its batches get): the batch is then linearized
            as a whole, without the loop over chunks. The result is the same (bit for bit),
            without the loop's gathers and dynamic shapes, which a small step pays for in
            tracing and in every step (docs/guides/levenberg_marquardt.md, "Jacobians, chunk by
            chunk"). A larger batch is still linearized exactly, in one piece (its memory is
            then that of its whole Jacobian).

    Returns:
        `(M, g, diag, rho, under)`, all in `solve_dtype` but `under` (a bool tensor):

        - overdetermined (rows m ≥ n, or more than one chunk): `M = CᵀC` (n × n),
          `rho` zeros;
        - underdetermined (m < n, one chunk): `M` is C with zero rows appended to n × n,
          `rho` the rows' rho with zeros appended to n (the m × m system lives in it);

        `g = Cᵀrho` and `diag` the diagonal of CᵀC in both cases.
    """
    n = sum(_sizes(variables))
    zeros, zeros_n = tf.zeros([n, n], solve_dtype), tf.zeros([n], solve_dtype)

    def linearize_chunk(rows_fn, part, c_n, rho_n, one_chunk):
        """`(CᵀC, Cᵀρ)` of one chunk in `solve_dtype`, `(c_n, rho_n)` replaced by the chunk's
        C and ρ padded to n when it is the batch's only chunk and has fewer rows than n, and
        the chunk's rows."""
        if mode == "per_example":
            closed = layerwise_jacobian(rows_fn, part, variables, layerwise_rows, dense_layers,
                                        hooked_layers)
            c, rho = closed or per_example_jacobian(rows_fn, part, variables, dense_layers)
        else:
            c, rho = jacobian(lambda: rows_fn(part), variables, mode)
        rho = tf.reshape(rho, [-1])
        # The products in the model's dtype (float32 halves their cost), summed in
        # `solve_dtype`.
        products = _products(c, rho)
        # A derivative that overflowed (inf/inf in float32, far out on an exponential) shows
        # on JᵀJ's diagonal; it then counts as zero, the sensitivity it tends to, instead of
        # poisoning JᵀJ and every step after. The check costs an n-vector; the clean-up, a
        # pass over the chunk's Jacobian, runs only then.
        cc, crho = tf.cond(
            tf.reduce_all(tf.math.is_finite(tf.linalg.diag_part(products[0]))),
            lambda: products,
            lambda: _products(tf.where(tf.math.is_finite(c), c, tf.zeros_like(c)), rho))
        cc, crho = tf.cast(cc, solve_dtype), tf.cast(crho, solve_dtype)
        rows = tf.shape(c)[0]
        # Keeps C itself when the batch is one chunk with fewer rows than parameters; the
        # max() keeps the padding valid in the branch XLA compiles but does not take.
        fill = tf.maximum(n - rows, 0)

        def keep_c():
            padded_c = tf.pad(tf.cast(c, solve_dtype), [[0, fill], [0, 0]])[:n]
            padded_rho = tf.pad(tf.cast(rho, solve_dtype), [[0, fill]])[:n]
            return tf.ensure_shape(padded_c, [n, n]), tf.ensure_shape(padded_rho, [n])

        c_n, rho_n = tf.cond(one_chunk & (rows < n), keep_c, lambda: (c_n, rho_n))
        return cc, crho, c_n, rho_n, rows

    if single_chunk:
        # The batch's tensors come from the graph outside the step's branches; their copies
        # here are what a gathered chunk would be (the closed-form Jacobian pairs the
        # layers' inputs of this graph).
        whole = tf.nest.map_structure(tf.identity, data)
        one_chunk = tf.constant(True)
        a, g, c_n, rho_n, rows = linearize_chunk(rows_for, whole, zeros, zeros_n, one_chunk)
    else:
        chunks = lm_chunks.ExampleChunks(data, num_examples, chunk)
        one_chunk = chunks.count == 1
        rows_of_kept = lm_chunks.kept_rows(rows_for)  # an example an earlier chunk counted: 0

        def body(i, a, g, c_n, rho_n, m):
            cc, crho, c_n, rho_n, rows = linearize_chunk(rows_of_kept, chunks.part(i), c_n,
                                                         rho_n, one_chunk)
            return i + 1, a + cc, g + crho, c_n, rho_n, rows

        start = (0, zeros, zeros_n, zeros, zeros_n, 0)
        _, a, g, c_n, rho_n, rows = tf.while_loop(lambda i, *_: i < chunks.count, body, start)
    under = one_chunk & (rows < n) & allow_under
    matrix = tf.where(under, c_n, a)
    return matrix, g, tf.linalg.diag_part(a), tf.where(under, rho_n, tf.zeros_like(rho_n)), under

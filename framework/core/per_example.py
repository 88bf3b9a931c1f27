"""Whether the layers are traced for one example at a time, vectorized over the examples.

Levenberg–Marquardt's per-example Jacobian differentiates each example on a batch of its own
and vectorizes that over the examples (`tf.vectorized_map`, that is pfor). pfor turns the
gradient of a matmul into a batched matmul of one tiny matrix per example, whose per-matrix
overhead dominates for small layers; a layer may then compute the same values in a form that
vectorizes into plain elementwise ops (`layers.Dense` does). Outside such a block (`fit`'s
own forward pass, `predict` on a single row, `model.flops()`) nothing changes.

Example:

    >>> from graphfit.core import per_example
    >>> with per_example.single_examples():
    ...     inside = per_example.active()
    >>> inside, per_example.active()
    (True, False)
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from graphfit.core.context_stack import ContextStack

__all__ = ["single_examples", "active"]

_blocks: ContextStack[bool] = ContextStack()


@contextlib.contextmanager
def single_examples() -> Iterator[None]:
    """Marks the layers traced inside as running on one example, vectorized by pfor."""
    with _blocks.push(True):
        yield


def active() -> bool:
    """Whether the layers are being traced inside `single_examples()`."""
    return bool(_blocks)

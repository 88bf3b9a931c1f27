"""`InputSpec`: the ranks and axis sizes a layer accepts, checked on every call."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import tensorflow as tf

if TYPE_CHECKING:
    from graphfit.core.layer import Layer

from graphfit.core.shapes import shape_text

__all__ = ["InputSpec"]


@dataclasses.dataclass
class InputSpec:
    """What a layer accepts: a rank (exact or minimum) and fixed sizes of some axes.

    Args:
        ndim: the exact rank, batch axis included.
        min_ndim: the smallest rank accepted.
        axes: {axis: size} sizes the layer was built for (usually {-1: features}).
        hint: a sentence telling the user how to fix a wrong rank.

    Example:

        >>> import tensorflow as tf, graphfit as gf
        >>> class Pairwise(gf.Layer):
        ...     def __init__(self, **kwargs):
        ...         super().__init__(**kwargs)
        ...         self.input_spec = gf.InputSpec(ndim=3, hint="Give (batch, items, features).")
        ...     def call(self, x, training=False):
        ...         return tf.matmul(x, x, transpose_b=True)
        >>> Pairwise(name="pairs")(tf.ones((2, 4)))
        Traceback (most recent call last):
        ...
        ValueError: Layer 'pairs' (Pairwise) expects inputs of rank 3 (the batch axis included); ...
    """

    ndim: int | None = None
    min_ndim: int | None = None
    axes: dict[int, int] | None = None
    hint: str = ""

    def check(self, layer: "Layer", shape: tf.TensorShape) -> None:
        rank = shape.rank
        if rank is None:
            return
        expected = None
        if self.ndim is not None and rank != self.ndim:
            expected = f"rank {self.ndim}"
        elif self.min_ndim is not None and rank < self.min_ndim:
            expected = f"rank {self.min_ndim} or more"
        if expected:
            raise ValueError(
                f"Layer {layer.name!r} ({type(layer).__name__}) expects inputs of {expected} "
                f"(the batch axis included); received inputs of shape {shape_text(shape)}, "
                f"rank {rank}. {self.hint}".rstrip()
            )
        for axis, size in (self.axes or {}).items():
            got = shape[axis] if -rank <= axis < rank else None
            if got is not None and got != size:
                raise ValueError(
                    f"Layer {layer.name!r} ({type(layer).__name__}) was built for inputs with "
                    f"{size} values on axis {axis}, but received inputs of shape "
                    f"{shape_text(shape)}. Feed data of the shape it was built for, or "
                    f"create a new layer for the new shape."
                )

"""`gf.Input` and `InputLayer`: where a functional model starts (Keras's names and arguments)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from graphfit.core.dtype_policy import POLICY_NAMES, DTypePolicy, dtype_policy
from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.core.symbolic import CallNode, History, SymbolicTensor, call_nodes
from graphfit.core.validation import positive_int

__all__ = ["Input", "InputLayer"]


def _batch_shape(shape, batch_size, batch_shape) -> tuple:
    if (shape is None) == (batch_shape is None):
        raise ValueError(
            "Input needs the shape of one sample, e.g. gf.Input(shape=(784,)), or batch_shape="
            f"(batch, ...), not both. Received: shape={shape!r}, batch_shape={batch_shape!r}"
        )
    if batch_shape is not None:
        if batch_size is not None:
            raise ValueError("Input takes batch_size or batch_shape, not both. Received: "
                             f"batch_size={batch_size!r}, batch_shape={batch_shape!r}")
        dims = batch_shape
    else:
        positive_int("batch_size", batch_size, allow_none=True)
        dims = (batch_size, *(shape if isinstance(shape, (list, tuple)) else (shape,)))
    dims = tuple(dims)
    if not all(d is None or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)
               for d in dims):
        raise ValueError(
            f"Input's shape must hold non-negative integers or None (an axis of any size). "
            f"Received: shape={shape!r}, batch_shape={batch_shape!r}"
        )
    return dims


def _dtypes(dtype) -> tuple:
    """(the layer's dtype policy or None, the data's dtype) of Input's `dtype`: a dtype
    (float32 by default, int32 for ids) or a dtype policy ("mixed_bfloat16": float32 data)."""
    if isinstance(dtype, DTypePolicy) or dtype in POLICY_NAMES:
        policy = dtype_policy(dtype, "dtype")
        return policy, policy.variable_dtype
    try:
        data_dtype = tf.as_dtype(dtype or "float32")
    except TypeError:
        raise ValueError(f"Input's dtype must be a TensorFlow dtype such as 'float32' or "
                         f"'int32'. Received: dtype={dtype!r}") from None
    return (data_dtype.name if data_dtype.name in POLICY_NAMES else None), data_dtype


@register_layer
class InputLayer(Layer):
    """The layer behind `gf.Input`: it passes its input on unchanged.

    Args:
        shape: the shape of one sample, without the batch axis.
        batch_size: a fixed batch size, or None.
        dtype: the data's dtype ("float32" by default; "int32" for ids).
        batch_shape: the shape with the batch axis, instead of shape and batch_size.
        name: the input's name: the key of its data in a dict of inputs.

    Example:

        >>> import graphfit as gf
        >>> layer = gf.InputLayer(shape=(3,), dtype="int32", name="ids")
        >>> layer.output
        <SymbolicTensor shape=(None, 3) dtype=int32 from layer 'ids'>
    """

    keeps_example_axis = True
    xla_friendly_on_cpu = True

    def __init__(self, shape=None, batch_size=None, dtype=None, batch_shape=None,
                 name: str | None = None, **kwargs):
        batch_shape = _batch_shape(shape, batch_size, batch_shape)
        trainable = kwargs.pop("trainable", True)
        if kwargs:
            raise TypeError(f"InputLayer got unexpected arguments {sorted(kwargs)}.")
        policy, data_dtype = _dtypes(dtype)
        super().__init__(name=name or None, dtype=policy, trainable=trainable)
        self.batch_shape = batch_shape
        self.data_dtype = data_dtype
        self.built = True
        self._output_shape = (None, *batch_shape[1:])
        tensor = SymbolicTensor(batch_shape, data_dtype, History(self, 0, 0), name=self.name)
        call_nodes(self).append(CallNode(self, [], tensor))

    @property
    def input(self) -> SymbolicTensor:
        return self.output

    def call(self, inputs, training: bool = False):
        return inputs

    def get_config(self) -> dict[str, Any]:
        mixed = self.data_dtype.is_floating and self.dtype_policy.is_mixed
        return {**self._base_config(), "batch_shape": list(self.batch_shape),
                "dtype": self.dtype_policy.name if mixed else self.data_dtype.name,
                "name": self.name}


def Input(shape=None, batch_size=None, dtype=None, sparse=None, ragged=None, batch_shape=None,
          name: str | None = None, tensor=None, optional: bool = False) -> SymbolicTensor:
    """A symbolic input of a functional model (Keras's `keras.Input`).

    Args:
        shape: the shape of one sample, without the batch axis: (784,), (None,) for sequences
            of any length, (28, 28, 1) for images.
        batch_size: a fixed batch size, or None (any).
        dtype: the data's dtype: "float32" by default, "int32" for ids (Embedding).
        sparse, ragged, tensor, optional: Keras's; refused (see the ValueError).
        batch_shape: the shape with the batch axis, instead of shape and batch_size.
        name: the input's name, the key of its data when inputs are passed as a dict.

    Returns:
        A `SymbolicTensor` to call layers on and to pass to `gf.Model(inputs, outputs)`.

    Raises:
        ValueError: for a bad shape or dtype, or a Keras argument graphfit does not support.

    Example:

        >>> import graphfit as gf
        >>> from graphfit import layers
        >>> inputs = gf.Input(shape=(4,), name="features")
        >>> outputs = layers.Dense(2, name="scores")(layers.Dense(8, name="hidden")(inputs))
        >>> model = gf.Model(inputs, outputs)
        >>> [layer.name for layer in model.layers]
        ['features', 'hidden', 'scores']
        >>> model.get_layer("hidden").output.shape
        TensorShape([None, 8])
    """
    refused = {"sparse": sparse, "ragged": ragged, "tensor": tensor, "optional": optional}
    given = [key for key, value in refused.items() if value not in (None, False)]
    if given:
        raise ValueError(
            f"gf.Input does not support {', '.join(given)}: graphfit's inputs are dense "
            f"tensors that every sample provides. Feed dense arrays (pad sequences to one "
            f"length), or subclass gf.Model for inputs of another kind."
        )
    return InputLayer(shape=shape, batch_size=batch_size, dtype=dtype, batch_shape=batch_shape,
                      name=name).output

"""Argument checks shared by the rank-generic spatial layers (pooling, padding, cropping,
up-sampling, spatial dropout): one wording for every rank, each error naming the layer.

`rank` is the number of spatial axes: 1 for sequences `(batch, steps, channels)`, 2 for images
`(batch, height, width, channels)`, 3 for volumes `(batch, depth, height, width, channels)`.
"""

from __future__ import annotations

from graphfit.core.layer import InputSpec
from graphfit.core.validation import is_integer

__all__ = ["AXES", "channels_last_only", "spatial_input_spec", "boolean", "side_pairs",
           "public_class"]

# The names of the spatial axes, by rank, for shapes in messages and docstrings.
AXES = {1: ("steps",), 2: ("height", "width"), 3: ("depth", "height", "width")}
_FORMATS = {1: "NWC", 2: "NHWC", 3: "NDHWC"}  # TensorFlow's names of the layouts


def _shape_text(rank: int, channels_first: bool = False) -> str:
    names = ("channels", *AXES[rank]) if channels_first else (*AXES[rank], "channels")
    return "(batch, " + ", ".join(names) + ")"


def channels_last_only(data_format, layer: str, rank: int) -> str:
    """'channels_last' for None or 'channels_last'; a ValueError naming `layer` for
    'channels_first' (with the transpose that converts the inputs) or anything else."""
    if data_format is None or data_format == "channels_last":
        return "channels_last"
    if data_format == "channels_first":
        permutation = (0, *range(2, rank + 2), 1)
        raise ValueError(
            f"{layer} supports only data_format='channels_last', inputs shaped "
            f"{_shape_text(rank)}: graphfit's spatial layers are channels-last throughout, as "
            f"TensorFlow's CPU kernels need ({_FORMATS[rank]}). Transpose inputs shaped "
            f"{_shape_text(rank, True)} with tf.transpose(x, {permutation}) and pass "
            f"data_format='channels_last' or None. "
            f"Received: data_format='channels_first'"
        )
    raise ValueError(f"{layer}: data_format must be 'channels_last' or None. "
                     f"Received: data_format={data_format!r}")


def spatial_input_spec(rank: int) -> InputSpec:
    """An `InputSpec` of rank `rank + 2` whose rank error shows the expected shape."""
    if rank == 2:  # the image spec also suggests the Reshape that fixes flat inputs
        from graphfit.layers.convolutional import ImageInputSpec

        return ImageInputSpec()
    return InputSpec(ndim=rank + 2, hint=f"It needs inputs shaped {_shape_text(rank)}.")


def boolean(value, argument: str, layer: str) -> bool:
    """`value` when it is True or False; else a ValueError naming `layer` and `argument`."""
    if not isinstance(value, bool):
        raise ValueError(f"{layer}: {argument} must be True or False. "
                         f"Received: {argument}={value!r}")
    return value


def _non_negative(value) -> bool:
    return is_integer(value) and value >= 0


def side_pairs(value, rank: int, argument: str, layer: str) -> tuple[tuple[int, int], ...]:
    """Keras's padding/cropping forms as one (before, after) pair per spatial axis.

    Accepted, as in Keras's ZeroPadding and Cropping layers: an int (the same on every side);
    for rank 1 a pair (before, after); for rank 2 and 3 a tuple of `rank` ints (symmetric per
    axis) or of `rank` pairs.
    """
    if _non_negative(value):
        return ((int(value), int(value)),) * rank
    try:
        items = tuple(value)
    except TypeError:
        items = ()
    if rank == 1 and len(items) == 2 and all(_non_negative(v) for v in items):
        return ((int(items[0]), int(items[1])),)
    if rank > 1 and len(items) == rank:
        if all(_non_negative(v) for v in items):
            return tuple((int(v), int(v)) for v in items)
        pairs = [tuple(v) if isinstance(v, (tuple, list)) else () for v in items]
        if all(len(p) == 2 and all(_non_negative(s) for s in p) for p in pairs):
            return tuple((int(a), int(b)) for a, b in pairs)
    forms = ("a non-negative integer or a pair (before, after)" if rank == 1 else
             f"a non-negative integer, a tuple of {rank} non-negative integers (one per "
             f"spatial axis) or a tuple of {rank} pairs ((before, after) per axis)")
    raise ValueError(f"{layer}: {argument} must be {forms}. Received: {argument}={value!r}")


def public_class(base: type, name: str, rank: int, module: str, doc: str,
                 **attributes) -> type:
    """The registered public class `name` of `module`: `base` at `rank` with its own
    docstring (`{name}` in it is filled in)."""
    from graphfit.core.registry import register_layer

    cls = type(name, (base,), {"rank": rank, "__doc__": doc.replace("{name}", name),
                               "__module__": module, "__qualname__": name,
                               **attributes})
    return register_layer(cls)

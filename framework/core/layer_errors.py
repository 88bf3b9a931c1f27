"""The errors a layer raises with its name in front: a failed `build`, and a `call` that
mixed float32 variables with the compute dtype of a mixed policy."""

from __future__ import annotations

import tensorflow as tf

from graphfit.core.shapes import shape_text

__all__ = ["build_error", "mixed_dtype_error"]


def mixed_dtype_error(layer, error: Exception) -> Exception:
    """`error` from a layer's `call` under a mixed policy, when it comes from mixing a
    float32 variable with compute-dtype tensors: a TypeError saying how to fix it. Any
    other error comes back unchanged."""
    policy = layer.dtype_policy
    text = str(error)
    if (not policy.is_mixed or getattr(error, "_graphfit_names_layer", False)
            or policy.compute_dtype.name not in text):
        return error
    wrapped = TypeError(
        f"Layer {layer.name!r} ({type(layer).__name__}) computes in "
        f"{policy.compute_dtype.name} under the dtype policy {policy.name!r}, whose variables "
        f"stay in {policy.variable_dtype.name}, and its call mixed the two. Read variables in "
        f"call through self.compute_value(variable) (cast other float32 tensors likewise), "
        f"or give the layer dtype='float32' to keep it in float32. TensorFlow said: {text}")
    wrapped._graphfit_names_layer = True
    return wrapped


def build_error(layer, shapes, error: Exception) -> Exception:
    """`error` with the failing layer's name and type in front, as the same exception type
    where that type can be made from a message; else `error` itself with a note."""
    if getattr(error, "_graphfit_names_layer", False):
        return error  # an inner layer already said which one
    where = (f"Layer {layer.name!r} ({type(layer).__name__}) failed to build for inputs of "
             f"shape {_shape_text(shapes)}: ")
    if any(tf.TensorShape(s).rank is None for s in tf.nest.flatten(shapes)):
        where += ("its input has an unknown shape, as the output of tf.numpy_function or "
                  "tf.py_function has; give it one with tf.ensure_shape(output, shape) or "
                  "output.set_shape(shape) in the layer that makes it. ")
    wrapped = None
    try:
        candidate = type(error)(where + str(error))
        if where in str(candidate):  # KeyError quotes its message; the text is there
            wrapped = candidate
    except Exception:  # an exception type whose constructor takes other arguments
        wrapped = None
    if wrapped is None:
        error.add_note(where.rstrip(": "))
        wrapped = error
    try:
        wrapped._graphfit_names_layer = True
    except AttributeError:
        pass
    return wrapped


def _shape_text(shapes) -> str:
    texts = tf.nest.map_structure(
        lambda s: "<unknown rank>" if tf.TensorShape(s).rank is None else shape_text(s), shapes,
        expand_composites=False)
    return texts if isinstance(texts, str) else str(texts).replace("'", "")

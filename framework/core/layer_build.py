"""`LayerBuild`: a layer's `build(input_shape)` runs once, whether the first call or the user
calls it, and marks the layer built.

Keras users build layers by hand (`Dense(3).build((None, 4))`) and expect the first call to
reuse those variables. Every subclass's `build` is therefore wrapped when the class is
defined: the wrapper takes a tuple, a list or a `TensorShape` (or a list or dict of them for
layers with several inputs), hands `build` `TensorShape`s as a call would, creates the
variables outside any trace, and marks the layer built; a second `build` does nothing.
Models build by tracing a forward pass and opt out with `builds_by_tracing`.
"""

from __future__ import annotations

import functools

import tensorflow as tf

from graphfit.core.layer_errors import build_error

__all__ = ["LayerBuild", "as_input_shapes", "built_once", "unbatched_shape"]


def as_input_shapes(input_shape):
    """A shape as `build` receives it from a call: a `TensorShape`, or a list (tuple, dict)
    of them for several inputs. (None, 4), [None, 4] and TensorShape([None, 4]) are one shape;
    [(None, 4), (None, 2)] is two."""
    if isinstance(input_shape, tf.TensorShape):
        return input_shape
    if isinstance(input_shape, dict):
        return {key: as_input_shapes(value) for key, value in input_shape.items()}
    if isinstance(input_shape, (list, tuple)) and any(
            isinstance(d, (list, tuple, dict, tf.TensorShape)) for d in input_shape):
        return type(input_shape)(as_input_shapes(s) for s in input_shape)
    try:
        return tf.TensorShape(input_shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"input_shape must be a tuple such as (None, 4), a TensorShape, or a list of them "
            f"for several inputs. Received: input_shape={input_shape!r}"
        ) from None


def unbatched_shape(shape) -> tuple:
    """(None, *dims[1:]) of a shape or tensor; () for a scalar or an unknown rank."""
    shape = tf.TensorShape(getattr(shape, "shape", shape))
    dims = shape.as_list() if shape.rank is not None else []
    return tuple([None] + dims[1:]) if dims else ()


def built_once(build):
    """`build` made to run once, from any shape form, outside any trace; marks the layer built."""

    @functools.wraps(build)
    def build_once(self, input_shape=None, *args, **kwargs):
        if self.built:
            return  # the variables exist: a hand-built layer keeps them at its first call
        shapes = as_input_shapes(input_shape)
        self.inherit_dtype_policy(self.dtype_policy)
        # Variables are created once, outside any trace, even when the first call is traced.
        with tf.init_scope():
            try:
                build(self, shapes, *args, **kwargs)
            except Exception as error:  # say which layer; keep the type and the cause
                wrapped = build_error(self, shapes, error)
                if wrapped is error:
                    raise
                raise wrapped from error
        self.record_build_shape(shapes)
        self.built = True

    build_once.runs_once = True
    return build_once


class LayerBuild:
    """Wraps each subclass's `build` so that it runs once and marks the layer built."""

    builds_by_tracing: bool = False
    """True for models: their `build` traces a forward pass, and the layers inside build."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        build = cls.__dict__.get("build")
        if build is not None and not cls.builds_by_tracing and not getattr(
                build, "runs_once", False):
            cls.build = built_once(build)

    def record_build_shape(self, shapes) -> None:
        """Remembers the input shape the layer was built for (batch axis None)."""
        self._build_input_shape = tf.nest.map_structure(unbatched_shape, shapes)

    def _build_from(self, inputs) -> None:
        shapes = tf.nest.map_structure(lambda t: t.shape, inputs)
        self.record_build_shape(shapes)
        with tf.init_scope():
            try:
                self.build(shapes)
            except Exception as error:  # a model's build, or a layer's that is not wrapped
                wrapped = build_error(self, shapes, error)
                if wrapped is error:
                    raise
                raise wrapped from error
        self.built = True

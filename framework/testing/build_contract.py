"""The part of the layer contract about `build(input_shape)` called by hand, as Keras users
call it: `Dense(3).build((None, 4))` marks the layer built, and its first call reuses those
variables (a Dense in a Sequential then counts 15 parameters, not 30)."""

from __future__ import annotations

import tensorflow as tf

__all__ = ["build_by_hand", "check_first_call_reuses"]


def _plain_shape(tensor) -> tuple:
    """(None, 4): the batch axis left open, the rest as plain Python ints."""
    return (None, *tf.TensorShape(tensor.shape).as_list()[1:])


def build_by_hand(layer, inputs) -> list[int]:
    """Calls `layer.build` with plain tuples (a list of them for a list of inputs), twice,
    and checks the layer is built and the second build made no variable.

    Returns:
        The ids of the layer's variables after the build.
    """
    shapes = tf.nest.map_structure(_plain_shape, inputs)
    name = type(layer).__name__
    layer.build(shapes)
    assert layer.built, f"{name}.build({shapes}) called by hand did not mark the layer built"
    built = [id(v) for v in layer.variables]
    layer.build(shapes)
    assert [id(v) for v in layer.variables] == built, (
        f"a second {name}.build({shapes}) made new variables")
    return built


def check_first_call_reuses(layer, built: list[int]) -> None:
    """The first call after `build_by_hand` kept the variables the build made."""
    assert [id(v) for v in layer.variables] == built, (
        f"{type(layer).__name__}'s first call after build(input_shape) made new variables "
        f"({len(layer.variables)} variables, {len(built)} after the build)")

"""Layer outputs by name: how Jacobians and gradient taps reach a node inside the model.

A model's forward pass is ordinary Python calling layers, so there is no graph node to look up
afterwards the way TF1's `graph.get_tensor_by_name` did. Instead, `Layer.__call__` offers every
output to the innermost `capture_outputs` block, which keeps those of the layers it asks for:

    with layer_outputs.capture_outputs(["hidden"]) as captured:
        y = model(x)
    hidden = captured["hidden"]        # the tensor the layer called "hidden" returned

The captured tensors belong to the same computation as `y`, so a `GradientTape` that recorded
the forward pass can differentiate them.

`transform_outputs` goes one step further for the layers it is given: each output passes
through a function before the rest of the model sees it (TensorBoard's activation gradient
taps put an identity there whose gradient records ∂loss/∂output on the optimizer's own
backward pass).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator

from graphfit.core import autograph_scope
from graphfit.core.context_stack import ContextStack

__all__ = ["CapturedOutputs", "capture_outputs", "offer", "transform_outputs"]


class CapturedOutputs(dict):
    """{layer name: output} of one `capture_outputs` block, plus how often each layer ran.

    A layer that is called more than once (a shared layer) has several outputs; the dict keeps
    the last and `calls[name]` counts them, so a caller can refuse the ambiguous case.
    """

    def __init__(self, names: Iterable[str]):
        super().__init__()
        self.names = frozenset(names)
        self.calls: dict[str, int] = {}


_captures: ContextStack[CapturedOutputs] = ContextStack()


@contextlib.contextmanager
def capture_outputs(names: Iterable[str]) -> Iterator[CapturedOutputs]:
    """Collects the outputs of the named layers called inside the block.

    Args:
        names: layer names (`layer.name`) whose outputs to keep.

    Yields:
        A `CapturedOutputs` dict, filled as the layers run.
    """
    with _captures.push(CapturedOutputs(names)) as captured:
        yield captured


def offer(layer_name: str, outputs: Any) -> None:
    """Called by `Layer.__call__` with each output; keeps it when a block asks for the name."""
    captured = _captures.top()
    if captured is not None and layer_name in captured.names:
        captured[layer_name] = outputs
        captured.calls[layer_name] = captured.calls.get(layer_name, 0) + 1


@contextlib.contextmanager
def transform_outputs(layers: Iterable[Any], fn: Callable[[Any, Any], Any]) -> Iterator[None]:
    """Inside the block, what each of `layers` returns is replaced by `fn(layer, outputs)`.

    The layer's own `call` is shadowed on the instance (never the class, so other instances
    and other threads' models are untouched) and restored on exit. The original `call` still
    goes through AutoGraph, and `Layer.__call__` offers the transformed outputs to
    `capture_outputs`, so what is captured is what the downstream layers consume.

    Args:
        layers: layer objects (each at most once).
        fn: `(layer, outputs) -> outputs` of the same structure, shapes and dtypes.
    """
    shadowed = []
    try:
        for layer in layers:
            if "call" in vars(layer):
                raise ValueError(f"layer {layer.name!r} is already being transformed")
            vars(layer)["call"] = _transformed_call(layer, type(layer).call, fn)
            shadowed.append(layer)
        yield
    finally:
        for layer in shadowed:
            del vars(layer)["call"]


def _transformed_call(layer, call, fn):
    def transformed(inputs, *args, **kwargs):
        bound = call.__get__(layer, type(layer))
        return fn(layer, autograph_scope.convert_user_code(bound)(inputs, *args, **kwargs))

    return transformed

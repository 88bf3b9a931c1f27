"""Layer outputs by name: how Jacobians, gradient taps and exports reach a node in the model.

A model's forward pass is ordinary Python calling layers, so there is no graph node to look up
afterwards the way TF1's `graph.get_tensor_by_name` did. Instead, while a pass runs inside
`capture_outputs`, the named layers' `call` is replaced on those instances
(`core.interception`) by one that also keeps what it returned:

    with layer_outputs.capture_outputs(model, ["hidden"]) as captured:
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
from graphfit.core.interception import replaced_method

__all__ = ["CapturedOutputs", "capture_outputs", "transform_outputs"]


class CapturedOutputs(dict):
    """{layer name: output} of one `capture_outputs` block, plus how often each layer ran.

    A layer that is called more than once (a shared layer) has several outputs; the dict keeps
    the last and `calls[name]` counts them, so a caller can refuse the ambiguous case.
    """

    def __init__(self, names: Iterable[str]):
        super().__init__()
        self.names = frozenset(names)
        self.calls: dict[str, int] = {}

    def keep(self, layer, outputs):
        self[layer.name] = outputs
        self.calls[layer.name] = self.calls.get(layer.name, 0) + 1
        return outputs


@contextlib.contextmanager
def capture_outputs(model, names: Iterable[str]) -> Iterator[CapturedOutputs]:
    """Collects the outputs of `model`'s layers called `names` that run inside the block.

    Args:
        model: the model (its layers, nested ones included, are searched by name).
        names: layer names (`layer.name`) whose outputs to keep.

    Yields:
        A `CapturedOutputs` dict, filled as the layers run.
    """
    captured = CapturedOutputs(names)
    layers = [layer for layer in model.flatten_layers(include_self=False)
              if layer.name in captured.names]
    with transform_outputs(layers, captured.keep):
        yield captured


@contextlib.contextmanager
def transform_outputs(layers: Iterable[Any], fn: Callable[[Any, Any], Any]) -> Iterator[None]:
    """Inside the block, what each of `layers` returns is replaced by `fn(layer, outputs)`.

    The layer's `call` is replaced on the instance (never the class, so other instances and
    other threads' models are untouched) and restored on exit; the original `call` still goes
    through AutoGraph.

    Args:
        layers: layer objects.
        fn: `(layer, outputs) -> outputs` of the same structure, shapes and dtypes.
    """
    with contextlib.ExitStack() as stack:
        for layer in layers:
            stack.enter_context(replaced_method(layer, "call", _transformed(layer, fn)))
        yield


def _transformed(layer, fn):
    def make(call):
        def transformed(inputs, *args, **kwargs):
            return fn(layer, autograph_scope.convert_user_code(call)(inputs, *args, **kwargs))

        return transformed

    return make

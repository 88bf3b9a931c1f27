"""What a model holds that XLA cannot compile, found before any step is traced.

`compile(jit_compile=...)` is resolved once, when the steps are built (`resolve_jit_compile`):
from each layer's declared `Layer.supports_jit`, then from the ops of the model's traced
training-mode forward pass, each looked up in TensorFlow's kernel registry for an XLA kernel
on this machine's device. `jit_compile=True` on a model that cannot compile is refused there,
naming the layer; "auto" runs such a model without XLA, saying once why. What the forward pass
does not show (a metric function, an overridden `train_step`) is left to XLA, whose own error
then surfaces.

TensorFlow has no public query of the XLA kernel registry: `kernels.get_registered_kernels_for_op`
(`tensorflow.python.framework.kernels`) is the private API this module uses for it; to see the
ops of the functions the forward pass calls, it also reads the traced graph's `_functions`.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
import weakref

import tensorflow as tf
from tensorflow.python.framework import kernels

from graphfit.core import update_hooks

__all__ = ["PythonOp", "find_python_op", "op_without_xla_kernel", "resolve_jit_compile"]

# Ops that call back into Python: a SavedModel cannot hold them, and XLA cannot compile them.
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

# Graph inputs and outputs, which XLA takes as parameters rather than kernels.
_GRAPH_BOUNDARY = frozenset({"Placeholder", "_Arg", "_Retval", "NoOp"})

_TOLD_NO_XLA: "weakref.WeakSet" = weakref.WeakSet()


@dataclasses.dataclass(frozen=True)
class PythonOp:
    """An op of a traced graph and the layer whose name scope holds it."""

    op_type: str
    op_name: str
    layer: str


def _graph_ops(graph):
    """(type, name) of the ops of `graph` and of every function it calls."""
    for op in graph.get_operations():
        yield op.type, op.name
    for function in list((getattr(graph, "_functions", {}) or {}).values()):
        definition = getattr(function, "cached_definition", None) or getattr(
            function, "definition", None)
        for node in getattr(definition, "node_def", []):
            yield node.op, node.name


def _layer_of(op_name: str, model) -> str:
    """The innermost layer whose name scope holds the op, as "layer 'name' (Type)"."""
    scopes = op_name.split("/")
    found = None
    for layer in model.flatten_layers():
        scope = getattr(layer, "_scope_name", None)
        if scope in scopes and layer is not model:
            depth = scopes.index(scope)
            if found is None or depth > found[0]:
                found = (depth, layer)
    if found is None:
        return f"model {model.name!r} ({type(model).__name__})"
    return f"layer {found[1].name!r} ({type(found[1]).__name__})"


def find_python_op(graph, model) -> PythonOp | None:
    """The first op of `graph` that runs Python (`tf.numpy_function`, `tf.py_function`)."""
    for op_type, op_name in _graph_ops(graph):
        if op_type in PYTHON_OPS:
            return PythonOp(op_type, op_name, _layer_of(op_name, model))
    return None


@functools.lru_cache(maxsize=None)
def _has_xla_kernel(op_type: str, device: str) -> bool:
    registered = kernels.get_registered_kernels_for_op(op_type).kernel
    return any(kernel.device_type == device for kernel in registered)


def op_without_xla_kernel(graph, model, device: str = "XLA_CPU_JIT") -> PythonOp | None:
    """The first op of `graph` that XLA has no kernel for on `device`, or None."""
    for op_type, op_name in _graph_ops(graph):
        if op_type not in _GRAPH_BOUNDARY and not _has_xla_kernel(op_type, device):
            return PythonOp(op_type, op_name, _layer_of(op_name, model))
    return None


def _forward_graph(model):
    def forward(x):
        with update_hooks.collect_updates():  # listed and dropped: nothing runs
            return model(x, training=True)

    return tf.function(forward, autograph=False).get_concrete_function(
        model.built_input_spec).graph


def _xla_problem(model, on_gpu: bool) -> str | None:
    """Why `model` cannot be XLA-compiled, or None."""
    unsupported = [f"{l.name!r} ({type(l).__name__})" for l in model.flatten_layers()
                   if not l.supports_jit]
    if unsupported:
        return (f"layers {', '.join(unsupported)} cannot be XLA-compiled "
                f"(supports_jit=False)")
    device = "XLA_GPU_JIT" if on_gpu else "XLA_CPU_JIT"
    op = op_without_xla_kernel(_forward_graph(model), model, device)
    if op is not None:
        return (f"{op.layer} runs a {op.op_type} op ({op.op_name!r}), which XLA cannot "
                f"compile (it has no kernel for it)")
    return None


def resolve_jit_compile(setting, model, optimizer=None, varying_shapes: bool = False) -> bool:
    """Whether the steps of `model` are compiled with XLA, decided once, before tracing.

    Args:
        setting: `compile`'s jit_compile: True, False or "auto".
        model: the built model.
        optimizer: the compiled optimizer, or None.
        varying_shapes: the training data's batches change shape beyond their row count
            (graph batches): "auto" then runs without XLA, which would compile every batch.

    "auto" compiles with XLA when the model can be compiled and, on a machine without a GPU,
    when every layer and the optimizer say XLA makes them no slower there
    (`xla_friendly_on_cpu`: convolutions, pooling and Levenberg–Marquardt's step do not;
    docs/benchmarks/performance.md has the measurements).

    Raises:
        ValueError: jit_compile=True on a model that cannot be compiled, naming the layer.
    """
    if setting is False:
        return False
    on_gpu = bool(tf.config.list_physical_devices("GPU"))
    problem = _xla_problem(model, on_gpu)
    if problem is not None:
        if setting is True:
            raise ValueError(
                f"jit_compile=True, but in model {model.name!r} {problem}. Compile with "
                f"jit_compile='auto' or False, or replace the layer's Python code by "
                f"TensorFlow ops; a layer that cannot be compiled should set "
                f"supports_jit = False.")
        if model not in _TOLD_NO_XLA:  # once per model: fit compiles again every call
            _TOLD_NO_XLA.add(model)
            warnings.warn(f"jit_compile='auto': model {model.name!r} runs without XLA, because "
                          f"{problem}.", stacklevel=5)
        return False
    if setting is True:
        return True
    if varying_shapes:
        return False
    if on_gpu:
        return True
    friendly = all(layer.xla_friendly_on_cpu for layer in model.flatten_layers())
    return friendly and (optimizer is None or optimizer.xla_friendly_on_cpu)

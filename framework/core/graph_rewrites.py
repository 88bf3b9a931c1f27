"""Grappler settings for one model's compiled functions, instead of the process-wide ones.

TensorFlow optimizes a traced function with Grappler when it first runs it (and again for each
new set of call options). The defaults suit large ops: two rounds of every optimizer, the
memory optimizer's swapping heuristics, the remapper's fused kernels. For a step made of a
thousand small ops (Levenberg–Marquardt's on a small network) the second round and the memory
optimizer lengthen the first call and leave the graph nearly as it was, so an optimizer may
ask for fewer (`BaseOptimizer.graph_rewrites`; docs/guides/levenberg_marquardt.md has the
measurements).

`tf.config.optimizer.set_experimental_options` changes every function of the process. These
settings travel instead with the calls of one model's loops, as the call's `config_proto`
(TensorFlow's per-thread function call options), so they apply to the functions that asked
for them and nothing else. A function called under the same settings every time is
optimized once; TensorFlow would optimize it again for other settings.

TensorFlow has no public way to set them per call: the eager context's
`function_call_options` (`tensorflow.python.eager.context`) is the one private API this module
uses.

Example:

    >>> import tensorflow as tf
    >>> double = tf.function(lambda x: 2 * x)
    >>> with graph_rewrites({"meta_optimizer_iterations": "ONE"}):
    ...     int(double(tf.constant(3)))
    6
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Mapping

from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.eager import context

from graphfit.core.registry import did_you_mean

__all__ = ["graph_rewrites", "check_rewrites"]

_RewriterConfig = rewriter_config_pb2.RewriterConfig

# The RewriterConfig fields graphfit sets, and how a setting's text reads as the field's value.
_TOGGLES = ("arithmetic_optimization", "constant_folding", "dependency_optimization",
            "layout_optimizer", "loop_optimization", "remapping", "shape_optimization")
_ENUMS = {"meta_optimizer_iterations": _RewriterConfig.NumIterationsType,
          "memory_optimization": _RewriterConfig.MemOptType}


def check_rewrites(settings: Mapping[str, object]) -> dict[str, int]:
    """The settings as RewriterConfig field values.

    Args:
        settings: `{field: value}`: a toggle (`"remapping"`, `"constant_folding"`, ...) takes
            True or False; `"meta_optimizer_iterations"` takes "ONE" or "TWO",
            `"memory_optimization"` a `RewriterConfig.MemOptType` name ("NO_MEM_OPT", ...).

    Raises:
        ValueError: an unknown field or value, naming it and the valid ones.
    """
    if not isinstance(settings, Mapping):
        raise ValueError(f"Grappler settings are a mapping {{setting: value}}, such as "
                         f"{{'meta_optimizer_iterations': 'ONE'}}. Received: {settings!r}")
    values = {}
    for field, value in settings.items():
        if field in _TOGGLES:
            if not isinstance(value, bool):
                raise ValueError(f"Grappler setting {field} takes True or False. "
                                 f"Received: {field}={value!r}")
            values[field] = _RewriterConfig.ON if value else _RewriterConfig.OFF
        elif field in _ENUMS:
            names = _ENUMS[field].keys()
            if value not in names:
                raise ValueError(f"Grappler setting {field} takes one of {', '.join(names)}. "
                                 f"Received: {field}={value!r}")
            values[field] = _ENUMS[field].Value(value)
        else:
            known = sorted((*_TOGGLES, *_ENUMS))
            raise ValueError(f"Unknown Grappler setting {field!r};"
                             f"{did_you_mean(str(field), known, ' did you mean {!r}?')} "
                             f"graphfit sets {', '.join(known)}")
    return values


def _call_options(base: context.FunctionCallOptions, values: dict[str, int],
                  executor_type: str | None = None) -> context.FunctionCallOptions:
    config = config_pb2.ConfigProto()
    config.ParseFromString(base.config_proto_serialized)
    rewrites = config.graph_options.rewrite_options
    for field, value in values.items():
        setattr(rewrites, field, value)
    return context.FunctionCallOptions(
        executor_type=base.executor_type if executor_type is None else executor_type,
        config_proto=config)


@contextlib.contextmanager
def graph_rewrites(settings: Mapping[str, object] | None,
                   executor_type: str | None = None) -> Iterator[None]:
    """Runs the functions called inside with these Grappler settings (this thread only).

    Args:
        settings: as in `check_rewrites`; None or empty: TensorFlow's, unchanged.
        executor_type: None (the caller's), or TensorFlow's executor for the calls:
            "SINGLE_THREADED_EXECUTOR" runs a small function's kernels inline in the calling
            thread (no hand-off to the inter-op threads; no control flow ops), about 15 %
            less CPU per call of a function of a hundred small ops.
    """
    if not settings and executor_type is None:
        yield
        return
    eager = context.context()
    previous = eager.function_call_options
    eager.function_call_options = _call_options(previous, check_rewrites(settings or {}),
                                                executor_type)
    try:
        yield
    finally:
        eager.function_call_options = previous

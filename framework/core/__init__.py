"""The core: `Layer`, `InputSpec`, update hooks (UPDATE_OPS), layer outputs, constructor
config, naming, the registry and seeding, and the one home of each shared helper: argument
validators (`validation`), the thread-local `ContextStack`, "did you mean" (`did_you_mean`),
`count_parameters` and `shape_text`. Nothing here imports the rest of graphfit."""

from graphfit.core.context_stack import ContextStack
from graphfit.core.dtype_policy import DTypePolicy, dtype_policy
from graphfit.core.input_spec import InputSpec
from graphfit.core.layer import Layer
from graphfit.core.registry import (
                                    CALLBACKS,
                                    LAYERS,
                                    LOSSES,
                                    OPTIMIZERS,
                                    Registry,
                                    closest,
                                    did_you_mean,
                                    register_layer,
                                    unknown_name_error,
)
from graphfit.core.seeding import set_seed
from graphfit.core.shapes import shape_text
from graphfit.core.update_hooks import PendingUpdate, UpdateHook, apply_updates, collect_updates
from graphfit.core.variables import count_parameters

__all__ = [
    "CALLBACKS",
    "ContextStack",
    "DTypePolicy",
    "InputSpec",
    "LAYERS",
    "LOSSES",
    "Layer",
    "OPTIMIZERS",
    "PendingUpdate",
    "Registry",
    "UpdateHook",
    "apply_updates",
    "closest",
    "collect_updates",
    "count_parameters",
    "did_you_mean",
    "dtype_policy",
    "register_layer",
    "set_seed",
    "shape_text",
    "unknown_name_error",
]

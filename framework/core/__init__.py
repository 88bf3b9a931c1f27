"""The core: `Layer`, `InputSpec`, update hooks (UPDATE_OPS), layer outputs, constructor
config, naming, the registry and seeding. Nothing here imports the rest of graphfit."""

from graphfit.core.input_spec import InputSpec
from graphfit.core.layer import Layer
from graphfit.core.registry import (CALLBACKS, LAYERS, OPTIMIZERS, Registry, closest,
                                    register_layer, unknown_name_error)
from graphfit.core.seeding import set_seed
from graphfit.core.update_hooks import PendingUpdate, UpdateHook, apply_updates, collect_updates

__all__ = [
    "CALLBACKS",
    "InputSpec",
    "LAYERS",
    "Layer",
    "OPTIMIZERS",
    "PendingUpdate",
    "Registry",
    "UpdateHook",
    "apply_updates",
    "closest",
    "collect_updates",
    "register_layer",
    "set_seed",
    "unknown_name_error",
]

"""The core: `Layer`, `InputSpec`, update hooks (UPDATE_OPS), layer outputs, constructor
config, naming, the registry and seeding, and the one home of each shared helper: argument
validators (`validation`), the thread-local `ContextStack`, "did you mean" (`did_you_mean`),
`count_parameters` and `shape_text`. Nothing here imports the rest of graphfit.

The names below load on first use (PEP 562, as `graphfit` itself): the registry's "did you
mean" and the recipe checks that need no TensorFlow must not wait for it (several seconds)
because they live in this package.
"""

from graphfit.core.lazy_names import lazy_names as _lazy_names

# public name -> its module
_LAZY = {
    "CALLBACKS": "graphfit.core.registry",
    "ContextStack": "graphfit.core.context_stack",
    "DTypePolicy": "graphfit.core.dtype_policy",
    "InputSpec": "graphfit.core.input_spec",
    "LAYERS": "graphfit.core.registry",
    "LOSSES": "graphfit.core.registry",
    "Layer": "graphfit.core.layer",
    "OPTIMIZERS": "graphfit.core.registry",
    "PendingUpdate": "graphfit.core.update_hooks",
    "Registry": "graphfit.core.registry",
    "UpdateHook": "graphfit.core.update_hooks",
    "apply_updates": "graphfit.core.update_hooks",
    "closest": "graphfit.core.registry",
    "collect_updates": "graphfit.core.update_hooks",
    "count_parameters": "graphfit.core.variables",
    "did_you_mean": "graphfit.core.registry",
    "dtype_policy": "graphfit.core.dtype_policy",
    "register_layer": "graphfit.core.registry",
    "set_seed": "graphfit.core.seeding",
    "shape_text": "graphfit.core.shapes",
    "unknown_name_error": "graphfit.core.registry",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_names(__name__, _LAZY, globals())

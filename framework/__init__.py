"""graphfit: a Keras-style training framework on TensorFlow 2 that keeps the graph in view.

    import graphfit as gf
    from graphfit import layers, optimizers, callbacks

The names below load on first use (PEP 562), so `import graphfit` and the command line's
`--help` do not pay for importing TensorFlow until something needs it.
"""

from graphfit.core.lazy_names import lazy_names as _lazy_names

__version__ = "0.1.0"

# public name -> (module, attribute or None for the module itself)
_LAZY = {
    "DTypePolicy": ("graphfit.core.dtype_policy", "DTypePolicy"),
    "DataCheckError": ("graphfit.core.data_checks", "DataCheckError"),
    "Functional": ("graphfit.models.functional", "Functional"),
    "GraphModel": ("graphfit.models.graph_model", "GraphModel"),
    "Input": ("graphfit.models.input_layer", "Input"),
    "InputLayer": ("graphfit.models.input_layer", "InputLayer"),
    "InputSpec": ("graphfit.core.input_spec", "InputSpec"),
    "Layer": ("graphfit.core.layer", "Layer"),
    "Model": ("graphfit.models.model", "Model"),
    "Node": ("graphfit.models.graph_model", "Node"),
    "Sequential": ("graphfit.models.sequential", "Sequential"),
    "UpdateHook": ("graphfit.core.update_hooks", "UpdateHook"),
    "autodiff": ("graphfit.autodiff", None),
    "callbacks": ("graphfit.callbacks", None),
    "checkpoints": ("graphfit.saving.checkpoints", None),
    "datasets": ("graphfit.datasets", None),
    "dtype_policy": ("graphfit.core.dtype_policy", "dtype_policy"),
    "fitting": ("graphfit.fitting", None),
    "flops": ("graphfit.inspect.flops", None),
    "inspect": ("graphfit.inspect", None),
    "layers": ("graphfit.layers", None),
    "models": ("graphfit.models", None),
    "optimizers": ("graphfit.optimizers", None),
    "recipes": ("graphfit.recipes", None),
    "register_layer": ("graphfit.core.registry", "register_layer"),
    "registry": ("graphfit.core.registry", None),
    "saving": ("graphfit.saving", None),
    "set_seed": ("graphfit.core.seeding", "set_seed"),
    "step_context": ("graphfit.core.step_context", None),
    "testing": ("graphfit.testing", None),
    "update_hooks": ("graphfit.core.update_hooks", None),
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_names(__name__, _LAZY, globals())

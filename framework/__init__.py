"""graphfit: a Keras-style training framework on TensorFlow 2 that keeps the graph in view.

    import graphfit as gf
    from graphfit import layers, optimizers, callbacks
"""

from graphfit.core import autograph_scope

autograph_scope.skip_graphfit_modules()  # before anything is traced

from graphfit import (  # noqa: E402  (they build on the core)  # noqa: E402  (they trace compiled steps)
    autodiff,
    callbacks,
    datasets,  # noqa: E402
    inspect,
    layers,
    optimizers,
    recipes,  # noqa: E402  (recipes name layers, optimizers, callbacks)
    testing,  # noqa: E402  (contracts of layers, models, optimizers)
)
from graphfit.core import registry, update_hooks
from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer
from graphfit.core.seeding import set_seed
from graphfit.core.update_hooks import UpdateHook
from graphfit.inspect import flops
from graphfit.models.graph_model import GraphModel, Node
from graphfit.models.model import Model
from graphfit.models.sequential import Sequential
from graphfit.saving import checkpoints

__version__ = "0.1.0"

__all__ = [
    "GraphModel",
    "InputSpec",
    "Layer",
    "Model",
    "Node",
    "Sequential",
    "UpdateHook",
    "autodiff",
    "callbacks",
    "checkpoints",
    "datasets",
    "flops",
    "inspect",
    "layers",
    "optimizers",
    "recipes",
    "register_layer",
    "registry",
    "set_seed",
    "testing",
    "update_hooks",
]

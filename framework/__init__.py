"""graphfit: a Keras-style training framework on TensorFlow 2 that keeps the graph in view.

    import graphfit as gf
    from graphfit import layers, optimizers, callbacks
"""

from graphfit.core import autograph_scope

autograph_scope.skip_graphfit_modules()  # before anything is traced

from graphfit import datasets  # noqa: E402
from graphfit.core import registry
from graphfit.core import update_hooks
from graphfit.saving import checkpoints
from graphfit.models.graph_model import GraphModel, Node
from graphfit.core.layer import InputSpec, Layer
from graphfit.models.model import Model
from graphfit.core.registry import register_layer
from graphfit.core.seeding import set_seed
from graphfit.models.sequential import Sequential
from graphfit.core.update_hooks import UpdateHook

from graphfit import callbacks, layers, optimizers  # noqa: E402  (they build on the core)
from graphfit import recipes  # noqa: E402  (recipes name layers, optimizers, callbacks)
from graphfit import autodiff, inspect  # noqa: E402  (they trace compiled steps)
from graphfit.inspect import flops

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
    "update_hooks",
]

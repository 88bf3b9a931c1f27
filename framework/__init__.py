"""graphfit: a Keras-style training framework on TensorFlow 2 that keeps the graph in view.

    import graphfit as gf
    from graphfit import layers, optimizers, callbacks
"""

from graphfit import autograph_scope

autograph_scope.skip_graphfit_modules()  # before anything is traced

from graphfit import datasets, registry, update_hooks  # noqa: E402
from graphfit import checkpoints
from graphfit.graph_model import GraphModel, Node
from graphfit.layer import InputSpec, Layer
from graphfit.model import Model
from graphfit.registry import register_layer
from graphfit.seeding import set_seed
from graphfit.sequential import Sequential
from graphfit.update_hooks import UpdateHook

from graphfit import callbacks, layers, optimizers  # noqa: E402  (they build on the core)
from graphfit import recipes  # noqa: E402  (recipes name layers, optimizers, callbacks)
from graphfit import autodiff, flops, inspect  # noqa: E402  (they trace compiled steps)

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

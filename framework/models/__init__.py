"""Models: `Model` (a `Layer` that trains), `Sequential`, `GraphModel`, the functional API
(`Input`, `Model(inputs, outputs)` making a `Functional`) and the summary table."""

from graphfit.models.functional import Functional
from graphfit.models.graph_model import GraphModel, Node
from graphfit.models.input_layer import Input, InputLayer
from graphfit.models.model import Model
from graphfit.models.sequential import Sequential

__all__ = ["Functional", "GraphModel", "Input", "InputLayer", "Model", "Node", "Sequential"]

"""Models: `Model` (a `Layer` that trains), `Sequential`, `GraphModel`, the summary table, and
`load_model` for what `model.save` wrote (as `keras.models.load_model`)."""

from graphfit.models.graph_model import GraphModel, Node
from graphfit.models.model import Model
from graphfit.models.sequential import Sequential
from graphfit.saving.model_file import load_model

__all__ = ["GraphModel", "Model", "Node", "Sequential", "load_model"]

"""Models: `Model` (a `Layer` that trains), `Sequential`, `GraphModel` and the summary table."""

from graphfit.models.graph_model import GraphModel, Node
from graphfit.models.model import Model
from graphfit.models.sequential import Sequential

__all__ = ["GraphModel", "Model", "Node", "Sequential"]

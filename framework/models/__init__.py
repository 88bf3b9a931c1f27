"""Models: `Model` (a `Layer` that trains), `Sequential`, `GraphModel`, the functional API
(`Input`, `Model(inputs, outputs)` making a `Functional`), the summary table, and `load_model`
for what `model.save` wrote (as `keras.models.load_model`), `model_from_json` for `to_json`."""

from graphfit.models.functional import Functional
from graphfit.models.graph_model import GraphModel, Node
from graphfit.models.input_layer import Input, InputLayer
from graphfit.models.model import Model
from graphfit.models.sequential import Sequential
from graphfit.saving.model_file import load_model, model_from_json

__all__ = ["Functional", "GraphModel", "Input", "InputLayer", "Model", "Node", "Sequential",
           "load_model", "model_from_json"]

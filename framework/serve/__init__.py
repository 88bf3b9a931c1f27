"""`graphfit serve`: a model served over HTTP with TensorFlow Serving's REST API.

`ModelServer(source, options=ServeOptions(...))` serves a SavedModel, a model folder in
TensorFlow Serving's layout (newer versions picked up as they appear) or a finished run, on
Starlette and uvicorn (`pip install 'graphfit[serve]'`), batching concurrent requests.
"""

from graphfit.serve.batching import Batcher
from graphfit.serve.metrics import Metrics
from graphfit.serve.models import ModelVersion, ServedModel
from graphfit.serve.server import ModelServer, ServeOptions

__all__ = ["ModelServer", "ServeOptions", "ServedModel", "ModelVersion", "Batcher", "Metrics"]

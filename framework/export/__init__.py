"""Export for serving: a trained model as a TensorFlow SavedModel that plain TensorFlow loads.

`export_model(model, path)` (also `Model.export(path)`, and `graphfit export RUN_DIR` for a
recipe run, whose standardization and column order go inside) writes the SavedModel;
`serving_call(loaded, body)` runs a TensorFlow Serving REST request body on it.
"""

from graphfit.export.preprocessing import Preprocessing
from graphfit.export.run_export import export_run
from graphfit.export.saved_model import export_model
from graphfit.export.serving import decode_request, serving_call

__all__ = ["Preprocessing", "export_model", "export_run", "decode_request", "serving_call"]

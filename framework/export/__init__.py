"""Export for serving: a trained model as a TensorFlow SavedModel that plain TensorFlow loads,
as TFLite or ONNX, or in TensorFlow Serving's layout.

`export_model(model, path)` (also `Model.export(path)`, and `graphfit export RUN_DIR` for a
recipe run, whose standardization and column order go inside) writes the SavedModel;
`export_as(model, path, format)` writes any format and checks it in the format's runtime;
`export_to_serving_dir` writes `DIR/<name>/<version>/` with a warm-up file;
`serving_call(loaded, body)` runs a TensorFlow Serving REST request body on it.
"""

from graphfit.export.formats import FORMATS, ExportCheck, convert_saved_model, export_as
from graphfit.export.preprocessing import Preprocessing
from graphfit.export.run_export import export_run, export_run_as
from graphfit.export.saved_model import export_model
from graphfit.export.serving import decode_arrays, decode_request, serving_call
from graphfit.export.serving_layout import export_to_serving_dir

__all__ = ["Preprocessing", "export_model", "export_run", "export_run_as", "export_as",
           "convert_saved_model", "export_to_serving_dir", "ExportCheck", "FORMATS",
           "decode_request", "decode_arrays", "serving_call"]

"""`export_run`: a finished recipe run exported (`graphfit export RUN_DIR`): a SavedModel, a
TFLite or ONNX file, or a version in TensorFlow Serving's layout, each checked at export."""

from __future__ import annotations

import os

from graphfit.export.preprocessing import Preprocessing
from graphfit.export.saved_model import export_model

__all__ = ["export_run", "export_run_as", "DEFAULT_FOLDER", "DEFAULT_FILES"]

# Where `graphfit export RUN_DIR` writes without --output: inside the run.
DEFAULT_FOLDER = "saved_model"
DEFAULT_FILES = {"saved_model": DEFAULT_FOLDER, "tflite": "model.tflite", "onnx": "model.onnx"}


def _load(run: str):
    from graphfit.recipes.running import runner  # recipes import much of graphfit

    prepared, record = runner.load_run(run, data=False)  # the training data may be gone
    more = None
    if "image_folder" in record:  # also takes encoded image files
        from graphfit.export.image_signatures import image_functions

        more = image_functions(prepared.model, record)
    return prepared, Preprocessing.from_record(record), more


def export_run(run: str, output: str | None = None, *, layers=(),
               classify: bool | None = None) -> str:
    """Exports a finished run's final weights, with its standardization and column order.

    Args:
        run: the run directory (or a folder holding one run).
        output: the SavedModel's folder; default `RUN_DIR/saved_model`.
        layers: layer names whose outputs get a signature each.
        classify: see `export_model`.

    Returns:
        The SavedModel's absolute path.

    Raises:
        ValueError: not a finished run, or what `export_model` refuses.
    """
    prepared, preprocessing, more = _load(run)
    target = output or os.path.join(run, DEFAULT_FOLDER)
    return export_model(prepared.model, target, preprocessing=preprocessing,
                        classify=classify, layers=layers, more_functions=more)


def export_run_as(run: str, output: str | None = None, *, format: str = "saved_model",
                  quantize: str | None = None, serving_dir: str | None = None,
                  name: str | None = None, layers=(), sample: dict | None = None):
    """Exports a finished run in `format` and checks the export in its own runtime.

    Args:
        run: the run directory.
        output: the folder or file to create; default `DEFAULT_FILES[format]` in the run.
        format: "saved_model", "tflite" or "onnx".
        quantize: TFLite only: "float16" or "dynamic_range".
        serving_dir: write `serving_dir/<name>/<next version>/` (a SavedModel with a warm-up
            file) instead of `output`.
        name: the model's name in `serving_dir`; default the recipe's name.
        layers: layer names whose outputs get a signature each (SavedModel only).
        sample: {input name: raw rows} to check with; default synthetic rows.

    Returns:
        The `ExportCheck` (its `path` is where the export went).

    Raises:
        ValueError: a bad combination of arguments, or what the export refuses.
    """
    from graphfit.export.formats import export_as
    from graphfit.export.serving_layout import export_to_serving_dir

    if serving_dir is not None and (output is not None or format != "saved_model"):
        raise ValueError("--serving-dir writes a SavedModel version folder of its own: give "
                         "it without --output and with --format saved_model")
    if layers and format != "saved_model":
        raise ValueError(f"--layer signatures exist in the SavedModel only; the {format} "
                         f"export holds serving_default")
    prepared, preprocessing, more = _load(run)
    if serving_dir is not None:
        name = name or prepared.recipe.config.get("name") or "model"
        return export_to_serving_dir(prepared.model, serving_dir, name,
                                     preprocessing=preprocessing, sample=sample,
                                     layers=layers)[1]
    target = output or os.path.join(run, DEFAULT_FILES.get(format, DEFAULT_FOLDER))
    return export_as(prepared.model, target, format, preprocessing=preprocessing,
                     quantize=quantize, sample=sample, layers=layers, more_functions=more)

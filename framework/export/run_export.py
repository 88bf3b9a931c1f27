"""`export_run`: the SavedModel of a finished recipe run (`graphfit export RUN_DIR`)."""

from __future__ import annotations

import os

from graphfit.export.preprocessing import Preprocessing
from graphfit.export.saved_model import export_model

__all__ = ["export_run", "DEFAULT_FOLDER"]

# Where `graphfit export RUN_DIR` writes without --output: inside the run.
DEFAULT_FOLDER = "saved_model"


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
    from graphfit.recipes.running import runner  # recipes import much of graphfit

    prepared, record = runner.load_run(run, data=False)  # the training data may be gone
    target = output or os.path.join(run, DEFAULT_FOLDER)
    more = None
    if "image_folder" in record:  # also takes encoded image files
        from graphfit.export.image_signatures import image_functions

        more = image_functions(prepared.model, record)
    return export_model(prepared.model, target, preprocessing=Preprocessing.from_record(record),
                        classify=classify, layers=layers, more_functions=more)

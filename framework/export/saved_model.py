"""`export_model`: a TensorFlow SavedModel that TensorFlow Serving, TFLite's converter or any
TensorFlow program loads without graphfit.

The SavedModel holds the model's variables and one concrete function per signature
(`graphfit.export.signatures`): `serving_default` and `predict`, `classify` for a
classifier, and any layer named. Its root object also keeps `feature_names` (the raw columns
in the order the model reads them, a string variable; empty when the run had none), which
`graphfit.export.serving` uses to order rows given by column name.

It is written to a temporary folder beside `path` and moved into place once complete, so an
export that fails leaves no half-written SavedModel, and an existing folder is never
overwritten.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import tensorflow as tf

from graphfit.export.preprocessing import Preprocessing
from graphfit.export.signatures import serving_functions
from graphfit.training import xla_support

__all__ = ["export_model"]


class _Export(tf.Module):
    """The SavedModel's root: the model (its variables), the functions, the feature names."""

    def __init__(self, model, functions: dict, feature_names, preprocessing_layers=()):
        super().__init__(name="graphfit_export")
        self.model = model
        self.functions = dict(functions)
        # A table's Keras preprocessing layers: their lookup tables go into the SavedModel.
        self.preprocessing_layers = list(preprocessing_layers)
        # A variable, so that the SavedModel keeps it (a constant attribute is not saved).
        self.feature_names = tf.Variable(tf.constant(list(feature_names or ()), tf.string),
                                         trainable=False, name="feature_names")


def _check_no_python(model, concrete) -> None:
    """Refuses a function that runs Python (tf.numpy_function / py_function): a SavedModel
    cannot hold it."""
    problem = xla_support.find_python_op(concrete.graph, model)
    if problem is not None:
        raise ValueError(
            f"cannot export model {model.name!r}: {problem.layer} runs Python code "
            f"({problem.op_type} op {problem.op_name!r}), which a SavedModel cannot hold (it "
            f"stores TensorFlow graphs only). Replace the layer by TensorFlow ops (a trained "
            f"surrogate of a BlackBox, for instance) before exporting.")


def _check_target(path: str) -> str:
    path = os.path.abspath(path)
    if os.path.isfile(path):
        raise ValueError(f"{path} is a file; export to a new folder")
    if os.path.isdir(path) and os.listdir(path):
        raise ValueError(f"{path} already exists and is not empty; export to a new folder (or "
                         f"remove it first): an export never overwrites")
    return path


def _make_parent(path: str) -> None:
    """Creates the folders above `path`, once the export is known to succeed."""
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cannot create {parent}: {error.strerror or error}") from None


def export_model(model, path: str, *, preprocessing: Preprocessing | None = None,
                 classify: bool | None = None, layers=(), more_functions=None) -> str:
    """Writes `model` as a TensorFlow SavedModel at `path` (a new folder).

    Args:
        model: a built graphfit model (trained or not).
        path: the folder to create; it must not exist, or be empty.
        preprocessing: standardization and feature names applied to the raw inputs inside
            every signature (`Preprocessing`); None: the inputs go in as they are.
        classify: add the `classify` signature; None: for a classifier (one output compiled
            with a cross-entropy loss).
        layers: names of layers whose outputs get a signature each (e.g. an embedding).
        more_functions: {signature name: tf.function with an input signature} to add (an
            image run's `predict_images`, `graphfit.export.image_signatures`).

    Returns:
        The absolute path of the SavedModel.

    Raises:
        ValueError: the model is not built, runs Python code (a BlackBox layer), a layer
            name is unknown or reserved, or `path` exists and is not empty.
    """
    model.require_built("export()")
    path = _check_target(path)
    preprocessing = preprocessing or Preprocessing()
    functions = serving_functions(model, preprocessing, classify, tuple(layers))
    functions.update(more_functions or {})
    concrete = {name: fn.get_concrete_function() for name, fn in functions.items()}
    for function in concrete.values():
        _check_no_python(model, function)
    signatures = {"serving_default": concrete["predict"], **concrete}
    table = preprocessing.table_preprocessor()
    root = _Export(model, functions, preprocessing.feature_names,
                   table.keras_layers() if table is not None else ())
    _make_parent(path)
    staging = tempfile.mkdtemp(prefix=".export-", dir=os.path.dirname(path))
    try:
        tf.saved_model.save(root, staging, signatures=signatures)
        if os.path.isdir(path):
            os.rmdir(path)  # empty (checked above)
        os.replace(staging, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path

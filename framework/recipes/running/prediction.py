"""`graphfit predict`: reading new inputs for a finished run and writing its predictions.

Inputs are a CSV file with a header row or an `.npz` file (array `x`). When the run was
trained on named CSV columns, those columns are taken by name (in any order, extra columns
ignored); otherwise every column is a feature, in order, and each row is reshaped to the
model's input shape (64 columns become an 8x8x1 image for a conv net). The run's
standardization is applied. The output CSV holds, per row, `class` and one `probability_<k>`
column per class for a classifier (`probability` for a binary one), or `prediction` /
`prediction_<k>` for a regression.
"""

from __future__ import annotations

import csv
import os

import numpy as np

from graphfit import datasets
from graphfit.core.shapes import num_elements
from graphfit.recipes.running.data_loading import Standardizer
from graphfit.training.losses import loss_kind, resolve_loss

__all__ = ["read_inputs", "prediction_table", "write_csv"]


def read_inputs(path: str, preprocessing: dict) -> np.ndarray:
    """The inputs in `path`, as the run's model expects them (shape and standardization).

    Raises:
        ValueError: for a missing file, missing columns or a width that does not fit.
    """
    if not os.path.isfile(path):
        raise ValueError(f"input file not found: {os.path.abspath(path)}")
    if path.endswith(".npz"):
        x, _ = datasets.load_npz(path, x_key="x", y_key=None)
    else:
        names = preprocessing.get("feature_names")
        if names is None:
            names = datasets.csv_columns(path)
        x, _ = datasets.load_csv(path, features=names, target=None)
    shape = preprocessing["input_shape"]
    if isinstance(shape, dict) and len(shape) == 1:
        shape = next(iter(shape.values()))  # a graph model with one named input
    if isinstance(shape, dict):
        raise ValueError("predict reads one input array; this run's model has several inputs "
                         f"({', '.join(shape)}). Use model.predict from Python.")
    width = num_elements(shape)
    if x.reshape(len(x), -1).shape[1] != width:
        raise ValueError(f"the inputs have {x.reshape(len(x), -1).shape[1]} values per row but "
                         f"the model takes {width} (shape {tuple(shape)})")
    x = x.reshape((len(x), *shape)).astype(np.float32)
    record = preprocessing.get("standardize")
    return Standardizer.from_json(record)(x) if record else x


def prediction_table(outputs: np.ndarray, loss) -> tuple[list[str], np.ndarray]:
    """(column names, rows) for the model's outputs, shaped by the kind of loss."""
    import tensorflow as tf

    kind = loss_kind(resolve_loss(loss, tf.float32))
    outputs = np.asarray(outputs).reshape(len(outputs), -1)
    if kind.labels in ("sparse_categorical", "categorical"):
        probabilities = tf.nn.softmax(outputs).numpy() if kind.from_logits else outputs
        names = ["class"] + [f"probability_{k}" for k in range(probabilities.shape[1])]
        return names, np.column_stack([probabilities.argmax(axis=1), probabilities])
    if kind.labels == "binary":
        probability = tf.sigmoid(outputs).numpy() if kind.from_logits else outputs
        if probability.shape[1] == 1:
            return ["class", "probability"], np.column_stack(
                [(probability[:, 0] > 0.5).astype(int), probability[:, 0]])
        return [f"probability_{k}" for k in range(probability.shape[1])], probability
    if outputs.shape[1] == 1:
        return ["prediction"], outputs
    return [f"prediction_{k}" for k in range(outputs.shape[1])], outputs


def write_csv(path: str, names: list[str], rows: np.ndarray) -> None:
    """Writes the table; the class column as integers, the rest with full float precision."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for row in rows:
            writer.writerow([int(v) if name == "class" else repr(float(v))
                             for name, v in zip(names, row)])

"""What a recipe can name, for `graphfit list`: (name, one-line summary) pairs."""

from __future__ import annotations

import inspect

__all__ = ["entries"]

# The sources of the user's own data (`data: {source: csv, ...}`), listed with the data sets.
_OWN_DATA = {
    "csv": "Your CSV file with a header row: {source: csv, path: FILE, target: COLUMN}.",
    "npz": "Your .npz archive (np.savez): {source: npz, path: FILE, x_key: x, y_key: y}.",
    "function": "Your Python function returning (x, y) or a batched tf.data.Dataset: "
                "{source: function, function: module:name, arguments: {...}}.",
    "image_folder": "Your folder of images, one subfolder per class: {source: image_folder, "
                    "path: DIR, image_size: [H, W], color_mode: rgb}.",
    "timeseries": "Your CSV log, one row per time step, cut into windows: {source: timeseries, "
                  "path: FILE, target: COLUMN, window: N, horizon: 1}.",
    "table": "Your table with typed columns (CSV, JSON lines, Parquet): {source: table, "
             "path: FILE, target: COLUMN, columns: {NAME: {type: numeric | categorical | "
             "text | boolean | date, ...}}}.",
    "text_folder": "Your folder of .txt files in one subfolder per class: {source: "
                   "text_folder, path: FOLDER}.",
    "stream": "Your CSV, TFRecord or Parquet shards, larger than memory, read by tf.data: "
              "{source: stream, files: GLOB, columns: {NAME: DTYPE or {type: ...}} (left out: "
              "inferred), target: COLUMN}.",
}


# Generated data sets that `datasets.names()` (the loaders' list) does not hold.
_MORE_DATA = {
    "sine_sequences": "Synthetic sequences: windows of noisy sines (random frequency and "
                      "phase), forecast the next value (make_sine_sequences).",
}

# Any Keras layer is named by its class, not registered: one entry says how.
_KERAS_LAYERS = {
    "keras.NAME": "Any built-in Keras 3 layer by class name, e.g. {type: keras.LSTM, units: 32}"
                  " (checked like these; Lambda and other code-running layers are refused).",
}


def _summary(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def entries(kind: str) -> list[tuple[str, str]]:
    """The names of one kind ("layers", "optimizers", "losses", "metrics", "datasets",
    "callbacks") with a short description each, sorted by name.

    Example:

        >>> names = [name for name, _ in entries("optimizers")]
        >>> "Adam" in names and "SGD" in names
        True
    """
    from graphfit import datasets
    from graphfit.recipes.reading import components

    if kind == "datasets":
        return sorted(dict(datasets.describe(), **_MORE_DATA, **_OWN_DATA).items())
    families = {"layers": components.LAYER, "optimizers": components.optimizer_family(),
                "losses": components.LOSS, "metrics": components.METRIC,
                "callbacks": components.CALLBACK}
    if kind not in families:
        raise ValueError(f"kind must be one of {', '.join(['datasets', *families])}. "
                         f"Received: kind={kind!r}")
    found = families[kind].names()
    listed = [(name, _summary(cls)) for name, cls in found.items()]
    if kind == "layers":
        listed += list(_KERAS_LAYERS.items())
    return sorted(listed)

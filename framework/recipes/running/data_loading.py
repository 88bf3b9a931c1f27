"""Loading a recipe's data: the source, the reproducible splits and the standardization.

The samples are shuffled with the recipe's seed, then the last `test_split` fraction becomes
the test split and the `validation_split` fraction before it the validation split, so the same
seed always gives the same split. Standardization statistics come from the training split
only and are applied to every split (and saved in the run, for `predict`). Graphs
(`datasets.GraphSet`) are split by graph, never by node; their standardization scales the node
features only, never the integer index inputs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from graphfit import datasets
from graphfit.recipes.reading import user_code
from graphfit.recipes.running import stream_loading

__all__ = ["Splits", "load_splits", "load_source", "file_dtype", "Standardizer", "DataError"]

_GENERATORS = {"moons": datasets.make_moons, "spirals": datasets.make_spirals,
               "blobs": datasets.make_blobs, "sinc": datasets.make_sinc,
               "graph_classes": datasets.make_graph_classes,
               "sine_sequences": datasets.make_sine_sequences}


class DataError(ValueError):
    """The data a recipe names cannot be used; `path` is the recipe key to blame."""

    def __init__(self, path: tuple, message: str):
        self.path = path
        super().__init__(message)


@dataclasses.dataclass
class Standardizer:
    """x -> (x - mean) / std per feature, with std 0 treated as 1 (constant features)."""

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> "Standardizer":
        """Mean and std per feature over its finite values: a NaN or inf that
        `training.check_finite: false` lets through stays in its own cell instead of making
        the whole feature NaN (a feature with none: mean 0, std 1).

        Example:

            >>> Standardizer.fit(np.array([[1.0], [np.nan], [3.0]])).mean.tolist()
            [2.0]
        """
        flat = x.reshape(len(x), -1).astype(np.float64)
        finite = np.isfinite(flat)
        count = finite.sum(axis=0)
        values = np.where(finite, flat, 0.0)
        mean = values.sum(axis=0) / np.maximum(count, 1)
        squares = np.where(finite, (flat - mean) ** 2, 0.0).sum(axis=0)
        std = np.sqrt(squares / np.maximum(count, 1))
        return cls(mean, np.where(std > 0, std, 1.0))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """x standardized, in float32, or in float64 for float64 x (a float64 recipe's)."""
        flat = x.reshape(len(x), -1)
        floating = np.float64 if x.dtype == np.float64 else np.float32
        return ((flat - self.mean) / self.std).astype(floating).reshape(x.shape)

    def to_json(self) -> dict:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_json(cls, data: dict) -> "Standardizer":
        return cls(np.asarray(data["mean"]), np.asarray(data["std"]))


@dataclasses.dataclass
class Splits:
    """The data of one run: (x, y) per stage (val or test may be None), or a train dataset."""

    train: Any
    val: Any
    test: Any
    standardizer: Standardizer | None
    feature_names: list[str] | None
    #: more entries for the run's preprocessing.json (class names, image size, windows, ...)
    record: dict = dataclasses.field(default_factory=dict)
    # A table's typed columns (graphfit.recipes.running.table_loading): the preprocessor's
    # record, the target's class names, the sample weights of the training rows.
    table: dict | None = None
    class_names: list[str] | None = None
    train_weight: Any = None
    # training.class_weight resolved to {class id: weight} ("balanced", class names).
    class_weight: dict | None = None
    #: batches per epoch of a train dataset that repeats (a `stream`), else None
    steps_per_epoch: int | None = None
    #: `error -> exception or None`: what a data error met in training was (a `stream`'s
    #: first unreadable record, with its file and index), else None
    diagnose: Any = None
    #: `(epoch, batch, steps_per_epoch) -> None`: starts a train dataset that positions
    #: itself (a `stream`) after that many epochs and batches, else None
    start_at: Any = None


def file_dtype(training: dict) -> str:
    """The floating dtype a recipe reads CSV and NPZ numbers as: its model's, float64 for
    `training.dtype: float64` (float32 would round them to about 7 digits first: a time
    stamp 1700000020 to 1700000000), else float32."""
    return "float64" if training.get("dtype") == "float64" else "float32"


def load_source(source: dict, seed: int, path: tuple, batch_size: int = 32,
                dtype: str = "float32"):
    """(x, y) arrays, or a `tf.data.Dataset`, from one resolved data source mapping
    (`batch_size`: the batches of a `stream`, read whole; `dtype`: the floating dtype of a
    CSV's or NPZ's numbers, `file_dtype`)."""
    kind = source["source"]
    if kind == "digits":
        return datasets.load_digits(as_images=source["as_images"])
    if kind == "breast_cancer":
        return datasets.load_breast_cancer()
    if kind in _GENERATORS:
        options = {k: v for k, v in source.items() if k not in ("source", "standardize",
                                                                "shuffle")}
        return _GENERATORS[kind](seed=seed, **options)
    if kind == "csv":
        return datasets.load_csv(source["path"], features=source["features"],
                                 target=source["target"], delimiter=source["delimiter"],
                                 dtype=dtype)
    if kind == "npz":
        return datasets.load_npz(source["path"], x_key=source["x_key"], y_key=source["y_key"],
                                 dtype=dtype)
    if kind in _FILE_SOURCES:
        return _FILE_SOURCES[kind](source, path)
    if kind == "stream":
        return stream_loading.whole_stream(source, batch_size)
    return _call_function(source, path)


def _options(source: dict, names) -> dict:
    return {name: source[name] for name in names}


def _image_folder(source: dict, path: tuple):
    try:
        return datasets.read_image_folder(source["path"], **_options(
            source, ("image_size", "color_mode", "interpolation", "label_mode", "on_corrupt")))
    except ValueError as error:
        raise DataError(path + ("path",), str(error)) from None


def _timeseries(source: dict, path: tuple):
    try:
        return datasets.read_timeseries(source["path"], **_options(
            source, ("target", "features", "window", "stride", "horizon", "time_column",
                     "delimiter")))
    except ValueError as error:
        raise DataError(path + ("path",), str(error)) from None


# Sources read from files into objects that split themselves (`source_splits`).
_FILE_SOURCES = {"image_folder": _image_folder, "timeseries": _timeseries}


def _call_function(source: dict, path: tuple):
    import tensorflow as tf

    reference = source["function"]
    try:
        function = user_code.import_attribute(reference, ":")
        user_code.check_runnable(function, reference)
        result = user_code.call(function, reference, source["arguments"])
    except ValueError as error:  # the user's own error, with the user's file and line
        raise DataError(path + ("function",), str(error)) from error
    if isinstance(result, tf.data.Dataset):
        _check_dataset_types(result, reference, path)
        return result
    if isinstance(result, dict) and {"x", "y"} <= set(result):
        result = (result["x"], result["y"])
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise DataError(path + ("function",), f"{reference} must return (x, y), "
                                              f"{{'x': ..., 'y': ...}} or a batched "
                                              f"tf.data.Dataset; it returned "
                                              f"{type(result).__name__}")
    x, y = (_numbers(part, name, reference, path) for part, name in zip(result, "xy"))
    if len(x) != len(y):
        raise DataError(path + ("function",), f"{reference} returned x with {len(x)} "
                                              f"samples but y with {len(y)}")
    return x, y


def _numbers(part, name: str, reference: str, path: tuple) -> np.ndarray:
    """One returned array, which must hold numbers with a sample axis."""
    try:
        array = np.asarray(part)
    except ValueError as error:  # ragged nested lists
        raise DataError(path + ("function",), f"{reference} returned an {name} that is not "
                                              f"an array: {error}") from None
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_) or array.ndim == 0:
        raise DataError(path + ("function",), f"{reference} must return arrays of numbers with "
                                              f"a sample axis; its {name} has dtype "
                                              f"{array.dtype} and shape {array.shape}")
    return array


def _check_dataset_types(dataset, reference: str, path: tuple) -> None:
    import tensorflow as tf

    for spec in tf.nest.flatten(dataset.element_spec):
        dtype = getattr(spec, "dtype", None)
        if dtype is not None and not (dtype.is_floating or dtype.is_integer or dtype.is_bool):
            raise DataError(path + ("function",), f"{reference} returned a dataset of "
                                                  f"{dtype.name} elements; a model trains on "
                                                  f"numbers")


def _split_indices(count: int, validation: float, test: float, seed: int, shuffle: bool):
    order = np.random.default_rng(seed).permutation(count) if shuffle else np.arange(count)
    n_test, n_val = int(round(count * test)), int(round(count * validation))
    n_train = count - n_test - n_val
    return order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]


def load_splits(config: dict, record: dict | None = None, strategy=None) -> Splits:
    """Loads and splits the data of a resolved recipe.

    Args:
        config: the resolved recipe.
        record: a finished run's `preprocessing.json`: a table's statistics are reused from
            it instead of adapted again.
        strategy: the run's strategy: under several workers each worker reads its own part
            of a stream (`stream_loading`).

    Raises:
        DataError: naming the recipe key when the data cannot be used as asked (too few
            samples for the splits, standardization of a dataset, ...).
    """
    from graphfit.recipes.running import table_loading

    data, training = config["data"], config["training"]
    if data["source"] in table_loading.TABLE_SOURCES:
        return table_loading.load_table_splits(config, (record or {}).get("table"))
    splits = _load_array_splits(config, (record or {}).get("table"), strategy)
    if data["source"] != "stream":  # a stream resolves its own (stream_weights)
        splits.class_weight = _class_weight(training.get("class_weight"), splits.train)
    return splits


def _class_weight(value, train):
    """training.class_weight as {class id: weight}: "balanced" from the training labels."""
    if value is None:
        return None
    if any(isinstance(key, str) for key in value) or (value == "balanced" and not (
            isinstance(train, tuple) and train[1] is not None)):
        raise DataError(("training", "class_weight"),
                        f"{value!r}: class names and 'balanced' need a table's target of "
                        f"class names or label arrays; give {{class id: weight}}")
    if value == "balanced":
        from graphfit.tabular.targets import balanced_class_weight

        y = np.asarray(train[1]).reshape(len(train[1]), -1)
        labels = y.argmax(axis=1) if y.shape[1] > 1 else y[:, 0]
        return balanced_class_weight(labels, int(labels.max()) + 1)
    return dict(value)


def _load_array_splits(config: dict, table: dict | None = None, strategy=None) -> Splits:
    seed, data, training = config["seed"], config["data"], config["training"]
    separate = {stage: training[f"{name}_data"] for stage, name in (("val", "validation"),
                                                                    ("test", "test"))}
    if data["source"] == "stream":
        return stream_loading.stream_splits(
            config, Splits, Standardizer, separate,
            lambda source, stage: load_source(
                source, seed, ("training", f"{_long(stage)}_data"), training["batch_size"],
                file_dtype(training)),
            table, strategy)
    loaded = load_source(data, seed, ("data",), dtype=file_dtype(training))
    from graphfit.recipes.running import source_splits

    if source_splits.splits_itself(loaded):  # an image folder (by file), a time series (by time)
        return source_splits.source_splits(loaded, config)
    if not isinstance(loaded, tuple):  # a tf.data.Dataset from a user function
        return _dataset_splits(loaded, data, training, separate, seed)
    x, y = loaded
    if training["check_finite"]:
        _check_finite((x, y), ("data",))
    train, val, test = _split_indices(len(x), training["validation_split"],
                                      training["test_split"], seed, data["shuffle"])
    if len(train) == 0:
        raise DataError(("training", "validation_split"),
                        f"no samples left to train on: the data has {len(x)} samples")
    _check_split_sizes(len(x), training, {"validation": val, "test": test})
    stages = {"train": (x[train], y[train]),
              "val": (x[val], y[val]) if len(val) else None,
              "test": (x[test], y[test]) if len(test) else None}
    for stage, source in separate.items():
        if source is not None:
            key = ("training", f"{_long(stage)}_data")
            stages[stage] = load_source(source, seed, key, training["batch_size"],
                                        file_dtype(training))
            if training["check_finite"] and isinstance(stages[stage], tuple):
                _check_finite(stages[stage], key)
    standardizer = Standardizer.fit(_float_features(stages["train"][0])) \
        if data["standardize"] else None
    if standardizer is not None:
        stages = {stage: (_standardized(standardizer, pair[0]), pair[1])
                  if pair is not None else None for stage, pair in stages.items()}
    names = data.get("features") if data["source"] == "csv" else None
    return Splits(stages["train"], stages["val"], stages["test"], standardizer, names)


def _float_features(x):
    """What standardization scales: the node features of graphs (per node, so the index
    inputs graph_index / senders / receivers stay untouched integers), else the samples."""
    return x.node_features if isinstance(x, datasets.GraphSet) else x


def _standardized(standardizer: Standardizer, x):
    if isinstance(x, datasets.GraphSet):
        return x.with_node_features(standardizer(x.node_features))
    return standardizer(x)


def _check_split_sizes(count: int, training: dict, indices: dict) -> None:
    """A split asked for must hold samples: 15% of 3 rows is none, which would silently train
    without validation or test. Better to say so than to report no numbers at the end."""
    for name, chosen in indices.items():
        fraction = training[f"{name}_split"]
        if fraction > 0 and len(chosen) == 0:
            raise DataError(("training", f"{name}_split"),
                            f"{name}_split {fraction} of {count} samples is no sample at all, "
                            f"so there would be no {name} numbers; give more data, a larger "
                            f"fraction, or set {name}_split: 0 to go without")


def _check_finite(pair: tuple, key: tuple) -> None:
    """NaN or infinity in the data is the data's problem: reported at the data source."""
    for name, array in zip(("x", "y"), pair):
        if not isinstance(array, np.ndarray) or not np.issubdtype(array.dtype, np.floating):
            continue
        bad = ~np.isfinite(array.reshape(len(array), -1)) if array.ndim else None
        if bad is not None and bad.any():
            sample = int(np.argmax(bad.any(axis=1)))
            raise DataError(key, f"the data holds NaN or infinite values ({name} of sample "
                                 f"{sample}, counting from 0 in the source's order, and "
                                 f"{int(bad.any(axis=1).sum())} sample(s) in all); delete or "
                                 f"fill those rows. (training.check_finite: false lets them "
                                 f"through, for a model that handles NaN itself; any other "
                                 f"model's loss turns NaN at the first batch that holds one)")


def _long(stage: str) -> str:
    return "validation" if stage == "val" else stage


def _dataset_splits(dataset, data, training, separate, seed) -> Splits:
    for stage, split in (("val", "validation_split"), ("test", "test_split")):
        if training[split] > 0:
            raise DataError(("training", split),
                            f"data.function returned a tf.data.Dataset, which cannot be split "
                            f"by a fraction; set {split}: 0 and give {_long(stage)}_data, or "
                            f"return arrays")
    if data["standardize"]:
        raise DataError(("data", "standardize"), "standardize needs arrays; the function "
                                                 "returned a tf.data.Dataset")
    stages = {stage: load_source(source, seed, ("training", f"{_long(stage)}_data"),
                                 training["batch_size"], file_dtype(training))
              if source is not None else None for stage, source in separate.items()}
    return Splits(dataset, stages["val"], stages["test"], None, None)

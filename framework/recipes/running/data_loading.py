"""Loading a recipe's data: the source, the reproducible splits and the standardization.

The samples are shuffled with the recipe's seed, then the last `test_split` fraction becomes
the test split and the `validation_split` fraction before it the validation split, so the same
seed always gives the same split. Standardization statistics come from the training split only
and are applied to every split (and saved in the run, for `predict`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from graphfit import datasets
from graphfit.recipes.reading.components import import_attribute

__all__ = ["Splits", "load_splits", "load_source", "Standardizer", "DataError"]

_GENERATORS = {"moons": datasets.make_moons, "spirals": datasets.make_spirals,
               "blobs": datasets.make_blobs, "sinc": datasets.make_sinc}


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
        flat = x.reshape(len(x), -1).astype(np.float64)
        std = flat.std(axis=0)
        return cls(flat.mean(axis=0), np.where(std > 0, std, 1.0))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        flat = x.reshape(len(x), -1)
        return ((flat - self.mean) / self.std).astype(np.float32).reshape(x.shape)

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


def load_source(source: dict, seed: int, path: tuple):
    """(x, y) arrays, or a `tf.data.Dataset`, from one resolved data source mapping."""
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
                                 target=source["target"], delimiter=source["delimiter"])
    if kind == "npz":
        return datasets.load_npz(source["path"], x_key=source["x_key"], y_key=source["y_key"])
    return _call_function(source, path)


def _call_function(source: dict, path: tuple):
    import tensorflow as tf

    function = import_attribute(source["function"], ":")
    try:
        result = function(**source["arguments"])
    except TypeError as error:
        raise DataError(path + ("arguments",), f"{source['function']} rejected the arguments "
                                               f"{source['arguments']}: {error}") from None
    if isinstance(result, tf.data.Dataset):
        return result
    if isinstance(result, dict) and {"x", "y"} <= set(result):
        result = (result["x"], result["y"])
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise DataError(path + ("function",), f"{source['function']} must return (x, y), "
                                              f"{{'x': ..., 'y': ...}} or a batched "
                                              f"tf.data.Dataset; it returned "
                                              f"{type(result).__name__}")
    x, y = (np.asarray(part) for part in result)
    if len(x) != len(y):
        raise DataError(path + ("function",), f"{source['function']} returned x with {len(x)} "
                                              f"samples but y with {len(y)}")
    return x, y


def _split_indices(count: int, validation: float, test: float, seed: int, shuffle: bool):
    order = np.random.default_rng(seed).permutation(count) if shuffle else np.arange(count)
    n_test, n_val = int(round(count * test)), int(round(count * validation))
    n_train = count - n_test - n_val
    return order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]


def load_splits(config: dict) -> Splits:
    """Loads and splits the data of a resolved recipe.

    Raises:
        DataError: naming the recipe key when the data cannot be used as asked (too few
            samples for the splits, standardization of a dataset, ...).
    """
    seed, data, training = config["seed"], config["data"], config["training"]
    loaded = load_source(data, seed, ("data",))
    separate = {stage: training[f"{name}_data"] for stage, name in (("val", "validation"),
                                                                    ("test", "test"))}
    if not isinstance(loaded, tuple):  # a tf.data.Dataset from a user function
        return _dataset_splits(loaded, data, training, separate, seed)
    x, y = loaded
    train, val, test = _split_indices(len(x), training["validation_split"],
                                      training["test_split"], seed, data["shuffle"])
    if len(train) == 0:
        raise DataError(("training", "validation_split"),
                        f"no samples left to train on: the data has {len(x)} samples")
    stages = {"train": (x[train], y[train]),
              "val": (x[val], y[val]) if len(val) else None,
              "test": (x[test], y[test]) if len(test) else None}
    for stage, source in separate.items():
        if source is not None:
            stages[stage] = load_source(source, seed, ("training", f"{_long(stage)}_data"))
    standardizer = Standardizer.fit(stages["train"][0]) if data["standardize"] else None
    if standardizer is not None:
        stages = {stage: (standardizer(pair[0]), pair[1]) if pair is not None else None
                  for stage, pair in stages.items()}
    names = data.get("features") if data["source"] == "csv" else None
    return Splits(stages["train"], stages["val"], stages["test"], standardizer, names)


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
    stages = {stage: load_source(source, seed, ("training", f"{_long(stage)}_data"))
              if source is not None else None for stage, source in separate.items()}
    return Splits(dataset, stages["val"], stages["test"], None, None)

"""What an exported model does to raw inputs before the model sees them.

A recipe run standardizes its features with statistics of the training split and may read
named CSV columns in a fixed order; `graphfit predict` applies the same on the host. An
export carries them inside the SavedModel, so raw rows go in, as they came from the data.
A run on a table (`table`: its typed columns and their statistics) is exported with one
input per raw column, by name (float32 numbers, NaN when missing; strings, "" when
missing), and the Keras preprocessing layers inside the graph.

Example:

    >>> import numpy as np
    >>> prep = Preprocessing.from_record({"standardize": {"mean": [1.0], "std": [2.0]},
    ...                                   "feature_names": ["age"], "input_shape": [1]})
    >>> prep.feature_names, float(prep.apply(np.array([[5.0]], np.float32))[0, 0])
    (('age',), 2.0)
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

__all__ = ["Preprocessing"]


@dataclasses.dataclass(frozen=True)
class Preprocessing:
    """Standardization and feature order of a model's raw inputs.

    Attributes:
        mean: per flattened feature, or None for no standardization.
        std: per flattened feature (0 already replaced by 1), with `mean`.
        feature_names: the names of the input's columns in the order the model reads them
            (named CSV columns), or None.
        input_name: the input standardization applies to when the model has several
            ("node_features" for a graph model); None for a model with one input.
    """

    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    feature_names: tuple[str, ...] | None = None
    input_name: str | None = None
    table: dict | None = None

    def table_preprocessor(self):
        """The run's `graphfit.tabular.TablePreprocessor` (one, made on first use) when it
        trained on a table: the export then takes the raw columns by name."""
        if self.table is None:
            return None
        if "_prep" not in self.__dict__:
            from graphfit.tabular import TablePreprocessor

            object.__setattr__(self, "_prep",
                               TablePreprocessor.from_record(self.table["preprocessor"]))
        return self.__dict__["_prep"]

    @property
    def class_names(self):
        return None if self.table is None else self.table.get("class_names")

    @classmethod
    def from_record(cls, record: dict | None) -> "Preprocessing":
        """From a run directory's `preprocessing.json` (see `graphfit.recipes`)."""
        record = record or {}
        standardize = record.get("standardize")
        shape = record.get("input_shape")
        names = record.get("feature_names")
        return cls(
            mean=None if not standardize else np.asarray(standardize["mean"], np.float64),
            std=None if not standardize else np.asarray(standardize["std"], np.float64),
            feature_names=tuple(names) if names else None,
            input_name="node_features" if isinstance(shape, dict) and standardize else None,
            table=record.get("table"))

    def apply(self, x):
        """`x` standardized as the run did: per flattened feature, in float64, then back to
        the input's dtype (the order of operations of the run's `Standardizer`)."""
        if self.mean is None:
            return x
        x = tf.convert_to_tensor(x)
        flat = tf.reshape(tf.cast(x, tf.float64), [tf.shape(x)[0], -1])
        scaled = (flat - tf.constant(self.mean)) / tf.constant(self.std)
        return tf.reshape(tf.cast(scaled, x.dtype), tf.shape(x))

    def apply_to_inputs(self, inputs):
        """`apply` on the model's inputs: the one input, or `input_name` of a dict."""
        if self.mean is None:
            return inputs
        if isinstance(inputs, dict):
            name = self.input_name
            if name not in inputs:
                raise ValueError(
                    f"the standardization of this export applies to the input {name!r}, which "
                    f"the model does not have (its inputs: {', '.join(inputs)})")
            return {**inputs, name: self.apply(inputs[name])}
        return self.apply(inputs)

"""`fit(class_weight=...)`: per-class weights turned into per-sample weights, as Keras does.

A sample's class is its label (class ids), the argmax of a one-hot row, or the rounded value
of a single column; its weight is `class_weight[class]`, 1 for a class the dict does not name.
Keras 3 refuses `class_weight` together with `sample_weight`; graphfit multiplies them, as
tf.keras 2 did (the weight of a sample is then `sample_weight * class_weight[class]`).

Example:

    >>> import numpy as np
    >>> weights = sample_weights(np.array([0, 1, 2, 1]), {0: 0.5, 1: 2.0})
    >>> weights.numpy().tolist()
    [0.5, 2.0, 1.0, 2.0]
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.core import validation
from graphfit.datasets.pipeline_functions import own_function
from graphfit.training import distribution

__all__ = ["check_class_weight", "sample_weights", "weigh_arrays", "weigh_dataset"]


def check_class_weight(class_weight) -> dict[int, float] | None:
    """`class_weight` as {class id: weight}, or None.

    Raises:
        ValueError: unless it is None or a dict from non-negative integer class ids to
            finite numbers.
    """
    if class_weight is None:
        return None
    if not isinstance(class_weight, dict) or not class_weight:
        raise validation.invalid(
            "class_weight", class_weight,
            "a dict from class ids to weights, e.g. {0: 1.0, 1: 5.0}")
    checked = {}
    for key, weight in class_weight.items():
        if not validation.is_integer(key) or key < 0:
            raise ValueError(
                f"class_weight keys must be class ids (integers >= 0). Received the key "
                f"{key!r} in class_weight={class_weight!r}.")
        checked[int(key)] = validation.finite_number(f"class_weight[{key}]", weight, minimum=0)
    return checked


def _refuse_several_outputs(y) -> None:
    if isinstance(y, (dict, list, tuple)):
        raise ValueError(
            "class_weight is only supported for models with a single output (as in Keras); "
            "the labels are a " + type(y).__name__ + ". For several outputs, pass "
            "sample_weight instead (computed from the classes of the output you weigh).")


def sample_weights(y, class_weight: dict[int, float], dtype=tf.float32) -> tf.Tensor:
    """One weight per sample of the labels `y` (a tensor or array; works inside a trace).

    Raises:
        ValueError: for labels with more than two axes, whose class Keras cannot read either.
    """
    y = tf.convert_to_tensor(y)
    if y.shape.rank is not None and y.shape.rank > 2:
        raise ValueError(
            f"class_weight needs one class per sample: labels of shape (n,), (n, 1) or one-hot "
            f"(n, classes). Received labels of shape {tuple(y.shape)}; pass sample_weight "
            f"instead.")
    if y.shape.rank == 2:
        classes = tf.cond(tf.shape(y)[-1] > 1,
                          lambda: tf.argmax(y, axis=-1, output_type=tf.int32),
                          lambda: tf.cast(tf.round(tf.cast(y[:, 0], tf.float64)), tf.int32))
    else:
        classes = tf.cast(tf.round(tf.cast(y, tf.float64)), tf.int32)
    table = np.ones(max(class_weight) + 1)
    for key, weight in class_weight.items():
        table[key] = weight
    table = tf.constant(table, dtype)
    inside = (classes >= 0) & (classes < table.shape[0])
    picked = tf.gather(table, tf.clip_by_value(classes, 0, table.shape[0] - 1))
    return tf.where(inside, picked, tf.ones_like(picked))


def weigh_arrays(y, sample_weight, class_weight, dtype: tf.DType):
    """The sample weights of in-memory labels with `class_weight` applied (multiplied into
    `sample_weight` when both are given); `sample_weight` itself when there is none."""
    class_weight = check_class_weight(class_weight)
    if class_weight is None:
        return sample_weight
    if y is None:
        raise ValueError("class_weight needs labels: pass y.")
    _refuse_several_outputs(y)
    weights = sample_weights(np.asarray(y), class_weight, dtype).numpy()
    if sample_weight is None:
        return weights
    given = np.asarray(sample_weight, dtype.as_numpy_dtype)
    if given.shape[:1] != weights.shape or given.ndim > 2 or (given.ndim == 2
                                                              and given.shape[1] != 1):
        raise ValueError(
            f"class_weight multiplies sample_weight, which must then hold one weight per "
            f"sample (shape ({len(weights)},)). Received sample_weight of shape {given.shape}.")
    return given.reshape(weights.shape) * weights


def weigh_dataset(dataset: tf.data.Dataset, class_weight, name: str = "x"):
    """A dataset of (x, y) or (x, y, sample_weight) batches whose sample weights include
    `class_weight` (the dataset itself when `class_weight` is None)."""
    class_weight = check_class_weight(class_weight)
    if class_weight is None:
        return dataset
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise ValueError(
            f"class_weight needs labels: {name} must yield (x, y) or (x, y, sample_weight) "
            f"batches.")
    _refuse_several_outputs(spec[1])

    @own_function
    def weigh(x, y, sample_weight=None):
        weights = sample_weights(y, class_weight)
        if sample_weight is not None:
            weights = tf.reshape(tf.cast(sample_weight, weights.dtype), [-1]) * weights
        return x, y, weights

    weighed = dataset.map(weigh)  # each worker's own batches still (`per_worker`)
    return distribution.per_worker(weighed) if distribution.reads_per_worker(dataset) else weighed

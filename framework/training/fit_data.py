"""What `fit` trains and validates on, from Keras's data arguments: `validation_split` and
`class_weight`.

As in Keras, `validation_split` holds out the *last* fraction of the in-memory arrays, before
any shuffling (`floor(n * (1 - validation_split))` samples train), sample weights split with
them; `validation_data`, when given too, wins. `class_weight` then weighs the training part
only (validation reports the unweighted loss, as Keras's does).

Example:

    >>> import numpy as np
    >>> (x, y, w), held_out = split_for_validation(np.arange(10), np.arange(10), None, 0.2)
    >>> len(x), held_out[0].tolist()
    (8, [8, 9])
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from graphfit.core import validation
from graphfit.training import class_weights, graph_feeds
from graphfit.training.array_data import is_structure_of_arrays
from graphfit.training.feeds import refuse_python_iterators

__all__ = ["split_for_validation", "fit_data"]


def _rows(value, start: int, stop: int):
    """Rows `start` to `stop` of every array in `value` (an array, or a dict or list of
    them)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: _rows(v, start, stop) for k, v in value.items()}
    if is_structure_of_arrays(value):
        return [_rows(v, start, stop) for v in value]
    return np.asarray(value)[start:stop]


def split_for_validation(x, y, sample_weight, validation_split: float):
    """((x, y, sample_weight) of the first samples, (x, y, sample_weight) of the last
    `validation_split` fraction), as Keras splits them.

    Raises:
        ValueError: for a dataset or graphs (split them yourself, or pass validation_data),
            or too few samples to leave some on each side.
    """
    if isinstance(x, tf.data.Dataset) or graph_feeds.as_graph_set(x, "x") is not None:
        raise ValueError(
            f"validation_split is only supported for in-memory arrays (as in Keras), not for "
            f"a {type(x).__name__}: pass validation_data=... (for a dataset, e.g. "
            f"dataset.take(n) for validation and dataset.skip(n) for training).")
    leaves = [v for v in tf.nest.flatten(_rows(x, 0, None)) if v is not None]
    total = int(np.shape(leaves[0])[0]) if leaves else 0
    split_at = int(math.floor(total * (1.0 - validation_split)))
    if split_at in (0, total):
        raise ValueError(
            f"The training data holds {total} samples, too few to hold out "
            f"validation_split={validation_split} of them and train on the rest. Give more "
            f"data, or another validation_split.")
    return (tuple(_rows(v, 0, split_at) for v in (x, y, sample_weight)),
            tuple(_rows(v, split_at, total) for v in (x, y, sample_weight)))


def fit_data(model, x, y, sample_weight, *, class_weight, validation_split, validation_data):
    """(x, y, sample_weight, validation_data) for `fit`: the validation split held out and
    the class weights applied to the training samples.

    Raises:
        ValueError: for a bad `validation_split` or `class_weight` (see
            `graphfit.training.class_weights`).
    """
    refuse_python_iterators(x, "x")
    validation_split = validation.number_in_range(
        "validation_split", validation_split if validation_split is not None else 0.0,
        0.0, 1.0, include_high=False)
    class_weights.check_class_weight(class_weight)
    if validation_split and validation_data is None:
        (x, y, sample_weight), validation_data = split_for_validation(
            x, y, sample_weight, validation_split)
    if class_weight is not None:
        if isinstance(x, tf.data.Dataset):
            x = class_weights.weigh_dataset(x, class_weight)
        else:
            sample_weight = class_weights.weigh_arrays(y, sample_weight, class_weight,
                                                       model.dtype)
    return x, y, sample_weight, validation_data

"""User data as the compiled loops take it: arrays in the model's dtype, their specs, labels
arranged by output, and batches gathered from arrays or read from a dataset.

Example:

    >>> import numpy as np
    >>> to_arrays([1.0, 2.0], tf.float32, features=True).shape  # one feature per sample
    (2, 1)
    >>> arrange_targets([np.zeros(2), np.ones(2)], ["a", "b"], ["a"], "y")["b"].tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["to_arrays", "to_array", "spec_of", "relaxed_specs", "arrange_targets",
           "is_structure_of_arrays", "gather_batch", "as_tuple", "step_data", "pad_rows"]


def to_array(value, dtype: tf.DType):
    """One array (or tensor) in `dtype` if floating; a `tf.Variable` of that dtype as it is."""
    if isinstance(value, tf.Variable) and value.dtype == dtype:
        return value  # fed as it is: the loops read its value at each call
    # A tensor's NumPy view, read-only and not a copy (`.numpy()` copies, which costs time
    # on large data); a tensor cannot change under it.
    array = np.asarray(value)
    if array.dtype == object:
        raise ValueError(
            "Could not convert the data to a numeric array (ragged rows or mixed types?). "
            "Give equal-length numeric rows, or a tf.data.Dataset."
        )
    if np.issubdtype(array.dtype, np.floating) and array.dtype != dtype.as_numpy_dtype:
        array = array.astype(dtype.as_numpy_dtype)
    if array.dtype == np.bool_:
        array = array.astype(dtype.as_numpy_dtype)
    return array


def is_structure_of_arrays(value) -> bool:
    """Whether `value` is a list or tuple of arrays (several inputs or outputs; None for an
    output without labels, as Keras), not one array written as a list of rows."""
    arrays = [v for v in value if v is not None] if isinstance(value, (list, tuple)) else []
    return bool(arrays) and all(
        isinstance(v, (np.ndarray, tf.Tensor)) and np.ndim(v) >= 1 for v in arrays
    )


def to_arrays(value, dtype: tf.DType, *, features: bool, built=None):
    """User data (arrays, lists, tensors, dicts of them) as numpy arrays in the model's dtype.

    1-D feature arrays become one column, (n,) -> (n, 1), except where the model was built
    for one scalar per sample (`built`: the model's input specs, in the data's structure), so
    arrays read as a Dataset of the same data does; labels keep their shape.
    """
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: to_arrays(v, dtype, features=features,
                             built=built.get(k) if isinstance(built, dict) else None)
                for k, v in value.items()}
    if is_structure_of_arrays(value):
        parts = (list(built) if isinstance(built, (list, tuple)) and len(built) == len(value)
                 else [None] * len(value))
        return [to_arrays(v, dtype, features=features, built=b) for v, b in zip(value, parts)]
    array = to_array(value, dtype)
    scalar_samples = isinstance(built, tf.TensorSpec) and built.shape.rank == 1
    if features and len(array.shape) == 1 and not scalar_samples:
        array = array[:, None]
    return array


def spec_of(value):
    """TensorSpecs of arrays or tensors (a nest of them), with the batch axis left open."""
    if value is None:
        return None
    return tf.nest.map_structure(
        lambda a: None if a is None else tf.TensorSpec([None, *a.shape[1:]],
                                                       tf.as_dtype(a.dtype)), value
    )


def arrange_targets(y, output_names: list[str] | None, needed: list[str], name: str):
    """Labels in the structure the losses read: one array, or a dict by output name.

    Args:
        y: the labels (or their specs): an array, a dict by output name, or a list/tuple in
            output order.
        output_names: the model's outputs when it has several, else None.
        needed: the outputs that have a loss or metrics, so must have labels.
        name: how the labels are called in messages ("y", "validation_data labels").
    """
    if output_names is None:
        if isinstance(y, (dict, list, tuple)):
            raise ValueError(
                f"The model has one output, but {name} is a {type(y).__name__}; give one array."
            )
        return y
    if isinstance(y, (list, tuple)):
        if len(y) != len(output_names):
            raise ValueError(
                f"{name} has {len(y)} entries but the model has outputs {output_names}; give one "
                f"per output, in that order, or a dict by output name."
            )
        y = dict(zip(output_names, y))
    if not isinstance(y, dict):
        raise ValueError(
            f"The model has outputs {output_names}; give {name} as a dict by output name or a "
            f"list in that order."
        )
    unknown = sorted(set(y) - set(output_names), key=str)
    if unknown:  # a misspelt output would leave its labels unused (Keras refuses it too)
        raise ValueError(f"{name} has labels for {unknown}, which the model does not output "
                         f"(outputs: {output_names}); check the names.")
    y = {n: v for n, v in y.items() if v is not None}  # Keras's None for an output without loss
    missing = [n for n in needed if n not in y]
    if missing:
        raise ValueError(f"{name} lacks labels for outputs {missing} (outputs: {output_names}).")
    return {n: y[n] for n in output_names if n in y}


def gather_batch(data, indices):
    """The rows `indices` of every array in `data` (a structure of tensors, samples first).

    Example:

        >>> x, y = gather_batch((tf.constant([[1.0], [2.0], [3.0]]), tf.constant([4, 5, 6])),
        ...                     [2, 0])
        >>> x.numpy().ravel().tolist(), y.numpy().tolist()
        ([3.0, 1.0], [6, 4])
    """
    return tf.nest.map_structure(lambda t: tf.gather(t, indices), data)


def as_tuple(element) -> tuple:
    """A dataset element as `(x, ...)`: a bare `x` becomes `(x,)`."""
    return element if isinstance(element, tuple) else (element,)


def step_data(batch) -> tuple:
    """The batch as the model's step receives it: (x,), (x, y) or (x, y, sample_weight)."""
    batch = tuple(batch)
    while len(batch) > 1 and batch[-1] is None:
        batch = batch[:-1]
    return batch


def relaxed_specs(data):
    """The specs of `data` with any number of rows."""
    return tf.nest.map_structure(lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), data)


def pad_rows(index_batches, capacity: int) -> np.ndarray:
    """`index_batches` (steps x batch sample indices) padded with zero rows to `capacity`
    rows (never fewer than it has).

    Example:

        >>> pad_rows(np.array([[3, 4]]), 3).tolist()
        [[3, 4], [0, 0], [0, 0]]
    """
    index_batches = np.asarray(index_batches, np.int32)
    rows = index_batches.shape[0]
    if rows >= capacity:
        return index_batches
    padded = np.zeros((capacity, index_batches.shape[1]), np.int32)
    padded[:rows] = index_batches
    return padded

"""`training.class_weight` of a `stream`: `balanced` from the class counts of one pass over
the training split, class names resolved to ids.

`balanced` gives class k the weight n / (classes * n_k), sklearn's rule and a table's
(`graphfit.tabular.targets.balanced_class_weight`), with n_k counted over every training
record (not a sample). The weights then reach `fit(class_weight=...)`, which multiplies them
into each batch's sample weights (a `sample_weight:` column's too).

Example:

    >>> balanced_from_counts({0: 30, 1: 10}, 2)
    {0: 0.6666666666666666, 1: 2.0}
"""

from __future__ import annotations

import numpy as np

__all__ = ["stream_class_weight", "class_counts", "balanced_from_counts", "named_class_weight"]


def _error(message: str):
    from graphfit.recipes.running.data_loading import DataError

    return DataError(("training", "class_weight"), message)


def balanced_from_counts(counts: dict, num_classes: int) -> dict:
    """{class id: n / (num_classes * count)}; a class never seen gets 1."""
    total = sum(counts.values())
    return {k: (float(total / (num_classes * counts[k])) if counts.get(k) else 1.0)
            for k in range(num_classes)}


def class_counts(stream, part, names=None) -> dict:
    """{class id: records} of the target over `part` (one pass; class names mapped to ids
    through `names`).

    Raises:
        BadRecordError: a record that cannot be read, with its file and index.
    """
    import tensorflow as tf

    counts: dict = {}
    try:
        for batch in stream.feature_batches(part, 4096, cycle_length=1):
            values, seen = np.unique(batch[stream.target].numpy(), return_counts=True)
            for value, count in zip(values, seen):
                counts[value] = counts.get(value, 0) + int(count)
    except tf.errors.OpError as error:
        raise stream.bad_record(part, error) from None
    if names is not None:
        return {names.names.index(v.decode().strip()): n for v, n in counts.items()}
    if any(isinstance(v, bytes) or not float(v).is_integer() or v < 0 for v in counts):
        raise _error(f"'balanced' needs class ids (whole numbers from 0) or class names in "
                     f"the target {stream.target!r}; it holds {sorted(counts)[:5]}")
    return {int(v): n for v, n in counts.items()}


def stream_class_weight(value, stream, part, names):
    """training.class_weight of a stream as {class id: weight}, or None.

    Raises:
        DataError: without a target, a class name the target does not have, `balanced` of a
            target that holds no class ids.
    """
    if value is None:
        return None
    if stream.target is None:
        raise _error(f"{value!r}: class weights need a target column (data.target)")
    if value == "balanced":
        counts = class_counts(stream, part, names)
        size = len(names.names) if names is not None else max(counts) + 1
        return balanced_from_counts(counts, size)
    return named_class_weight(value, names)


def named_class_weight(value: dict, names) -> dict:
    """`{class name or id: weight}` as {class id: weight}, names looked up in `names` (a
    `ClassNames`, or None for a target of ids); a table's and a stream's class_weight alike.

    Raises:
        DataError: at training.class_weight, for a name the target does not have.
    """
    resolved = {}
    for key, weight in value.items():
        if isinstance(key, str):
            if names is None or key not in names.names:
                known = ", ".join(names.names) if names is not None else "ids only: the " \
                    "target holds numbers"
                raise _error(f"{key!r} is not a class of the target ({known})")
            key = names.names.index(key)
        resolved[key] = weight
    return resolved

"""Checks on user data, run before any training step so bad data fails fast and clearly.

Each check raises `ValueError` with what was wrong, where (which argument, which sample) and how
to fix it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.core.shapes import shape_text
from graphfit.training.losses import LossKind

__all__ = ["check_same_length", "check_finite", "check_features", "check_labels",
           "label_checks", "NonFiniteData", "OptimizerMismatch"]


def _leaves(name: str, value) -> list[tuple[str, np.ndarray]]:
    if value is None:
        return []
    if isinstance(value, dict):  # None: an output without labels (Keras)
        return [(f"{name}[{k!r}]", np.asarray(v)) for k, v in value.items() if v is not None]
    if isinstance(value, (list, tuple)):
        return [(f"{name}[{i}]", np.asarray(v)) for i, v in enumerate(value) if v is not None]
    return [(name, np.asarray(value))]


def check_same_length(named: dict[str, object]) -> int:
    """All arrays have one row per sample; returns the number of samples."""
    lengths = []
    for name, value in named.items():
        for leaf_name, array in _leaves(name, value):
            if array.ndim == 0:
                raise ValueError(
                    f"{leaf_name} is a scalar; it needs one row per sample (shape (samples, ...))."
                )
            lengths.append((leaf_name, array.shape[0]))
    distinct = {n for _, n in lengths}
    if len(distinct) > 1:
        described = ", ".join(f"{name} has {n}" for name, n in lengths)
        raise ValueError(
            f"The data arrays disagree on the number of samples: {described}. Every array must "
            f"have one row per sample."
        )
    if not lengths or lengths[0][1] == 0:
        raise ValueError(f"{next(iter(named), 'x')} is empty: there is nothing to train on.")
    return lengths[0][1]


class NonFiniteData(ValueError):
    """The data holds NaN or infinite values (a problem of the data, not of the model)."""


class OptimizerMismatch(ValueError):
    """The compiled optimizer cannot minimise the compiled loss with the default training
    step (`BaseOptimizer.check_training`), found before the first step."""


def check_finite(named: dict[str, object]) -> None:
    """No NaN or infinite value in floating arrays (pass check_finite=False to skip).

    Raises:
        NonFiniteData: naming the array, the counts and the first bad index.
    """
    for name, value in named.items():
        for leaf_name, array in _leaves(name, value):
            if not np.issubdtype(array.dtype, np.floating):
                continue
            finite = np.isfinite(array)
            if finite.all():
                continue
            bad = np.argwhere(~finite)[0]
            nans = int(np.isnan(array).sum())
            infs = int(np.isinf(array).sum())
            raise NonFiniteData(
                f"{leaf_name} contains {nans} NaN and {infs} infinite values; the first is at "
                f"index {tuple(int(i) for i in bad)}. Clean or impute the data (check_finite=False "
                f"lets them through, for a model that handles NaN itself; any other model's "
                f"loss turns NaN at the first batch that holds one)."
            )


def check_features(name: str, array_shape, expected: tf.TensorSpec) -> None:
    """The samples have the shape the model was built for."""
    got = tf.TensorShape([None] + list(array_shape)[1:])
    if not got.is_compatible_with(expected.shape):
        raise ValueError(
            f"{name} has samples of shape {shape_text(got[1:])}, but the model was built for "
            f"samples of shape {shape_text(expected.shape[1:])}. Reshape the data, or build a "
            f"new model for this shape."
        )


def check_labels(name: str, y: np.ndarray, output: tf.TensorSpec, kind: LossKind) -> None:
    """Labels fit the loss and the model's output: class ids in range, 0/1 targets, shapes."""
    y = np.asarray(y)
    if not (np.issubdtype(y.dtype, np.number) or y.dtype == np.bool_):
        raise ValueError(
            f"{name} must be numeric; it holds {y.dtype} values such as {y.flat[0]!r}. Encode "
            f"class names as integer ids (e.g. with np.unique(labels, return_inverse=True))."
        )
    outputs = output.shape[-1] if output.shape.rank else None
    if kind.labels == "sparse_categorical":
        if not np.issubdtype(y.dtype, np.integer) and not np.all(np.mod(y, 1) == 0):
            raise ValueError(
                f"{name} must hold integer class ids for a sparse categorical loss; it has "
                f"non-integer values such as {y[np.mod(y, 1) != 0].flat[0]!r}."
            )
        counted = y if kind.ignore_class is None else y[y != kind.ignore_class]
        if outputs is not None and counted.size and (
                counted.min() < 0 or counted.max() >= outputs):
            bad = counted.min() if counted.min() < 0 else counted.max()
            ignored = ("" if kind.ignore_class is None
                       else f" (or {kind.ignore_class}, the loss's ignore_class)")
            raise ValueError(
                f"{name} contains label {int(bad)}, but the model outputs {outputs} classes, so "
                f"labels must lie in 0..{outputs - 1}{ignored}. Give the last layer as many "
                f"units as there are classes, or fix the labels."
            )
        return
    if kind.labels == "own_shape":
        return  # the loss defines the labels' shape (CTC, Circle) and checks it itself
    if kind.labels == "binary" and y.size and (y.min() < 0 or y.max() > 1):
        raise ValueError(
            f"{name} must hold targets in [0, 1] for a binary cross-entropy loss; found values "
            f"from {y.min()} to {y.max()}."
        )
    if kind.labels == "categorical" and y.shape[1:] != tuple(output.shape[1:]):
        raise ValueError(
            f"{name} has rows of shape {shape_text(y.shape[1:])} but the model outputs "
            f"{shape_text(output.shape[1:])}. A categorical loss needs one-hot rows; for integer "
            f"class ids use sparse_categorical_crossentropy."
        )
    _check_target_shape(name, y.shape, output)


def _check_target_shape(name: str, shape, output: tf.TensorSpec) -> None:
    target = list(shape[1:])
    predicted = output.shape.as_list()[1:]
    # Keras squeezes a trailing axis of size 1 on one side, so (n,) targets fit (n, 1) outputs.
    if target[-1:] == [1] and len(target) == len(predicted) + 1:
        target = target[:-1]
    if predicted[-1:] == [1] and len(predicted) == len(target) + 1:
        predicted = predicted[:-1]
    compatible = len(target) == len(predicted) and all(
        p is None or t == p or t == 1 or p == 1 for t, p in zip(target, predicted)
    )
    if not compatible:
        raise ValueError(
            f"{name} has targets of shape {shape_text([None] + list(shape[1:]))} but the model "
            f"predicts {shape_text(output.shape)}. Make the last layer produce one value per "
            f"target, or reshape the targets."
        )


def label_checks(y, checks: dict) -> list:
    """The loss's checks of one batch of labels read from a dataset (in-memory labels are
    checked whole, before training, by `check_labels`).

    Args:
        y: the batch's labels (a dict by output name for several outputs).
        checks: {output or None: (name for messages, output TensorSpec, LossKind)}.

    Returns:
        `(ok, message)` pairs (`Layer.batch_checks`'s form).
    """
    found = []
    for output, (name, spec, kind) in checks.items():
        labels = tf.cast(y if output is None else y[output], tf.float64)
        if kind.labels == "sparse_categorical" and spec.shape[-1] is not None:
            classes = int(spec.shape[-1])
            ok = (labels >= 0) & (labels < classes)
            ignored = ""
            if kind.ignore_class is not None:
                ok |= tf.equal(labels, float(kind.ignore_class))
                ignored = f" (or {kind.ignore_class}, the loss's ignore_class)"
            found.append((ok, (
                f"{name} contains a label outside 0..{classes - 1}{ignored}, but the model "
                f"outputs {classes} classes. Fix the labels, or give the last layer as many "
                f"units as there are classes.")))
        elif kind.labels == "binary":
            found.append(((labels >= 0) & (labels <= 1), (
                f"{name} must hold targets in [0, 1] for a binary cross-entropy loss.")))
    return found

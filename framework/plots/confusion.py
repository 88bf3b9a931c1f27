"""`confusion_matrix`: a classifier's confusion matrix as a PNG, counts in the cells."""

from __future__ import annotations

import numpy as np

from graphfit.plots import backend
from graphfit.plots.curves import PlotResult

__all__ = ["CONFUSION_MATRIX", "confusion_counts", "confusion_matrix"]

CONFUSION_MATRIX = "confusion_matrix.png"
_MAX_ANNOTATED = 30  # more classes than this: cells too small for their counts


def _class_ids(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        array = array.reshape(-1) if array.size == len(array) else array
    if array.ndim != 1:
        raise ValueError(f"{name} must be one class id per example (a 1-D array); received "
                         f"shape {array.shape}. For one-hot rows or probabilities pass "
                         f"their argmax along the last axis")
    if array.dtype.kind not in "iub" and not (
            array.dtype.kind == "f" and np.all(np.isfinite(array))
            and np.all(array == np.round(array))):
        raise ValueError(f"{name} must hold integer class ids; received values such as "
                         f"{array[:3].tolist()}")
    if array.size and array.min() < 0:
        raise ValueError(f"{name} holds a negative class id ({array.min()}): class ids count "
                         f"from 0")
    return array.astype(np.int64)


def confusion_counts(y_true, y_pred, num_classes: int | None = None) -> np.ndarray:
    """The (classes x classes) counts: row = true class, column = predicted class.

    Example:
        >>> confusion_counts([0, 0, 1, 2], [0, 1, 1, 2]).tolist()
        [[1, 1, 0], [0, 1, 0], [0, 0, 1]]
    """
    true, pred = _class_ids(y_true, "y_true"), _class_ids(y_pred, "y_pred")
    if len(true) != len(pred):
        raise ValueError(f"y_true has {len(true)} examples but y_pred has {len(pred)}: give "
                         f"one prediction per label")
    if len(true) == 0:
        raise ValueError("y_true and y_pred are empty: a confusion matrix needs examples")
    largest = int(max(true.max(), pred.max())) + 1
    count = largest if num_classes is None else num_classes
    if count < largest:
        raise ValueError(f"a class id is {largest - 1} but there are only {count} classes "
                         f"(num_classes or class_names): ids must be below {count}")
    matrix = np.zeros((count, count), dtype=np.int64)
    np.add.at(matrix, (true, pred), 1)
    return matrix


def confusion_matrix(y_true, y_pred, path: str, class_names=None,
                     title: str = "confusion matrix (test)") -> PlotResult:
    """Writes a confusion matrix PNG: counts in the cells, coloured by the fraction of each
    true class (rows normalized), so small classes read as clearly as large ones.

    Args:
        y_true: the true class id of every example (integers from 0).
        y_pred: the predicted class id of every example.
        path: the PNG to write (`confusion_matrix.png` in a run directory).
        class_names: a name per class, or None for the ids; their number sets the number of
            classes (classes never seen still get a row and a column).
        title: the chart's title.

    Returns:
        PlotResult: `paths` = [the PNG]; `data` = {"counts": rows of counts (true class per
        row), "row_fractions": the same divided by each row's total (0 for an empty row),
        "class_names": the labels used}.

    Raises:
        ValueError: for labels that are not integer class ids, different lengths, or more
            ids than class names.
        PlotsUnavailable: when matplotlib is not installed.
    """
    names = None if class_names is None else [str(name) for name in class_names]
    counts = confusion_counts(y_true, y_pred, None if names is None else len(names))
    names = names or [str(k) for k in range(len(counts))]
    totals = counts.sum(axis=1, keepdims=True)
    fractions = np.divide(counts, totals, out=np.zeros(counts.shape), where=totals > 0)
    size = min(max(3.8, 0.55 * len(names) + 2.0), 16.0)
    figure = backend.new_figure(size + 1.0, size)
    axes = figure.add_subplot(1, 1, 1)
    image = axes.imshow(fractions, cmap="Blues", vmin=0.0, vmax=1.0)
    figure.colorbar(image, ax=axes, shrink=0.8, label="fraction of the true class")
    if len(names) <= _MAX_ANNOTATED:
        for (row, column), count in np.ndenumerate(counts):
            axes.text(column, row, str(count), ha="center", va="center",
                      fontsize=9 if len(names) <= 12 else 7,
                      color="white" if fractions[row, column] > 0.55 else "#222222")
    ticks = range(len(names))
    axes.set_xticks(ticks, names, rotation=45 if max(map(len, names)) > 3 else 0,
                    ha="right" if max(map(len, names)) > 3 else "center")
    axes.set_yticks(ticks, names)
    axes.tick_params(labelsize=9)
    axes.set_xlabel("predicted class")
    axes.set_ylabel("true class")
    accuracy = np.trace(counts) / counts.sum()
    axes.set_title(f"{title}\n{counts.sum()} examples, accuracy {accuracy:.3f}", fontsize=10)
    written = backend.save_png(figure, path)
    return PlotResult([written], {"counts": counts.tolist(), "row_fractions": fractions.tolist(),
                                  "class_names": names})

"""The plots of a finished run (called at the end of a recipe run) and `graphfit plot`.

At the end of a run: `learning_curves.png` always; `fit.png` (data, fit and bands) for a
curve-fit run (one that wrote `fitted_curve.json`); `confusion_matrix.png` for a classifier
(one output whose loss is a sparse / categorical or binary cross-entropy) with a test split.
Without matplotlib the run still finishes: a warning says how to get the plots. The
environment variable `GRAPHFIT_PLOTS=0` turns the end-of-run plots off (a test suite that
trains many small runs, a cluster job that never looks at them); `graphfit plot` draws them
later from the run directory.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from graphfit.plots.backend import PlotsUnavailable
from graphfit.plots.comparison import compare_runs
from graphfit.plots.confusion import CONFUSION_MATRIX, confusion_matrix
from graphfit.plots.curves import learning_curves
from graphfit.plots.fitted_curve import fitted_curve, has_fitted_curve

__all__ = ["classifier_labels", "labels_of_split", "plot_run", "plot_finished_run", "plot_command",
           "plots_enabled", "ENVIRONMENT_SWITCH"]

ENVIRONMENT_SWITCH = "GRAPHFIT_PLOTS"
_OFF, _ON = ("0", "false", "no", "off"), ("", "1", "true", "yes", "on")


def plots_enabled() -> bool:
    """Whether runs draw their plots at the end: `GRAPHFIT_PLOTS` unset or 1/true/yes/on;
    0/false/no/off turns them off (any other value warns and keeps them on)."""
    value = os.environ.get(ENVIRONMENT_SWITCH, "").strip().lower()
    if value in _OFF:
        return False
    if value not in _ON:
        warnings.warn(f"{ENVIRONMENT_SWITCH}={os.environ[ENVIRONMENT_SWITCH]!r} is neither "
                      f"on (1, true, yes, on) nor off (0, false, no, off): drawing the plots",
                      stacklevel=3)
    return True


def classifier_labels(model, x, y, batch_size: int | None = 256):
    """(true class ids, predicted class ids) of a single-output classifier on (x, y), or
    None when the model is not one (its loss is not a cross-entropy, or it has several
    outputs or several binary labels per example).

    Predicted classes follow the loss: the argmax of the outputs for (sparse) categorical
    cross-entropy; output > 0 for binary cross-entropy on logits, > 0.5 on probabilities.
    """
    state = getattr(model, "compile_state", None)
    loss_set = getattr(state, "loss_set", None)
    if loss_set is None or loss_set.output_names is not None or y is None:
        return None
    kind = loss_set.kind()
    if kind.labels not in ("binary", "categorical", "sparse_categorical"):
        return None
    outputs = np.asarray(model.predict(x, batch_size=batch_size, verbose=0))
    outputs = outputs.reshape(len(outputs), -1)
    labels = np.asarray(y).reshape(len(outputs), -1)
    if kind.labels == "binary":
        if outputs.shape[1] != 1:
            return None  # multi-label: no single class per example
        threshold = 0.0 if kind.from_logits else 0.5
        return np.rint(labels[:, 0]).astype(int), (outputs[:, 0] > threshold).astype(int)
    predicted = outputs.argmax(axis=1)
    true = labels.argmax(axis=1) if kind.labels == "categorical" else labels[:, 0]
    return np.rint(true).astype(int), predicted


def plot_run(run_dir: str, model=None, test_data=None, class_names=None,
             labels=None) -> list[str]:
    """Writes a run's plots into its directory and returns their paths: the learning curves,
    and the test split's confusion matrix when `model` is a classifier and `test_data` an
    (x, y) pair, or when `labels` gives (true, predicted) class ids already.

    Raises:
        HistoryError: when the run has no readable history.json.
        PlotsUnavailable: when matplotlib is not installed.
    """
    paths = learning_curves(run_dir).paths
    if has_fitted_curve(run_dir):  # a curve-fit run: data, fit and band
        paths += fitted_curve(run_dir).paths
    if labels is None and model is not None and isinstance(test_data, tuple) \
            and len(test_data) == 2:
        labels = classifier_labels(model, *test_data)
    if labels is not None:
        binary = model is not None and model.compile_state.loss_set.kind().labels == "binary"
        names = class_names or (["0", "1"] if binary else None)
        paths += confusion_matrix(*labels, os.path.join(run_dir, CONFUSION_MATRIX),
                                  class_names=names).paths
    return paths


def labels_of_split(model, test_data):
    """`classifier_labels` of a run's test split, or None (no (x, y) test split, not a
    classifier, or plots turned off). Under several workers every worker must call it: the
    prediction is a collective. A `tf.data.Dataset` of (x, y) batches (an image folder's
    split) is read twice: its labels, then its inputs for the predictions."""
    if not plots_enabled():
        return None
    import tensorflow as tf

    from graphfit.datasets.pipeline_functions import own_function
    from graphfit.training.distribution import reads_per_worker

    if reads_per_worker(test_data):  # each worker holds its own part of the split (a stream)
        return None  # under several workers: no confusion matrix (on every worker alike)
    if isinstance(test_data, tf.data.Dataset) and len(test_data.element_spec) == 2:
        labels = [np.asarray(y) for y in test_data.map(
            own_function(lambda x, y: y)).as_numpy_iterator()]
        if not labels:
            return None
        inputs = test_data.map(own_function(lambda x, y: x))
        return classifier_labels(model, inputs, np.concatenate(labels), batch_size=None)
    if not (isinstance(test_data, tuple) and len(test_data) == 2):
        return None
    return classifier_labels(model, *test_data)


def plot_finished_run(run_dir: str, model=None, test_data=None, class_names=None,
                      labels=None) -> list[str]:
    """`plot_run` for the end of a training run: without matplotlib it warns (how to install
    it) and returns [] instead of failing a run that trained well; with `GRAPHFIT_PLOTS=0` it
    draws nothing and returns []."""
    if not plots_enabled():
        return []
    try:
        return plot_run(run_dir, model, test_data, class_names, labels)
    except PlotsUnavailable as error:
        warnings.warn(f"no plots were drawn for {run_dir}: {error}", stacklevel=2)
        return []


def plot_command(run_dirs: list[str], output: str | None = None) -> list[str]:
    """`graphfit plot RUN [RUN ...] [--output DIR]`: one run → its learning curves (in the run
    directory, or in `output` when given); several → `comparison_<metric>.png` charts in
    `output` (default: the current directory). Returns the files written.

    Raises:
        HistoryError: for a run without a readable history.json.
        PlotsUnavailable: when matplotlib is not installed.
        ValueError: when `output` is a file.
    """
    if output is not None and os.path.exists(output) and not os.path.isdir(output):
        raise ValueError(f"--output {output} is a file, not a folder; give a folder for the "
                         f"PNG files")
    if len(run_dirs) == 1:
        target = None if output is None else os.path.join(output, "learning_curves.png")
        paths = learning_curves(run_dirs[0], target).paths
        if has_fitted_curve(run_dirs[0]):  # a curve-fit run: data, fit and band
            paths += fitted_curve(run_dirs[0], None if output is None else os.path.join(
                output, "fit.png")).paths
        return paths
    return compare_runs(run_dirs, output or ".").paths

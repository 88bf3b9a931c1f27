"""Keras's losses and metrics in graphfit: every public name works as in Keras, or is listed
here with how it differs or why it is refused.

The "Losses and metrics" section of `docs/guides/keras_parity.md` is generated from this module
(`markdown()`), and `tests/keras_parity/` walks the same names: each one listed as working is run
through Keras and graphfit and compared, so neither the table nor the tests can forget a name
Keras adds. Regenerate the section with:

    python -m graphfit.training.loss_metric_parity --write
"""

from __future__ import annotations

import pathlib
import re
import sys

import keras

__all__ = ["LOSS_ALIASES", "METRIC_ALIASES", "LOSS_NOTES", "METRIC_NOTES", "ARGUMENT_ROWS",
           "NOT_LOSSES_OR_METRICS", "keras_loss_names", "keras_metric_names", "status",
           "markdown", "write_section", "section_of"]

# The strings Keras accepts besides the public names (keras/src/losses/__init__.py and
# metrics/__init__.py ALL_OBJECTS_DICT; "crossentropy", "ce", "accuracy" and "acc" are
# chosen by shape in keras/src/trainers/compile_utils.py).
LOSS_ALIASES = ("bce", "BCE", "kld", "KLD", "mae", "MAE", "mse", "MSE", "mape", "MAPE",
                "msle", "MSLE", "crossentropy", "ce")
METRIC_ALIASES = ("bce", "BCE", "mse", "MSE", "mae", "MAE", "mape", "MAPE", "msle", "MSLE",
                  "accuracy", "acc")

# Public names of keras.losses / keras.metrics that are neither a loss nor a metric.
NOT_LOSSES_OR_METRICS = ("get", "serialize", "deserialize", "Reduction")

# name: (status, why and what to do instead); every other name "works".
LOSS_NOTES = {
    "Loss": ("works", "the base class: a subclass (or an instance of one) is a loss, computed "
                      "in the model's dtype"),
    "CategoricalGeneralizedCrossEntropy": (
        "differs", "graphfit takes the name too; Keras's `losses.get` does not know it (the "
                   "object works in both)"),
    "categorical_generalized_cross_entropy": (
        "differs", "graphfit takes the name too (the class with its defaults, `q=0.5`); "
                   "Keras's `losses.get` does not know it"),
}

_NEEDS_ARGUMENTS = ("as an object with its arguments: its constructor needs them, so Keras's "
                    "`metrics.get` cannot make it from the name either")
_NOT_BY_NAME = ("by name, as in Keras, whose `metrics.get` does not know it (a function of "
                "`keras.metrics` all the same): pass "
                "`keras.metrics.MeanMetricWrapper(keras.metrics.NAME)`")

METRIC_NOTES = {
    "Metric": ("works", "the base class: pass an instance of your subclass"),
    "MeanMetricWrapper": ("works", "as an object around a function `fn(y_true, y_pred)`"),
    "Mean": ("refused", "not a `(y_true, y_pred)` metric: Keras's `compile(metrics=[Mean()])` "
                        "fails too. Return the value in `StepResult(logs={...})` from your "
                        "own step; it is averaged over the epoch"),
    "Sum": ("refused", "not a `(y_true, y_pred)` metric (Keras's compile fails too); return "
                       "the value in `StepResult(logs={...})` from your own step"),
    **{name: ("works", _NEEDS_ARGUMENTS) for name in (
        "IoU", "MeanIoU", "OneHotIoU", "OneHotMeanIoU", "PrecisionAtRecall",
        "RecallAtPrecision", "SensitivityAtSpecificity", "SpecificityAtSensitivity")},
    **{name: ("refused", _NOT_BY_NAME) for name in (
        "huber", "log_cosh", "binary_focal_crossentropy", "categorical_focal_crossentropy")},
}

# Arguments and behaviours that hold for many names: (Keras API, status, why).
ARGUMENT_ROWS = (
    ("`metrics=[\"accuracy\"]` / `\"acc\"`", "works",
     "binary, sparse categorical or categorical accuracy chosen from the labels' and outputs' "
     "shapes, as Keras's `compile_utils.get_metric`"),
    ("`loss=\"crossentropy\"` / `\"ce\"`", "works",
     "binary, sparse categorical or categorical cross-entropy chosen from the shapes, as Keras"),
    ("`\"accuracy\"`, `\"precision\"`, `\"recall\"`, `\"auc\"` by name with a binary "
     "cross-entropy loss `from_logits=True`", "differs",
     "graphfit thresholds the logits at 0 (`AUC(from_logits=True)`), which is the 0.5 of the "
     "probabilities; Keras thresholds the logits at 0.5. Pass the metric object "
     "(`keras.metrics.BinaryAccuracy(threshold=0.5)`) for Keras's numbers"),
    ("`thresholds=[...]` (`Precision`, `Recall`, `TruePositives`, ...)", "works",
     "one NumPy array per key in the logs, `history` and `evaluate`, as Keras. TensorBoard, "
     "`history.json` and `metrics.json` take one number per key: there they are "
     "`precision_0`, `precision_1`, ... (Keras's TensorBoard passes the array to "
     "`tf.summary.scalar`, which takes scalars only)"),
    ("`F1Score()`, `FBetaScore()` without `average`", "works",
     "one value per class, an array in the logs as in Keras (TensorBoard: one scalar per class)"),
    ("progress bar of an array metric", "differs",
     "prints every element (`precision: [0.5000 0.2500]`); Keras prints their mean"),
    ("`ignore_class` (`SparseCategoricalCrossentropy`, IoU metrics)", "works",
     "the label checks let the ignored class through, in arrays and in datasets"),
    ("`top_k`, `class_id`, `from_logits`, `label_smoothing`, `axis`, `reduction`", "works",
     "the Keras objects compute them; graphfit rebuilds the object in the model's dtype from "
     "its config"),
    ("`sample_weight` with `loss`, `metrics`, `weighted_metrics`", "works",
     "the loss and `weighted_metrics` read the sample weights, `metrics` ignore them, as Keras"),
    ("training numbers of an array metric, with `validation_data`", "differs",
     "Keras logs a NumPy view of the metric's variables, which its validation pass then "
     "resets and refills: Keras's training numbers of such a metric are the validation "
     "data's. graphfit logs a copy: the training data's numbers (Keras's without validation)"),
    ("metric state of train, validation and test", "differs",
     "each stage owns its metric objects (cloned from what `compile` received), reset at its "
     "own start: the epoch logs are Keras's numbers, but an `evaluate` in the middle of an "
     "epoch (in a callback) no longer resets the training numbers as it does in Keras"),
    ("a binary metric (`AUC`, `Precision`, ...) on a multi-class output with class-id labels",
     "refused", "Keras fails inside the graph with a shape error; graphfit says why and "
                "suggests `accuracy`, one-hot labels or one sigmoid output"),
)


def _public(module) -> list[str]:
    return sorted(name for name in dir(module)
                  if not name.startswith("_") and name not in NOT_LOSSES_OR_METRICS)


def keras_loss_names() -> list[str]:
    """Every string and class Keras's `compile(loss=...)` knows: the public names of
    `keras.losses`, then Keras's aliases."""
    return _public(keras.losses) + list(LOSS_ALIASES)


def keras_metric_names() -> list[str]:
    """The same for `compile(metrics=...)`: `keras.metrics`' public names and aliases."""
    return _public(keras.metrics) + list(METRIC_ALIASES)


def status(kind: str, name: str) -> tuple[str, str]:
    """(status, why) of a loss or metric name: "works", "differs" or "refused"."""
    notes = LOSS_NOTES if kind == "loss" else METRIC_NOTES
    return notes.get(name, ("works", ""))


def markdown() -> str:
    """The "Losses and metrics" section of docs/guides/keras_parity.md, without its heading."""
    lines = [
        "Generated by `python -m graphfit.training.loss_metric_parity --write` from",
        "`graphfit/training/loss_metric_parity.py`; `tests/keras_parity/test_losses.py` and",
        "`test_metrics.py` run every name marked *works* through Keras and graphfit (same",
        "weights, same data: `evaluate` and one `fit` epoch's logs) and fail when Keras has a",
        "name this table lacks.",
        "",
        "| Keras API | status | why / what to do instead |",
        "|---|---|---|",
    ]
    lines += [f"| {api} | {state} | {why} |" for api, state, why in ARGUMENT_ROWS]
    for kind, names in (("loss", keras_loss_names()), ("metric", keras_metric_names())):
        grouped: dict[tuple[str, str], list[str]] = {}
        for name in names:
            grouped.setdefault(status(kind, name), []).append(f"`{name}`")
        for (state, why), members in sorted(grouped.items()):
            where = "losses" if kind == "loss" else "metrics"
            text = why or ("by name and as an object, Keras's numbers" if state == "works" else "")
            lines.append(f"| {where}: {', '.join(members)} | {state} | {text} |")
    return "\n".join(lines) + "\n"


_SECTION = re.compile(r"(## Losses and metrics\n\n)(.*?)(?=\n## |\Z)", re.S)


def write_section(path: str | pathlib.Path) -> None:
    """Replaces the body of the "## Losses and metrics" section of `path` by `markdown()`."""
    path = pathlib.Path(path)
    text = path.read_text(encoding="utf-8")
    if not _SECTION.search(text):
        raise ValueError(f"{path} has no '## Losses and metrics' section to fill.")
    path.write_text(_SECTION.sub(lambda m: m.group(1) + markdown(), text, count=1),
                    encoding="utf-8")


def section_of(path: str | pathlib.Path) -> str:
    """The body of the "## Losses and metrics" section of `path`, as written there."""
    match = _SECTION.search(pathlib.Path(path).read_text(encoding="utf-8"))
    return match.group(2) if match else ""


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m graphfit.training.loss_metric_parity --write")
    target = pathlib.Path(__file__).resolve().parents[2] / "docs" / "guides" / "keras_parity.md"
    write_section(target)
    print(f"wrote the 'Losses and metrics' section of {target}")

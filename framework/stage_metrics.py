"""Per-stage metric state: train, validation and test each own their metric variables.

Keras 3 shares one set of metric variables between `fit`'s training numbers and `evaluate`, and
resets it when a stage starts, so a validation pass in the middle of an epoch can disturb the
training numbers. graphfit gives each stage its own `StageMetrics`: fresh Keras metric objects
(cloned from what `compile` received) and a loss tracker, reset at the start of that stage only.
"""

from __future__ import annotations

import functools

import keras
import tensorflow as tf

from graphfit.losses import LossKind, LossSet
from graphfit.registry import closest

__all__ = ["StageMetrics", "STAGES", "stage_prefix", "resolve_metric", "check_metric_identifier"]

STAGES = ("train", "val", "test")


def stage_prefix(stage: str) -> str:
    """'' for train, 'val_' and 'test_': the prefix of a stage's keys in epoch logs."""
    return "" if stage == "train" else f"{stage}_"


@functools.cache
def _valid_metric_names() -> list[str]:
    names = {"accuracy", "acc", "auc"}
    for attribute in dir(keras.metrics):
        if attribute.startswith("_") or attribute in ("get", "serialize", "deserialize"):
            continue
        value = getattr(keras.metrics, attribute)
        if callable(value) and attribute[0].islower():
            names.add(attribute)
    return sorted(names)


def check_metric_identifier(identifier) -> None:
    """Fails at compile time on a metric name Keras does not know."""
    if isinstance(identifier, keras.metrics.Metric) or (
        callable(identifier) and not isinstance(identifier, str)
    ):
        return
    if not isinstance(identifier, str):
        raise TypeError(
            f"A metric must be a name, a keras.metrics.Metric or a function (y_true, y_pred). "
            f"Received: {identifier!r}"
        )
    if identifier.lower() in ("accuracy", "acc"):
        return
    try:
        keras.metrics.get(identifier)
    except ValueError:
        suggestion = closest(identifier, _valid_metric_names())
        hint = f" Did you mean {suggestion!r}?" if suggestion else ""
        raise ValueError(
            f"Unknown metric {identifier!r}.{hint} Valid metric names: "
            f"{', '.join(_valid_metric_names())}; or pass a keras.metrics.Metric object or a "
            f"function (y_true, y_pred)."
        ) from None


def resolve_metric(identifier, y_true: tf.TensorSpec, y_pred: tf.TensorSpec,
                   kind: LossKind) -> keras.metrics.Metric:
    """A fresh Keras metric object for one stage and one output.

    "accuracy" picks binary, sparse-categorical or categorical accuracy from the shapes, as Keras
    does. When the loss says the outputs are binary logits, threshold metrics ("accuracy",
    "precision", "recall", "auc") are set up for logits (threshold 0, AUC(from_logits=True)),
    which Keras leaves to the user.
    """
    binary_logits = kind.labels == "binary" and kind.from_logits
    if isinstance(identifier, keras.metrics.Metric):
        return type(identifier).from_config(identifier.get_config())
    if not isinstance(identifier, str):
        return keras.metrics.MeanMetricWrapper(identifier, name=getattr(identifier, "__name__", "metric"))
    name = identifier
    lowered = identifier.lower()
    if lowered in ("accuracy", "acc"):
        if y_pred.shape[-1] == 1:
            return keras.metrics.BinaryAccuracy(name=name, threshold=0.0 if binary_logits else 0.5)
        sparse = y_true.shape.rank < y_pred.shape.rank or (
            y_true.shape[-1] == 1 and (y_pred.shape[-1] or 0) > 1
        )
        if sparse:
            return keras.metrics.SparseCategoricalAccuracy(name=name)
        return keras.metrics.CategoricalAccuracy(name=name)
    if binary_logits and lowered == "auc":
        return keras.metrics.AUC(name=name, from_logits=True)
    if binary_logits and lowered in ("precision", "recall"):
        cls = keras.metrics.Precision if lowered == "precision" else keras.metrics.Recall
        return cls(name=name, thresholds=0.0)
    metric = keras.metrics.get(identifier)
    if isinstance(metric, keras.metrics.Metric):
        return type(metric).from_config({**metric.get_config(), "name": name})
    return keras.metrics.MeanMetricWrapper(metric, name=name)


class StageMetrics:
    """The loss tracker and metric objects of one stage.

    Args:
        stage: "train", "val" or "test".
        metrics: what compile() received: a list for every output, or a dict by output name.
        loss_set: the compiled loss (its kinds choose how "accuracy" is computed).
    """

    def __init__(self, stage: str, metrics, loss_set: LossSet):
        self.stage = stage
        self._spec = metrics or []
        self._loss_set = loss_set
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.output_loss_trackers: dict[str, keras.metrics.Mean] = {}
        self.metrics: list[tuple[str | None, keras.metrics.Metric]] = []
        self.built = False

    def build(self, y_true_spec, y_pred_spec) -> None:
        """Creates the metric objects eagerly, before any step is traced."""
        names = self._loss_set.output_names
        if names is None:
            pairs = [(None, m) for m in _as_list(self._spec)]
        elif isinstance(self._spec, dict):
            pairs = [(out, m) for out in names for m in _as_list(self._spec.get(out))]
        else:
            pairs = [(out, m) for out in names for m in _as_list(self._spec)]
        self.metrics = []
        for output, identifier in pairs:
            true_spec = y_true_spec if output is None else y_true_spec[output]
            pred_spec = y_pred_spec if output is None else y_pred_spec[output]
            metric = resolve_metric(identifier, true_spec, pred_spec, self._loss_set.kind(output))
            self.metrics.append((output, metric))
        if names is not None:
            self.output_loss_trackers = {
                out: keras.metrics.Mean(name=f"{out}_loss") for out in self._loss_set.losses
            }
        self.built = True

    def update(self, y_true, y_pred, sample_weight, loss, output_losses) -> None:
        """Adds one batch; runs inside the compiled loop."""
        batch = tf.cast(tf.shape(tf.nest.flatten(y_pred)[0])[0], loss.dtype)
        self.loss_tracker.update_state(loss, sample_weight=batch)
        for out, value in output_losses.items():
            self.output_loss_trackers[out].update_state(value, sample_weight=batch)
        for output, metric in self.metrics:
            true = y_true if output is None else y_true[output]
            pred = y_pred if output is None else y_pred[output]
            metric.update_state(true, pred, sample_weight=sample_weight)

    def reset(self) -> None:
        self.loss_tracker.reset_state()
        for tracker in self.output_loss_trackers.values():
            tracker.reset_state()
        for _, metric in self.metrics:
            metric.reset_state()

    def names(self) -> list[str]:
        """Log keys without the stage prefix, in order: loss, output losses, metrics."""
        keys = ["loss", *(t.name for t in self.output_loss_trackers.values())]
        return keys + [self._key(output, metric) for output, metric in self.metrics]

    def results(self) -> dict[str, float]:
        """The stage's numbers so far, keyed without the stage prefix."""
        values = {"loss": float(self.loss_tracker.result())}
        for tracker in self.output_loss_trackers.values():
            values[tracker.name] = float(tracker.result())
        for output, metric in self.metrics:
            values[self._key(output, metric)] = _scalar(metric.result())
        return values

    @staticmethod
    def _key(output, metric) -> str:
        return metric.name if output is None else f"{output}_{metric.name}"


def _as_list(spec) -> list:
    if spec is None:
        return []
    return list(spec) if isinstance(spec, (list, tuple)) else [spec]


def _scalar(value) -> float:
    value = tf.convert_to_tensor(value)
    if value.shape.rank:
        # Metrics with one value per class (F1Score without averaging) are logged as their mean.
        value = tf.reduce_mean(value)
    return float(value)

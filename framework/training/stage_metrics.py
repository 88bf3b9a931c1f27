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

from graphfit.core import log_values
from graphfit.core.registry import unknown_name_error
from graphfit.training.losses import LossKind, LossSet

__all__ = ["MetricMismatch", "StageMetrics", "STAGES", "stage_prefix", "resolve_metric",
           "check_metric_identifier", "check_binary_metric", "reset_model_metrics"]

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
    """Fails at compile time on a metric name Keras does not know, on a Keras metric class
    that needs constructor arguments named by its name only, and on `Mean` / `Sum`, which
    are not `(y_true, y_pred)` metrics.

    Raises:
        ValueError: saying what was wrong and what to pass instead.
        TypeError: for something that is neither a name, a metric nor a function.
    """
    if isinstance(identifier, keras.metrics.Metric):
        _refuse_value_metric(identifier)
        return
    if callable(identifier) and not isinstance(identifier, str):
        return
    if not isinstance(identifier, str):
        raise TypeError(
            f"A metric must be a name, a keras.metrics.Metric or a function (y_true, y_pred). "
            f"Received: {identifier!r}"
        )
    if identifier.lower() in ("accuracy", "acc"):
        return
    try:
        metric = keras.metrics.get(identifier)
    except ValueError:
        if callable(getattr(keras.metrics, identifier, None)):  # keras.metrics.huber, ...
            raise ValueError(
                f"Keras's metrics.get does not know {identifier!r} by name (Keras's compile "
                f"refuses it too), although keras.metrics.{identifier} exists. Pass "
                f"keras.metrics.MeanMetricWrapper(keras.metrics.{identifier}) instead."
            ) from None
        raise unknown_name_error(
            "metric", identifier, _valid_metric_names(),
            "or pass a keras.metrics.Metric object or a function (y_true, y_pred).",
        ) from None
    except TypeError as error:  # a class whose constructor needs arguments (IoU, ...)
        raise ValueError(
            f"Metric {identifier!r} cannot be made from its name alone ({error}). Pass the "
            f"object with its arguments instead, e.g. metrics=[keras.metrics."
            f"{identifier}(...)].") from None
    if isinstance(metric, keras.metrics.Metric):
        _refuse_value_metric(metric)


def _refuse_value_metric(metric: keras.metrics.Metric) -> None:
    """`Mean` and `Sum` average values, not `(y_true, y_pred)` pairs (Keras's compile fails
    on them too, inside the step)."""
    if type(metric) in (keras.metrics.Mean, keras.metrics.Sum):
        name = type(metric).__name__
        raise ValueError(
            f"keras.metrics.{name} is not a (y_true, y_pred) metric and cannot be compiled "
            f"(Keras's compile fails on it too). To log a value of your own, return it in "
            f"StepResult(logs={{...}}) from your train_step or test_step: it is averaged over "
            f"the epoch; or wrap a function fn(y_true, y_pred) in "
            f"keras.metrics.MeanMetricWrapper(fn).")


def resolve_metric(identifier, y_true: tf.TensorSpec, y_pred: tf.TensorSpec,
                   kind: LossKind, dtype: tf.DType = tf.float32) -> keras.metrics.Metric:
    """A fresh Keras metric object for one stage and one output, computing in `dtype`.

    "accuracy" picks binary, sparse-categorical or categorical accuracy from the shapes, as Keras
    does. When the loss says the outputs are binary logits, threshold metrics ("accuracy",
    "precision", "recall", "auc") are set up for logits (threshold 0, AUC(from_logits=True)),
    which Keras leaves to the user.
    """
    binary_logits = kind.labels == "binary" and kind.from_logits
    dtype = dtype.name
    if isinstance(identifier, keras.metrics.Metric):
        return _clone(identifier, dtype=dtype)
    if not isinstance(identifier, str):
        name = getattr(identifier, "__name__", "metric")
        return keras.metrics.MeanMetricWrapper(identifier, name=name, dtype=dtype)
    name = identifier
    lowered = identifier.lower()
    if lowered in ("accuracy", "acc"):
        if y_pred.shape[-1] == 1:
            threshold = 0.0 if binary_logits else 0.5
            return keras.metrics.BinaryAccuracy(name=name, threshold=threshold, dtype=dtype)
        sparse = y_true.shape.rank < y_pred.shape.rank or (
            y_true.shape[-1] == 1 and (y_pred.shape[-1] or 0) > 1
        )
        cls = (keras.metrics.SparseCategoricalAccuracy if sparse
               else keras.metrics.CategoricalAccuracy)
        return cls(name=name, dtype=dtype)
    if binary_logits and lowered == "auc":
        return keras.metrics.AUC(name=name, from_logits=True, dtype=dtype)
    if binary_logits and lowered in ("precision", "recall"):
        cls = keras.metrics.Precision if lowered == "precision" else keras.metrics.Recall
        return cls(name=name, thresholds=0.0, dtype=dtype)
    metric = keras.metrics.get(identifier)
    if isinstance(metric, keras.metrics.Metric):
        return _clone(metric, name=name, dtype=dtype)
    return keras.metrics.MeanMetricWrapper(metric, name=name, dtype=dtype)


# Metrics that compare labels and predictions element by element, as two-class problems.
_BINARY_ONLY = (
    keras.metrics.AUC, keras.metrics.Precision, keras.metrics.Recall,
    keras.metrics.TruePositives, keras.metrics.TrueNegatives, keras.metrics.FalsePositives,
    keras.metrics.FalseNegatives, keras.metrics.PrecisionAtRecall,
    keras.metrics.RecallAtPrecision, keras.metrics.SensitivityAtSpecificity,
    keras.metrics.SpecificityAtSensitivity,
)


class MetricMismatch(ValueError):
    """A metric that cannot measure this model's outputs (a problem of the `metrics` chosen)."""


def check_binary_metric(metric, y_true: tf.TensorSpec, y_pred: tf.TensorSpec, output=None):
    """Refuses a binary (two-class) metric on an output with several classes whose labels are
    class ids: Keras would fail inside the graph with a shape error.

    Raises:
        MetricMismatch: naming the metric, the shapes and the fix.
    """
    if not isinstance(metric, _BINARY_ONLY):
        return
    classes = y_pred.shape[-1] if y_pred.shape.rank else None
    if classes is None or classes <= 1:
        return
    true_dims = y_true.shape[1:]
    if true_dims.rank is not None and true_dims.is_compatible_with(y_pred.shape[1:]):
        return  # one-hot (or multi-label) labels: the metric is micro-averaged, as in Keras
    where = "" if output is None else f" of output {output!r}"
    raise MetricMismatch(
        f"Metric {metric.name!r} ({type(metric).__name__}) is a binary (two-class) metric, "
        f"but the model's output{where} has {classes} classes (shape "
        f"{tuple(y_pred.shape[1:])} per sample) and the labels are class ids (shape "
        f"{tuple(true_dims)} per sample). Use 'accuracy' or 'sparse_top_k_categorical_"
        f"accuracy' for class ids; or one-hot encode the labels (then {type(metric).__name__} "
        f"is micro-averaged over the classes); or give the model one sigmoid output for a "
        f"two-class problem."
    )


def _clone(metric: keras.metrics.Metric, **overrides) -> keras.metrics.Metric:
    """A metric with fresh state (and, where its constructor takes them, the overrides)."""
    config = metric.get_config()
    try:
        return type(metric).from_config({**config, **overrides})
    except TypeError:
        return type(metric).from_config(config)


class StageMetrics:
    """The loss trackers and metric objects of one stage.

    Args:
        stage: "train", "val" or "test".
        metrics: what compile() received: a list for every output, or a dict by output name.
            They ignore sample weights, as in Keras.
        weighted_metrics: the same, for metrics that apply the sample weights.
        loss_set: the compiled loss (its kinds choose how "accuracy" is computed), or None
            when the model's own steps compute the loss.
        dtype: the model's dtype; the numbers are accumulated in it.
    """

    def __init__(self, stage: str, metrics, weighted_metrics, loss_set: LossSet | None,
                 dtype: tf.DType = tf.float32):
        self.stage = stage
        self._specs = ((metrics or [], False), (weighted_metrics or [], True))
        self._loss_set = loss_set
        self.dtype = dtype
        self.loss_tracker = keras.metrics.Mean(name="loss", dtype=dtype.name)
        self.output_loss_trackers: dict[str, keras.metrics.Mean] = {}
        self.log_trackers: dict[str, keras.metrics.Mean] = {}  # a step's StepResult.logs
        # The logs a Keras-style step returned last ({name: float64 variable}): a step that
        # returns a dict reports its metrics itself, as in Keras.
        self.returned: dict[str, tf.Variable] = {}
        # (output or None, log key, metric, whether it reads the sample weights)
        self.metrics: list[tuple[str | None, str, keras.metrics.Metric, bool]] = []

    def build(self, y_true_spec, y_pred_spec) -> None:
        """Creates the metric objects eagerly, before any step is traced."""
        loss_set = self._loss_set
        if loss_set is None:  # a model whose overridden steps compute their own loss
            names = list(y_pred_spec) if isinstance(y_pred_spec, dict) else None
        else:
            names = loss_set.output_names
        entries, keys = [], set()
        specs = self._specs if y_true_spec is not None else ()  # no labels: no metrics
        for spec, weighted in specs:
            for output, identifier in _per_output(spec, names):
                true_spec = y_true_spec if output is None else y_true_spec[output]
                pred_spec = y_pred_spec if output is None else y_pred_spec[output]
                metric = resolve_metric(identifier, true_spec, pred_spec,
                                        _kind(loss_set, output), self.dtype)
                check_binary_metric(metric, true_spec, pred_spec, output)
                key = _unique_key(output, metric.name, weighted, keys)
                entries.append((output, key, metric, weighted))
        self.metrics = entries
        if names is not None and loss_set is not None:
            self.output_loss_trackers = {
                out: keras.metrics.Mean(name=f"{out}_loss", dtype=self.dtype.name)
                for out in self._loss_set.losses
            }

    def update(self, y_true, sample_weight, result, batch_size) -> None:
        """Adds one step's `StepResult`; runs inside the compiled loop.

        The loss, the per-output losses and every entry of `result.logs` are averaged over
        the stage weighted by `batch_size`; the compiled metrics read `result.y_pred` (none
        when the step returns no outputs or the data no labels). A dict (Keras's form: the
        metric results so far, which the step updated itself) is kept as the stage's logs.
        """
        if isinstance(result, dict):
            for name, value in log_values.flat_logs(result).items():
                self._returned_variable(name).assign(log_values.float64_scalar(value))
            return
        batch = tf.cast(batch_size, self.dtype)
        self.loss_tracker.update_state(tf.cast(result.loss, self.dtype), sample_weight=batch)
        for out, value in (result.output_losses or {}).items():
            self.output_loss_trackers[out].update_state(value, sample_weight=batch)
        for name, value in (result.logs or {}).items():
            self._log_tracker(name).update_state(tf.cast(value, self.dtype), sample_weight=batch)
        if result.y_pred is not None and y_true is not None:
            self.update_compiled(y_true, result.y_pred, sample_weight)

    def update_compiled(self, y_true, y_pred, sample_weight=None) -> None:
        """Updates the compiled metrics (not the loss trackers) from one batch
        (`Model.compute_metrics`)."""
        for output, _, metric, weighted in self.metrics:
            true = y_true if output is None else y_true[output]
            pred = y_pred if output is None else y_pred[output]
            metric.update_state(true, pred, sample_weight=sample_weight if weighted else None)

    def _returned_variable(self, name: str) -> tf.Variable:
        if name not in self.returned:  # created on the first trace, outside the graph
            with tf.init_scope():
                self.returned[name] = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                                                  name="returned_log")
        return self.returned[name]

    @property
    def metric_objects(self) -> list:
        """The stage's Keras metric objects: the loss trackers, then the compiled metrics."""
        return [self.loss_tracker, *self.output_loss_trackers.values(),
                *(metric for _, _, metric, _ in self.metrics)]

    def metric_keys(self) -> dict:
        """{id(metric object): the key its result is logged under}."""
        keys = {id(self.loss_tracker): "loss"}
        keys.update({id(tracker): tracker.name for tracker in self.output_loss_trackers.values()})
        keys.update({id(metric): key for _, key, metric, _ in self.metrics})
        return keys

    def _log_tracker(self, name: str) -> keras.metrics.Mean:
        """The tracker of a step's extra log; created on the first trace (Keras creates its
        variables outside the graph), then reused by every later trace."""
        if name not in self.log_trackers:
            if name == "loss" or name in self.output_loss_trackers or any(
                    key == name for _, key, _, _ in self.metrics):
                raise ValueError(
                    f"StepResult.logs has the key {name!r}, which the compiled loss or metrics "
                    f"already report; give it another name.")
            with tf.init_scope():  # eagerly, in the strategy's scope: never in a branch
                self.log_trackers[name] = keras.metrics.Mean(name=name, dtype=self.dtype.name)
        return self.log_trackers[name]

    def reset(self) -> None:
        for metric in [*self.metric_objects, *self.log_trackers.values()]:
            metric.reset_state()

    @property
    def variables(self) -> list:
        """Every metric variable of this stage (the trackers' included)."""
        objects = [*self.metric_objects, *self.log_trackers.values()]
        return [v for obj in objects for v in obj.variables] + list(self.returned.values())

    def as_keras_list(self, logs: dict):
        """`logs` as Keras's evaluate and *_on_batch return them without return_dict (its
        `_flatten_metrics_in_order`): the loss, the compiled metrics whose key is their name
        (a single output's), the per-output losses, then the other keys sorted (a multi-output
        model's metrics, prefixed by their output); a lone loss as a float."""
        names = [metric.name for _, _, metric, _ in self.metrics]
        losses = [tracker.name for tracker in self.output_loss_trackers.values()]
        first = [k for k in dict.fromkeys(["loss", *names, *losses]) if k in logs]
        values = [logs[k] for k in first + sorted(k for k in logs if k not in first)]
        return values[0] if len(values) == 1 else values

    def results(self) -> dict:
        """The stage's numbers so far, keyed without the stage prefix: what a Keras-style
        step returned last, else the trackers' and metrics' results (floats, and NumPy arrays
        for metrics with one value per threshold or class, as Keras logs them)."""
        if self.returned:
            return {name: float(value.numpy()) for name, value in self.returned.items()}
        values = {"loss": float(self.loss_tracker.result())}
        for tracker in self.output_loss_trackers.values():
            values[tracker.name] = float(tracker.result())
        for _, key, metric, _ in self.metrics:
            values[key] = log_values.metric_log_value(metric.result())
        for name, tracker in self.log_trackers.items():
            values[name] = float(tracker.result())
        return values


def _kind(loss_set: LossSet | None, output) -> LossKind:
    return LossKind(None) if loss_set is None else loss_set.kind(output)


def _per_output(spec, output_names) -> list[tuple]:
    if output_names is None:
        return [(None, m) for m in _as_list(spec)]
    if isinstance(spec, dict):
        if set(spec) - set(output_names):  # a misspelt output would drop its metrics
            raise ValueError(f"The metrics name outputs {sorted(set(spec) - set(output_names))} "
                             f"the model does not have; its outputs are {output_names}.")
        return [(out, m) for out in output_names for m in _as_list(spec.get(out))]
    if spec and all(entry is None or isinstance(entry, (list, tuple)) for entry in spec):
        if len(spec) != len(output_names):  # Keras's [[metrics of output 1], [...], ...]
            raise ValueError(f"A list of metric lists needs one per output {output_names}.")
        return [(out, m) for out, entry in zip(output_names, spec) for m in _as_list(entry)]
    return [(out, m) for out in output_names for m in _as_list(spec)]


def _unique_key(output, name: str, weighted: bool, taken: set) -> str:
    """Keras's log keys: "{output}_{name}"; a weighted twin of a metric becomes
    "weighted_{name}"; other repeats get "_1", "_2"."""
    key = name if output is None else f"{output}_{name}"
    if key in taken and weighted:
        key = f"weighted_{name}" if output is None else f"{output}_weighted_{name}"
    base, index = key, 1
    while key in taken:
        key, index = f"{base}_{index}", index + 1
    taken.add(key)
    return key


def _as_list(spec) -> list:
    return [] if spec is None else list(spec) if isinstance(spec, (list, tuple)) else [spec]


def reset_model_metrics(model, stages: dict) -> None:
    """Resets the metric objects `model.metrics` lists that no stage owns (a custom step's
    own trackers), as Keras resets `model.metrics` when a stage starts."""
    owned = {id(metric) for stage in stages.values() for metric in stage.metric_objects}
    for metric in model.metrics:
        if id(metric) not in owned:
            metric.reset_state()

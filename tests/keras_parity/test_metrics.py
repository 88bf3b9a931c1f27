"""Keras's metrics through graphfit's compile / evaluate / fit give Keras's numbers.

Every public name of `keras.metrics` (and Keras's aliases) is either run here, by name and as an
object, through the same model in Keras and graphfit (same weights, same data: `evaluate` and
one `fit` epoch with validation), or listed in `graphfit.training.loss_metric_parity` as
differing or refused, with the reason; a name Keras adds fails the walk until it is classified.
Goldens from keras/src/metrics/*_test.py run through an identity model.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit.training import loss_metric_parity as parity
from tests.keras_parity import loss_metric_twins as twins

# Keras name: (kind of labels, constructor arguments of the object run, usable by name).
CLASSES = {
    "AUC": ("binary", {"num_thresholds": 50}, True),
    "Accuracy": ("binary", {}, True),
    "BinaryAccuracy": ("binary", {"threshold": 0.4}, True),
    "BinaryCrossentropy": ("binary", {"label_smoothing": 0.1}, True),
    "BinaryIoU": ("binary", {"target_class_ids": [1], "threshold": 0.4}, True),
    "CategoricalAccuracy": ("categorical", {}, True),
    "CategoricalCrossentropy": ("categorical", {"label_smoothing": 0.2}, True),
    "CategoricalHinge": ("categorical", {}, True),
    "ConcordanceCorrelation": ("regression", {"axis": 0}, True),
    "CosineSimilarity": ("regression", {"axis": -1}, True),
    "F1Score": ("multilabel", {"threshold": 0.5}, True),
    "FBetaScore": ("multilabel", {"beta": 2.0, "average": "macro", "threshold": 0.5}, True),
    "FalseNegatives": ("binary", {"thresholds": [0.3, 0.5, 0.7]}, True),
    "FalsePositives": ("binary", {"thresholds": [0.3, 0.5, 0.7]}, True),
    "Hinge": ("binary", {}, True),
    "IoU": ("sparse", {"num_classes": 4, "target_class_ids": [0, 2], "sparse_y_pred": False},
            False),
    "KLDivergence": ("categorical", {}, True),
    "LogCoshError": ("regression", {}, True),
    "MeanAbsoluteError": ("regression", {}, True),
    "MeanAbsolutePercentageError": ("positive", {}, True),
    "MeanIoU": ("sparse", {"num_classes": 4, "sparse_y_pred": False}, False),
    "MeanSquaredError": ("regression", {}, True),
    "MeanSquaredLogarithmicError": ("positive", {}, True),
    "OneHotIoU": ("categorical", {"num_classes": 4, "target_class_ids": [1, 3]}, False),
    "OneHotMeanIoU": ("categorical", {"num_classes": 4}, False),
    "PearsonCorrelation": ("regression", {"axis": 0}, True),
    "Poisson": ("positive", {}, True),
    "Precision": ("binary", {"thresholds": [0.5, 0.7]}, True),
    "PrecisionAtRecall": ("binary", {"recall": 0.5}, False),
    "R2Score": ("regression", {}, True),
    "Recall": ("binary", {"thresholds": [0.3, 0.6]}, True),
    "RecallAtPrecision": ("binary", {"precision": 0.5}, False),
    "RootMeanSquaredError": ("regression", {}, True),
    "SensitivityAtSpecificity": ("binary", {"specificity": 0.5}, False),
    "SparseCategoricalAccuracy": ("sparse", {}, True),
    "SparseCategoricalCrossentropy": ("sparse", {}, True),
    "SparseTopKCategoricalAccuracy": ("sparse", {"k": 2}, True),
    "SpecificityAtSensitivity": ("binary", {"sensitivity": 0.5}, False),
    "SquaredHinge": ("binary", {}, True),
    "TopKCategoricalAccuracy": ("categorical", {"k": 2}, True),
    "TrueNegatives": ("binary", {"thresholds": [0.3, 0.5, 0.7]}, True),
    "TruePositives": ("binary", {"thresholds": [0.3, 0.5, 0.7]}, True),
}

# Functions and aliases, used by name: the kind of labels they read.
NAMES = {
    "binary_accuracy": "binary", "binary_crossentropy": "binary",
    "categorical_accuracy": "categorical", "categorical_crossentropy": "categorical",
    "categorical_hinge": "categorical", "concordance_correlation": "regression",
    "hinge": "binary", "kl_divergence": "categorical", "mean_absolute_error": "regression",
    "mean_absolute_percentage_error": "positive", "mean_squared_error": "regression",
    "mean_squared_logarithmic_error": "positive", "pearson_correlation": "regression",
    "poisson": "positive", "sparse_categorical_accuracy": "sparse",
    "sparse_categorical_crossentropy": "sparse", "sparse_top_k_categorical_accuracy": "sparse",
    "squared_hinge": "binary", "top_k_categorical_accuracy": "categorical",
    "bce": "binary", "BCE": "binary", "mse": "regression", "MSE": "regression",
    "mae": "regression", "MAE": "regression", "mape": "positive", "MAPE": "positive",
    "msle": "positive", "MSLE": "positive",
    # Keras's choice by shapes: binary here; sparse and categorical below.
    "accuracy": "binary", "acc": "binary",
}

# Objects of the same class with other arguments: top_k, class_id, multi-label.
EXTRA_OBJECTS = {
    "multilabel": [keras.metrics.Precision(top_k=2, name="precision_top_2"),
                   keras.metrics.Recall(class_id=1, name="recall_class_1"),
                   keras.metrics.Precision(class_id=2, thresholds=[0.4, 0.6],
                                           name="precision_class_2"),
                   keras.metrics.AUC(multi_label=True, num_thresholds=20, name="auc_multi")],
    "sparse": ["accuracy", "acc",
               keras.metrics.MeanIoU(num_classes=4, sparse_y_pred=False, ignore_class=0,
                                     name="mean_iou_ignoring_0")],
    "regression": [keras.metrics.MeanMetricWrapper(keras.losses.mean_squared_error,
                                                   name="wrapped_mse"),
                   keras.metrics.MeanMetricWrapper(keras.metrics.huber, name="huber"),
                   keras.metrics.MeanMetricWrapper(keras.metrics.log_cosh, name="log_cosh")],
    "binary": [keras.metrics.MeanMetricWrapper(keras.metrics.binary_focal_crossentropy,
                                               name="binary_focal_crossentropy")],
    "categorical": ["accuracy", "acc",
                    keras.metrics.Precision(top_k=1, name="precision_top_1"),
                    keras.metrics.Recall(class_id=3, name="recall_class_3"),
                    keras.metrics.MeanMetricWrapper(keras.metrics.categorical_focal_crossentropy,
                                                    name="categorical_focal_crossentropy")],
}

# Covered by their own tests below, or by the base-class tests.
COVERED_ELSEWHERE = {"Metric", "MeanMetricWrapper"}

KINDS = ("regression", "positive", "binary", "multilabel", "categorical", "sparse")


def _metrics_of(kind: str) -> list:
    metrics = [name for name, k in NAMES.items() if k == kind]
    for name, (k, kwargs, by_name) in CLASSES.items():
        if k != kind:
            continue
        if by_name:
            metrics.append(name)
        metrics.append(getattr(keras.metrics, name)(name=f"{name}_object", **kwargs))
    return metrics + EXTRA_OBJECTS.get(kind, [])


def test_every_keras_metric_is_run_here_or_listed_as_different():
    unclassified = [
        name for name in parity.keras_metric_names()
        if name not in CLASSES and name not in NAMES and name not in COVERED_ELSEWHERE
        and parity.status("metric", name)[0] == "works"]
    assert not unclassified, (
        f"Keras metrics neither compared here nor listed in loss_metric_parity.METRIC_NOTES: "
        f"{unclassified}")
    listed = [name for name in [*CLASSES, *NAMES] if name not in parity.keras_metric_names()]
    assert not listed, f"names this test runs that Keras does not have: {listed}"


@pytest.mark.parametrize("kind", KINDS)
def test_every_metric_by_name_and_as_object_gives_kerass_numbers(kind):
    train, val = twins.data(kind)
    ours, theirs = twins.twins(kind)
    loss = "mse" if kind in ("regression", "positive") else "crossentropy"
    twins.compile_both(ours, theirs, loss=loss, metrics=_metrics_of(kind))
    ours_history, theirs_history = twins.fit_both(ours, theirs, train, val)
    # Keras's training numbers of an array metric are overwritten by its validation pass
    # (test_kerass_training_arrays_are_overwritten_by_validation): those are compared there.
    keys = [key for key, value in theirs_history.items() if key != "learning_rate"
            and (key.startswith("val_") or np.ndim(value[0]) == 0)]
    twins.assert_same_logs(ours_history, theirs_history, keys)


def test_thresholds_lists_are_logged_as_one_array_per_metric_as_keras_does():
    # keras/src/metrics/confusion_metrics_test.py, FalsePositivesTest.test_unweighted_with_
    # thresholds and PrecisionTest.test_weighted_with_threshold, through an identity model.
    y_pred = np.array([(0.9, 0.2, 0.8, 0.1), (0.2, 0.9, 0.7, 0.6), (0.1, 0.2, 0.4, 0.3),
                       (0, 1, 0.7, 0.3)], dtype="float32")
    y_true = np.array([(0, 1, 1, 0), (1, 0, 0, 0), (0, 0, 0, 0), (1, 1, 1, 1)],
                      dtype="float32")
    ours, theirs = twins.identity_twins(4)
    metrics = [keras.metrics.FalsePositives(thresholds=[0.15, 0.5, 0.85],
                                            name="false_positives"),
               keras.metrics.Precision(thresholds=[0.5, 0.7], name="precision"), "accuracy"]
    twins.compile_both(ours, theirs, loss="mse", metrics=metrics)
    ours_logs, theirs_logs = twins.evaluate_both(ours, theirs, y_pred, y_true)
    twins.assert_same_logs(ours_logs, theirs_logs)
    assert sorted(ours_logs) == sorted(theirs_logs), (sorted(ours_logs), sorted(theirs_logs))
    np.testing.assert_allclose(ours_logs["false_positives"], [7.0, 4.0, 2.0])
    assert ours_logs["precision"].shape == (2,)
    as_list = ours.evaluate(y_pred, y_true, verbose=0)  # return_dict=False: Keras's order
    np.testing.assert_allclose(as_list[1], [7.0, 4.0, 2.0])
    history = ours.fit(y_pred, y_true, epochs=2, batch_size=4, verbose=0)
    assert [np.shape(v) for v in history.history["precision"]] == [(2,), (2,)]


def test_kerass_training_arrays_are_overwritten_by_validation_graphfits_are_not():
    # Keras logs a NumPy view of the metric's variables: the validation pass that follows
    # resets and refills them, so Keras's *training* numbers of an array metric read the
    # validation data's. graphfit logs a copy, equal to Keras's numbers without validation.
    train, val = twins.data("binary", seed=13)
    metrics = [keras.metrics.FalseNegatives(thresholds=[0.3, 0.5, 0.7], name="fn")]
    runs = {}
    for validation in (None, val):
        ours, theirs = twins.twins("binary", seed=13)
        twins.compile_both(ours, theirs, loss="binary_crossentropy", metrics=metrics)
        runs[validation is None] = twins.fit_both(ours, theirs, train, validation, epochs=2)
    (ours_alone, keras_alone), (ours_validated, keras_validated) = runs[True], runs[False]
    twins.assert_same_logs(ours_alone, keras_alone)
    twins.assert_same_logs(ours_validated, keras_alone, ["fn", "loss"])
    twins.assert_same_logs(ours_validated, keras_validated, ["val_fn", "val_loss"])
    np.testing.assert_array_equal(keras_validated["fn"][-1], keras_validated["val_fn"][-1])
    assert np.sum(ours_validated["fn"][-1]) != np.sum(ours_validated["val_fn"][-1])


def test_top_k_and_class_id_goldens():
    # PrecisionTest.test_unweighted_top_k (1/3), test_unweighted_class_id_multiclass (1.0),
    # test_unweighted_top_k_and_threshold (1.0); RecallTest's class_id golden (0.5).
    top_k_pred = np.array([[0.2, 0.1, 0.5, 0, 0.2]], dtype="float32")
    top_k_true = np.array([[0, 1, 1, 0, 0]], dtype="float32")
    ours, theirs = twins.identity_twins(5)
    metrics = [keras.metrics.Precision(top_k=3, name="p_top_3"),
               keras.metrics.Precision(thresholds=0.7, top_k=2, name="p_top_2_at_07")]
    twins.compile_both(ours, theirs, loss="mse", metrics=metrics)
    ours_logs, theirs_logs = twins.evaluate_both(ours, theirs, top_k_pred, top_k_true)
    twins.assert_same_logs(ours_logs, theirs_logs)
    assert ours_logs["p_top_3"] == pytest.approx(1 / 3)
    assert ours_logs["p_top_2_at_07"] == pytest.approx(0.0)  # 0.5 and 0.2: none above 0.7

    y_pred = np.array([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2], [0.2, 0.6, 0.2], [0.7, 0.2, 0.1],
                       [0.1, 0.1, 0.8]], dtype="float32")
    y_true = np.eye(3, dtype="float32")[[2, 0, 1, 0, 2]]
    ours, theirs = twins.identity_twins(3)
    metrics = [keras.metrics.Precision(class_id=1, name="precision"),
               keras.metrics.Recall(class_id=2, name="recall"),
               keras.metrics.TopKCategoricalAccuracy(k=1)]
    twins.compile_both(ours, theirs, loss="categorical_crossentropy", metrics=metrics)
    ours_logs, theirs_logs = twins.evaluate_both(ours, theirs, y_pred, y_true)
    twins.assert_same_logs(ours_logs, theirs_logs)
    assert ours_logs["precision"] == pytest.approx(1.0)
    assert ours_logs["recall"] == pytest.approx(1.0)


def test_sample_weights_reach_weighted_metrics_and_not_metrics():
    train, val = twins.data("binary", seed=3)
    weights = np.random.default_rng(4).uniform(0, 2, size=len(train[0])).astype("float32")
    ours, theirs = twins.twins("binary", seed=3)
    twins.compile_both(ours, theirs, loss="binary_crossentropy",
                       metrics=["accuracy", keras.metrics.AUC(num_thresholds=40, name="auc")],
                       weighted_metrics=[keras.metrics.Precision(thresholds=[0.4, 0.6],
                                                                 name="precision"),
                                         keras.metrics.AUC(num_thresholds=40, name="w_auc")])
    ours_logs, theirs_logs = twins.evaluate_both(ours, theirs, *train, sample_weight=weights)
    twins.assert_same_logs(ours_logs, theirs_logs)
    unweighted = ours.evaluate(*train, verbose=0, return_dict=True)
    assert unweighted["auc"] == pytest.approx(ours_logs["auc"])  # metrics: no weights
    assert unweighted["w_auc"] != pytest.approx(ours_logs["w_auc"])  # weighted ones: weights
    ours_history, theirs_history = twins.fit_both(ours, theirs, train, val,
                                                  sample_weight=weights)
    twins.assert_same_logs(ours_history, theirs_history)


def test_each_stage_owns_its_metric_objects_cloned_from_one_object():
    train, val = twins.data("binary", seed=5)
    auc = keras.metrics.AUC(num_thresholds=30, name="auc")
    ours, theirs = twins.twins("binary", seed=5)
    twins.compile_both(ours, theirs, loss="binary_crossentropy", metrics=[auc])
    ours_history, theirs_history = twins.fit_both(ours, theirs, train, val)
    twins.assert_same_logs(ours_history, theirs_history)
    stages = ours.compile_state.stage_metrics
    objects = [stages[s].metrics[0][2] for s in ("train", "val", "test")]
    assert len({id(o) for o in objects}) == 3 and auc not in objects
    # The validation numbers are those of a fresh evaluation, not carried from training.
    again = ours.evaluate(*val, batch_size=twins.BATCH, verbose=0, return_dict=True)
    assert again["auc"] == pytest.approx(ours_history["val_auc"][0], rel=1e-6)


class MeanGap(keras.metrics.Metric):
    """A user metric from Keras's base class: the mean of y_pred - y_true."""

    def __init__(self, name="mean_gap", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        gap = keras.ops.cast(y_pred, "float32") - keras.ops.cast(y_true, "float32")
        self.total.assign_add(keras.ops.sum(gap))
        self.count.assign_add(keras.ops.cast(keras.ops.size(gap), "float32"))

    def result(self):
        return self.total / keras.ops.maximum(self.count, 1.0)


def test_a_metric_subclass_and_a_wrapped_function_give_kerass_numbers():
    train, val = twins.data("regression", seed=6)
    ours, theirs = twins.twins("regression", seed=6)
    twins.compile_both(ours, theirs, loss="mse", metrics=[
        MeanGap(), keras.metrics.MeanMetricWrapper(keras.losses.huber, name="huber_1",
                                                   delta=0.5)])
    twins.assert_same_logs(*twins.fit_both(ours, theirs, train, val))


@pytest.mark.parametrize("metric", ["mean", "Sum", keras.metrics.Mean()])
def test_value_metrics_are_refused_with_what_to_do_instead(metric):
    assert parity.status("metric", "Mean")[0] == "refused"
    model = gf.Sequential([gf.layers.Dense(1)], input_shape=(2,))
    with pytest.raises(ValueError, match="not a \\(y_true, y_pred\\) metric.*StepResult"):
        model.compile(optimizer="sgd", loss="mse", metrics=[metric])


@pytest.mark.parametrize("name", ["huber", "log_cosh", "binary_focal_crossentropy"])
def test_metric_functions_keras_does_not_know_by_name_are_refused_as_in_keras(name):
    assert parity.status("metric", name)[0] == "refused"
    with pytest.raises(ValueError, match="Could not interpret"):
        keras.metrics.get(name)
    model = gf.Sequential([gf.layers.Dense(1)], input_shape=(2,))
    with pytest.raises(ValueError, match=f"MeanMetricWrapper\\(keras.metrics.{name}\\)"):
        model.compile(optimizer="sgd", loss="mse", metrics=[name])


def test_a_metric_class_that_needs_arguments_by_name_says_so():
    model = gf.Sequential([gf.layers.Dense(1)], input_shape=(2,))
    with pytest.raises(ValueError, match="IoU.*cannot be made from its name alone.*"
                                         "keras.metrics.IoU\\(...\\)"):
        model.compile(optimizer="sgd", loss="mse", metrics=["IoU"])


def test_array_metrics_reach_tensorboard_and_the_progress_line_one_number_each(tmp_path,
                                                                                 capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train, val = twins.data("binary", seed=12)
    model, _ = twins.twins("binary", seed=12)
    model.compile(optimizer="sgd", loss="binary_crossentropy", jit_compile=False,
                  metrics=[keras.metrics.Precision(thresholds=[0.3, 0.6], name="precision")])
    history = model.fit(*train, validation_data=val, epochs=1, verbose=2,
                        callbacks=[gf.callbacks.TensorBoard(str(tmp_path))])
    for run, prefix in (("train", ""), ("val", "val_")):
        events = EventAccumulator(str(tmp_path / run), size_guidance={"tensors": 0})
        events.Reload()
        tags = events.Tags()["tensors"]
        assert {"precision_0", "precision_1"} <= set(tags) and "precision" not in tags
        written = [float(tf.make_ndarray(
            events.Tensors(f"precision_{i}")[0].tensor_proto)) for i in (0, 1)]
        np.testing.assert_allclose(written, history.history[f"{prefix}precision"][0],
                                   rtol=1e-6)
    first, second = history.history["precision"][0]
    assert f"precision: [{first:.4f} {second:.4f}]" in capsys.readouterr().out


def test_a_recipe_with_a_thresholds_metric_writes_one_number_per_threshold(tmp_path):
    from graphfit.recipes import evaluate_run, load_recipe, train

    path = tmp_path / "thresholds.yaml"
    path.write_text(
        "data: {source: breast_cancer, standardize: true}\n"
        "model: [{type: Dense, units: 1, activation: sigmoid}]\n"
        "loss: binary_crossentropy\n"
        "metrics: [{type: Precision, thresholds: [0.3, 0.7], name: precision}]\n"
        "optimizer: {type: SGD, learning_rate: 0.1}\n"
        "training: {epochs: 2, jit_compile: false}\n")
    result = train(load_recipe(str(path)), run_dir=str(tmp_path / "run"), verbose=0)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert {"precision_0", "precision_1", "val_precision_0", "val_precision_1"} <= set(history)
    assert len(history["precision_0"]) == 2
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert {"precision_0", "precision_1"} <= set(metrics["test"])
    assert metrics["test"] == pytest.approx(result.metrics["test"])
    assert evaluate_run(str(tmp_path / "run"))["test"] == pytest.approx(metrics["test"])

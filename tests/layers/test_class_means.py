"""ClassMeans: per-class running means through update hooks, labels from the training step;
CenterLoss; the digits center-loss recipe."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import cli, layers, optimizers
from graphfit.core import update_hooks
from graphfit.layers import CenterLoss
from graphfit.training.losses import LossSet

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCCE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def numpy_update(means, counts, features, labels, momentum):
    """The reference: per-class batch means, first sight sets, others decay; absent unchanged."""
    means, counts = means.copy(), counts.copy()
    for k in np.unique(labels):
        batch_mean = features[labels == k].mean(axis=0)
        if counts[k] == 0:
            means[k] = batch_mean
        else:
            means[k] = momentum * means[k] + (1 - momentum) * batch_mean
        counts[k] += int((labels == k).sum())
    return means, counts


def test_update_equals_numpy_with_repeated_and_missing_classes():
    rng = np.random.default_rng(0)
    layer = layers.ClassMeans(num_classes=5, momentum=0.8, dtype="float64")
    means, counts = np.zeros((5, 3)), np.zeros(5, np.int64)
    # repeated labels; class 4 never, class 3 only in the last batch; (batch, 1) labels too
    batches = [np.array([0, 0, 1, 0, 2]), np.array([[1], [1], [1]]), np.array([3, 0, 2, 2])]
    for labels in batches:
        x = rng.normal(size=(len(labels), 3))
        before = layer.means.numpy().copy() if layer.built else None
        layer(x, training=True, labels=labels)
        means, counts = numpy_update(means, counts, x, labels.reshape(-1), 0.8)
        np.testing.assert_allclose(layer.means.numpy(), means, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(layer.counts.numpy(), counts)
        if before is not None:  # classes absent from the batch: bit for bit unchanged
            absent = np.setdiff1d(np.arange(5), labels.reshape(-1))
            np.testing.assert_array_equal(layer.means.numpy()[absent], before[absent])
    assert layer.counts.numpy()[4] == 0 and not layer.means.numpy()[4].any()


def test_collected_updates_wait_and_inference_is_identity():
    layer = layers.ClassMeans(num_classes=2, momentum=0.5)
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with update_hooks.collect_updates() as pending:
        out = layer(x, training=True, labels=[1, 1])
    assert len(pending) == 3 and not layer.means.numpy().any()
    update_hooks.apply_updates(pending)
    np.testing.assert_array_equal(layer.means.numpy(), [[0, 0], [2, 3]])
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(layer(x), x)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"num_classes": 0}, "num_classes"), ({"num_classes": 3, "momentum": 1.0}, "momentum"),
    ({"num_classes": 3, "momentum": -0.1}, "momentum"),
    ({"num_classes": 3, "momentum": "0.9"}, "momentum"),
    ({"num_classes": 3, "center_loss_weight": -1}, "center_loss_weight"),
    ({"num_classes": 3, "labels_of": ""}, "labels_of")])
def test_bad_arguments_say_what_is_wrong(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        layers.ClassMeans(**kwargs)


def test_bad_labels_and_missing_labels_give_clear_errors():
    layer = layers.ClassMeans(num_classes=3)
    x = tf.ones((3, 2))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels must lie in 0\.\.2"):
        layer(x, training=True, labels=[0, 3, 1])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels must lie in 0\.\.2"):
        layer(x, training=True, labels=[0, -1, 1])
    with pytest.raises(ValueError, match="one class id per example"):
        layer(x, training=True, labels=tf.ones((3, 3)))
    with pytest.raises(ValueError, match="reads the batch's labels in training"):
        layer(x, training=True)  # outside fit, no labels
    assert not layer.counts.numpy().any()


def test_out_of_range_labels_stop_fit_before_training_even_under_xla():
    """XLA drops the step's asserts, so fit checks in-memory labels on the host first."""
    model = gf.Sequential([layers.Dense(4), layers.ClassMeans(3, name="centers"),
                           layers.Dense(5)])
    model.compile(optimizer="sgd", loss=SCCE, jit_compile=True)
    x = np.ones((8, 2), "float32")
    with pytest.raises(ValueError, match=r"ClassMeans 'centers': labels must lie in 0\.\.2.*"
                                         r"a batch holds a label outside.*\(rows 0 to 7 of x; "
                                         r"row 3 fails it alone"):
        model.fit(x, np.array([0, 1, 2, 4, 0, 1, 4, 2]), verbose=0)
    assert not model.layers[1].counts.numpy().any()  # nothing trained


@pytest.mark.parametrize("jit_compile", [False, True])
def test_out_of_range_labels_from_a_dataset_stop_fit_before_their_step(jit_compile):
    """A dataset's batches are checked in the loop, before each step: under XLA the step's
    own asserts are dropped and the out-of-range ids would silently miss their class."""
    model = gf.Sequential([layers.Dense(4), layers.ClassMeans(3, name="centers"),
                           layers.Dense(5)])
    model.compile(optimizer="sgd", loss=SCCE, jit_compile=jit_compile, steps_per_execution=1)
    x = np.ones((8, 2), "float32")
    labels = np.array([0, 1, 2, 0, 1, 4, 2, 1])  # the 4 is in the second batch
    dataset = tf.data.Dataset.from_tensor_slices((x, labels)).batch(4)
    with pytest.raises(ValueError) as error:
        model.fit(dataset, epochs=1, verbose=0)
    assert str(error.value) == (
        "ClassMeans 'centers': labels must lie in 0..2 (num_classes=3); a batch holds a label "
        "outside. Fix the labels or raise num_classes. (batch 1).")
    # The first batch trained; the bad one never reached the means.
    np.testing.assert_array_equal(model.layers[1].counts.numpy(), [2, 1, 1])


def _two_output_model(lm=False):
    nodes = [gf.Node(layers.Dense(2, name="embedding"), "x"),
             gf.Node(layers.ClassMeans(3, momentum=0.5, labels_of="logits", name="centers"),
                     "embedding"),
             gf.Node(layers.Dense(3, name="logits"), "centers")]
    model = gf.GraphModel({"x": (4,)}, nodes, ["logits", "centers"])
    loss = {"logits": SCCE, "centers": CenterLoss()}  # CenterLoss has residuals for LM
    model.compile(optimizer=optimizers.LevenbergMarquardt() if lm else "adam", loss=loss,
                  loss_weights={"logits": 1.0, "centers": 0.1}, jit_compile=False)
    return model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(12, 4)).astype("float32")
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1])  # class 2 never appears
    return x, y


@pytest.fixture(scope="module")
def trained(data):
    """A two-output model after one full-batch step, with the features that step saw."""
    x, y = data
    model = _two_output_model()
    features = model.predict(x, verbose=0)["centers"]  # identity: the embedding
    model.fit(x, {"logits": y, "centers": y[:, None]}, batch_size=12, epochs=1, verbose=0,
              shuffle=False)
    return model, features


def test_fit_moves_the_means_once_per_step_from_that_steps_features(trained, data):
    model, features = trained
    layer = model.get_layer("centers")
    means, counts = numpy_update(np.zeros((3, 2)), np.zeros(3, np.int64), features, data[1], 0.5)
    np.testing.assert_allclose(layer.means.numpy(), means, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(layer.counts.numpy(), counts)


def test_evaluate_and_predict_leave_the_means_alone(trained, data):
    model, _ = trained
    x, y = data
    layer = model.get_layer("centers")
    before = [v.numpy().copy() for v in layer.variables]
    logs = model.evaluate(x, {"logits": y, "centers": y[:, None]}, verbose=0, return_dict=True)
    model.predict(x, verbose=0)  # needs no labels
    for v, b in zip(layer.variables, before):
        np.testing.assert_array_equal(v.numpy(), b)
    # evaluate's center loss is the NumPy one against the (unchanged) means
    f = model.predict(x, verbose=0)["centers"]
    expected = np.mean(0.5 * np.sum((f - layer.means.numpy()[y]) ** 2, axis=1))
    np.testing.assert_allclose(logs["centers_loss"], expected, rtol=1e-5)


def test_means_are_checkpointed(trained, tmp_path):
    model, _ = trained
    path = str(tmp_path / "weights")
    model.save_weights(path)
    fresh = _two_output_model()
    fresh.build({"x": (None, 4)})
    fresh.load_weights(path)
    for name in ("means", "counts", "spread_total"):
        np.testing.assert_array_equal(getattr(fresh.get_layer("centers"), name).numpy(),
                                      getattr(model.get_layer("centers"), name).numpy())


def test_levenberg_marquardt_trials_and_jacobians_do_not_move_the_means(data):
    x, y = data
    model = _two_output_model(lm=True)
    model.fit(x, {"logits": y, "centers": y[:, None]}, batch_size=12, epochs=1,
              verbose=0, shuffle=False)
    layer = model.get_layer("centers")
    # One step: counted once (not per trial or Jacobian chunk), from the forward pass of the
    # point the step ends on (LM's aux, as for BatchNormalization): the final weights.
    features = model.predict(x, verbose=0)["centers"]
    means, counts = numpy_update(np.zeros((3, 2)), np.zeros(3, np.int64), features, y, 0.5)
    np.testing.assert_array_equal(layer.counts.numpy(), counts)
    np.testing.assert_allclose(layer.means.numpy(), means, rtol=1e-5, atol=1e-6)


def test_levenberg_marquardt_refuses_a_loss_added_by_a_layer(data):
    x, y = data
    model = gf.Sequential([layers.Dense(3), layers.ClassMeans(3, center_loss_weight=0.1),
                           layers.Dense(3)])
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss=SCCE, jit_compile=False)
    with pytest.raises(ValueError, match="cannot linearize the losses that layers add"):
        model.fit(x, y, epochs=1, verbose=0)


def test_center_loss_value_and_gradient_against_numpy(trained):
    model, _ = trained
    layer = model.get_layer("centers")
    loss = CenterLoss()
    loss.bind_model(model, "centers")
    rng = np.random.default_rng(2)
    f = tf.constant(rng.normal(size=(5, 2)).astype("float32"))
    y = np.array([[0], [2], [1], [0], [1]])
    c = layer.means.numpy()[y[:, 0]]
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(f)
        value = loss(y, f)
    np.testing.assert_allclose(value, np.mean(0.5 * np.sum((f.numpy() - c) ** 2, 1)), rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(value, f), (f.numpy() - c) / 5, rtol=1e-5)
    assert tape.gradient(value, layer.means) is None  # the centres move by the hooks only


def test_center_loss_finds_its_layer_or_says_why_not():
    model = gf.Sequential([layers.Dense(2), layers.Dense(2)])
    model.build((None, 3))
    with pytest.raises(ValueError, match="has none: add a layers.ClassMeans"):
        CenterLoss().bind_model(model, None)
    with pytest.raises(ValueError, match="not bound"):
        CenterLoss()(np.zeros((1, 1)), np.zeros((1, 2), "float32"))
    loss_set = LossSet("center_loss")  # registered by name, for recipes
    loss_set.build(None, tf.float32)
    assert isinstance(loss_set.losses[None], CenterLoss)


def test_digits_center_loss_recipe_shrinks_the_spread(tmp_path):
    run = tmp_path / "run"
    recipe = os.path.join(REPO, "recipes", "digits_center_loss.yaml")
    assert cli.main(["train", recipe, "--run-dir", str(run), "--verbose", "0",
                     "--set", "training.epochs=6"]) == 0
    history = json.loads((run / "history.json").read_text())
    spread = history["centers_within_class_spread"]
    shift = history["centers_center_shift"]
    assert spread[-1] < 0.95 * max(spread)  # the within-class spread falls after its peak
    assert shift[0] == 0.0 and min(shift[1:]) > 0.0  # the centres move every epoch...
    assert shift[-1] < shift[1]  # ...less and less
    assert history["val_accuracy"][-1] > 0.85

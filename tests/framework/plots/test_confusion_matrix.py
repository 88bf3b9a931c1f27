"""confusion_matrix: counts against TensorFlow's, rows normalized for the colour, clear errors;
classifier_labels: the class rule of each cross-entropy."""

import types

import numpy as np
import pytest
import tensorflow as tf

from graphfit import plots
from graphfit.training.losses import LossSet

from .conftest import png_size


def test_counts_match_tensorflow_and_fractions_are_per_row(tmp_path, figures):
    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 4, size=200)
    y_pred = np.where(rng.random(200) < 0.7, y_true, rng.integers(0, 4, size=200))
    y_true[y_true == 3] = 2  # class 3 is never true: an empty row, fractions 0
    names = ["cat", "dog", "bird", "fish"]
    path = str(tmp_path / "confusion_matrix.png")
    result = plots.confusion_matrix(y_true, y_pred, path, class_names=names)
    expected = tf.math.confusion_matrix(y_true, y_pred, num_classes=4).numpy()
    assert result.data["counts"] == expected.tolist()
    fractions = np.asarray(result.data["row_fractions"])
    np.testing.assert_allclose(fractions[:3], expected[:3] / expected[:3].sum(1, keepdims=True))
    assert fractions[3].tolist() == [0.0] * 4
    assert result.data["class_names"] == names and result.paths == [path]
    assert min(png_size(path)) > 200
    axes = figures["confusion_matrix.png"].axes[0]
    assert [t.get_text() for t in axes.get_xticklabels()] == names
    cells = [t.get_text() for t in axes.texts]
    assert cells == [str(count) for count in expected.ravel()]
    assert np.allclose(axes.images[0].get_array(), fractions)


def test_hand_computed_binary_case(tmp_path):
    result = plots.confusion_matrix([0, 0, 1, 1, 1], np.array([0, 1, 1, 1, 0.0]),
                                    str(tmp_path / "cm.png"))
    assert result.data["counts"] == [[1, 1], [1, 2]]
    assert result.data["class_names"] == ["0", "1"]


@pytest.mark.parametrize("y_true, y_pred, names, message", [
    ([0, 1, 2], [0, 1], None, "y_true has 3 examples but y_pred has 2"),
    ([0, 1], [0, 5], ["a", "b"], "a class id is 5 but there are only 2 classes"),
    ([0, -1], [0, 1], None, "negative class id"),
    ([0.5, 1], [0, 1], None, "must hold integer class ids"),
    ([[1, 0], [0, 1]], [0, 1], None, "one class id per example"),
    ([], [], None, "empty"),
])
def test_bad_labels_get_clear_errors(tmp_path, y_true, y_pred, names, message):
    with pytest.raises(ValueError, match=message):
        plots.confusion_matrix(y_true, y_pred, str(tmp_path / "cm.png"), class_names=names)
    assert not (tmp_path / "cm.png").exists()


def _model(loss, outputs, output_names=None):
    """A trained model's two parts classifier_labels reads: the loss set and predict."""
    loss_set = LossSet(loss)
    loss_set.build(output_names, tf.float32)
    state = types.SimpleNamespace(loss_set=loss_set)
    return types.SimpleNamespace(compile_state=state,
                                 predict=lambda x, batch_size=None, verbose=0: outputs)


def test_classifier_labels_follow_the_loss():
    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0], [-1.0, 4.0, 0.0]])
    sparse = _model(tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), logits)
    true, pred = plots.classifier_labels(sparse, None, np.array([[0], [1], [1]]))
    assert true.tolist() == [0, 1, 1] and pred.tolist() == [0, 2, 1]
    onehot = _model("categorical_crossentropy", logits)
    true, pred = plots.classifier_labels(onehot, None, np.eye(3)[[2, 2, 1]])
    assert true.tolist() == [2, 2, 1] and pred.tolist() == [0, 2, 1]
    column = np.array([[-0.1], [0.2], [0.7]])
    on_logits = _model(tf.keras.losses.BinaryCrossentropy(from_logits=True), column)
    assert plots.classifier_labels(on_logits, None, np.array([0, 1, 1.0]))[1].tolist() == [0, 1, 1]
    on_probabilities = _model("binary_crossentropy", column)
    assert plots.classifier_labels(on_probabilities, None, [0, 1, 1])[1].tolist() == [0, 0, 1]
    assert plots.classifier_labels(_model("mse", column), None, [0, 1, 1]) is None
    multilabel = _model("binary_crossentropy", np.zeros((3, 2)))
    assert plots.classifier_labels(multilabel, None, np.zeros((3, 2))) is None
    two_outputs = _model({"a": "binary_crossentropy", "b": "mse"}, column, ["a", "b"])
    assert plots.classifier_labels(two_outputs, None, [0, 1, 1]) is None

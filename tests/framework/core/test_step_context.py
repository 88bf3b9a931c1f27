"""step_context: labels published by the training step, read by the layers that need them."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.core import step_context


def test_labels_by_output_and_the_errors_that_name_the_fix():
    both = {"logits": tf.constant([1, 2]), "aux": tf.constant([0, 0])}
    with step_context.training_step(both):
        assert step_context.labels_for("m", "logits").numpy().tolist() == [1, 2]
        with pytest.raises(ValueError, match=r"several outputs \['aux', 'logits'\]"):
            step_context.labels_for("m", None)
        with pytest.raises(ValueError, match="labels_of='nope'.*outputs \\['aux', 'logits'\\]"):
            step_context.labels_for("m", "nope")
    with step_context.training_step({"logits": tf.constant([3])}):  # the only output's
        assert step_context.labels_for("m", None).numpy().tolist() == [3]
    with step_context.training_step(tf.constant([4])):
        with pytest.raises(ValueError, match="single output"):
            step_context.labels_for("m", "logits")
    with step_context.training_step(None):
        with pytest.raises(ValueError, match="Give fit\\(\\) labels"):
            step_context.labels_for("m", None)
    assert step_context.labels_for("m", None) is None and step_context.current() is None


def test_fit_publishes_labels_and_sums_the_losses_layers_add():
    x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
    y = np.array([0, 1, 1, 0, 1, 0, 0, 1])
    model = gf.Sequential([layers.Dense(2), layers.ClassMeans(2, center_loss_weight=2.0,
                                                                name="cm")])
    scce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # the features as logits
    model.compile(optimizer=gf.optimizers.SGD(0.0), loss=scce, jit_compile=False)
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    # lr 0: the features stay put; epoch 2's center loss is against epoch 1's means
    f = model.predict(x, verbose=0)
    means = np.stack([f[y == k].mean(0) for k in (0, 1)])
    center = np.mean(0.5 * np.sum((f - means[y]) ** 2, 1))
    assert history.history["cm_center_loss"][1] == pytest.approx(2.0 * center, rel=1e-5)
    log_softmax = f - np.log(np.exp(f).sum(1, keepdims=True))
    cross_entropy = -np.mean(log_softmax[np.arange(8), y])
    assert history.history["loss"][1] == pytest.approx(cross_entropy + 2.0 * center, rel=1e-5)

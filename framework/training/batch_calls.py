"""`train_on_batch`, `test_on_batch` and `predict_on_batch`: one step on one batch, as Keras.

Each runs the same compiled step `fit`, `evaluate` and `predict` run, on all the samples it is
given as one batch, with the same checks of the data first; no callback is called. As in
Keras 3, the metrics are reset first, so the numbers returned are those of this batch alone.
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.training import class_weights, graph_feeds
from graphfit.training import loops as training_loop
from graphfit.training.feeds import make_feed
from graphfit.training.stage_data import prepare, require_loss, stage_data

__all__ = ["train_on_batch", "test_on_batch", "predict_on_batch"]


def _one_batch(x, method: str, whole: str) -> None:
    """Refuses what is not one batch of in-memory data."""
    if isinstance(x, tf.data.Dataset) or graph_feeds.as_graph_set(x, "x") is not None:
        raise ValueError(
            f"{method}() takes one batch of arrays, not a {type(x).__name__}. For a dataset "
            f"call it per batch (for x, y in dataset: model.{method}(x, y)), or use "
            f"{whole}() on the whole dataset.")


def train_on_batch(model, x, y=None, sample_weight=None, class_weight=None,
                   return_dict: bool = False):
    """`Model.train_on_batch` (see its docstring)."""
    state = model.compiled_for("train_on_batch")
    default_step = require_loss(model, state, "train")
    _one_batch(x, "train_on_batch", "fit")
    if y is None and default_step and state.loss_set is not None:
        raise ValueError("train_on_batch() needs labels: pass y.")
    sample_weight = class_weights.weigh_arrays(y, sample_weight, class_weight, model.dtype)
    feed = make_feed(model, x, y, sample_weight, batch_size=None)
    prepare(model, state, feed, "train")
    metrics = state.stage_metrics["train"]
    metrics.reset()
    # A step outside fit is a pass of its own, with no promise on the batch size.
    state.steps.expect_fit(None, None)
    (batch,) = feed.batches_in_order()
    state.steps.run_arrays("train", stage_data(feed), batch, 1)
    logs = metrics.results()
    return logs if return_dict else metrics.as_keras_list(logs)


def test_on_batch(model, x, y=None, sample_weight=None, return_dict: bool = False):
    """`Model.test_on_batch` (see its docstring): `evaluate` on one batch, with the test
    stage's metrics."""
    _one_batch(x, "test_on_batch", "evaluate")
    return training_loop.evaluate(
        model, x, y, batch_size=None, verbose=0, sample_weight=sample_weight, steps=None,
        callbacks=None, return_dict=return_dict, stage="test", check_finite=True)


def predict_on_batch(model, x):
    """`Model.predict_on_batch` (see its docstring): `predict` on one batch."""
    _one_batch(x, "predict_on_batch", "predict")
    return training_loop.predict(model, x, batch_size=None, verbose=0, steps=None,
                                 callbacks=None)

"""History: train/val metrics per epoch, test metrics with their epoch, Keras' conventions."""

import keras

from graphfit.callbacks import CallbackList, History


class StubModel:
    """Stands in for a model: History only sets `model.history` on it."""


def simulate_fit(callbacks, epochs=3, test_inside_last_epoch=False):
    """Drives hooks as fit does: val every epoch, test once, at the end of training."""
    callbacks.on_train_begin()
    for epoch in range(epochs):
        callbacks.on_epoch_begin(epoch)
        callbacks.on_train_batch_end(0, {"loss": 9.0})
        callbacks.on_test_begin(stage="val")
        val = {"loss": 1.0 + epoch, "accuracy": 0.5}
        callbacks.on_test_end(val, stage="val")
        logs = {"loss": 0.1 * (epoch + 1), "accuracy": 0.25, "val_loss": val["loss"]}
        logs["val_accuracy"] = val["accuracy"]
        if test_inside_last_epoch and epoch == epochs - 1:
            callbacks.on_test_begin(stage="test")
            callbacks.on_test_end({"loss": 7.0, "accuracy": 0.75}, stage="test")
            logs.update(test_loss=7.0, test_accuracy=0.75)
        callbacks.on_epoch_end(epoch, logs)
    if not test_inside_last_epoch:
        callbacks.on_test_begin(stage="test")
        callbacks.on_test_end({"loss": 7.0, "accuracy": 0.75}, stage="test")
    callbacks.on_train_end()


EXPECTED = {
    "loss": [0.1, 0.2, 0.30000000000000004],
    "accuracy": [0.25, 0.25, 0.25],
    "val_loss": [1.0, 2.0, 3.0],
    "val_accuracy": [0.5, 0.5, 0.5],
    "test_loss": [7.0],
    "test_accuracy": [0.75],
}


def test_fit_with_validation_every_epoch_and_test_at_the_end():
    callbacks = CallbackList(add_history=True)
    simulate_fit(callbacks)
    history = callbacks.history
    assert history.history == EXPECTED
    assert history.epoch == [0, 1, 2]
    assert history.test_epoch == [2]


def test_test_inside_an_epoch_is_recorded_once_with_that_epoch():
    history = History()
    simulate_fit(CallbackList([history]), test_inside_last_epoch=True)
    # The epoch logs carried test_loss too; it must not be appended a second time.
    assert history.history == EXPECTED
    assert history.test_epoch == [2]


def test_test_every_epoch_pairs_each_result_with_its_epoch():
    history = History()
    history.on_train_begin()
    for epoch in range(2):
        history.on_epoch_begin(epoch)
        history.on_test_end({"loss": 10.0 + epoch}, stage="test")
        history.on_epoch_end(epoch, {"loss": 1.0, "test_loss": 10.0 + epoch})
    assert history.history == {"loss": [1.0, 1.0], "test_loss": [10.0, 11.0]}
    assert history.test_epoch == [0, 1]


def test_validation_reported_through_test_hooks_is_ignored():
    history = History()
    history.on_train_begin()
    history.on_epoch_begin(0)
    history.on_test_end({"loss": 1.0}, stage="val")
    assert history.history == {} and history.test_epoch == []


def test_standalone_evaluation_has_no_epoch():
    history = History()
    history.on_test_end({"loss": 0.5}, stage="test")
    assert history.history == {"test_loss": [0.5]}
    assert history.test_epoch == [None]


def test_model_history_points_at_the_callback():
    model = StubModel()
    history = History()
    history.set_model(model)
    history.on_train_begin()
    assert model.history is history


def test_reuse_across_fits_matches_keras():
    """Keras keeps `history` accumulating and restarts `epoch` at each fit."""
    ours, theirs = History(), keras.callbacks.History()
    for callback in (ours, theirs):
        callback.set_model(StubModel())
        for fit in range(2):
            callback.on_train_begin()
            for epoch in range(2):
                callback.on_epoch_begin(epoch)
                callback.on_epoch_end(epoch, {"loss": float(fit * 2 + epoch)})
    assert ours.history == theirs.history == {"loss": [0.0, 1.0, 2.0, 3.0]}
    assert ours.epoch == theirs.epoch == [0, 1]
    assert ours.model.history is ours and theirs.model.history is theirs

"""ModelCheckpoint: latest every epoch, best on improvement, never a non-finite epoch."""

import math
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.callbacks import ModelCheckpoint
from graphfit.core.registry import CALLBACKS
from graphfit.saving import checkpoints


def _model():
    model = gf.Sequential([layers.Dense(2), layers.Dense(1)])
    model.compile(optimizer=gf.optimizers.SGD(0.1, momentum=0.9), loss="mse", jit_compile=False)
    model.build((None, 3))
    return model


def _numbers(folder, which):
    path = os.path.join(folder, which)
    if not os.path.isdir(path):
        return []
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(), path, max_to_keep=None)
    return [int(p.rsplit("-", 1)[1]) for p in manager.checkpoints]


def _run_epochs(callback, model, logs_per_epoch, first_epoch=0):
    """Drives the hooks as fit does, stamping the first kernel with the epoch number so a
    restored checkpoint tells which epoch it holds."""
    state = checkpoints.fit_state(model)
    state.epoch.assign(first_epoch)
    callback.set_model(model)
    callback.on_train_begin()
    for epoch, logs in enumerate(logs_per_epoch, start=first_epoch):
        callback.on_epoch_begin(epoch)
        model.variables[0].assign(tf.fill(model.variables[0].shape, float(epoch + 1)))
        state.epoch.assign(epoch + 1)
        callback.on_epoch_end(epoch, dict(logs))


def _restored_epoch_stamp(folder, which):
    fresh = _model()
    checkpoints.Checkpointer(folder, fresh).restore(which)
    return float(fresh.variables[0].numpy().flat[0])


# ------------------------------------------------------------------- construction


@pytest.mark.parametrize("kwargs, message", [
    ({"filepath": ""}, "filepath must be a folder path"),
    ({"filepath": None}, "filepath must be a folder path"),
    ({"filepath": "model.keras"}, "not a Keras file name"),
    ({"filepath": "ckpt/{epoch:02d}"}, "not a Keras file name"),
    ({"monitor": ""}, "monitor must be a log key"),
    ({"mode": "up"}, "mode must be one of"),
    ({"save_best_only": "yes"}, "save_best_only must be True or False"),
    ({"save_freq": 0}, "save_freq must be 'epoch' or a positive number"),
    ({"save_freq": "batch"}, "save_freq must be 'epoch' or a positive number"),
    ({"max_to_keep": 0}, "max_to_keep must be a positive integer"),
    ({"verbose": 2}, "verbose must be 0 or 1"),
    ({"monitor": "val_custom"}, "mode='auto' cannot tell"),
    ({"save_weights_only": 1}, "save_weights_only must be True or False"),
    ({"initial_value_threshold": "0.5"}, "initial_value_threshold must be a finite number"),
    ({"initial_value_threshold": float("nan")}, "initial_value_threshold must be a finite"),
])
def test_bad_arguments_raise_naming_the_argument(tmp_path, kwargs, message):
    arguments = {"filepath": str(tmp_path), **kwargs}
    with pytest.raises(ValueError, match=message):
        ModelCheckpoint(**arguments)


def test_built_from_recipe_data_without_side_effects(tmp_path):
    folder = tmp_path / "checkpoints"
    callback = CALLBACKS.get("ModelCheckpoint")(filepath=str(folder), monitor="val_accuracy",
                                                max_to_keep=None)
    assert isinstance(callback, gf.callbacks.ModelCheckpoint)
    assert callback.direction == "max" and callback.max_to_keep is None
    assert not folder.exists()


@pytest.mark.parametrize("monitor, mode, direction", [
    ("loss", "auto", "min"), ("val_loss", "auto", "min"), ("val_accuracy", "auto", "max"),
    ("test_auc", "auto", "max"), ("val_mean_absolute_error", "auto", "min"),
    ("val_custom", "max", "max"), ("val_accuracy", "min", "min"),
])
def test_direction_from_the_mode_or_the_name(tmp_path, monitor, mode, direction):
    assert ModelCheckpoint(str(tmp_path), monitor=monitor, mode=mode).direction == direction


# ------------------------------------------------------------------------ saving


def test_latest_every_epoch_and_best_on_improvement(tmp_path):
    folder = str(tmp_path)
    callback = ModelCheckpoint(folder, max_to_keep=3)
    _run_epochs(callback, _model(), [{"loss": 1, "val_loss": v} for v in (1.0, 2.0, 0.5, 0.5)])
    assert _numbers(folder, "latest") == [2, 3, 4]
    assert _numbers(folder, "best") == [1, 3]
    assert callback.best == 0.5
    assert _restored_epoch_stamp(folder, "best") == 3.0
    assert _restored_epoch_stamp(folder, "latest") == 4.0
    assert checkpoints.resume_point(folder) == 4


def test_max_mode_keeps_the_largest(tmp_path):
    folder = str(tmp_path)
    _run_epochs(ModelCheckpoint(folder, monitor="val_accuracy"), _model(),
                [{"loss": 1, "val_accuracy": v} for v in (0.5, 0.7, 0.6)])
    assert _numbers(folder, "best") == [1, 2]
    assert checkpoints.Checkpointer(folder, _model()).recorded_best("best") == 0.7


def test_save_best_only_writes_no_latest(tmp_path):
    folder = str(tmp_path)
    _run_epochs(ModelCheckpoint(folder, save_best_only=True), _model(),
                [{"loss": 1, "val_loss": v} for v in (1.0, 2.0, 0.5)])
    assert _numbers(folder, "best") == [1, 3]
    assert not os.path.exists(os.path.join(folder, "latest"))


def test_save_best_only_folder_resumes_from_best_and_load_weights_names_it(tmp_path):
    folder = str(tmp_path)
    _run_epochs(ModelCheckpoint(folder, save_best_only=True, save_weights_only=True), _model(),
                [{"loss": 1, "val_loss": v} for v in (1.0, 0.5, 2.0)])
    fresh = _model()
    with pytest.warns(RuntimeWarning, match=r"holds no checkpoint .*save_best_only=True.* "
                                            r"after epoch 2"):
        state = checkpoints.restore_latest(fresh, folder)
    assert state["epoch"] == 2 and float(fresh.variables[0].numpy().flat[0]) == 2.0
    with pytest.raises(FileNotFoundError, match=r"ModelCheckpoint's best/: load .*best'"):
        _model().load_weights(folder)
    loaded = _model()
    loaded.load_weights(os.path.join(folder, "best"))
    assert float(loaded.variables[0].numpy().flat[0]) == 2.0


@pytest.mark.parametrize("save_best_only", [False, True])
def test_initial_value_threshold_is_the_value_best_must_beat(tmp_path, save_best_only):
    folder = str(tmp_path)
    callback = ModelCheckpoint(folder, save_best_only=save_best_only,
                               initial_value_threshold=0.8)
    _run_epochs(callback, _model(), [{"loss": 1, "val_loss": v} for v in (1.0, 0.9, 0.7, 0.75)])
    assert _numbers(folder, "best") == [3] and callback.best == 0.7


def test_a_missing_monitor_warns_once_and_latest_is_still_written(tmp_path):
    folder = str(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run_epochs(ModelCheckpoint(folder), _model(), [{"loss": 1.0}, {"loss": 0.5}])
    messages = [str(w.message) for w in caught if "ModelCheckpoint" in str(w.message)]
    assert len(messages) == 1 and "'val_loss', which is not in the logs" in messages[0]
    assert _numbers(folder, "latest") == [1, 2] and _numbers(folder, "best") == []


@pytest.mark.parametrize("bad_logs", [
    {"loss": math.nan, "val_loss": 0.1},
    {"loss": 0.2, "val_loss": math.inf},
    {"loss": np.float32("nan")},
])
def test_an_epoch_with_a_non_finite_loss_is_not_saved(tmp_path, bad_logs):
    folder = str(tmp_path)
    _run_epochs(ModelCheckpoint(folder), _model(),
                [{"loss": 1.0, "val_loss": 1.0}, bad_logs, bad_logs])
    assert _numbers(folder, "latest") == [1] and _numbers(folder, "best") == [1]
    assert _restored_epoch_stamp(folder, "latest") == 1.0


def test_a_nonfinite_step_flagged_during_the_fit_stops_saving(tmp_path):
    class Flag(gf.callbacks.Callback):  # what TerminateOnNaN does, without its checks
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                self.model.nonfinite_step = 7

    folder = str(tmp_path)
    model = _model()
    model.nonfinite_step = 3  # left over from an earlier fit: not this one's
    callbacks = gf.callbacks.CallbackList([Flag(), ModelCheckpoint(folder)], model=model)
    _run_epochs(callbacks, model, [{"loss": 1.0, "val_loss": 1.0}] * 3)
    assert _numbers(folder, "latest") == [1]


@pytest.mark.parametrize("terminate", [True, False])
def test_a_fit_that_turns_nan_keeps_the_last_good_checkpoint(tmp_path, terminate):
    class Poison(gf.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:
                self.model.variables[0].assign(tf.fill(self.model.variables[0].shape, np.nan))

    folder = str(tmp_path)
    model = _model()
    extra = [gf.callbacks.TerminateOnNaN()] if terminate else []
    history = model.fit(np.ones((16, 3)), np.ones((16, 1)), epochs=4, verbose=0,
                        callbacks=[Poison(), *extra, ModelCheckpoint(folder, monitor="loss")])
    assert math.isnan(history.history["loss"][-1])
    assert _numbers(folder, "latest") == [1, 2]
    fresh = _model()
    assert checkpoints.restore_latest(fresh, folder)["epoch"] == 2
    assert all(np.all(np.isfinite(v.numpy())) for v in fresh.variables)


def test_a_resumed_fit_keeps_the_best_of_the_whole_run(tmp_path):
    folder = str(tmp_path)
    model = _model()
    _run_epochs(ModelCheckpoint(folder), model, [{"loss": 1, "val_loss": v} for v in (0.5, 0.8)])
    resumed = ModelCheckpoint(folder)
    _run_epochs(resumed, model, [{"loss": 1, "val_loss": v} for v in (0.7, 0.4)], first_epoch=2)
    assert _numbers(folder, "best") == [1, 4] and resumed.best == 0.4
    # A fit from epoch 0 starts a new record instead.
    restarted = ModelCheckpoint(str(tmp_path / "again"))
    _run_epochs(restarted, model, [{"loss": 1, "val_loss": 0.7}])
    assert restarted.best == 0.7


def test_a_real_fit_with_validation(tmp_path, capsys):
    x, y = gf.datasets.make_moons(n_samples=60, seed=0)
    model = gf.Sequential([layers.Dense(4, activation="relu"), layers.Dense(1)])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"],
                  jit_compile=False)
    folder = str(tmp_path)
    history = model.fit(x[:40], y[:40], epochs=3, verbose=0, validation_data=(x[40:], y[40:]),
                        callbacks=[ModelCheckpoint(folder, verbose=1)])
    assert _numbers(folder, "latest") == [1, 2, 3]
    best = checkpoints.Checkpointer(folder, model).recorded_best("best")
    assert best == pytest.approx(min(history.history["val_loss"]))
    printed = capsys.readouterr().out
    assert "Epoch 1: val_loss improved from - to" in printed
    assert f"Epoch 3: saved {os.path.join(folder, 'latest', 'ckpt-3')}" in printed

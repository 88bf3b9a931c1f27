"""EarlyStopping, ReduceLROnPlateau, LearningRateScheduler, CSVLogger and TerminateOnNaN.

Keras 3's callbacks are the reference: both are driven with the same logs and must stop at the
same epoch, set the same learning rates, restore the same weights and write the same file.
Then each runs inside a real `fit`, and from a recipe.
"""

import csv
import itertools
import math
import re
import warnings

import keras
import numpy as np
import pytest

import graphfit as gf
from graphfit import layers
from graphfit.callbacks import (
    CSVLogger,
    EarlyStopping,
    LearningRateScheduler,
    ReduceLROnPlateau,
    TerminateOnNaN,
)


class FakeModel:
    """What the callbacks touch: stop_training, weights that name their epoch, an optimizer."""

    def __init__(self, optimizer=None):
        self.stop_training = False
        self.optimizer = optimizer
        self.weights = [np.zeros(2)]

    def get_weights(self):
        return [w.copy() for w in self.weights]

    def set_weights(self, weights):
        self.weights = [np.array(w) for w in weights]


def _drive(callback, values, key="val_loss", optimizer=None):
    """Runs epochs of logs {key: value} through `callback`; returns what it did."""
    model = FakeModel(optimizer)
    callback.set_model(model)
    callback.on_train_begin()
    epochs, rates = 0, []
    for epoch, value in enumerate(values):
        model.weights = [np.full(2, float(epoch))]
        logs = {"loss": 1.0} if value is None else {"loss": 1.0, key: value}
        callback.on_epoch_begin(epoch, logs)
        callback.on_epoch_end(epoch, logs)
        epochs += 1
        if optimizer is not None:
            rates.append((logs.get("learning_rate"), float(np.asarray(optimizer.learning_rate))))
        if model.stop_training:
            break
    callback.on_train_end()
    return epochs, model, rates


def _sequences(count, length=12):
    rng = np.random.default_rng(7)
    # Rounded to one decimal, so that ties (no improvement) are common.
    return [list(np.round(rng.uniform(0, 1, length), 1)) for _ in range(count)]


# ------------------------------------------------------------------- Keras as the reference

EARLY_STOPPING_SETTINGS = [
    dict(patience=p, min_delta=d, baseline=b, restore_best_weights=r, start_from_epoch=s, mode=m)
    for p, d, b, r, s, m in itertools.product(
        # Keras compares a value with the baseline in float32; 0.35 is never a tie.
        (0, 1, 3), (0.0, 0.05), (None, 0.35), (False, True), (0, 2), ("min", "max"))
]


@pytest.mark.parametrize("settings", EARLY_STOPPING_SETTINGS, ids=str)
def test_early_stopping_matches_keras(settings):
    for values in _sequences(3):
        ours = EarlyStopping(**settings)
        theirs = keras.callbacks.EarlyStopping(**settings)
        epochs, model, _ = _drive(ours, values)
        keras_epochs, keras_model, _ = _drive(theirs, values)
        assert epochs == keras_epochs
        assert ours.stopped_epoch == theirs.stopped_epoch
        assert ours.best_epoch == theirs.best_epoch and ours.wait == theirs.wait
        assert ours.best == pytest.approx(float(theirs.best))
        np.testing.assert_array_equal(model.weights[0], keras_model.weights[0])
        assert getattr(model, "stop_reason", None) is not None or not model.stop_training


def test_early_stopping_says_why_and_prints_it(capsys):
    stopper = EarlyStopping(patience=2, restore_best_weights=True, verbose=1)
    epochs, model, _ = _drive(stopper, [0.5, 0.25, 0.3, 0.26, 0.1])
    assert epochs == 4 and stopper.stopped_epoch == 3
    expected = ("EarlyStopping: val_loss did not improve for 2 epochs (best 0.2500 at epoch 2); "
                "restored the weights of epoch 2")
    assert model.stop_reason == expected
    assert capsys.readouterr().out == expected + "\n"
    np.testing.assert_array_equal(model.weights[0], [1.0, 1.0])

    stopper = EarlyStopping(monitor="val_accuracy", mode="max", baseline=0.9, patience=1)
    _, model, _ = _drive(stopper, [0.5, 0.6, 0.55], key="val_accuracy")
    assert model.stop_reason == ("EarlyStopping: val_accuracy did not improve on the baseline "
                                 "0.9000 in 3 epochs (best 0.6000 at epoch 2)")


def test_a_missing_monitor_key_warns_once_and_suggests_the_closest_key():
    # With an explicit mode (in "auto" mode Keras 3 and graphfit refuse a monitor they cannot
    # place: tests/keras_parity/test_callbacks.py).
    for callback, what in ((EarlyStopping(monitor="val_los", mode="min"), "Early stopping"),
                           (ReduceLROnPlateau(monitor="val_los", mode="min"),
                            "Learning rate reduction")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _drive(callback, [0.3, 0.2, 0.1], optimizer=gf.optimizers.SGD(0.1))
        messages = [str(w.message) for w in caught]
        assert len(messages) == 1, messages
        assert messages[0].startswith(f"{what} conditioned on metric `val_los` which is not "
                                      "available. Available metrics are: loss,val_loss")
        assert "Did you mean 'val_loss'?" in messages[0]


REDUCE_SETTINGS = [
    dict(patience=p, cooldown=c, min_lr=m, factor=f, min_delta=d, mode=mode)
    for p, c, m, f, d, mode in itertools.product(
        (0, 1, 2), (0, 2), (0.0, 0.004), (0.5, 0.1), (1e-4, 0.1), ("min", "max"))
]


@pytest.mark.parametrize("settings", REDUCE_SETTINGS, ids=str)
def test_reduce_lr_on_plateau_matches_keras(settings):
    for values in _sequences(2):
        _, _, ours = _drive(ReduceLROnPlateau(**settings), values,
                            optimizer=gf.optimizers.SGD(0.1))
        _, _, theirs = _drive(keras.callbacks.ReduceLROnPlateau(**settings), values,
                              optimizer=keras.optimizers.SGD(0.1))
        # Keras keeps the rate in float32, graphfit in float64.
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def _scheduled(callback, optimizer, epochs=6):
    callback.set_model(FakeModel(optimizer))
    callback.on_train_begin()
    rates = []
    for epoch in range(epochs):
        logs = {"loss": 1.0}
        callback.on_epoch_begin(epoch, logs)
        callback.on_epoch_end(epoch, logs)
        rates.append(logs["learning_rate"])
    return rates


@pytest.mark.parametrize("schedule, equivalent", [
    (lambda epoch, lr: lr * 0.5 if epoch % 2 else lr, None),
    (lambda epoch: 0.1 / (epoch + 1), None),
    ([0.3, 0.2, 0.1], lambda epoch, lr: [0.3, 0.2, 0.1][min(epoch, 2)]),
    ({2: 0.05, "4": 0.01}, lambda epoch, lr: 0.1 if epoch < 2 else 0.05 if epoch < 4 else 0.01),
], ids=["callable", "keras-1-argument", "list", "dict"])
def test_learning_rate_scheduler_matches_keras(schedule, equivalent):
    ours = _scheduled(LearningRateScheduler(schedule), gf.optimizers.SGD(0.1))
    theirs = _scheduled(keras.callbacks.LearningRateScheduler(equivalent or schedule),
                        keras.optimizers.SGD(0.1))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("separator", [",", ";"])
def test_csv_logger_writes_the_same_file_as_keras(tmp_path, separator):
    epochs = [{"loss": 0.5, "val_loss": 0.75, "accuracy": 0.625},
              {"loss": 0.123456789, "val_loss": 1e-05, "accuracy": 1.0}]

    def write(logger):
        for _ in range(2):  # a second run appends (Keras writes no second header)
            logger.on_train_begin()
            for epoch, logs in enumerate(epochs):
                logger.on_epoch_end(epoch, dict(logs))
            logger.on_train_end()

    write(CSVLogger(tmp_path / "ours.csv", separator=separator, append=True))
    write(keras.callbacks.CSVLogger(str(tmp_path / "keras.csv"), separator=separator, append=True))
    ours = (tmp_path / "ours.csv").read_bytes()
    assert ours == (tmp_path / "keras.csv").read_bytes()
    assert ours.count(b"epoch") == 1 and ours.count(b"\r\n") == 5


def test_terminate_on_nan_stops_at_the_same_batch_as_keras(capsys):
    losses = [0.5, 0.4, float("inf"), float("nan")]
    stops = []
    for callback in (TerminateOnNaN(), keras.callbacks.TerminateOnNaN()):
        model = FakeModel()
        callback.set_model(model)
        callback.on_train_begin()
        callback.on_epoch_begin(0)
        for batch, loss in enumerate(losses):
            callback.on_train_batch_begin(batch)
            callback.on_train_batch_end(batch, {"loss": loss})
            if model.stop_training:
                stops.append(batch)
                break
    assert stops == [2, 2]
    expected = "TerminateOnNaN: the loss became inf at epoch 1, batch 3 (step 3)"
    assert expected in capsys.readouterr().out

    guard = TerminateOnNaN(raise_error=True)
    guard.set_model(FakeModel())
    guard.on_train_begin()
    with pytest.raises(RuntimeError, match=r"the loss became nan at epoch 1, batch 1 \(step 1\)"):
        guard.on_train_batch_end(0, {"loss": float("nan")})


def test_csv_logger_widens_the_header_and_keeps_appended_rows(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("epoch,loss\r\n0,0.5\r\n")  # from an earlier run
    logger = CSVLogger(path, append=True)
    logger.on_train_begin()
    logger.on_epoch_end(1, {"loss": 0.25})
    assert path.read_text() == "epoch,loss\n0,0.5\n1,0.25\n"  # the header is reused
    logger.on_epoch_end(2, {"loss": 0.125, "val_loss": 0.75})
    logger.on_train_end()
    with open(path, newline="") as f:
        assert list(csv.reader(f)) == [["epoch", "loss", "val_loss"], ["0", "0.5", ""],
                                       ["1", "0.25", ""], ["2", "0.125", "0.75"]]


def test_early_stopping_puts_back_good_weights_after_terminate_on_nan(capsys):
    model = FakeModel()  # no optimizer: the step is the count of batches heard
    stopper = EarlyStopping(patience=5, restore_best_weights=True)
    callbacks = gf.callbacks.CallbackList([TerminateOnNaN(), stopper], model=model)
    callbacks.on_train_begin()
    for epoch, (loss, val_loss) in enumerate([(0.5, 0.4), (0.4, 0.3), (float("nan"), None)]):
        model.weights = [np.full(2, float(epoch))]
        callbacks.on_epoch_begin(epoch)
        callbacks.on_train_batch_begin(0)
        callbacks.on_train_batch_end(0, {"loss": loss})
        callbacks.on_epoch_end(epoch, {"loss": loss, "val_loss": val_loss or float("nan")})
        if model.stop_training:
            break
    callbacks.on_train_end()
    assert epoch == 2 and model.nonfinite_step == 3
    assert model.stop_reason == ("TerminateOnNaN: the loss became nan at epoch 3, batch 1 "
                                 "(step 3); EarlyStopping restored the weights of epoch 2 "
                                 "(best val_loss 0.3000)")
    np.testing.assert_array_equal(model.weights[0], [1.0, 1.0])


# ------------------------------------------------------------------- arguments and wiring

@pytest.mark.parametrize("cls, arguments, name", [
    (EarlyStopping, {"patience": -1}, "patience"),
    (EarlyStopping, {"patience": 1.5}, "patience"),
    (EarlyStopping, {"min_delta": -0.1}, "min_delta"),
    (EarlyStopping, {"mode": "maximum"}, "mode"),
    (EarlyStopping, {"monitor": ""}, "monitor"),
    (EarlyStopping, {"baseline": "high"}, "baseline"),
    (EarlyStopping, {"restore_best_weights": "yes"}, "restore_best_weights"),
    (EarlyStopping, {"start_from_epoch": -2}, "start_from_epoch"),
    (EarlyStopping, {"verbose": 3}, "verbose"),
    (ReduceLROnPlateau, {"factor": 1.0}, "factor"),
    (ReduceLROnPlateau, {"factor": 0}, "factor"),
    (ReduceLROnPlateau, {"cooldown": -1}, "cooldown"),
    (ReduceLROnPlateau, {"min_lr": -1e-3}, "min_lr"),
    (ReduceLROnPlateau, {"patience": True}, "patience"),
    (LearningRateScheduler, {"schedule": "fast"}, "schedule"),
    (LearningRateScheduler, {"schedule": []}, "schedule"),
    (LearningRateScheduler, {"schedule": {-1: 0.1}}, "schedule"),
    (LearningRateScheduler, {"schedule": [0.1, -0.1]}, r"schedule\[1\]"),
    (CSVLogger, {"filename": ""}, "filename"),
    (CSVLogger, {"filename": "log.csv", "separator": ";;"}, "separator"),
    (CSVLogger, {"filename": "log.csv", "append": 1}, "append"),
    (TerminateOnNaN, {"raise_error": "no"}, "raise_error"),
])
def test_constructors_reject_bad_arguments_naming_them(cls, arguments, name):
    with pytest.raises(ValueError, match=rf"{name}"):
        cls(**arguments)


def test_constructors_have_no_side_effects(tmp_path):
    CSVLogger(tmp_path / "not" / "yet" / "log.csv")
    assert not (tmp_path / "not").exists()


def test_only_terminate_on_nan_makes_fit_hear_every_batch():
    for callback in (EarlyStopping(), ReduceLROnPlateau(), LearningRateScheduler([0.1]),
                     CSVLogger("log.csv")):
        assert not gf.callbacks.CallbackList([callback]).needs_train_batch_hooks
    assert gf.callbacks.CallbackList([TerminateOnNaN()]).wants_every_train_batch


def test_a_learning_rate_that_follows_a_schedule_cannot_be_changed():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    for callback in (ReduceLROnPlateau(), LearningRateScheduler([0.1])):
        callback.set_model(FakeModel(gf.optimizers.SGD(schedule)))
        with pytest.raises(TypeError, match=f"{type(callback).__name__} cannot change a learning "
                                            "rate that follows a schedule"):
            callback.on_train_begin()
            callback.on_epoch_begin(0)


@pytest.mark.parametrize("wrapped", [False, True])
def test_an_optimizer_without_a_learning_rate_is_refused_before_training(wrapped):
    # LevenbergMarquardt solves for its step length: the scheduler used to log a falling
    # rate that changed nothing (a review).
    optimizer = gf.optimizers.LevenbergMarquardt()
    if wrapped:
        optimizer = gf.optimizers.LossScaleOptimizer(optimizer)
    for callback in (ReduceLROnPlateau(), LearningRateScheduler([0.1, 0.01])):
        callback.set_model(FakeModel(optimizer))
        with pytest.raises(ValueError, match=f"{type(callback).__name__} would change nothing: "
                                             f"LevenbergMarquardt has no learning rate"):
            callback.on_train_begin()


@pytest.mark.parametrize("output", ["fast", -0.5, float("nan"), True])
def test_learning_rate_scheduler_rejects_a_bad_schedule_output(output):
    scheduler = LearningRateScheduler(lambda epoch, lr: output)
    scheduler.set_model(FakeModel(gf.optimizers.SGD(0.1)))
    scheduler.on_train_begin()
    with pytest.raises(ValueError, match="The output of the schedule function must be a learning"):
        scheduler.on_epoch_begin(0)


# ------------------------------------------------------------------- inside a real fit

@pytest.fixture(scope="module")
def moons():
    x, y = gf.datasets.make_moons(n_samples=96, seed=0)
    return x.astype("float32"), y.astype("float32")


def _model(learning_rate=0.1, **compile_arguments):
    model = gf.Sequential([layers.Dense(4, activation="relu"), layers.Dense(1)])
    model.compile(optimizer=gf.optimizers.SGD(learning_rate),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False, **compile_arguments)
    return model


class Scripted(gf.callbacks.Callback):
    """Adds a logged quantity with scripted values, and copies the weights of every epoch."""

    def __init__(self, key=None, values=()):
        super().__init__()
        self.key, self.values, self.weights = key, list(values), []

    def on_epoch_end(self, epoch, logs=None):
        if self.key:
            logs[self.key] = self.values[epoch]
        self.weights.append(self.model.get_weights())


def test_early_stopping_restores_the_best_epochs_weights_in_fit(moons, capsys):
    x, y = moons
    model = _model()
    script = Scripted("val_score", [0.5, 0.4, 0.3, 0.35, 0.32, 0.31, 0.2, 0.1])
    stopper = EarlyStopping("val_score", patience=3, mode="min", restore_best_weights=True,
                            verbose=1)
    history = model.fit(x, y, epochs=8, verbose=0, callbacks=[script, stopper])
    assert history.epoch == [0, 1, 2, 3, 4, 5] and stopper.stopped_epoch == 5
    for restored, best, last in zip(model.get_weights(), script.weights[2], script.weights[5]):
        np.testing.assert_array_equal(restored, best)
        assert not np.array_equal(restored, last)
    reason = ("EarlyStopping: val_score did not improve for 3 epochs (best 0.3000 at epoch 3); "
              "restored the weights of epoch 3")
    assert model.stop_reason == reason and capsys.readouterr().out == reason + "\n"

    # The next fit starts afresh: no stale reason, and nothing stops it.
    model.fit(x, y, epochs=1, verbose=0, callbacks=[EarlyStopping("loss")])
    assert model.stop_reason is None


@pytest.mark.parametrize("patience, stops", [(2, True), (9, False)],
                         ids=["stopped", "ran_all_epochs"])
def test_the_last_test_measures_the_weights_early_stopping_keeps(moons, patience, stops):
    """With restore_best_weights, fit's last test runs on the restored weights, whether
    training stopped early (after that epoch's own test_freq test) or ran all its epochs
    (whose last test waits for the restore)."""
    x, y = moons
    model = _model()
    script = Scripted("val_score", [0.5, 0.3, 0.4, 0.45, 0.6])
    stopper = EarlyStopping("val_score", patience=patience, mode="min",
                            restore_best_weights=True)
    history = model.fit(x[:64], y[:64], epochs=5, verbose=0, test_data=(x[64:], y[64:]),
                        test_freq=1, callbacks=[script, stopper])
    assert (stopper.stopped_epoch > 0) == stops
    for restored, best in zip(model.get_weights(), script.weights[1], strict=True):
        np.testing.assert_array_equal(restored, best)
    kept = model.evaluate(x[64:], y[64:], verbose=0, return_dict=True)
    assert history.history["test_loss"][-1] == pytest.approx(kept["loss"], rel=1e-6)
    assert history.test_epoch[-1] == history.epoch[-1]
    # Every epoch tested once, and the stopped fit's last epoch again after the restore.
    assert history.test_epoch == history.epoch + ([history.epoch[-1]] if stops else [])


def test_auto_mode_reads_the_direction_of_compiled_metrics(moons):
    x, y = moons
    model = _model()
    watchers = [EarlyStopping("val_accuracy", patience=9), ReduceLROnPlateau("val_loss"),
                EarlyStopping("test_accuracy", patience=9)]
    model.fit(x[:64], y[:64], epochs=2, verbose=0, validation_data=(x[64:], y[64:]),
              test_data=(x[64:], y[64:]), test_freq=1, callbacks=watchers)
    assert [w.direction for w in watchers] == ["max", "min", "max"]
    with pytest.raises(ValueError, match="monitor='val_score'.*Pass mode='max'"):
        model.fit(x, y, epochs=1, verbose=0,
                  callbacks=[Scripted("val_score", [1.0]), EarlyStopping("val_score")])


def test_reduce_lr_on_plateau_lowers_the_rate_and_logs_it(moons):
    x, y = moons
    model = _model(0.1)
    reduce = ReduceLROnPlateau("loss", factor=0.5, patience=1, min_delta=10.0, min_lr=0.03)
    history = model.fit(x, y, epochs=4, verbose=0, callbacks=[reduce])
    np.testing.assert_allclose(history.history["learning_rate"], [0.1, 0.1, 0.05, 0.03],
                               rtol=1e-6)
    assert float(model.optimizer.learning_rate) == pytest.approx(0.03)


@pytest.mark.parametrize("schedule, rates", [
    ([0.1, 0.0], [0.1, 0.0, 0.0]),
    ({1: 0.05}, [0.2, 0.05, 0.05]),
    (lambda epoch, lr: lr / 2, [0.1, 0.05, 0.025]),
], ids=["list", "dict", "callable"])
def test_learning_rate_scheduler_sets_the_rate_the_step_uses(moons, schedule, rates):
    x, y = moons
    model = _model(0.2)
    script = Scripted()
    history = model.fit(x, y, epochs=3, verbose=0,
                        callbacks=[LearningRateScheduler(schedule), script])
    np.testing.assert_allclose(history.history["learning_rate"], rates)
    if rates[1] == 0.0:  # plain SGD with a zero rate: the compiled step must leave weights alone
        for after_first, after_last in zip(script.weights[0], script.weights[2]):
            np.testing.assert_array_equal(after_first, after_last)


def test_csv_logger_file_equals_the_history(moons, tmp_path):
    x, y = moons
    model = _model()
    path = tmp_path / "run" / "log.csv"
    logger = CSVLogger(str(path))
    assert not path.parent.exists()
    history = model.fit(x[:64], y[:64], epochs=3, verbose=0, validation_data=(x[64:], y[64:]),
                        test_data=(x[64:], y[64:]), test_freq=2,
                        callbacks=[ReduceLROnPlateau("val_loss"), logger])
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    train_and_val = [k for k in history.history if not k.startswith("test_")]
    test_keys = ["test_accuracy", "test_loss"]
    assert reader.fieldnames == ["epoch", *sorted(train_and_val + test_keys)]
    assert [int(row["epoch"]) for row in rows] == history.epoch == [0, 1, 2]
    for key in train_and_val:
        assert [float(row[key]) for row in rows] == history.history[key]
    assert history.test_epoch == [1, 2]  # the test stage ran after epochs 2 and 3 only
    for key in test_keys:
        assert rows[0][key] == ""
        assert [float(row[key]) for row in rows[1:]] == history.history[key]


@pytest.mark.parametrize("steps_per_execution, where, steps_run", [
    # One step per call: the loss of the step with the inf input is inf.
    ("auto", "inf at epoch 1, batch 5 (step 5)", 5),
    # Four steps per call: the three after it (with non-finite weights) make the mean nan.
    (4, "nan at epoch 1, one of batches 5-8 (steps 5-8), which ran in one compiled call", 8),
])
def test_terminate_on_nan_stops_at_the_step_whose_loss_is_not_finite(
        moons, capsys, steps_per_execution, where, steps_run):
    x, y = moons
    x = x.copy()
    x[37, 0] = np.inf  # in batch 4 (0-based) of 8-sample batches
    model = gf.Sequential([layers.Dense(1)])
    model.compile(optimizer=gf.optimizers.SGD(0.1), loss="mse", jit_compile=False,
                  steps_per_execution=steps_per_execution)
    losses = []

    class Losses(gf.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses.append(logs["loss"])

    history = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, check_finite=False,
                        verbose=0, callbacks=[TerminateOnNaN(), Losses()])
    reason = f"TerminateOnNaN: the loss became {where}"
    assert model.stop_reason.startswith(reason)
    assert capsys.readouterr().out.startswith(reason)
    assert model.stop_training and model.nonfinite_step == steps_run
    assert int(model.optimizer.iterations) == steps_run  # no step ran after it
    assert all(math.isfinite(loss) for loss in losses[:-1]) and not math.isfinite(losses[-1])
    assert history.epoch == [0] and not math.isfinite(history.history["loss"][0])
    # Nothing is restored behind the user's back: the model holds the last step's weights.
    assert not all(np.isfinite(w).all() for w in model.get_weights())


# ------------------------------------------------------------------- recipes

RECIPE = """
data: {source: moons, n_samples: 64}
model: [{type: Dense, units: 1}]
loss: {type: BinaryCrossentropy, from_logits: true}
training: {epochs: 2, validation_split: 0.25}
callbacks:
  - {type: EarlyStopping, monitor: val_loss, patience: PATIENCE, restore_best_weights: true}
  - {type: ReduceLROnPlateau, factor: 0.5, patience: 2}
  - {type: LearningRateScheduler, schedule: {0: 0.01, 5: 0.001}}
  - {type: LearningRateScheduler, schedule: [0.01, 0.005]}
  - {type: CSVLogger, filename: FOLDER/log.csv, separator: ";"}
  - TerminateOnNaN
"""


def test_the_callbacks_come_from_a_recipe(tmp_path):
    from graphfit.recipes.running.builder import build_callbacks

    text = RECIPE.replace("FOLDER", str(tmp_path / "csv")).replace("PATIENCE", "3")
    recipe = gf.recipes.recipe_from_text(text, "r.yaml")
    entries = recipe.config["callbacks"]
    assert entries[0] == {"type": "EarlyStopping", "monitor": "val_loss", "min_delta": 0.0,
                          "patience": 3, "verbose": 0, "mode": "auto", "baseline": None,
                          "restore_best_weights": True, "start_from_epoch": 0}
    callbacks = build_callbacks(recipe.config)
    assert [type(c) for c in callbacks] == [EarlyStopping, ReduceLROnPlateau,
                                            LearningRateScheduler, LearningRateScheduler,
                                            CSVLogger, TerminateOnNaN]
    assert callbacks[2].rate_for(7, 1.0) == 0.001 and callbacks[3].rate_for(7, 1.0) == 0.005
    assert not (tmp_path / "csv").exists()  # checking and building write nothing

    with pytest.raises(gf.recipes.RecipeError) as error:
        gf.recipes.recipe_from_text(RECIPE.replace("PATIENCE", "-1"), "r.yaml")
    assert re.search(r"r\.yaml:\d+:\d+: callbacks\[0\]\.patience: EarlyStopping: patience must "
                     r"be a non-negative integer\. Received: patience=-1", str(error.value))

"""Callbacks as Keras 3 calls them, against Keras itself.

The same small case runs through `keras` and through graphfit, each with a callback that
records every hook it hears, with its arguments and logs; the two records must agree (the
hooks, their order, the batch and epoch indices, the log keys and, from the same initial
weights, the numbers). Then the goldens of Keras's own tests, each run through both:
`callbacks/callback_test.py`, `lambda_callback_test.py`, `early_stopping_test.py` and
`backup_and_restore_test.py`.

Where graphfit differs by design the test says so (and `docs/guides/keras_parity.md` lists it):
- under `steps_per_execution`, the epoch's last, shorter execution ends with the index of the
  last batch that ran; Keras reports `first + steps_per_execution - 1`, batches that never ran;
- `LambdaCallback` refuses a keyword that names no hook (Keras keeps it as an attribute);
- `BackupAndRestore` writes TensorFlow training checkpoints (optimizer state and shuffle seed
  included), not Keras's `.weights.h5` and `training_metadata.json`.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers

TRAIN_HOOKS = ("on_train_begin", "on_train_end", "on_test_begin", "on_test_end",
               "on_predict_begin", "on_predict_end")
EPOCH_HOOKS = ("on_epoch_begin", "on_epoch_end")
BATCH_HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_test_batch_begin",
               "on_test_batch_end", "on_predict_batch_begin", "on_predict_batch_end")


def _recorder_class(base):
    """A Keras-style callback class (no `stage` argument) on `base` that records
    (hook, index, logs) for every hook, and may act (set a stop flag) on a hook."""

    class Recorder(base):
        def __init__(self, act=None):
            super().__init__()
            self.calls = []
            self.act = act

        def _record(self, hook, index, logs):
            logs = dict(logs or {})
            if "outputs" in logs:
                logs["outputs"] = np.array(logs["outputs"])
            self.calls.append((hook, index, logs))
            if self.act is not None:
                self.act(hook, index, self.model)

    def logs_hook(name):
        return lambda self, logs=None: self._record(name, None, logs)

    def indexed_hook(name):
        return lambda self, index, logs=None: self._record(name, index, logs)

    for name in TRAIN_HOOKS:
        setattr(Recorder, name, logs_hook(name))
    for name in EPOCH_HOOKS + BATCH_HOOKS:
        setattr(Recorder, name, indexed_hook(name))
    return Recorder


KerasRecorder = _recorder_class(keras.callbacks.Callback)
GraphfitRecorder = _recorder_class(gf.callbacks.Callback)


def _data(samples, features=3, outputs=2, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(samples, features)).astype("float32"),
            rng.normal(size=(samples, outputs)).astype("float32"))


def _twins(steps_per_execution=1):
    """A graphfit model and its Keras twin with the same weights, compiled alike."""
    ours = gf.Sequential([layers.Dense(2)], input_shape=(3,))
    theirs = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    theirs.set_weights(ours.get_weights())
    ours.compile(optimizer=gf.optimizers.SGD(0.1), loss="mse", metrics=["mae"],
                 steps_per_execution=steps_per_execution)
    theirs.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"],
                   steps_per_execution=steps_per_execution)
    return ours, theirs


def _assert_same_calls(ours, theirs):
    assert [(h, i) for h, i, _ in ours] == [(h, i) for h, i, _ in theirs]
    for (hook, index, our_logs), (_, _, their_logs) in zip(ours, theirs):
        assert sorted(our_logs) == sorted(their_logs), (hook, index)
        for key, value in their_logs.items():
            np.testing.assert_allclose(our_logs[key], value, rtol=2e-5, atol=1e-6,
                                       err_msg=f"{hook}({index}): {key}")


def _run_all(model, recorder, x, y, val, batch_size):
    model.fit(x, y, batch_size=batch_size, epochs=2, shuffle=False, validation_data=val,
              callbacks=[recorder], verbose=0)
    model.evaluate(*val, batch_size=batch_size, callbacks=[recorder], verbose=0)
    model.predict(val[0], batch_size=batch_size, callbacks=[recorder], verbose=0)
    return recorder.calls


def _truncated_ends(calls, batches: dict) -> list:
    """Keras's record with the index of each last, shorter execution's end hook lowered to
    the last batch that ran (`batches`: batches per pass of each kind of hook)."""
    kinds = {"on_train_batch_end": "train", "on_test_batch_end": "test",
             "on_predict_batch_end": "predict"}
    return [(hook, min(index, batches[kinds[hook]] - 1) if hook in kinds else index, logs)
            for hook, index, logs in calls]


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_every_hook_in_keras_order_with_keras_arguments(steps_per_execution):
    """fit (with validation), evaluate and predict: 16 training samples in batches of 4, 8
    validation samples; every execution is full."""
    x, y = _data(16)
    val = _data(8, seed=1)
    ours, theirs = _twins(steps_per_execution)
    our_calls = _run_all(ours, GraphfitRecorder(), x, y, val, 4)
    their_calls = _run_all(theirs, KerasRecorder(), x, y, val, 4)
    _assert_same_calls(our_calls, their_calls)
    hooks = [hook for hook, _, _ in our_calls]
    assert hooks.count("on_train_batch_end") == 2 * 4 // steps_per_execution
    assert hooks.count("on_test_begin") == 3  # two validations, one evaluate
    predicted = [logs["outputs"] for hook, _, logs in our_calls
                 if hook == "on_predict_batch_end"]
    assert [p.shape for p in predicted] == [(4 * steps_per_execution, 2)] * (
        2 // steps_per_execution)
    np.testing.assert_allclose(np.concatenate(predicted), ours.predict(val[0], verbose=0))


def test_the_last_shorter_execution_ends_at_the_last_batch_that_ran():
    """18 samples in batches of 4: 5 batches (the last of 2), steps_per_execution=3. Keras
    ends the second execution with batch index 5, a batch that did not run (its epoch
    iterator numbers executions before it reads them); graphfit says 4. Everything else,
    the numbers included, is Keras's."""
    x, y = _data(18)
    val = _data(8, seed=1)
    ours, theirs = _twins(3)
    our_calls = _run_all(ours, GraphfitRecorder(), x, y, val, 4)
    their_calls = _run_all(theirs, KerasRecorder(), x, y, val, 4)
    train_ends = [index for hook, index, _ in their_calls if hook == "on_train_batch_end"]
    assert train_ends == [2, 5, 2, 5]  # Keras: batch 5 does not exist
    _assert_same_calls(our_calls, _truncated_ends(their_calls,
                                                  {"train": 5, "test": 2, "predict": 2}))


def _stopper(flag, hook, at):
    def act(called, index, model):
        if called == hook and index == at:
            setattr(model, flag, True)
    return act


STOPS = {
    "stop_training in a train batch": ("stop_training", "on_train_batch_end", 1),
    "stop_training at an epoch's end": ("stop_training", "on_epoch_end", 0),
    "stop_evaluating in validation": ("stop_evaluating", "on_test_batch_end", 0),
    "stop_predicting": ("stop_predicting", "on_predict_batch_end", 0),
}


@pytest.fixture(scope="module")
def twins_and_weights():
    """One traced pair for the stop cases, and the weights each case starts from."""
    ours, theirs = _twins()
    return ours, theirs, ours.get_weights()


@pytest.mark.parametrize("case", sorted(STOPS))
def test_stop_flags_set_by_a_callback_stop_as_in_keras(case, twins_and_weights):
    flag, hook, at = STOPS[case]
    x, y = _data(16)
    val = _data(8, seed=1)
    ours, theirs, weights = twins_and_weights
    results = []
    for model, recorder in ((ours, GraphfitRecorder(_stopper(flag, hook, at))),
                            (theirs, KerasRecorder(_stopper(flag, hook, at)))):
        model.set_weights(weights)  # plain SGD: nothing else carries over between cases
        history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False,
                            validation_data=val, callbacks=[recorder], verbose=0)
        evaluated = model.evaluate(*val, batch_size=4, callbacks=[recorder], verbose=0,
                                   return_dict=True)
        predicted = model.predict(val[0], batch_size=4, callbacks=[recorder], verbose=0)
        results.append((recorder.calls, history.history, evaluated, predicted))
    (our_calls, our_history, our_eval, our_pred), (their_calls, *theirs_rest) = results
    _assert_same_calls(our_calls, their_calls)
    assert sorted(our_history) == sorted(theirs_rest[0])
    for key in our_history:
        np.testing.assert_allclose(our_history[key], theirs_rest[0][key], rtol=2e-5)
    for key in our_eval:
        np.testing.assert_allclose(our_eval[key], theirs_rest[1][key], rtol=2e-5)
    np.testing.assert_allclose(our_pred, theirs_rest[2], rtol=2e-5, atol=1e-6)
    hooks = [h for h, _, _ in our_calls]
    if flag == "stop_predicting":  # predict returns what it predicted before it stopped
        assert our_pred.shape == (4, 2) and hooks.count("on_predict_batch_end") == 1
    if flag == "stop_training":
        assert len(our_history["loss"]) == 1
    if flag == "stop_evaluating":  # every validation and the evaluate read one batch
        assert hooks.count("on_test_batch_end") == 3


def test_callback_sees_the_state_of_the_batch_it_is_told_about():
    """Keras's callback_test: `on_batch_end(batch)` comes after the step of `batch`."""
    class Counting(gf.Layer):
        def build(self, input_shape):
            self.count = self.add_weight("count", shape=(), initializer="zeros",
                                         trainable=False)

        def call(self, x, training=False):
            if training:
                self.add_update(self.count, self.count + 1.0)
            return x

    seen = []

    class Check(gf.callbacks.Callback):
        def on_batch_end(self, batch, logs=None):
            seen.append((int(model.layers[0].count.numpy()), batch + 1))

    model = gf.Sequential([Counting(), layers.Dense(1)], input_shape=(1,))
    model.compile(optimizer="sgd", loss="mse")
    x, y = _data(8, features=1, outputs=1)
    model.fit(x, y, callbacks=[Check()], batch_size=2, verbose=0)
    assert seen == [(1, 1), (2, 2), (3, 3), (4, 4)]


# ------------------------------------------------------------------- LambdaCallback

def _lambda_case(module, log):
    return module.callbacks.LambdaCallback(
        on_train_begin=lambda logs: log.append(("on_train_begin",)),
        on_epoch_begin=lambda epoch, logs: log.append(("on_epoch_begin", epoch)),
        on_epoch_end=lambda epoch, logs: log.append(("on_epoch_end", epoch, sorted(logs))),
        on_train_end=lambda logs: log.append(("on_train_end", sorted(logs))),
        on_train_batch_begin=lambda batch, logs: log.append(("batch_begin", batch)),
        on_train_batch_end=lambda batch, logs: log.append(("batch_end", batch)),
        on_test_begin=lambda logs: log.append(("on_test_begin",)),
        on_predict_begin=lambda logs: log.append(("on_predict_begin",)),
        on_predict_batch_end=lambda batch, logs: log.append(
            ("predict_batch_end", batch, np.shape(logs["outputs"]))),
    )


def test_lambda_callback_calls_its_functions_as_keras_does():
    """lambda_callback_test: the named hooks, the batch hooks, and other hooks by keyword
    (on_test_begin in evaluate, on_predict_begin in predict)."""
    x, y = _data(16, features=2, outputs=1)
    val = _data(4, features=2, outputs=1, seed=1)
    logs = {}
    for name, module, model in (
            ("graphfit", gf, gf.Sequential([layers.Dense(1)], input_shape=(2,))),
            ("keras", keras, keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]))):
        log = logs[name] = []
        callback = _lambda_case(module, log)
        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y, batch_size=4, epochs=2, validation_data=val, callbacks=[callback],
                  verbose=0)
        model.evaluate(x, y, batch_size=4, callbacks=[callback], verbose=0)
        model.predict(x, batch_size=4, callbacks=[callback], verbose=0)
    assert logs["graphfit"] == logs["keras"]
    assert ("on_epoch_end", 1, ["loss", "val_loss"]) in logs["graphfit"]
    assert logs["graphfit"].count(("on_test_begin",)) == 3


def test_lambda_callback_arguments():
    assert isinstance(gf.callbacks.LambdaCallback(), gf.callbacks.Callback)  # no arguments
    # Keras keeps an unknown keyword as an attribute that nothing calls; graphfit refuses it.
    assert hasattr(keras.callbacks.LambdaCallback(custom_method=lambda logs: None),
                   "custom_method")
    with pytest.raises(ValueError, match="no hook 'custom_method'"):
        gf.callbacks.LambdaCallback(custom_method=lambda logs: None)
    with pytest.raises(ValueError, match="Did you mean 'on_epoch_end'"):
        gf.callbacks.LambdaCallback(on_epoch_ned=lambda epoch, logs: None)
    with pytest.raises(TypeError, match=r"called with \(epoch, logs\)"):
        gf.callbacks.LambdaCallback(on_epoch_end=lambda logs: None)
    with pytest.raises(TypeError, match="must be a function"):
        gf.callbacks.LambdaCallback(on_train_begin="print")
    with pytest.raises(TypeError, match=r"called with \(batch, logs\)"):
        gf.callbacks.LambdaCallback(on_train_batch_end=print)  # logs= would fail in fit
    callback = gf.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: None)
    assert callback.implements_train_batch_hooks()
    assert not gf.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: None).implements_train_batch_hooks()


# ------------------------------------------------------------------- EarlyStopping

def _early_stopping_models():
    x, y = _data(10, features=5, outputs=1)
    val = _data(10, features=5, outputs=1, seed=1)
    metrics = ["mse", "acc", "accuracy", "hinge", keras.metrics.F1Score(name="f1_score")]
    ours = gf.Sequential([layers.Dense(1, activation="relu"),
                          layers.Dense(1, activation="relu")], input_shape=(5,))
    theirs = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1, activation="relu"),
                               keras.layers.Dense(1, activation="relu")])
    theirs.set_weights(ours.get_weights())
    ours.compile(loss="mae", optimizer="adam", metrics=metrics)
    theirs.compile(loss="mae", optimizer="adam",
                   metrics=metrics[:4] + [keras.metrics.F1Score(name="f1_score")])
    return (x, y, val), ours, theirs


EARLY_STOPPING_MODES = [("max", "val_mse", "max"), ("min", "val_loss", "min"),
                        ("auto", "val_mse", "min"), ("auto", "loss", "min"),
                        ("auto", "acc", "max"), ("auto", "val_accuracy", "max"),
                        ("auto", "hinge", "min"), ("auto", "f1_score", "max")]


def test_early_stopping_direction_and_unknown_monitor_as_keras():
    """early_stopping_test.test_early_stopping: the direction of each monitor, and
    Keras 3.15's answer to a monitor it cannot place: in "auto" mode a ValueError at the
    first epoch's end; with an explicit mode, a warning each epoch and no stop."""
    (x, y, val), ours, theirs = _early_stopping_models()
    for mode, monitor, expected in EARLY_STOPPING_MODES:
        ours_stopper = gf.callbacks.EarlyStopping(patience=0, monitor=monitor, mode=mode)
        theirs_stopper = keras.callbacks.EarlyStopping(patience=0, monitor=monitor, mode=mode)
        for model, stopper in ((ours, ours_stopper), (theirs, theirs_stopper)):
            model.fit(x, y, batch_size=5, validation_data=val, callbacks=[stopper], epochs=2,
                      verbose=0)
        keras_direction = "max" if theirs_stopper.monitor_op is keras.ops.greater else "min"
        assert ours_stopper.direction == keras_direction == expected, monitor

    for model, module in ((ours, gf), (theirs, keras)):
        with pytest.raises(ValueError, match="monitor=.?unknown"):
            model.fit(x, y, batch_size=5, validation_data=val, epochs=2, verbose=0,
                      callbacks=[module.callbacks.EarlyStopping(monitor="unknown")])
    with pytest.raises(ValueError, match="The logs hold no 'val_los'; did you mean 'val_loss'"):
        ours.fit(x, y, batch_size=5, validation_data=val, epochs=2, verbose=0,
                 callbacks=[gf.callbacks.EarlyStopping(monitor="val_los")])

    for model, module in ((ours, gf), (theirs, keras)):
        stopper = module.callbacks.EarlyStopping(monitor="unknown", mode="min")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            history = model.fit(x, y, batch_size=5, epochs=3, verbose=0, callbacks=[stopper])
        assert len(history.history["loss"]) == 3 and not model.stop_training
        assert any("Early stopping conditioned on metric `unknown` which is not available"
                   in str(w.message) for w in caught), module.__name__


def test_early_stopping_patience_golden():
    """early_stopping_test.test_early_stopping_patience: stopped_epoch == max(patience, 1) + 2."""
    losses = [10.0, 9.0, 8.0, 9.0, 8.9, 8.8, 8.7, 8.6, 8.5]
    for patience in (0, 1, 2, 3):
        for module, model in ((gf, gf.Sequential([layers.Dense(1)])),
                              (keras, keras.Sequential())):
            stopper = module.callbacks.EarlyStopping(monitor="loss", patience=patience)
            stopper.set_model(model)
            model.compile(loss="mse", optimizer="sgd")
            stopper.on_train_begin()
            for epoch, loss in enumerate(losses):
                stopper.on_epoch_end(epoch=epoch, logs={"loss": loss})
                if model.stop_training:
                    break
            assert stopper.stopped_epoch == max(patience, 1) + 2


class _DummyModel:
    """early_stopping_test's model: its weights are the number of their epoch."""

    def __init__(self):
        self.stop_training = False
        self.weights = -1

    def get_weights(self):
        return self.weights

    def set_weights(self, weights):
        self.weights = weights


@pytest.mark.parametrize("baseline, stop_at, trained", [(None, None, 5), (0.5, None, 5),
                                                         (0.5, 3, 4)])
def test_early_stopping_restores_the_best_weights_golden(baseline, stop_at, trained):
    """test_early_stopping_final_weights_when_restoring_model_weights: the weights of epoch 2
    come back, whether EarlyStopping or another callback (`stop_at`) stops training."""
    losses = ([0.2, 0.15, 0.1, 0.11, 0.12] if baseline is None
              else [0.9, 0.8, 0.7, 0.71, 0.72, 0.73])
    for module in (gf, keras):
        stopper = module.callbacks.EarlyStopping(
            monitor="val_loss", patience=2 if baseline is None else 5, baseline=baseline,
            restore_best_weights=True)
        stopper.set_model(_DummyModel())
        stopper.on_train_begin()
        epochs_trained = 0
        for epoch, loss in enumerate(losses):
            epochs_trained += 1
            stopper.model.weights = epoch
            stopper.on_epoch_end(epoch, logs={"val_loss": loss})
            if epoch == stop_at:
                stopper.model.stop_training = True
            if stopper.model.stop_training:
                break
        stopper.on_train_end()
        assert (epochs_trained, stopper.model.get_weights()) == (trained, 2), module.__name__


def test_early_stopping_state_is_reset_at_each_fit():
    """test_state_reset_across_fit_calls, and test_early_stopping_reuse: a reused instance
    starts afresh, so a second fit trains at least `patience` epochs again."""
    stopper = gf.callbacks.EarlyStopping(monitor="loss", patience=3)
    stopper.set_model(gf.Sequential([layers.Dense(1)]))
    stopper.on_train_begin()
    stopper.best, stopper.wait, stopper.stopped_epoch = 0.1, 3, 5
    stopper.best_epoch, stopper.best_weights = 5, object()
    stopper.on_train_begin()
    assert (stopper.best, stopper.wait, stopper.stopped_epoch, stopper.best_epoch,
            stopper.best_weights) == (None, 0, 0, 0, None)

    data = np.random.default_rng(0).random((100, 1)).astype("float32")
    labels = np.where(data > 0.5, 1.0, 0.0).astype("float32")
    model = gf.Sequential([layers.Dense(1, activation="relu"),
                           layers.Dense(1, activation="relu")], input_shape=(1,))
    model.compile(optimizer="sgd", loss="mae", metrics=["mse"])
    stopper = gf.callbacks.EarlyStopping(monitor="mse", patience=3)
    for _ in range(2):
        history = model.fit(data, labels, callbacks=[stopper], verbose=0, epochs=20)
        assert len(history.epoch) >= 3


@pytest.mark.parametrize("settings, at_least", [(dict(baseline=0.6, patience=3), 3),
                                                (dict(start_from_epoch=2, patience=3), 5),
                                                (dict(start_from_epoch=2, patience=0), 2)])
def test_early_stopping_baseline_and_start_from_epoch_in_fit(settings, at_least):
    """test_early_stopping_with_baseline / _with_start_from_epoch, through both fits from the
    same weights: the same epochs run."""
    x, y = _data(10, features=5, outputs=1)
    ours = gf.Sequential([layers.Dense(1, activation="relu"),
                          layers.Dense(1, activation="relu")], input_shape=(5,))
    theirs = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1, activation="relu"),
                               keras.layers.Dense(1, activation="relu")])
    theirs.set_weights(ours.get_weights())
    epochs = []
    for module, model in ((gf, ours), (keras, theirs)):
        model.compile(optimizer=module.optimizers.SGD(0.01), loss="mae", metrics=["mse"])
        stopper = module.callbacks.EarlyStopping(monitor="mse", **settings)
        history = model.fit(x, y, batch_size=32, shuffle=False, callbacks=[stopper],
                            verbose=0, epochs=20)
        epochs.append(len(history.epoch))
    assert epochs[0] == epochs[1] >= at_least


# ------------------------------------------------------------------- BackupAndRestore

class Interrupting:
    """backup_and_restore_test's InterruptingCallback, for either library."""

    @staticmethod
    def make(module, steps=None, epochs=None):
        class Interrupt(module.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.batch_count = self.epoch_count = 0

            def on_epoch_end(self, epoch, logs=None):
                self.epoch_count += 1
                if epochs is not None and self.epoch_count == epochs:
                    raise RuntimeError("EpochInterruption")

            def on_batch_end(self, batch, logs=None):
                self.batch_count += 1
                if steps is not None and self.batch_count == steps:
                    raise RuntimeError("StepsInterruption")

        return Interrupt()


class GraphfitCanary(gf.Layer):
    def build(self, input_shape):
        self.counter = self.add_weight("counter", shape=(), initializer="zeros",
                                       trainable=False)

    def call(self, x, training=False):
        if training:
            self.add_update(self.counter, self.counter + 1.0)
        return x


class KerasCanary(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.counter = self.add_weight(shape=(), initializer="zeros", trainable=False)

    def call(self, x):
        self.counter.assign_add(1.0)
        return x


def _canary_model(module):
    if module is gf:
        model = gf.Sequential([GraphfitCanary(), layers.Dense(1)], input_shape=(3,))
    else:
        model = keras.Sequential([keras.Input((3,)), KerasCanary(), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="sgd", metrics=["mse"])
    return model


def _counter(model):
    return int(model.layers[0].counter.numpy())


BACKUP_CASES = {  # Keras's goldens: the counter after the interruption and after resuming
    "step": (dict(save_freq=1), dict(steps=2), 2, 5, (2, 17)),
    "epoch": (dict(save_freq="epoch"), dict(epochs=2), 6, 5, (6, 15)),
    "corrupted": (dict(save_freq="epoch", double_checkpoint=True), dict(epochs=2), 6, 5,
                  (6, 15)),
}


@pytest.mark.parametrize("case", sorted(BACKUP_CASES))
def test_backup_and_restore_resumes_as_keras(case, tmp_path):
    """test_best_case_step / _epoch / test_backup_corrupted: the same interrupted fit and
    resume through both; the counters of training steps agree with Keras's goldens."""
    arguments, interrupt, epochs, resumed_epochs, golden = BACKUP_CASES[case]
    x, y = _data(10, outputs=1)
    for module in (gf, keras):
        backup_dir = tmp_path / module.__name__ / "subdir"
        model = _canary_model(module)
        backup = module.callbacks.BackupAndRestore(str(backup_dir), **arguments)
        with pytest.raises(RuntimeError):
            model.fit(x, y, batch_size=4, epochs=epochs, verbose=0,
                      callbacks=[backup, Interrupting.make(module, **interrupt)])
        assert backup_dir.is_dir() and _counter(model) == golden[0]
        if case == "corrupted":
            if module is gf:  # damage the newest backup: the previous one is restored
                newest = tf.train.latest_checkpoint(str(backup_dir / "latest"))
                data = [f for f in os.listdir(backup_dir / "latest")
                        if f.startswith(os.path.basename(newest) + ".data")]
                (backup_dir / "latest" / data[0]).write_bytes(b"0")
            else:
                with open(backup._weights_path, "w") as file:
                    file.write("0")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # graphfit names the damaged backup it skipped
            history = model.fit(x, y, batch_size=4, epochs=resumed_epochs, verbose=0,
                                callbacks=[backup])
        assert history.epoch[-1] == resumed_epochs - 1
        assert _counter(model) == golden[1], module.__name__
        assert not backup_dir.exists()  # deleted once the fit finished


def test_backup_and_restore_resumes_exactly_and_deletes_or_keeps_its_backups(tmp_path):
    """The Keras docstring's case (interrupted at epoch 4 of 10: the second fit runs epochs
    4 to 9); graphfit's backup holds the optimizer's state and the shuffle seed, so the
    resumed fit ends with the weights of an uninterrupted one."""
    x, y = _data(20, outputs=1)

    def model():
        gf.set_seed(3)
        built = gf.Sequential([layers.Dense(1)], input_shape=(3,))
        built.compile(optimizer=gf.optimizers.SGD(0.05, momentum=0.9), loss="mse")
        return built

    class InterruptAt4(gf.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 4:
                raise RuntimeError("Interrupting!")

    whole = model()
    whole.fit(x, y, batch_size=4, epochs=10, verbose=0)
    interrupted = model()
    backup = gf.callbacks.BackupAndRestore(str(tmp_path / "backup"), delete_checkpoint=False)
    with pytest.raises(RuntimeError, match="Interrupting"):
        interrupted.fit(x, y, batch_size=4, epochs=10, verbose=0,
                        callbacks=[backup, InterruptAt4()])
    resumed = model()  # a new process would build the model again
    history = resumed.fit(x, y, batch_size=4, epochs=10, verbose=0, callbacks=[backup])
    assert history.epoch == [4, 5, 6, 7, 8, 9] and backup.restored_epoch == 4
    for a, b in zip(whole.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert (tmp_path / "backup" / "latest").is_dir()  # delete_checkpoint=False keeps it

    other = gf.Sequential([layers.Dense(2)], input_shape=(3,))
    other.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="BackupAndRestore cannot restore the backup"):
        other.fit(x, np.ones((20, 2)), verbose=0, callbacks=[backup])


def test_backup_and_restore_arguments_as_keras(tmp_path):
    for module in (gf, keras):
        for save_freq in ("batch", 0.15):
            with pytest.raises(ValueError, match="Invalid value for argument `save_freq`"):
                module.callbacks.BackupAndRestore(backup_dir="backup_dir", save_freq=save_freq)
        for backup_dir in ("", None):
            with pytest.raises(ValueError, match="Empty `backup_dir` argument passed"):
                module.callbacks.BackupAndRestore(backup_dir=backup_dir, save_freq="epoch")
    with pytest.raises(ValueError, match="double_checkpoint must be True or False"):
        gf.callbacks.BackupAndRestore(str(tmp_path), double_checkpoint="yes")
    # Backups at epoch ends need no batch hooks (steps_per_execution="auto" stays fast).
    assert not gf.callbacks.BackupAndRestore(str(tmp_path)).implements_train_batch_hooks()
    assert gf.callbacks.BackupAndRestore(str(tmp_path), 5).implements_train_batch_hooks()


# ------------------------------------------------------------------- docs/guides/keras_parity.md

def _callbacks_rows() -> dict[str, str]:
    """{first name in backticks: the row's verdict} of the Callbacks section's table."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "keras_parity.md").read_text()
    section = text.split("\n## Callbacks\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) == 2 and cells[0].startswith("`"):
            for name in re.findall(r"(?:^|, )`(?:model\.)?([A-Za-z_]+)", cells[0]):
                rows[name] = cells[1].split()[0].rstrip(":,")
    return rows


def test_the_parity_table_has_a_row_for_every_keras_callback():
    rows = _callbacks_rows()
    keras_names = {name for name in dir(keras.callbacks) if not name.startswith("_")}
    assert keras_names <= set(rows), sorted(keras_names - set(rows))
    assert {"stop_training", "stop_evaluating", "stop_predicting"} <= set(rows)
    # A callback the table says works exists in graphfit under Keras's name.
    for name, verdict in rows.items():
        if verdict == "works" and name in keras_names:
            assert isinstance(getattr(gf.callbacks, name), type), name


def test_stop_flags_reach_the_loop_of_a_cached_fit():
    """fit(cache_frozen=True) trains the tail in the whole model's place; the flags a
    callback sets on the whole model stop the tail's loops as they stop an ordinary fit."""
    x, y = _data(16)
    val = _data(8, seed=1)
    calls = []
    for cache in (False, True):
        model = gf.Sequential([layers.Dense(4, activation="tanh", trainable=False),
                               layers.Dense(2)], input_shape=(3,))
        model.compile(optimizer="sgd", loss="mse")
        recorder = GraphfitRecorder(_stopper("stop_evaluating", "on_test_batch_end", 0))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the cache serves this fit (no fallback warning)
            model.fit(x, y, batch_size=4, epochs=2, validation_data=val, shuffle=False,
                      callbacks=[recorder], verbose=0, cache_frozen=cache)
        calls.append([(hook, index) for hook, index, _ in recorder.calls])
    assert calls[0] == calls[1]
    assert calls[1].count(("on_test_batch_end", 0)) == 2
    assert ("on_test_batch_end", 1) not in calls[1]


def test_a_monitor_with_one_value_per_threshold_is_refused_with_what_to_do():
    # Keras compares a one-element array as a number (F1Score of one class) and fails on more
    # with NumPy's message; graphfit says which key and what to monitor instead.
    stopper = gf.callbacks.EarlyStopping(monitor="precision")
    stopper.on_train_begin()
    assert stopper.monitored_value({"precision": np.array([0.5])}, "Early stopping") == 0.5
    with pytest.raises(ValueError, match="`precision`, which has 2 values"):
        stopper.monitored_value({"precision": np.array([0.5, 0.25])}, "Early stopping")

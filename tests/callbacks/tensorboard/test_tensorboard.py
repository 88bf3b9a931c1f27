"""TensorBoard: train / val / test runs with the same tags, batch scalars, the learning rate,
weight and gradient histograms, the step graph, recipe text, hyperparameters and profiles, all
read back with TensorBoard's own event reader."""

import glob
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

import graphfit as gf
from graphfit import layers
from graphfit.callbacks import CallbackList, TensorBoard
from graphfit.core.registry import CALLBACKS
from graphfit.core.step_context import record_gradients
from graphfit.saving import checkpoints
from graphfit.training.recorders import GradientTaps

RECIPE = "name: moons\nmodel:\n  - {type: Dense, units: 8}\n"
HPARAMS = {"learning_rate": 0.1, "units": 8, "optimizer": "sgd", "batch_norm": False}


def _events(folder):
    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    return events


def _values(folder):
    """{tag: [(step, value as an array)]} of one run (TF2 writes every summary as a tensor)."""
    events = _events(folder)
    return {tag: [(e.step, tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)]
            for tag in events.Tags()["tensors"]}


def _steps(series):
    return [step for step, _ in series]


def _floats(series):
    return [float(value) for _, value in series]


def _check_histogram(histogram, values):
    """A tf.summary.histogram of `values`: [left edge, right edge, count] rows."""
    values = np.asarray(values).ravel()
    assert histogram[:, 2].sum() == values.size
    np.testing.assert_allclose([histogram[0, 0], histogram[-1, 1]], [values.min(), values.max()],
                               rtol=1e-5, atol=1e-7)


def _mlp():
    return gf.Sequential([layers.Dense(8, activation="relu", name="hidden"),
                          layers.Dense(1, name="out")])


@pytest.fixture(scope="module")
def moons_run(tmp_path_factory):
    """One fit with every feature on: 4 steps per epoch, 3 epochs, test every 2 epochs."""
    keras.utils.set_random_seed(1234)
    log_dir = tmp_path_factory.mktemp("tensorboard") / "run"
    x, y = gf.datasets.make_moons(n_samples=120, seed=0)
    model = _mlp()
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=4, decay_rate=0.5)
    model.compile(optimizer=gf.optimizers.SGD(schedule),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=["accuracy", "auc"])
    board = TensorBoard(str(log_dir), histogram_freq=2, update_freq=2, hparams=HPARAMS,
                        recipe_text=RECIPE)
    history = model.fit(x[:80], y[:80], batch_size=20, epochs=3, verbose=0,
                        validation_data=(x[80:100], y[80:100]), test_data=(x[100:], y[100:]),
                        test_freq=2, callbacks=[board])
    runs = {stage: _values(log_dir / stage) for stage in ("train", "val", "test")}
    return log_dir, model, history, runs


def test_three_runs_with_the_same_tags_and_the_history_values(moons_run):
    _, _, history, runs = moons_run
    epoch_tags = {"loss", "accuracy", "auc"}
    assert set(runs["val"]) == set(runs["test"]) == epoch_tags
    assert epoch_tags < set(runs["train"])
    for tag in epoch_tags:
        assert _steps(runs["train"][tag]) == _steps(runs["val"][tag]) == [0, 1, 2]
        assert _steps(runs["test"][tag]) == history.test_epoch == [1, 2]
        np.testing.assert_allclose(_floats(runs["train"][tag]), history.history[tag], rtol=1e-6)
        for stage in ("val", "test"):
            np.testing.assert_allclose(_floats(runs[stage][tag]), history.history[f"{stage}_{tag}"],
                                       rtol=1e-6)


def test_learning_rate_each_epoch(moons_run):
    _, _, _, runs = moons_run
    # ExponentialDecay(0.1, 4, 0.5) after 4 steps per epoch: the rate of the next step.
    assert _steps(runs["train"]["learning_rate"]) == [0, 1, 2]
    np.testing.assert_allclose(_floats(runs["train"]["learning_rate"]),
                               [0.1 * 0.5 ** (epoch + 1) for epoch in range(3)], rtol=1e-6)


def test_learning_rate_from_the_epoch_logs_when_a_callback_put_it_there(tmp_path):
    model = gf.Sequential([layers.Dense(1)])
    model.compile(optimizer=gf.optimizers.SGD(0.5), loss="mse")
    board = TensorBoard(str(tmp_path))
    board.set_model(model)
    board.on_epoch_end(0, {"loss": 1.0})
    board.on_epoch_end(1, {"loss": 1.0, "learning_rate": 0.25})  # e.g. ReduceLROnPlateau's
    board.on_train_end()
    rates = _values(tmp_path / "train")["learning_rate"]
    assert _steps(rates) == [0, 1]
    np.testing.assert_allclose(_floats(rates), [0.5, 0.25])


def test_batch_scalars_every_update_freq_steps_at_the_global_step(moons_run):
    _, model, history, runs = moons_run
    assert int(model.optimizer.iterations) == 12
    for tag in ("loss", "accuracy", "auc"):
        series = dict((step, float(v)) for step, v in runs["train"][f"batch_{tag}"])
        assert sorted(series) == [2, 4, 6, 8, 10, 12]
        # The running metrics at the last step of an epoch are the epoch's numbers.
        np.testing.assert_allclose([series[4], series[8], series[12]], history.history[tag],
                                   rtol=1e-6)


def test_batch_hooks_and_single_steps_only_when_asked():
    quiet = CallbackList([TensorBoard("unused")])
    assert not quiet.needs_train_batch_hooks and not quiet.wants_every_train_batch
    assert CallbackList([TensorBoard("unused", update_freq=5)]).wants_every_train_batch
    assert CallbackList([TensorBoard("unused", profile_batch=[2, 3])]).wants_every_train_batch


def test_weight_and_gradient_histograms_every_histogram_freq_epochs(moons_run):
    _, model, _, runs = moons_run
    names = ["hidden/kernel", "hidden/bias", "out/kernel", "out/bias"]
    for name in names:
        assert _steps(runs["train"][f"weights/{name}"]) == [0, 2]
        assert _steps(runs["train"][f"gradients/{name}"]) == [0, 2]
    final = dict(zip(names, model.variables))
    for name, variable in final.items():  # epoch 2 is the last: its weights are the final ones
        _check_histogram(runs["train"][f"weights/{name}"][-1][1], variable.numpy())


def test_graph_of_the_training_step(moons_run):
    log_dir = moons_run[0]
    graph = _events(log_dir / "train").Graph()
    ops = {node.op for node in graph.node}
    assert {"MatMul", "AssignVariableOp", "BroadcastGradientArgs"} <= ops
    for stage in ("val", "test"):
        assert not _events(log_dir / stage).Tags()["graph"]


def test_no_graph_when_running_eagerly(tmp_path):
    model = gf.Sequential([layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    model.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0, callbacks=[TensorBoard(str(tmp_path))])
    events = _events(tmp_path / "train")
    assert not events.Tags()["graph"] and "loss" in events.Tags()["tensors"]


def test_recipe_text_and_hparams_session_in_the_log_dir_itself(moons_run):
    log_dir = moons_run[0]
    events = _events(log_dir)
    (text,) = events.Tensors("recipe")
    assert text.step == 0
    assert tf.make_ndarray(text.tensor_proto).item().decode() == f"```\n{RECIPE}\n```"
    start = plugin_data_pb2.HParamsPluginData.FromString(
        events.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    ).session_start_info
    assert start.hparams["learning_rate"].number_value == 0.1
    assert start.hparams["units"].number_value == 8
    assert start.hparams["optimizer"].string_value == "sgd"
    assert start.hparams["batch_norm"].bool_value is False
    end = plugin_data_pb2.HParamsPluginData.FromString(
        events.SummaryMetadata("_hparams_/session_end_info").plugin_data.content
    ).session_end_info
    assert end.status == api_pb2.STATUS_SUCCESS


@pytest.mark.parametrize("jit_compile", [False, True])
def test_recorded_gradient_is_the_raw_gradient_of_the_last_batch(tmp_path, jit_compile):
    x, y = gf.datasets.make_moons(n_samples=24, seed=1)
    y = y.astype("float32")[:, None]
    model = _mlp()
    # lr=0: the weights never move; clipnorm: the recorded gradient is the raw one.
    model.compile(optimizer=gf.optimizers.SGD(0.0, clipnorm=1e-3), loss="mse",
                  jit_compile=jit_compile)
    board = TensorBoard(str(tmp_path), histogram_freq=1)
    model.fit(x, y, batch_size=None, epochs=2, verbose=0, callbacks=[board])
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    expected = tape.gradient(loss, model.trainable_variables)
    assert np.linalg.norm(np.concatenate([g.numpy().ravel() for g in expected])) > 1e-2
    taps = _recorded_gradients(model)
    assert [v.name for v, _ in taps] == [v.name for v in model.trainable_variables]
    runs = _values(tmp_path / "train")
    for (variable, tap), gradient in zip(taps, expected):
        np.testing.assert_allclose(tap.numpy(), gradient.numpy(), rtol=1e-5, atol=1e-7)
        histogram = runs[f"gradients/{variable.name.split(':')[0].split('/', 1)[1]}"]
        assert variable.name.split("/")[1] in ("hidden", "out")
        assert _steps(histogram) == [0, 1]
        _check_histogram(histogram[-1][1], gradient.numpy())
    assert _events(tmp_path / "train").Tags()["graph"]


def _recorded_gradients(model):
    """What the TensorBoard callback's gradient taps hold (it adds them as a step recorder)."""
    taps = [r for r in model.step_recorders if isinstance(r, GradientTaps)]
    assert len(taps) == 1, model.step_recorders
    return taps[0].recorded_gradients()


class _SilentSGD(gf.optimizers.SGD):
    """A minimize override that reports no gradient (like a second-order optimizer might)."""

    def minimize(self, loss_fn, variables, batch=None):
        with tf.GradientTape() as tape:
            loss, aux = loss_fn()
        self.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss, aux


class _ReportingSGD(_SilentSGD):
    """A minimize override that reports a gradient of its own choice (here: doubled)."""

    def minimize(self, loss_fn, variables, batch=None):
        with tf.GradientTape() as tape:
            loss, aux = loss_fn()
        gradients = tape.gradient(loss, variables)
        record_gradients([2.0 * g for g in gradients], variables)
        self.apply_gradients(zip(gradients, variables))
        return loss, aux


def test_minimize_overrides_report_gradients_or_get_weight_histograms_only(tmp_path):
    x, y = np.ones((4, 2), "float32"), np.ones((4, 1), "float32")
    model = gf.Sequential([layers.Dense(1, kernel_initializer="zeros", name="dense")])
    model.compile(optimizer=_SilentSGD(0.0), loss="mse", jit_compile=False)
    with pytest.warns(UserWarning, match="reported no gradients"):
        model.fit(x, y, batch_size=None, verbose=0,
                  callbacks=[TensorBoard(str(tmp_path / "silent"), histogram_freq=1)])
    assert set(_values(tmp_path / "silent" / "train")) >= {"weights/dense/kernel", "loss"}
    assert not [t for t in _values(tmp_path / "silent" / "train") if t.startswith("gradients/")]

    model.compile(optimizer=_ReportingSGD(0.0), loss="mse", jit_compile=False)
    model.fit(x, y, batch_size=None, verbose=0,
              callbacks=[TensorBoard(str(tmp_path / "reporting"), histogram_freq=1)])
    # d/dw mean((x w + b - 1)^2) at w = 0, b = 0: 2 * mean(-1 * x) = -2 per weight, doubled.
    kernel_tap = _recorded_gradients(model)[0][1]
    np.testing.assert_allclose(kernel_tap.numpy(), [[-4.0], [-4.0]])
    assert "gradients/dense/kernel" in _values(tmp_path / "reporting" / "train")


def _logit_metrics(logits, labels):
    """Binary cross-entropy from logits and accuracy (threshold 0), in NumPy."""
    z, t = logits.ravel().astype(np.float64), labels.ravel().astype(np.float64)
    loss = np.mean(np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z))))
    return loss, np.mean((z > 0) == (t > 0.5))


def test_each_stage_logs_the_metrics_of_its_own_data_only(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(90, 2)).astype("float32")
    y = (x[:, :1] > 0).astype("float32")
    data = {"train": (x[:40], y[:40]), "val": (x[40:65], 1.0 - y[40:65]),  # flipped labels
            "test": (3.0 * x[65:], y[65:])}
    model = _mlp()
    model.compile(optimizer=gf.optimizers.SGD(0.0),  # fixed weights: one value per stage
                  loss=keras.losses.BinaryCrossentropy(from_logits=True), metrics=["accuracy"])
    model.fit(*data["train"], batch_size=None, epochs=2, verbose=0,
              validation_data=data["val"], validation_freq=1, test_data=data["test"],
              test_freq=1, callbacks=[TensorBoard(str(tmp_path))])
    expected = {stage: _logit_metrics(model(xs).numpy(), ys) for stage, (xs, ys) in data.items()}
    assert len({round(loss, 4) for loss, _ in expected.values()}) == 3
    for stage, (loss, accuracy) in expected.items():
        run = _values(tmp_path / stage)
        assert _steps(run["loss"]) == _steps(run["accuracy"]) == [0, 1]
        np.testing.assert_allclose(_floats(run["loss"]), [loss, loss], rtol=1e-5)
        np.testing.assert_allclose(_floats(run["accuracy"]), [accuracy, accuracy], rtol=1e-6)


def test_evaluate_writes_its_stage_run_at_the_last_trained_epoch(tmp_path):
    x, y = gf.datasets.make_moons(n_samples=40, seed=2)
    model = _mlp()
    model.compile(optimizer="sgd", loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    board = TensorBoard(str(tmp_path / "evaluated"))
    untrained = model.evaluate(x, y, stage="test", callbacks=[board], verbose=0, return_dict=True)
    model.fit(x, y, epochs=3, verbose=0)
    trained = model.evaluate(x, y, stage="test", callbacks=[board], verbose=0, return_dict=True)
    checkpoints.fit_state(model).epoch.assign(5)  # as restored from a checkpoint after 5 epochs
    restored = model.evaluate(x, y, stage="test", callbacks=[board], verbose=0, return_dict=True)
    board.evaluation_step = 7
    validated = model.evaluate(x, y, stage="val", callbacks=[board], verbose=0, return_dict=True)
    # Flushed without on_train_end: readable at once.
    test, val = _values(tmp_path / "evaluated" / "test"), _values(tmp_path / "evaluated" / "val")
    assert set(test) == set(val) == {"loss", "accuracy"}
    assert board.runs_written == {"test", "val"}
    for tag in ("loss", "accuracy"):
        assert _steps(test[tag]) == [0, 2, 4]  # the index of the last completed epoch
        np.testing.assert_allclose(_floats(test[tag]),
                                   [untrained[tag], trained[tag], restored[tag]], rtol=1e-6)
        assert _steps(val[tag]) == [7]
        np.testing.assert_allclose(_floats(val[tag]), [validated[tag]], rtol=1e-6)


def test_profile_batch_writes_a_profile_of_the_range(tmp_path):
    model = gf.Sequential([layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    board = TensorBoard(str(tmp_path), profile_batch="2,3", write_graph=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(np.ones((16, 2)), np.ones((16, 1)), batch_size=4, epochs=2, verbose=0,
                  callbacks=[board])
    failed = [str(w.message) for w in caught if "profiler" in str(w.message)]
    if failed:
        pytest.skip(f"tf.profiler is unavailable here: {failed[0]}")
    assert glob.glob(os.path.join(tmp_path, "train", "plugins", "profile", "*", "*.xplane.pb"))
    assert not board.implements_train_batch_hooks()  # done: back to multi-step calls
    assert _steps(_values(tmp_path / "train")["loss"]) == [0, 1]


@pytest.mark.parametrize("arguments, named", [
    ({"log_dir": ""}, "log_dir=''"),
    ({"histogram_freq": -1}, "histogram_freq=-1"),
    ({"histogram_freq": True}, "histogram_freq=True"),
    ({"write_graph": "yes"}, "write_graph='yes'"),
    ({"write_images": True}, "write_images=True"),
    ({"update_freq": "step"}, "update_freq='step'"),
    ({"update_freq": 0}, "update_freq=0"),
    ({"profile_batch": "a,b"}, "profile_batch='a,b'"),
    ({"profile_batch": [3, 2]}, "profile_batch=[3, 2]"),
    ({"profile_batch": [1, 2, 3]}, "profile_batch=[1, 2, 3]"),
    ({"profile_batch": -1}, "profile_batch=-1"),
    ({"hparams": [("lr", 0.1)]}, "hparams=[('lr', 0.1)]"),
    ({"hparams": {"layers": [8, 8]}}, "hparams['layers']=[8, 8]"),
    ({"hparams": {"lr": None}}, "hparams['lr']=None"),
    ({"recipe_text": 5}, "recipe_text=5"),
])
def test_bad_arguments_name_the_argument_and_value(arguments, named):
    with pytest.raises(ValueError) as error:
        TensorBoard(**arguments)
    assert named in str(error.value)


def test_recipe_arguments_are_plain_data_and_construction_touches_no_file(tmp_path):
    log_dir = tmp_path / "not_yet"
    board = CALLBACKS.get("TensorBoard")(
        log_dir=str(log_dir), histogram_freq=1, update_freq="batch", profile_batch=[2, 4],
        hparams={"lr": 0.1, "name": "a", "flag": True}, recipe_text=RECIPE)
    assert (board._batch_every, board._profile_range) == (1, (2, 4))
    assert TensorBoard(profile_batch="2,4")._profile_range == (2, 4)
    assert TensorBoard(profile_batch=3)._profile_range == (3, 3)
    assert TensorBoard(profile_batch=0)._profile_range is None
    assert not log_dir.exists()


def _session_status(log_dir):
    return plugin_data_pb2.HParamsPluginData.FromString(
        _events(log_dir).SummaryMetadata("_hparams_/session_end_info").plugin_data.content
    ).session_end_info.status


@pytest.mark.parametrize("guard", [False, True])
def test_a_run_whose_loss_turned_nan_ends_its_hparams_session_as_failure(tmp_path, guard):
    model = gf.Sequential([layers.Dense(1)])
    model.compile(optimizer=gf.optimizers.SGD(1e30), loss="mse")
    board = TensorBoard(str(tmp_path), hparams={"learning_rate": 1e30})
    extra = [gf.callbacks.TerminateOnNaN()] if guard else []
    x = np.linspace(-3, 3, 16, dtype="float32")[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x, 5 * x, batch_size=4, epochs=3, verbose=0, callbacks=[board, *extra])
    assert not np.isfinite(model.history.history["loss"][-1])
    assert _session_status(tmp_path) == api_pb2.STATUS_FAILURE

"""Training checkpoints: what they hold, deferred restore, atomic saves, and exact resume.

The resume tests compare a fit interrupted after some epochs and resumed in a fresh model
(restore_latest, then fit(initial_epoch=...)) with an uninterrupted fit: weights, optimizer
slots, batch-norm statistics and Dropout generator states must be bitwise equal.
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.saving import checkpoints

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.1).astype("float32")
    return x, y


def _build_model(jit_compile=False, steps_per_execution="auto", optimizer=None):
    model = gf.Sequential([layers.Dense(8, activation="relu"), layers.Dropout(0.3),
                           layers.BatchNormalization(), layers.Dense(1)])
    model.compile(optimizer=optimizer or gf.optimizers.SGD(0.05, momentum=0.9), loss="mse",
                  jit_compile=jit_compile, steps_per_execution=steps_per_execution)
    return model


def _full_state(model) -> dict:
    """Every value a resumed fit depends on, by position (names differ between models)."""
    state = {f"model/{i}": v.numpy() for i, v in enumerate(model.variables)}
    state.update({f"optimizer/{i}": v.numpy() for i, v in enumerate(model.optimizer.variables)})
    for i, layer in enumerate(model.flatten_layers()):
        if isinstance(getattr(layer, "_generator", None), tf.random.Generator):
            state[f"dropout/{i}/generator"] = layer._generator.state.numpy()
    return state


def _assert_same_state(expected: dict, actual: dict):
    assert len(expected) == len(actual)
    for (name, want), got in zip(expected.items(), actual.values()):
        np.testing.assert_array_equal(got, want, err_msg=name)


def _fit(model, directory, epochs, initial_epoch=0, extra=()):
    x, y = _data()
    callbacks = [gf.callbacks.ModelCheckpoint(directory, monitor="loss"), *extra]
    return model.fit(x, y, batch_size=8, epochs=epochs, initial_epoch=initial_epoch,
                     verbose=0, callbacks=callbacks)


# --------------------------------------------------------------------- exact resume


@pytest.mark.parametrize("jit_compile, steps_per_execution", [(False, "auto"), (True, 1)])
def test_resumed_fit_equals_an_uninterrupted_one(tmp_path, jit_compile, steps_per_execution):
    gf.set_seed(0)
    uninterrupted = _build_model(jit_compile, steps_per_execution)
    full = _fit(uninterrupted, str(tmp_path / "a"), epochs=6)

    gf.set_seed(0)
    first_half = _build_model(jit_compile, steps_per_execution)
    _fit(first_half, str(tmp_path / "b"), epochs=3)
    shutil.copytree(tmp_path / "b", tmp_path / "after_3")
    # A fresh model from another global seed: the checkpoint alone must carry the run on.
    gf.set_seed(999)
    resumed = _build_model(jit_compile, steps_per_execution)
    state = checkpoints.restore_latest(resumed, str(tmp_path / "b"))
    assert {k: state[k] for k in ("epoch", "path")} == {
        "epoch": 3, "path": str(tmp_path / "b" / "latest" / "ckpt-3")}
    assert [set(entry) for entry in state["records"]] == [{"loss"}] * 3  # the logs, in it
    second_half = _fit(resumed, str(tmp_path / "b"), epochs=6, initial_epoch=state["epoch"])

    _assert_same_state(_full_state(uninterrupted), _full_state(resumed))
    assert second_half.history["loss"] == full.history["loss"][3:]
    assert int(resumed.optimizer.iterations) == 6 * 5
    assert checkpoints.resume_point(str(tmp_path / "b")) == 6

    if not jit_compile:
        # The control: the same resume with the shuffle seed forgotten ends elsewhere, so the
        # comparison above does see the sample order.
        gf.set_seed(999)
        forgetful = _build_model(jit_compile, steps_per_execution)
        checkpoints.restore_latest(forgetful, str(tmp_path / "after_3"))
        gf.checkpoints.fit_state(forgetful).shuffle_seed.assign(-1)
        _fit(forgetful, str(tmp_path / "c"), epochs=6, initial_epoch=3)
        assert not np.array_equal(forgetful.variables[0].numpy(),
                                  uninterrupted.variables[0].numpy())


def test_a_keras_layer_s_dropout_resumes_its_random_stream(tmp_path):
    # Keras's SeedGenerator state is not among the Keras layer's weights or checkpoint
    # dependencies: the checkpoint's `random_state` part carries it, so the resumed fit
    # draws the masks the uninterrupted one drew.
    import keras

    def build():
        model = gf.Sequential([layers.Dense(8, activation="relu"),
                               layers.KerasLayer(keras.layers.Dropout(0.4, seed=3)),
                               layers.Dense(1)])
        model.compile(optimizer=gf.optimizers.SGD(0.05), loss="mse")
        return model

    gf.set_seed(0)
    uninterrupted = build()
    _fit(uninterrupted, str(tmp_path / "a"), epochs=4)
    gf.set_seed(0)
    _fit(build(), str(tmp_path / "b"), epochs=2)
    saved = dict(tf.train.list_variables(str(tmp_path / "b" / "latest" / "ckpt-2")))
    assert [name for name in saved if name.startswith("random_state/")] == [
        "random_state/layer_2_seed_0/.ATTRIBUTES/VARIABLE_VALUE"]  # the model is layer 0
    resumed = build()
    checkpoints.restore_latest(resumed, str(tmp_path / "b"))
    _fit(resumed, str(tmp_path / "b"), epochs=4, initial_epoch=2)
    _assert_same_state(_full_state(uninterrupted), _full_state(resumed))


def _sequences():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 6, 3)).astype("float32")
    return x, x.sum(axis=(1, 2))[:, None]


def _resumes_exactly(tmp_path, build, fit_kwargs, before_restore=None, after_restore=None):
    """Whether 2 + 2 epochs through a checkpoint end with the weights of 4 in one fit."""
    x, y = _sequences()
    fit_kwargs = dict(batch_size=16, verbose=0, **fit_kwargs)
    gf.set_seed(0)
    uninterrupted = build()
    uninterrupted.fit(x, y, epochs=4, **fit_kwargs)
    gf.set_seed(0)
    build().fit(x, y, epochs=2, callbacks=[
        gf.callbacks.ModelCheckpoint(str(tmp_path), monitor="loss")], **fit_kwargs)
    gf.set_seed(123)
    resumed = build()
    if before_restore:
        before_restore(resumed, x)
    state = checkpoints.restore_latest(resumed, str(tmp_path))
    if after_restore:
        after_restore(resumed, x)
    resumed.fit(x, y, epochs=4, initial_epoch=state["epoch"], **fit_kwargs)
    return all(np.array_equal(a.numpy(), b.numpy())
               for a, b in zip(uninterrupted.variables, resumed.variables))


def _lstm():
    model = gf.Sequential([layers.LSTM(4, dropout=0.3), layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    return model


def test_evaluating_or_predicting_leaves_a_keras_lstm_s_random_stream_alone(tmp_path):
    # Keras's LSTM draws its dropout masks at inference too. That seed advance was kept, so
    # the shorter run's end-of-fit test evaluation (or a predict after the restore) moved the
    # stream the uninterrupted run had not moved at that epoch.
    x, y = _sequences()
    assert _resumes_exactly(tmp_path / "test", _lstm, {"test_data": (x[:16], y[:16])},
                            before_restore=lambda model, x: model(x[:1]))
    assert _resumes_exactly(tmp_path / "predict", _lstm, {},
                            after_restore=lambda model, x: model.predict(x, verbose=0))


def test_a_keras_layer_that_makes_its_seed_when_built_resumes_into_an_unbuilt_model(tmp_path):
    # MultiHeadAttention creates its dropout's seed in build(): restored before the model
    # was built, the seed waits for fit to build it (deferred restoration).
    def build():
        model = gf.Sequential([layers.MultiHeadAttention(num_heads=2, key_dim=2, dropout=0.3),
                               layers.Flatten(), layers.Dense(1)])
        model.compile(optimizer="adam", loss="mse")
        return model

    assert _resumes_exactly(tmp_path, build, {})


def test_a_checkpoint_without_random_state_warns_that_the_resume_is_not_exact(tmp_path):
    x, y = _sequences()
    model = _lstm()
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    # As a graphfit that saved no random state wrote it: every other part is there.
    tf.train.Checkpoint(model=model, optimizer=model.optimizer,
                        fit_state=checkpoints.fit_state(model),
                        best_value=tf.Variable(np.nan, dtype=tf.float64)).write(
        str(tmp_path / "latest" / "ckpt-1"))
    with open(tmp_path / "latest" / "checkpoint", "w") as state_file:
        state_file.write('model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n')
    with pytest.warns(UserWarning, match="holds no random state for the Keras layers"):
        checkpoints.restore_latest(model, str(tmp_path))


def test_fit_draws_a_shuffle_seed_only_when_starting_and_counts_epochs():
    x, y = _data()
    model = _build_model()
    state = checkpoints.fit_state(model)
    assert (int(state.epoch), int(state.shuffle_seed)) == (0, -1)
    model.fit(x, y, epochs=2, verbose=0)
    first = int(state.shuffle_seed)
    assert first >= 0 and int(state.epoch) == 2
    model.fit(x, y, epochs=3, initial_epoch=2, verbose=0)
    assert (int(state.epoch), int(state.shuffle_seed)) == (3, first)
    model.fit(x, y, epochs=1, verbose=0)
    assert int(state.shuffle_seed) != first and int(state.epoch) == 1


def test_epochs_completed_stop_where_training_stopped():
    class StopAfterSecond(gf.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.stop_training = epoch == 1
            self.seen = int(checkpoints.fit_state(self.model).epoch)

    stopper = StopAfterSecond()
    model = _build_model()
    model.fit(*_data(), epochs=5, verbose=0, callbacks=[stopper])
    assert stopper.seen == 2 and int(checkpoints.fit_state(model).epoch) == 2


# ------------------------------------------------------------------ what is restored


def _trained(tmp_path, optimizer=None):
    gf.set_seed(0)
    model = _build_model(optimizer=optimizer)
    _fit(model, str(tmp_path), epochs=2)
    return model


OPTIMIZERS = {"sgd_momentum": lambda: gf.optimizers.SGD(0.05, momentum=0.9),
              "adam": lambda: gf.optimizers.Adam(0.01)}


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """`trained_run(optimizer)`: (folder, model) of a 2-epoch run with that optimizer, trained
    once per module and shared by the tests that only read it (they restore its checkpoints
    into other models and never change the folder or the model)."""
    runs = {}

    def get(optimizer="sgd_momentum"):
        if optimizer not in runs:
            folder = tmp_path_factory.mktemp(optimizer)
            runs[optimizer] = str(folder), _trained(folder, OPTIMIZERS[optimizer]())
        return runs[optimizer]

    return get


@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_deferred_restore_fills_variables_and_slots_created_later(trained_run, optimizer):
    folder, saved = trained_run(optimizer)
    gf.set_seed(5)
    fresh = _build_model(optimizer=OPTIMIZERS[optimizer]())
    assert not fresh.variables and not fresh.optimizer.variables[2:]  # nothing built yet
    state = checkpoints.restore_latest(fresh, folder)
    assert state["epoch"] == 2
    assert int(checkpoints.fit_state(fresh).shuffle_seed) == int(
        checkpoints.fit_state(saved).shuffle_seed)
    # Built afterwards, as fit would: the saved values arrive as the variables are created.
    fresh.build((None, 3))
    fresh.optimizer.build(fresh.trainable_variables)
    _assert_same_state(_full_state(saved), _full_state(fresh))
    slot = {"sgd_momentum": "momentum", "adam": "velocity"}[optimizer]
    assert np.any(fresh.optimizer.get_slot(fresh.trainable_variables[0], slot).numpy() != 0)


def test_restore_into_a_built_model_creates_the_slots_first(trained_run):
    folder, saved = trained_run()
    gf.set_seed(5)
    fresh = _build_model()
    fresh.build((None, 3))
    assert len(fresh.optimizer.variables) == 2  # iterations and learning rate: no slots yet
    checkpoints.Checkpointer(folder, fresh).restore("latest")
    _assert_same_state(_full_state(saved), _full_state(fresh))


def test_restore_best_and_the_recorded_best_value(trained_run):
    folder, model = trained_run()
    checkpointer = checkpoints.Checkpointer(folder, model)
    best = checkpointer.latest_path("best")
    assert best is not None and checkpointer.recorded_best("best") == pytest.approx(
        min(model.history.history["loss"]))
    fresh = _build_model()
    assert checkpoints.Checkpointer(folder, fresh).restore("best")["path"] == best


def test_a_mismatched_checkpoint_raises_and_leaves_the_model_as_it_was(trained_run):
    folder, _ = trained_run()
    other = gf.Sequential([layers.Dense(5), layers.Dense(1)])
    other.compile(optimizer=gf.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    other.build((None, 3))
    before = [v.numpy() for v in other.variables]
    with pytest.raises(ValueError, match="does not match model"):
        checkpoints.restore_latest(other, folder)
    for value, variable in zip(before, other.variables):
        np.testing.assert_array_equal(variable.numpy(), value)


@pytest.mark.parametrize("built", [True, False], ids=["built", "deferred"])
def test_a_checkpoint_of_another_optimizer_is_refused(trained_run, built):
    # Slots are saved by position: Adam's "momentum" would fill SGD's, silently.
    folder, _ = trained_run("adam")
    other = _build_model(optimizer=gf.optimizers.SGD(0.05, momentum=0.9))
    if built:
        other.build((None, 3))
    before = [v.numpy() for v in other.variables]
    with pytest.raises(ValueError, match=r"saved by an optimizer with the slots momentum, "
                                         r"velocity per variable, but this model's optimizer "
                                         r"\(SGD\) keeps momentum.*model.load_weights"):
        checkpoints.restore_latest(other, folder)
    for value, variable in zip(before, other.variables, strict=True):
        np.testing.assert_array_equal(variable.numpy(), value)
    assert int(checkpoints.fit_state(other).epoch) == 0
    if built:  # the weights alone still load, as the message says
        path = checkpoints.Checkpointer(folder, other).latest_path("latest")
        other.load_weights(path)


def test_a_checkpoint_with_the_earlier_int32_lm_state_says_so_and_changes_nothing(tmp_path):
    # Before LM's convergence code became int64 (XLA on a GPU cannot reach int32 variables),
    # checkpoints held it as int32: rewrite a fresh checkpoint that way, as that graphfit did.
    model = _trained(tmp_path, gf.optimizers.LevenbergMarquardt())
    path = checkpoints.Checkpointer(str(tmp_path), model).latest_path()
    reader = tf.train.load_checkpoint(path)
    dtypes = reader.get_variable_to_dtype_map()
    names = sorted(dtypes)
    codes = [n for n in names if n.startswith("optimizer/_reason/")]
    assert len(codes) == 1 and dtypes[codes[0]] == tf.int64, codes
    tensors = [reader.get_tensor(n).astype(np.int32) if n in codes else reader.get_tensor(n)
               for n in names]
    tf.raw_ops.SaveV2(prefix=path, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)
    before = [v.numpy() for v in model.variables + list(model.optimizer.variables)]
    with pytest.raises(ValueError, match="int32 state variable .* an earlier graphfit wrote"):
        checkpoints.restore_latest(model, str(tmp_path))
    after = [v.numpy() for v in model.variables + list(model.optimizer.variables)]
    for value, again in zip(before, after):
        np.testing.assert_array_equal(again, value)


def test_no_checkpoint_yet_and_nothing_created_before_a_save(tmp_path):
    folder = tmp_path / "missing"
    model = _build_model()
    checkpointer = checkpoints.Checkpointer(str(folder), model)
    assert checkpoints.restore_latest(model, str(folder)) is None
    assert checkpoints.resume_point(str(folder)) is None
    assert checkpointer.recorded_best() is None and checkpointer.best_value is None
    assert not folder.exists()


def test_save_weights_leaves_the_fit_state_and_optimizer_out(trained_run, tmp_path):
    _, model = trained_run()
    prefix = model.save_weights(str(tmp_path / "weights" / "model"))
    names = [name for name, _ in tf.train.list_variables(prefix)]
    assert names and all(n.startswith("model/") or n == "_CHECKPOINTABLE_OBJECT_GRAPH"
                         for n in names)
    fresh = _build_model()
    fresh.fit(*_data(), epochs=1, verbose=0)  # it has a fit state of its own
    fresh.load_weights(prefix)
    np.testing.assert_array_equal(fresh.variables[0].numpy(), model.variables[0].numpy())


def test_numbers_never_reuse_a_listed_checkpoint(tmp_path):
    model = _build_model()
    model.build((None, 3))
    state = checkpoints.fit_state(model)
    state.epoch.assign(7)
    checkpointer = checkpoints.Checkpointer(str(tmp_path), model, max_to_keep=2)
    assert checkpointer.save_latest(3).endswith("ckpt-3")
    assert checkpointer.save_latest(3).endswith("ckpt-4")
    # A run started again in the same folder numbers after the old checkpoints.
    again = checkpoints.Checkpointer(str(tmp_path), model, max_to_keep=2)
    assert again.save_latest(1).endswith("ckpt-5")
    assert sorted(os.listdir(tmp_path / "latest")) == [
        "checkpoint", "ckpt-4.data-00000-of-00001", "ckpt-4.index",
        "ckpt-5.data-00000-of-00001", "ckpt-5.index"]
    assert checkpoints.resume_point(str(tmp_path)) == 7  # the epoch comes from the fit state


def test_leftovers_of_a_killed_save_are_removed_at_the_next_save(tmp_path):
    model = _build_model()
    model.build((None, 3))
    checkpointer = checkpoints.Checkpointer(str(tmp_path), model)
    checkpointer.save_latest(1)
    folder = tmp_path / "latest"
    (folder / "ckpt-2_temp").mkdir()
    (folder / "ckpt-2_temp" / "part-00000-of-00001.index").write_bytes(b"half")
    (folder / "ckpt-9.index").write_bytes(b"half")
    fresh = checkpoints.Checkpointer(str(tmp_path), model)
    fresh.save_latest(3)
    assert sorted(os.listdir(folder)) == [
        "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
        "ckpt-3.data-00000-of-00001", "ckpt-3.index"]


@pytest.mark.parametrize("kwargs, message", [
    ({"directory": ""}, "directory must be a folder path"),
    ({"directory": 3}, "directory must be a folder path"),
    ({"max_to_keep": 0}, "max_to_keep must be a positive integer"),
    ({"max_to_keep": True}, "max_to_keep must be a positive integer"),
])
def test_checkpointer_arguments_are_checked(tmp_path, kwargs, message):
    arguments = {"directory": str(tmp_path), "model": _build_model(), **kwargs}
    with pytest.raises(ValueError, match=message):
        checkpoints.Checkpointer(**arguments)


def test_bad_which_and_step(tmp_path):
    checkpointer = checkpoints.Checkpointer(str(tmp_path), _build_model())
    with pytest.raises(ValueError, match="which must be 'latest' or 'best'"):
        checkpointer.restore("newest")
    with pytest.raises(ValueError, match="step must be a non-negative integer"):
        checkpointer.save_latest(-1)


# ------------------------------------------------- killed processes (subprocesses)


def _spawn(*code_and_args):
    # ROOT first, and whatever the environment already needs (TensorFlow on PYTHONPATH).
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=path)
    return subprocess.Popen([sys.executable, "-c", *code_and_args], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _big_model():
    model = gf.Sequential([layers.Dense(1024)])
    model.build((None, 2048))  # 2 x 8 MB with the momentum slots: a save takes ~15 ms
    model.compile(optimizer=gf.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def _stamped_variables(model):
    state = checkpoints.fit_state(model)
    return [*model.variables, *model.optimizer.variables, state.epoch, state.shuffle_seed]


def save_forever(directory):
    """The subprocess of the SIGKILL test: stamp every variable with the step, save, repeat;
    from the parent's "go" on (the workers start up together, then save one at a time, so
    that none spends the CPU the others' saves and the parent need)."""
    model = _big_model()
    checkpointer = checkpoints.Checkpointer(directory, model, max_to_keep=2)
    variables = _stamped_variables(model)
    print("ready", flush=True)
    sys.stdin.readline()
    for step in range(1, 1_000_000):
        for variable in variables:
            variable.assign(tf.fill(variable.shape, tf.cast(step, variable.dtype)))
        print("begin", step, flush=True)
        checkpointer.save_latest(step)
        print("end", step, flush=True)


def test_a_save_killed_at_a_random_moment_leaves_the_latest_checkpoint_whole(tmp_path):
    code = "import sys; from tests.framework.saving.test_checkpoints import save_forever; " \
           "save_forever(sys.argv[1])"
    folders = [str(tmp_path / f"run{i}") for i in range(3)]
    workers = [_spawn(code, folder) for folder in folders]
    model = _big_model()
    stamped = _stamped_variables(model)
    rng = random.Random(0)
    for folder, worker in zip(folders, workers):
        ready = worker.stdout.readline()
        assert ready.strip() == "ready", ready + worker.stderr.read()
        worker.stdin.write("go\n")
        worker.stdin.flush()
        lines = []
        while not lines or lines[-1] != "end 1":  # at least one complete checkpoint
            line = worker.stdout.readline()
            assert line, worker.stderr.read()
            lines.append(line.strip())
        time.sleep(rng.uniform(0.0, 0.3))
        worker.send_signal(signal.SIGKILL)
        out, _ = worker.communicate()
        words = " ".join([*lines, out]).split()
        last_end = max(int(n) for w, n in zip(words, words[1:]) if w == "end" and n.isdigit())
        # The latest checkpoint is the last save that finished, or the one in progress if it
        # got as far as the state file.
        state = checkpoints.Checkpointer(folder, model).restore()
        assert last_end <= state["epoch"] <= last_end + 1
        for variable in stamped:
            np.testing.assert_array_equal(variable.numpy(), state["epoch"], err_msg=variable.name)
        # Saving carries on over whatever the killed save left behind.
        checkpoints.fit_state(model).epoch.assign(state["epoch"] + 1)
        next_path = checkpoints.Checkpointer(folder, model).save_latest(state["epoch"] + 1)
        assert checkpoints.Checkpointer(folder, model).restore()["path"] == next_path
        assert not [n for n in os.listdir(os.path.join(folder, "latest")) if "_temp" in n]


def train_run(mode, directory, out):
    """A run of the interruption test: 'full' trains 6 epochs; 'killed' the same, but stops
    after the second epoch's checkpoint and waits there, on stdin, until the parent kills it
    (so it cannot finish first, however slow the parent is); 'resume' warms TensorFlow up on
    a throwaway model while the others run, waits for a line on stdin, then carries on from
    the latest checkpoint in a fresh model."""
    initial_epoch = 0
    if mode == "resume":
        _build_model().fit(*_data(), epochs=1, verbose=0)  # tracing machinery warmed up
        sys.stdin.readline()
    gf.set_seed(999 if mode == "resume" else 0)
    model = _build_model()
    if mode == "resume":
        initial_epoch = checkpoints.restore_latest(model, directory)["epoch"]

    class Pause(gf.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch + 1 >= 2:  # after the checkpointer's save of this epoch
                sys.stdin.readline()  # never answered: the parent kills this process

    _fit(model, directory, epochs=6, initial_epoch=initial_epoch,
         extra=[Pause()] if mode == "killed" else [])
    np.savez(out, initial_epoch=initial_epoch, **_full_state(model))


def test_a_run_killed_after_an_epoch_resumes_in_a_new_process_exactly(tmp_path):
    code = "import sys; from tests.framework.saving.test_checkpoints import train_run; " \
           "train_run(*sys.argv[1:])"
    folder = str(tmp_path / "killed")
    killed = _spawn(code, "killed", folder, str(tmp_path / "never.npz"))
    resume = _spawn(code, "resume", folder, str(tmp_path / "resumed.npz"))
    # The uninterrupted run, here while the subprocesses start.
    train_run("full", str(tmp_path / "full"), str(tmp_path / "full.npz"))
    deadline = time.monotonic() + 120  # a failure, not a hang, if epoch 2 is never saved
    while ((checkpoints.resume_point(folder) or 0) < 2 and killed.poll() is None
           and time.monotonic() < deadline):
        time.sleep(0.01)
    assert killed.poll() is None, "it ended before it could be killed: " + killed.stderr.read()
    assert (checkpoints.resume_point(folder) or 0) >= 2, "no checkpoint of epoch 2 appeared"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    resume.stdin.write("go\n")
    resume.stdin.flush()
    assert resume.wait() == 0, resume.stderr.read()
    expected, resumed = np.load(tmp_path / "full.npz"), np.load(tmp_path / "resumed.npz")
    assert int(resumed["initial_epoch"]) == 2  # it really was interrupted, after epoch 2
    assert not (tmp_path / "never.npz").exists()
    for name in expected.files:
        if name != "initial_epoch":
            np.testing.assert_array_equal(resumed[name], expected[name], err_msg=name)


def test_a_checkpoint_folder_given_relative_to_the_working_directory_restores(
        tmp_path, monkeypatch):
    # TensorFlow prefixes the state file's relative paths with the folder it is given; the
    # folder used to be joined a second time ("ck/latest/ck/latest/ckpt-2"), and a user was
    # told that no saved state was left.
    monkeypatch.chdir(tmp_path)
    saved = _build_model()
    _fit(saved, "ck", epochs=2)
    assert checkpoints.resume_point("ck") == 2
    fresh = _build_model()
    fresh.build((None, 3))
    assert checkpoints.restore_latest(fresh, "ck")["epoch"] == 2
    for a, b in zip(saved.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_damaged_checkpoint_in_a_relative_folder_is_listed_once(tmp_path, monkeypatch):
    # The state file's checkpoints and the folder's scanned ones are joined: both in the same
    # (absolute) spelling, or each damaged checkpoint appears twice.
    from graphfit.saving import checkpoint_files

    monkeypatch.chdir(tmp_path)
    _fit(_build_model(), "ck", epochs=2)
    newest = sorted((tmp_path / "ck" / "latest").glob("ckpt-2.data-*"))[0]
    newest.write_bytes(b"")
    damaged = checkpoint_files.unreadable("ck/latest")
    assert [os.path.basename(path) for path, _ in damaged] == ["ckpt-2"], damaged

"""A damaged or untimed `checkpoint` state file costs no intact checkpoint.

`tf.train.CheckpointManager` rebuilds its list of checkpoints from the state file, and keeps
only those whose timestamp is above the file's `last_preserved_timestamp` (and not after the
clock): a file without timestamps (older TensorFlow, a hand-written one, or graphfit's own
repair of a garbled file) gave an empty list, so the first save afterwards deleted every
intact checkpoint as a leftover, and a file cut short inside its list of paths made the
resume go back to an older checkpoint. These tests damage the state file of a trained run in
each of those ways, resume, save again and count the checkpoints left.
"""

import os
import re
import shutil

import numpy as np
import pytest

import graphfit as gf
from graphfit import layers
from graphfit.saving import checkpoint_files, checkpoints


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 3)).astype("float32")
    return x, (x @ np.array([[1.0], [-2.0], [0.5]], "float32")).astype("float32")


def _model():
    """Without XLA: these tests are about the state file, and each fresh model's XLA compile
    (a dozen of them in the resume-per-epoch runs) was most of this file's time."""
    model = gf.Sequential([layers.Dense(4, activation="relu"), layers.Dense(1)])
    model.compile(optimizer=gf.optimizers.SGD(0.05, momentum=0.9), loss="mse",
                  jit_compile=False)
    return model


def _train(directory, epochs, model=None, initial_epoch=0, max_to_keep=3):
    model = model or _model()
    model.fit(*_data(), batch_size=8, epochs=epochs, initial_epoch=initial_epoch, verbose=0,
              callbacks=[gf.callbacks.ModelCheckpoint(directory, monitor="loss",
                                                      max_to_keep=max_to_keep)])
    return model


def _numbers(folder) -> list[int]:
    """The numbers of the checkpoints whose index file is in `folder`, in order."""
    names = os.listdir(folder)
    return sorted(int(m.group(1)) for m in map(re.compile(r"ckpt-(\d+)\.index").fullmatch,
                                                    names) if m)


def _listed(folder) -> list[int]:
    """The numbers of the checkpoints the state file in `folder` lists, in its order."""
    paths, garbled = checkpoint_files.candidates(str(folder))
    assert not garbled
    return sorted(checkpoint_files.checkpoint_number(p) for p in paths)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Five epochs with ModelCheckpoint(max_to_keep=3): latest/ holds ckpt-3, 4 and 5; the
    model's weights are those of ckpt-5."""
    folder = tmp_path_factory.mktemp("trained") / "run"
    model = _train(str(folder), epochs=5)
    return folder, [v.numpy() for v in model.variables]


def _without_timestamps(text):
    return "".join(line for line in text.splitlines(keepends=True) if "timestamp" not in line)


def _cut_inside_the_paths(text):
    """What a truncation at a line end leaves: the newest path and the oldest of the list."""
    return "".join(text.splitlines(keepends=True)[:2])


def _cut_inside_the_timestamps(text):
    return "".join(text.splitlines(keepends=True)[:5])


def _cut_inside_a_line(text):
    return text[:text.index('"ckpt-4"') + 5]


def _written_on_a_clock_ahead(text):
    """The state file of a machine whose clock was 11 days ahead of this one."""
    return re.sub(r"(timestamps?: )(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + 10**6}",
                  text)


DAMAGES = {
    "garbled": lambda text: "garbage {{ \0",
    "emptied": lambda text: "",
    "untimed": _without_timestamps,
    "cut inside the paths": _cut_inside_the_paths,
    "cut inside the timestamps": _cut_inside_the_timestamps,
    "cut inside a line": _cut_inside_a_line,
    "written on a clock ahead": _written_on_a_clock_ahead,
}


def _damaged_copy(trained, tmp_path, damage):
    folder, weights = trained
    run = tmp_path / "run"
    shutil.copytree(folder, run)
    state = run / "latest" / "checkpoint"
    original = state.read_text()
    assert _listed(run / "latest") == [3, 4, 5] and "timestamps" in original
    state.write_text(DAMAGES[damage](original))
    return run, weights


@pytest.mark.filterwarnings("ignore:the state file:RuntimeWarning")
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_resume_after_a_damaged_state_file_loses_no_checkpoint(trained, tmp_path, damage):
    run, weights = _damaged_copy(trained, tmp_path, damage)
    latest = run / "latest"
    assert checkpoints.resume_point(str(run)) == 5

    model = _model()
    model.build((None, 3))
    checkpointer = checkpoints.Checkpointer(str(run), model)
    state = checkpointer.restore()
    assert state["epoch"] == 5 and state["path"].endswith("ckpt-5")
    for got, want in zip(model.variables, weights):  # the newest checkpoint was restored
        np.testing.assert_array_equal(got.numpy(), want)

    epoch = checkpoints.fit_state(model).epoch
    epoch.assign(6)
    assert checkpointer.save_latest(6).endswith("ckpt-6")
    assert _numbers(latest) == [4, 5, 6] and _listed(latest) == [4, 5, 6]
    epoch.assign(7)
    checkpointer.save_latest(7)
    assert _numbers(latest) == [5, 6, 7] and _listed(latest) == [5, 6, 7]
    assert checkpoints.resume_point(str(run)) == 7
    assert checkpoints.Checkpointer(str(run), _model()).latest_path().endswith("ckpt-7")


@pytest.mark.filterwarnings("ignore:the state file:RuntimeWarning")
@pytest.mark.parametrize("damage", ["garbled", "untimed", "cut inside the paths"])
def test_a_fit_resumed_after_a_damaged_state_file_keeps_max_to_keep(trained, tmp_path,
                                                                    damage):
    # The way a user meets it: restore_latest, then fit on with ModelCheckpoint.
    run, _ = _damaged_copy(trained, tmp_path, damage)
    (run / "best" / "checkpoint").write_text(DAMAGES[damage]((run / "best" / "checkpoint")
                                                             .read_text()))
    best_before = _numbers(run / "best")
    model = _model()
    assert checkpoints.restore_latest(model, str(run))["epoch"] == 5
    _train(str(run), epochs=7, model=model, initial_epoch=5)
    assert _numbers(run / "latest") == [5, 6, 7]
    assert checkpoints.resume_point(str(run)) == 7
    # best/ keeps its newest three: the ones it had, then the ones written since.
    best_after = _numbers(run / "best")
    written = sorted(set(best_after) - set(best_before))
    assert best_after == (best_before + written)[-3:]


def test_a_hand_written_state_file_naming_only_the_newest_leaves_the_others_on_disk(
        trained, tmp_path):
    # Its list is the one named checkpoint: the others are not managed, and not deleted.
    run, _ = _damaged_copy(trained, tmp_path, "untimed")
    (run / "latest" / "checkpoint").write_text('model_checkpoint_path: "ckpt-5"\n')
    model = _model()
    checkpointer = checkpoints.Checkpointer(str(run), model)
    assert checkpointer.restore()["epoch"] == 5
    for step in (6, 7, 8):
        checkpoints.fit_state(model).epoch.assign(step)
        checkpointer.save_latest(step)
    assert _listed(run / "latest") == [6, 7, 8]
    assert _numbers(run / "latest") == [3, 4, 6, 7, 8]
    assert checkpoints.resume_point(str(run)) == 8


def test_a_crash_while_a_garbled_state_file_is_repaired_leaves_a_state_file(
        trained, tmp_path, monkeypatch):
    # The repair used to move the garbled file aside before writing the new one: a crash in
    # between left no state file, and the next save deleted every checkpoint as a leftover.
    from tensorflow.python.lib.io import file_io

    run, _ = _damaged_copy(trained, tmp_path, "garbled")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed while writing the state file")

    monkeypatch.setattr(file_io, "atomic_write_string_to_file", crash)
    with pytest.raises(KeyboardInterrupt), pytest.warns(RuntimeWarning, match="garbled"):
        checkpoints.Checkpointer(str(run), _model()).restore()
    monkeypatch.undo()
    assert (run / "latest" / "checkpoint").read_text() == "garbage {{ \0"
    assert _numbers(run / "latest") == [3, 4, 5]
    model = _model()
    checkpointer = checkpoints.Checkpointer(str(run), model)
    with pytest.warns(RuntimeWarning, match="garbled"):
        assert checkpointer.restore()["epoch"] == 5
    assert (run / "latest" / "checkpoint.garbled").read_text() == "garbage {{ \0"
    checkpoints.fit_state(model).epoch.assign(6)
    checkpointer.save_latest(6)
    assert _numbers(run / "latest") == [4, 5, 6] and _listed(run / "latest") == [4, 5, 6]


@pytest.mark.parametrize("how", ["one fit", "a resume per epoch",
                                 "a resume per epoch from untimed state files"])
def test_after_fourteen_saves_the_last_epoch_is_restored(tmp_path, how):
    run = str(tmp_path / "run")
    model = _model()
    if how == "one fit":
        _train(run, epochs=14, model=model)
    else:
        for epoch in range(14):
            if how.endswith("untimed state files") and epoch:
                state = tmp_path / "run" / "latest" / "checkpoint"
                state.write_text(_without_timestamps(state.read_text()))
            model = _model()
            resumed = checkpoints.restore_latest(model, run)
            assert (resumed or {"epoch": 0})["epoch"] == epoch
            _train(run, epochs=epoch + 1, model=model, initial_epoch=epoch)
    assert _numbers(tmp_path / "run" / "latest") == [12, 13, 14]
    assert checkpoints.resume_point(run) == 14
    fresh = _model()
    state = checkpoints.restore_latest(fresh, run)
    assert state["epoch"] == 14 and state["path"].endswith("ckpt-14")
    for got, want in zip(fresh.variables, model.variables):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_checkpoint_the_state_file_lists_is_never_swept_as_a_leftover(trained, tmp_path,
                                                                        monkeypatch):
    # Were a manager ever to miss the state file's checkpoints (here: the repair turned
    # off, so TensorFlow's manager reads an untimed file as an empty list), the first save
    # still deletes none of them and numbers after them.
    run, _ = _damaged_copy(trained, tmp_path, "untimed")
    monkeypatch.setattr(checkpoint_files, "repair_state_file", lambda folder: None)
    model = _model()
    checkpointer = checkpoints.Checkpointer(str(run), model)
    assert checkpointer.restore()["epoch"] == 5
    checkpoints.fit_state(model).epoch.assign(6)
    assert checkpointer.save_latest(2).endswith("ckpt-6")
    assert _numbers(run / "latest") == [3, 4, 5, 6]


def test_an_untimed_state_file_in_a_folder_that_cannot_be_written_still_restores(
        trained, tmp_path, monkeypatch):
    import tensorflow as tf
    from tensorflow.python.lib.io import file_io

    run, weights = _damaged_copy(trained, tmp_path, "untimed")
    untimed = (run / "latest" / "checkpoint").read_text()

    def refuse(*args, **kwargs):
        raise tf.errors.PermissionDeniedError(None, None, "read-only file system")

    monkeypatch.setattr(file_io, "atomic_write_string_to_file", refuse)
    model = _model()
    assert checkpoints.restore_latest(model, str(run))["epoch"] == 5
    for got, want in zip(model.variables, weights):
        np.testing.assert_array_equal(got.numpy(), want)
    assert (run / "latest" / "checkpoint").read_text() == untimed

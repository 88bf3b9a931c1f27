"""A checkpoint folder whose `checkpoint` state file is gone (deleted, or not copied with the
checkpoints) loses none of its intact checkpoints.

Before, such a folder read as holding no checkpoint at all: a resume started afresh, and the
first save afterwards swept every `ckpt-N` away as the leftovers of a killed save. Now its
checkpoints are found by their index files, the newest intact one is restored (with a
warning saying the state file is missing), and the state file is rebuilt from the intact ones
before the next save.
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
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, 3)).astype("float32")
    return x, (x @ np.array([[0.5], [1.0], [-1.5]], "float32")).astype("float32")


def _model():
    model = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(1)])
    model.compile(optimizer=gf.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    return model


def _train(directory, epochs, model, initial_epoch=0):
    return model.fit(*_data(), batch_size=8, epochs=epochs, initial_epoch=initial_epoch,
                     verbose=0, callbacks=[gf.callbacks.ModelCheckpoint(
                         directory, monitor="loss", max_to_keep=3)])


def _numbers(folder) -> list[int]:
    """The numbers of the checkpoints whose index file is in `folder`, in order."""
    found = map(re.compile(r"ckpt-(\d+)\.index").fullmatch, os.listdir(folder))
    return sorted(int(m.group(1)) for m in found if m)


def _listed(folder) -> list[int]:
    paths, damage = checkpoint_files.candidates(str(folder))
    assert damage is None, damage
    return sorted(checkpoint_files.checkpoint_number(p) for p in paths)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Five epochs with ModelCheckpoint(max_to_keep=3): latest/ holds ckpt-3, 4 and 5."""
    folder = tmp_path_factory.mktemp("trained") / "run"
    model = _model()
    _train(str(folder), 5, model)
    return folder, [v.numpy() for v in model.variables]


def _copy_without_state_file(trained, tmp_path, which=("latest",)):
    folder, weights = trained
    run = tmp_path / "run"
    shutil.copytree(folder, run)
    for name in which:
        os.remove(run / name / "checkpoint")
    return run, weights


def test_the_checkpoints_are_found_by_their_index_files(trained, tmp_path):
    run, _ = _copy_without_state_file(trained, tmp_path)
    paths, damage = checkpoint_files.candidates(str(run / "latest"))
    assert damage == "missing"
    assert [checkpoint_files.checkpoint_number(p) for p in paths] == [5, 4, 3]
    with pytest.warns(RuntimeWarning, match="is missing: using the newest intact checkpoint"):
        assert checkpoints.resume_point(str(run)) == 5
    empty = tmp_path / "empty"
    empty.mkdir()
    assert checkpoint_files.candidates(str(empty)) == ([], None)  # nothing is missing there


def test_a_resume_restores_the_newest_and_the_next_saves_keep_max_to_keep(trained, tmp_path):
    run, weights = _copy_without_state_file(trained, tmp_path, which=("latest", "best"))
    model = _model()
    with pytest.warns(RuntimeWarning, match=r"the state file .*latest.checkpoint is missing: "
                                            r"using the newest intact checkpoint .*ckpt-5"):
        state = checkpoints.restore_latest(model, str(run))
    assert state["epoch"] == 5
    history = _train(str(run), 7, model, initial_epoch=state["epoch"])
    assert len(history.history["loss"]) == 2
    # Before: the first save swept ckpt-3, 4 and 5 away, leaving [6, 7].
    assert _numbers(run / "latest") == [5, 6, 7] and _listed(run / "latest") == [5, 6, 7]
    assert checkpoints.resume_point(str(run)) == 7
    assert _listed(run / "best") == _numbers(run / "best")  # rebuilt there too
    assert len(_numbers(run / "best")) >= 3


def test_a_damaged_newest_checkpoint_is_skipped_and_replaced(trained, tmp_path):
    run, weights = _copy_without_state_file(trained, tmp_path)
    latest = run / "latest"
    data = next(latest.glob("ckpt-5.data-*"))
    data.write_bytes(data.read_bytes()[:10])  # cut short
    model = _model()
    model.build((None, 3))
    checkpointer = checkpoints.Checkpointer(str(run), model)
    with pytest.warns(RuntimeWarning, match=r"is missing, and the checkpoint .*ckpt-5 .* cannot "
                                            r"be read: using the newest intact checkpoint "
                                            r".*ckpt-4 instead"):
        state = checkpointer.restore()
    assert state["epoch"] == 4
    checkpoints.fit_state(model).epoch.assign(5)
    assert checkpointer.save_latest(5).endswith("ckpt-5")  # the damaged files were replaced
    assert _numbers(latest) == [3, 4, 5] and _listed(latest) == [3, 4, 5]
    assert checkpoint_files.unreadable(str(latest)) == []


def test_a_first_save_killed_before_its_state_file_leaves_nothing_behind(tmp_path):
    """No state file and only the half-written files of a killed first save: those are
    leftovers, swept at the next save, as before."""
    latest = tmp_path / "latest"
    latest.mkdir()
    (latest / "ckpt-1.index").write_bytes(b"half")
    (latest / "ckpt-1_temp").mkdir()
    model = _model()
    model.build((None, 3))
    checkpointer = checkpoints.Checkpointer(str(tmp_path), model)
    assert checkpointer.save_latest(1).endswith("ckpt-1")
    assert sorted(os.listdir(latest)) == ["checkpoint", "ckpt-1.data-00000-of-00001",
                                          "ckpt-1.index"]
    assert checkpoint_files.unreadable(str(latest)) == []

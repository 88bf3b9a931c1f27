"""Every failure says where and why (issue 45): errors from user code at the recipe entry that
named it, disk faults in plain words, damaged run files named, and the trial's gaps (jacobian
with respect to an activation, function_graph's label).

The schema-level kinds (non-finite numbers, wrong types in graph models, a batched dataset with
a batch size, a dataset's first batch, callback paths on the run's own files) are cases of the
broken-recipe corpus (broken/*.yaml) and of the recipe fuzzer (test_recipe_fuzzer.py).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import autodiff, cli, layers
from graphfit.inspect import graph_report
from graphfit.recipes import load_recipe
from graphfit.recipes.running import run_directory, training_run
from graphfit.recipes.running.origins import EntryFailed

USER_MODULE = textwrap.dedent("""\
    import graphfit as gf
    from graphfit.core.registry import CALLBACKS


    class FailsToBuild(gf.Layer):
        def build(self, input_shape):
            raise RuntimeError("the lookup table is missing")

        def call(self, x, training=False):
            return x


    class FailsInTraining(gf.Layer):
        def call(self, x, training=False):
            if training:
                raise ArithmeticError("only inference works")
            return x


    class EpochBoom(gf.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise KeyError(f"no entry for epoch {epoch}")


    if "Issue45EpochBoom" not in CALLBACKS.names():
        CALLBACKS.register(EpochBoom, name="Issue45EpochBoom")
    """)

MOONS = ("data: {source: moons, n_samples: 80}\n"
         "model: [{type: Dense, units: 4, activation: relu}, {type: Dense, units: 1}]\n"
         "loss: {type: BinaryCrossentropy, from_logits: true}\n"
         "training: {epochs: 3, batch_size: 16, jit_compile: false}\n")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "issue45_user.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "issue45_user", raising=False)  # this test's own file
    yield tmp_path
    sys.modules.pop("issue45_user", None)


def _cli(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err and 'File "' not in err and "graphfit/" not in err, err


# --- errors from user code, at the entry that named it ------------------------------------

def test_a_class_path_layer_whose_build_raises_is_told_at_its_entry(folder, capsys):
    (folder / "r.yaml").write_text(
        "data: {source: moons, n_samples: 40}\n"
        "model: [{class_path: issue45_user.FailsToBuild}, {type: Dense, units: 1}]\n"
        "loss: mse\n")
    code, _, err = _cli(capsys, "validate", str(folder / "r.yaml"))
    assert code == 1, err
    assert (f"{folder / 'r.yaml'}:2:9: model.layers[0]: RuntimeError: Layer 'fails_to_build' "
            f"(FailsToBuild) failed to build") in err, err
    assert f"the lookup table is missing (at {folder / 'issue45_user.py'}:7)" in err, err
    _no_traceback(err)
    with pytest.raises(EntryFailed):
        cli.main(["validate", str(folder / "r.yaml"), "--debug"])


def test_a_user_layer_that_raises_only_in_training_is_found_by_validate(folder, capsys):
    (folder / "r.yaml").write_text(
        "data: {source: moons, n_samples: 40}\n"
        "model:\n"
        "  - {type: Dense, units: 3}\n"
        "  - {class_path: issue45_user.FailsInTraining}\n"
        "  - {type: Dense, units: 1}\n"
        "loss: mse\n")
    code, _, err = _cli(capsys, "validate", str(folder / "r.yaml"))
    assert code == 1, err
    assert (f"{folder / 'r.yaml'}:4:5: model.layers[1]: ArithmeticError: only inference works "
            f"(at {folder / 'issue45_user.py'}:16)") in err, err
    assert "in user code" not in err
    _no_traceback(err)


def test_a_callback_failing_in_the_first_epoch_leaves_no_run_folder(folder, capsys):
    (folder / "r.yaml").write_text("imports: [issue45_user]\n" + MOONS
                                   + "callbacks: [{type: Issue45EpochBoom}]\n")
    code, _, err = _cli(capsys, "train", str(folder / "r.yaml"), "--verbose", "0")
    assert code == 1, err
    # (the class registers once per process: the file of the test that imported it first)
    assert (f"{folder / 'r.yaml'}:6:13: callbacks[0]: KeyError: 'no entry for epoch 0' (at "
            in err and "issue45_user.py:22)" in err), err
    _no_traceback(err)
    assert os.listdir(folder / "runs" / "r") == []  # nothing half-made left behind
    # An explicit, existing empty --run-dir stays, empty.
    (folder / "mine").mkdir()
    code, _, err = _cli(capsys, "train", str(folder / "r.yaml"), "--verbose", "0",
                        "--run-dir", str(folder / "mine"))
    assert code == 1 and os.listdir(folder / "mine") == [], err


def test_a_builtin_layer_that_fails_to_build_is_a_bad_recipe_at_its_entry(folder, capsys):
    # The initializer's value does not fit the bias: TensorFlow's error, at the layer's entry.
    (folder / "r.yaml").write_text(
        "data: {source: moons, n_samples: 40}\n"
        "model:\n"
        "  - {type: Dense, units: 2, bias_initializer: {class_name: Constant, config: "
        "{value: [1.0, 2.0, 3.0]}}}\n"
        "loss: {type: SparseCategoricalCrossentropy, from_logits: true}\n")
    code, _, err = _cli(capsys, "validate", str(folder / "r.yaml"))
    assert code == 2, err
    assert f"{folder / 'r.yaml'}:3:5: model.layers[0]: " in err, err
    _no_traceback(err)


# --- disk faults -----------------------------------------------------------------------------

def _failing_write(monkeypatch, name: str, code: int, after: int = 0):
    """run_directory.write_json raises OSError(code) on the (after+1)-th write of `name`."""
    real, seen = run_directory.write_json, []

    def write_json(path, data):
        if os.path.basename(path) == name:
            seen.append(path)
            if len(seen) == after + 1:
                raise OSError(code, os.strerror(code), path)
        return real(path, data)

    monkeypatch.setattr(run_directory, "write_json", write_json)


def test_a_full_disk_at_the_history_says_which_file_and_what_to_do(folder, capsys, monkeypatch):
    (folder / "r.yaml").write_text(MOONS)
    _failing_write(monkeypatch, "history.json", errno.ENOSPC, after=1)  # in epoch 2
    run = folder / "run"
    code, _, err = _cli(capsys, "train", str(folder / "r.yaml"), "--verbose", "0",
                        "--run-dir", str(run))
    assert code == 1, err
    assert (f"cannot write {run / 'history.json'}: the disk is full (No space left on device)"
            f". Nothing written before it was lost; the epochs checkpointed so far continue "
            f"with `graphfit train --resume {run}`. Free some space") in err, err
    _no_traceback(err)
    monkeypatch.undo()  # space freed: the run continues from its first epoch's checkpoint
    result = training_run.resume(str(run), verbose=0)
    assert len(result.history["loss"]) == 3


def test_a_full_disk_at_a_checkpoint_is_told_without_tensorflows_words(folder, capsys,
                                                                        monkeypatch):
    (folder / "r.yaml").write_text(MOONS)
    real, calls = tf.train.CheckpointManager.save, []

    def save(self, *args, **kwargs):
        calls.append(self.directory)
        if len(calls) == 2:
            raise tf.errors.ResourceExhaustedError(None, None, (
                "{{function_node __wrapped__SaveV2_dtypes_23_device_/job:localhost/replica:0/"
                f"task:0/device:CPU:0}}}} {self.directory}/ckpt-2_temp/part-00000-of-00001."
                "data-00000-of-00001.tempstate1; No space left on device [Op:SaveV2]"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
    code, _, err = _cli(capsys, "train", str(folder / "r.yaml"), "--verbose", "0",
                        "--run-dir", str(folder / "run"))
    assert code == 1, err
    assert f"cannot write {calls[1]}/ckpt-2_temp/" in err, err
    assert "the disk is full" in err and "SaveV2" not in err and "function_node" not in err
    assert os.path.isfile(os.path.join(calls[0], "ckpt-1.index"))  # the earlier one stays


def test_a_read_only_folder_at_a_write_says_so(folder, capsys, monkeypatch):
    (folder / "r.yaml").write_text(MOONS)
    _failing_write(monkeypatch, "metrics.json", errno.EROFS)
    code, _, err = _cli(capsys, "train", str(folder / "r.yaml"), "--verbose", "0",
                        "--run-dir", str(folder / "run"))
    assert code == 1, err
    assert (f"cannot write {folder / 'run' / 'metrics.json'}: the folder is read-only") in err
    assert "Make the folder writable, or write the run elsewhere (--run-dir)" in err


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    folder = tmp_path_factory.mktemp("finished")
    (folder / "r.yaml").write_text(MOONS)
    training_run.train(load_recipe(str(folder / "r.yaml")), run_dir=str(folder / "run"),
                       verbose=0)
    return folder / "run"


@pytest.fixture
def run(finished, tmp_path):
    shutil.copytree(finished, tmp_path / "run", symlinks=True)
    return tmp_path / "run"


def test_resume_of_a_read_only_run_says_so_before_anything_else(run, capsys, monkeypatch):
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(run)
                        else real(path, mode))
    code, _, err = _cli(capsys, "train", "--resume", str(run), "--set", "training.epochs=5")
    assert code == 2, err
    assert (f"the run {run} cannot be resumed where it is: {run} is read-only (permission "
            f"denied or a read-only file system)") in err, err
    assert "cp -r" in err


@pytest.mark.parametrize("name", ["preprocessing.json", "user_modules.json"])
def test_a_damaged_run_file_is_named_when_read(run, capsys, name):
    (run / name).write_text('{"input_shape": [2], "trunc')
    code, _, err = _cli(capsys, "evaluate", str(run))
    assert code == 2, err
    assert f"graphfit: {run / name} is damaged (not valid JSON at line 1" in err, err
    _no_traceback(err)


def test_a_damaged_run_recipe_is_named_with_its_line(run, capsys):
    (run / "recipe.yaml").write_text("data: {source: moons\nmodel: [")
    code, _, err = _cli(capsys, "evaluate", str(run))
    assert code == 2, err
    assert f"{run / 'recipe.yaml'}:" in err
    _no_traceback(err)


def test_a_run_file_of_the_wrong_kind_is_named(run):
    (run / "preprocessing.json").write_text(json.dumps([1, 2]))
    with pytest.raises(run_directory.DamagedRunFile, match="it holds list, not a mapping"):
        run_directory.read_json(str(run / "preprocessing.json"))


# --- the trial's gaps ------------------------------------------------------------------------

def _reference(x, first, rest):
    """(d rest(a) / d a) with a = first(x), by tf.GradientTape.jacobian: full and blocks."""
    with tf.GradientTape() as tape:
        a = first(tf.constant(x))
        tape.watch(a)
        y = rest(a)
    full = tape.jacobian(y, a).numpy()
    return full, np.stack([full[i, :, i] for i in range(len(x))])


def test_jacobian_with_respect_to_another_nodes_activation():
    model = gf.Sequential([layers.Dense(5, activation="tanh", name="hidden"),
                           layers.Dense(4, activation="tanh", name="mid"),
                           layers.Dense(3, name="out")], input_shape=(2,))
    x = np.random.default_rng(0).normal(size=(6, 2)).astype("float32")
    hidden, mid, out = model.layers
    full, blocks = _reference(x, hidden, lambda a: out(mid(a)))
    wrt = autodiff.activation("hidden")
    np.testing.assert_allclose(autodiff.jacobian(model, x, wrt=wrt), blocks, atol=1e-6)
    np.testing.assert_allclose(autodiff.jacobian(model, x, wrt=wrt, per_example=False), full,
                               atol=1e-6)
    _, mid_blocks = _reference(x, hidden, mid)
    np.testing.assert_allclose(autodiff.jacobian(model, x, of="mid", wrt=wrt), mid_blocks,
                               atol=1e-6)
    with pytest.raises(ValueError, match=r"wrt=graphfit.autodiff.activation\('hidden'\)"):
        autodiff.jacobian(model, x, wrt="hidden_output")
    with pytest.raises(ValueError, match="names no layer"):
        autodiff.jacobian(model, x, wrt=autodiff.activation("hiden"))


def test_jacobian_with_respect_to_a_graph_node():
    model = gf.GraphModel(["points"], [
        gf.Node(layers.Dense(4, activation="tanh", name="a"), "points"),
        gf.Node(layers.Dense(4, activation="tanh", name="b"), "points"),
        gf.Node(layers.Concatenate(name="joined"), ["a", "b"]),
        gf.Node(layers.Dense(2, name="logits"), "joined")], "logits")
    x = np.random.default_rng(1).normal(size=(5, 3)).astype("float32")
    model(x)
    a, b, joined, logits = (model.get_layer(n) for n in ("a", "b", "joined", "logits"))
    with tf.GradientTape() as tape:
        first = a(tf.constant(x))
        tape.watch(first)
        y = logits(joined([first, b(tf.constant(x))]))
    full = tape.jacobian(y, first).numpy()
    got = autodiff.jacobian(model, x, wrt=autodiff.activation("a"), per_example=False)
    np.testing.assert_allclose(got, full, atol=1e-6)


def test_function_graph_labels_the_spec_it_was_called_with():
    relaxed = tf.function(lambda x: x * 2.0, input_signature=[tf.TensorSpec([None], tf.float32)])
    report = graph_report.function_graph(relaxed, tf.TensorSpec([8], tf.float32))
    assert report.signature == "x: float32[8] (traced as float32[None])"
    plain = graph_report.function_graph(lambda x: x * 2.0, tf.TensorSpec([8], tf.float32))
    assert plain.signature == "x: float32[8]"
    assert "float32[8]" in str(plain)


def test_a_full_disk_at_export_says_so_in_plain_words(run, capsys, monkeypatch):
    from graphfit.export import run_export

    target = str(run / "saved_model" / "variables" / "variables.data-00000-of-00001")

    def export_run_as(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), target)

    monkeypatch.setattr(run_export, "export_run_as", export_run_as)
    code, _, err = _cli(capsys, "export", str(run))
    assert code == 1, err
    assert f"graphfit: export failed: cannot write {target}: the disk is full" in err, err
    assert "Errno" not in err

"""Run directories that survive kills, damage, concurrent writers and read-only disks
(issue 13: items 3, 6, 7, 8, 9, 12, 13, 15, 19, 21)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from graphfit import cli
from graphfit.recipes import load_recipe
from graphfit.recipes.reading.problems import RecipeError
from graphfit.recipes.running import run_directory, runner, training_run

MOONS = ("data: {source: moons, n_samples: 160}\n"
         "model: [{type: Dense, units: 8, activation: relu}, {type: Dense, units: 1}]\n"
         "loss: {type: BinaryCrossentropy, from_logits: true}\n"
         "metrics: [accuracy]\n"
         "training: {epochs: 3, batch_size: 16}\n")


def _recipe(tmp_path, text=MOONS, name="moons.yaml", overrides=()):
    path = tmp_path / name
    path.write_text(text)
    return load_recipe(str(path), list(overrides))


def _train(tmp_path, run="run", **kw):
    return training_run.train(_recipe(tmp_path, **kw), run_dir=str(tmp_path / run), verbose=0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished run of MOONS (3 epochs) and its final metrics, trained as `graphfit
    train` does without --run-dir: into <folder>/runs/moons/<run>, with the link
    runs/moons/latest to it (its recipe at <folder>/moons.yaml). The tests that damage,
    resume, evaluate or lock such a run work on their own copy of it (`_finished_run`)
    instead of training the same run again; the tests of the latest link and of a base run
    read it as it is. It trains without XLA, and so do its resumes and evaluations: the
    compiles would be most of those tests' time, and what they check is how the run
    directory's files are read and written. (Resuming an XLA run is checked in
    test_history_follows_the_checkpoint_after_a_kill_before_its_write.)"""
    folder = tmp_path_factory.mktemp("trained")
    result = training_run.train(_recipe(folder, overrides=["training.jit_compile=false"]),
                                verbose=0, runs_root=str(folder / "runs"))
    return pathlib.Path(result.run_dir), result.metrics


def _moved_run(template, run, tmp_path):
    """The run `template` copied to `run`, its recipe at tmp_path/moons.yaml."""
    (tmp_path / "moons.yaml").write_text(MOONS)
    shutil.copytree(template, run, symlinks=True)
    record = run_directory.read_json(str(run / run_directory.USER_MODULES))
    assert record == {"recipe_folder": str(template.parents[2]), "modules": []}
    run_directory.write_json(str(run / run_directory.USER_MODULES),
                             {**record, "recipe_folder": str(tmp_path)})


def _finished_run(trained, tmp_path):
    """What `_train(tmp_path)` leaves (but trained without XLA), copied from the module's
    run: tmp_path/run, with its recipe at tmp_path/moons.yaml. Returns its final metrics."""
    template, metrics = trained
    _moved_run(template, tmp_path / "run", tmp_path)
    return metrics


def _kill_after_last_checkpoint(run):
    """What a kill -9 between the last checkpoint and the final files leaves behind."""
    for name in os.listdir(run / "checkpoints"):
        if name.startswith("final"):
            os.remove(run / "checkpoints" / name)
    os.remove(run / "metrics.json")


def test_history_follows_the_checkpoint_after_a_kill_before_its_write(tmp_path):
    full = _train(tmp_path, "full", overrides=["training.epochs=5"])
    run = tmp_path / "run"
    _train(tmp_path)
    _kill_after_last_checkpoint(run)
    # The kill came after epoch 3's checkpoint but before history.json recorded epoch 3.
    history = json.loads((run / "history.json").read_text())
    (run / "history.json").write_text(json.dumps({k: v[:2] for k, v in history.items()}))
    result = training_run.resume(str(run), epochs=5, verbose=0)
    written = json.loads((run / "history.json").read_text())
    assert written["loss"] == pytest.approx(full.history["loss"], rel=1e-6)
    assert len(written["val_loss"]) == 5 and result.history["loss"] == written["loss"]


def test_resume_finishes_a_run_killed_before_its_final_files(trained, tmp_path, capsys):
    run = tmp_path / "run"
    metrics = _finished_run(trained, tmp_path)
    _kill_after_last_checkpoint(run)
    assert cli.main(["evaluate", str(run)]) == 2
    assert f"graphfit train --resume {run}" in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(run), "--verbose", "0"]) == 0
    assert (run / "checkpoints" / "final.index").is_file()
    assert json.loads((run / "metrics.json").read_text()) == metrics
    assert cli.main(["evaluate", str(run)]) == 0
    assert len(json.loads((run / "history.json").read_text())["loss"]) == 3


def test_resume_falls_back_from_a_truncated_latest_checkpoint(trained, tmp_path):
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    latest = run / "checkpoints" / "latest"
    (data,) = [p for p in latest.iterdir() if p.name.startswith("ckpt-3.data")]
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.warns(RuntimeWarning, match=r"ckpt-3 .*cannot be read.*intact checkpoint "
                                            r".*ckpt-2 instead"):
        result = training_run.resume(str(run), epochs=4, verbose=0)
    assert len(result.history["loss"]) == 4  # epochs 1-2 from ckpt-2, then 3-4 again
    assert (run / "checkpoints" / "final.index").is_file()


def test_resume_survives_a_garbled_checkpoint_state_file(trained, tmp_path):
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    _kill_after_last_checkpoint(run)
    (run / "checkpoints" / "latest" / "checkpoint").write_text("garbage {{ \0")
    with pytest.warns(RuntimeWarning, match="state file .* is garbled.*ckpt-3 instead"):
        training_run.resume(str(run), epochs=4, verbose=0)
    assert len(json.loads((run / "history.json").read_text())["loss"]) == 4
    kept = sorted(os.listdir(run / "checkpoints" / "latest"))
    assert "checkpoint.garbled" in kept and "ckpt-4.index" in kept



def _index_numbers(folder):
    return sorted(int(name[len("ckpt-"):-len(".index")]) for name in os.listdir(folder)
                  if name.startswith("ckpt-") and name.endswith(".index"))


@pytest.mark.filterwarnings("ignore:the state file:RuntimeWarning")
@pytest.mark.parametrize("damage", ["garbled", "emptied", "untimed"])
def test_a_resume_after_a_damaged_state_file_keeps_the_checkpoints(trained, tmp_path, damage):
    # The repaired or untimed state file gave TensorFlow's manager an empty list: the
    # resume's first save deleted ckpt-1 to ckpt-3, and latest/ kept only what it wrote.
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    state = run / "checkpoints" / "latest" / "checkpoint"
    text = state.read_text()
    assert _index_numbers(state.parent) == [1, 2, 3] and "timestamps" in text
    state.write_text({"garbled": "garbage {{ \0", "emptied": "",
                      "untimed": "".join(line for line in text.splitlines(keepends=True)
                                         if "timestamp" not in line)}[damage])
    assert cli.main(["train", "--resume", str(run), "--set", "training.epochs=4",
                     "--verbose", "0"]) == 0
    assert _index_numbers(state.parent) == [2, 3, 4]
    assert len(json.loads((run / "history.json").read_text())["loss"]) == 4

def test_evaluate_falls_back_when_the_final_weights_are_damaged(trained, tmp_path):
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    (data,) = [p for p in (run / "checkpoints").iterdir() if p.name.startswith("final.data")]
    data.write_bytes(b"")
    with pytest.warns(RuntimeWarning, match="final weights .* cannot be read.*ckpt-3"):
        results = runner.evaluate_run(str(run))
    assert set(results) == {"val", "test"}


def test_a_second_writer_of_a_run_is_refused(trained, tmp_path, capsys):
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    with run_directory.lock_run(str(run)):
        with pytest.raises(run_directory.RunBusy, match=f"in use by process {os.getpid()}"):
            training_run.resume(str(run), epochs=4, verbose=0)
        assert cli.main(["train", "--resume", str(run), "--set", "training.epochs=4",
                         "--verbose", "0"]) == 2  # a busy run directory: exit 2
        err = capsys.readouterr().err
        assert "Wait for it to end" in err and "Traceback" not in err
    assert len(json.loads((run / "history.json").read_text())["loss"]) == 3  # untouched


def test_a_stale_lock_of_a_dead_process_is_taken_over_with_a_note(trained, tmp_path, capsys):
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run / run_directory.LOCK_FILE).write_text(f"{dead.pid}\n")
    training_run.resume(str(run), epochs=4, verbose=0)
    assert f"took over the lock of {run} left by process {dead.pid}" in capsys.readouterr().err
    assert (run / run_directory.LOCK_FILE).read_text() == ""  # released cleanly


def test_an_explicit_run_dir_taken_by_a_live_run_is_refused(tmp_path):
    run = tmp_path / "shared"
    run.mkdir()
    with run_directory.lock_run(str(run)):
        with pytest.raises(ValueError, match="in use by process"):
            run_directory.claim_new_run("x", str(run))
    (run / "recipe.yaml").write_text("")
    with pytest.raises(ValueError, match="not empty"):
        run_directory.claim_new_run("x", str(run))
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        run_directory.claim_new_run("x", str(tmp_path / "file"))


def _train_recipe(tmp_path, capsys, data, units, rest, verbose="0", status=1):
    """Trains a Dense(units, tanh) -> Dense(1) recipe that must end with exit `status` (1: it
    fails); returns (run folder, captured output)."""
    path = tmp_path / "failing.yaml"
    path.write_text(f"data: {data}\nmodel: [{{type: Dense, units: {units}, activation: tanh}}, "
                    f"{{type: Dense, units: 1}}]\nloss: mse\n{rest}")
    run = tmp_path / "run"
    assert cli.main(["train", str(path), "--run-dir", str(run), "--verbose", verbose]) == status
    return run, capsys.readouterr()


def test_a_loss_non_finite_from_the_first_epoch_stops_and_says_no_checkpoint(tmp_path, capsys):
    run, captured = _train_recipe(
        tmp_path, capsys, "{source: sinc, n_samples: 200}", 16,
        "optimizer: {type: SGD, learning_rate: 1.0e+30}\ntraining: {epochs: 6, batch_size: 8}\n")
    err = captured.err
    assert "the loss became non-finite in epoch 1" in err
    assert "no checkpoint was written" in err and "latest checkpoint" not in err
    assert len(json.loads((run / "history.json").read_text())["loss"]) == 1  # stopped at once


def test_a_levenberg_marquardt_run_on_a_nan_label_says_to_check_the_data(tmp_path, capsys):
    # LM has no learning rate to lower; its own stop says why it stopped.
    _sinc_csv(tmp_path / "sinc_nan.csv", 60, nan_row=7)
    _, captured = _train_recipe(
        tmp_path, capsys, "{source: csv, path: sinc_nan.csv, features: [x], target: y}", 8,
        "optimizer: {type: LevenbergMarquardt}\n"
        "training: {epochs: 4, batch_size: null, check_finite: false}\n", verbose="2")
    printed = captured.out + captured.err
    assert "a step started from a NaN or inf loss" in printed
    assert "the loss became non-finite in epoch 1" in captured.err
    assert "Check the data (NaN or inf pass with training.check_finite: false)" in captured.err
    assert "learning rate" not in captured.err


def _sinc_csv(path, points, nan_row=None):
    rows = ["x,y"] + [f"{x:.3f},{np.sinc(3 * x):.5f}" for x in np.linspace(-1, 1, points)]
    if nan_row is not None:
        rows[nan_row] = rows[nan_row].split(",")[0] + ",nan"
    path.write_text("\n".join(rows) + "\n")


def test_a_nan_only_in_the_test_data_is_warned_about_and_the_run_finishes(tmp_path, capsys):
    # The test loss says nothing about training: the run used to fail, discard its weights
    # and blame "the loss" (a review).
    _sinc_csv(tmp_path / "train.csv", 80)
    _sinc_csv(tmp_path / "test.csv", 20, nan_row=4)
    csv = "{source: csv, path: %s, features: [x], target: y}"
    with pytest.warns(UserWarning, match="test_loss is nan after epoch 2, while training's "
                                         "loss is finite: the test data holds NaN or inf"):
        run, _ = _train_recipe(
            tmp_path, capsys, csv % "train.csv", 8,
            "optimizer: {type: Adam, learning_rate: 0.01}\ntraining: {epochs: 2, batch_size: "
            f"16, check_finite: false, test_data: {csv % 'test.csv'}}}\n", status=0)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["test"]["loss"] is None and metrics["val"]["loss"] > 0
    assert (run / "checkpoints").is_dir() and any(
        name.startswith("final") for name in os.listdir(run / "checkpoints"))
    assert cli.main(["evaluate", str(run)]) == 0  # re-evaluated with the recipe's setting


def test_evaluate_a_run_whose_logs_cannot_be_written(trained, tmp_path, capsys):
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    shutil.rmtree(run / "logs")
    (run / "logs").write_text("not a folder: as unwritable as a read-only disk")
    assert cli.main(["evaluate", str(run)]) == 0
    captured = capsys.readouterr()
    assert "test: loss=" in captured.out
    assert "note: cannot write test logs into" in captured.err and "instead" in captured.err


def _user_module_recipe(tmp_path, module):
    code = tmp_path / "code"
    code.mkdir()
    (code / f"{module}.py").write_text(
        "import graphfit as gf\n"
        "def make(n):\n    return gf.datasets.make_moons(n_samples=n, seed=0)\n")
    text = MOONS.replace("data: {source: moons, n_samples: 160}",
                         f"imports: [{module}]\n"
                         f"data: {{source: function, function: '{module}:make',\n"
                         f"       arguments: {{n: 160}}}}")
    # Without XLA: what is checked is where the run finds its module again.
    return code, _recipe(code, text, overrides=["training.jit_compile=false"])


def _forget(module, folder):
    sys.modules.pop(module, None)
    while str(folder) in sys.path:
        sys.path.remove(str(folder))


def test_a_run_with_user_modules_is_reused_from_its_directory_alone(tmp_path, monkeypatch):
    module = f"user_data_{os.getpid()}_a"
    code, recipe = _user_module_recipe(tmp_path, module)
    run = tmp_path / "run"
    training_run.train(recipe, run_dir=str(run), verbose=0)
    record = json.loads((run / run_directory.USER_MODULES).read_text())
    assert record["modules"] == [{"module": module, "file": str(code / f"{module}.py"),
                                  "folder": str(code)}]
    _forget(module, code)
    monkeypatch.chdir(tmp_path)
    assert set(runner.evaluate_run(str(run))) == {"val", "test"}
    _forget(module, code)
    _kill_after_last_checkpoint(run)
    training_run.resume(str(run), verbose=0)  # finishes it, the module found again
    _forget(module, code)
    os.rename(code / f"{module}.py", tmp_path / "moved.py")
    with pytest.raises(ValueError, match=f"needs the module '{module}', which was "
                                         f".*{module}.py when it was trained"):
        runner.evaluate_run(str(run))
    _forget(module, code)


def test_finetuning_must_reuse_the_base_runs_split(trained, monkeypatch):
    run_dir = trained[0]  # a base run: XLA is beside the point
    folder = run_dir.parents[2]  # where runs/moons/latest is
    monkeypatch.chdir(folder)
    tune = ("seed: 1\n" + MOONS.replace(
        "model: [", "model:\n  base: {run: runs/moons/latest, drop: 1}\n  layers: [")
        .replace("units: 8, activation: relu}, {type: Dense, units: 1}]",
                 "units: 1}]"))
    with pytest.raises(RecipeError) as caught:
        runner.prepare(_recipe(folder, tune, "tune.yaml"))
    assert ":1:" in str(caught.value) and "seed: is 1 but the base run" in str(caught.value)
    assert "Set seed: 0 to reuse the base run's split" in str(caught.value)
    tuned = runner.prepare(_recipe(folder, tune.replace("seed: 1", "seed: 0"), "tune.yaml"))
    assert tuned.recipe.model["base"]["run"] == str(run_dir)  # latest, resolved to the run


def test_shipped_finetune_recipe_splits_like_quickstart():
    recipes = os.path.join(os.path.dirname(__file__), "..", "..", "..", "recipes")
    with open(os.path.join(recipes, "quickstart.yaml")) as handle:
        quick = handle.read()
    with open(os.path.join(recipes, "finetune_frozen.yaml")) as handle:
        tune = handle.read()

    def seed(text):
        return [line.split("#")[0].split(":")[1].strip() for line in text.splitlines()
                if line.startswith("seed:")]
    assert seed(tune) == seed(quick)


def test_latest_is_a_symlink_and_hparams_sessions_are_named_after_runs(trained):
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    run_dir = str(trained[0])  # trained into runs/, as without --run-dir
    latest = trained[0].parent / "latest"
    assert latest.is_symlink() and os.path.realpath(latest) == run_dir
    assert run_directory.find_run(str(latest)) == run_dir
    events = event_accumulator.EventAccumulator(os.path.join(run_dir, "logs"))
    events.Reload()
    start = plugin_data_pb2.HParamsPluginData.FromString(
        events.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    ).session_start_info
    assert start.group_name == f"moons/{os.path.basename(run_dir)}"


@pytest.fixture(scope="module")
def paced(tmp_path_factory):
    """MOONS trained with training.test_freq=1 and training.steps_per_epoch=2: one run for
    the two tests below (neither setting changes what the other one counts)."""
    folder = tmp_path_factory.mktemp("paced")
    return _train(folder, overrides=["training.test_freq=1", "training.steps_per_epoch=2",
                                     "training.jit_compile=false"])


def test_recipes_can_set_test_freq(paced):
    assert len(paced.history["test_loss"]) == 3  # a test point every epoch, not only last


def test_recipes_can_set_steps_per_epoch(paced, tmp_path):
    assert int(paced.model.optimizer.iterations) == 6  # 3 epochs of 2 batches, not of 7
    with pytest.raises(RecipeError, match="steps_per_epoch"):
        _recipe(tmp_path, overrides=["training.steps_per_epoch=0"])


def test_recipes_can_set_class_weight(tmp_path):
    weighted = _recipe(tmp_path, overrides=["training.class_weight={0: 1.0, 1: 3.0}"])
    assert weighted.config["training"]["class_weight"] == {0: 1.0, 1: 3.0}
    # Weights of zero for both classes leave nothing of the loss: proof that fit got them.
    result = _train(tmp_path, overrides=["training.class_weight={0: 0.0, 1: 0.0}",
                                         "training.epochs=1", "training.jit_compile=false"])
    assert result.history["loss"] == [0.0]
    with pytest.raises(RecipeError, match="class_weight: must be 'balanced' or a mapping from "
                                          "class ids"):
        _recipe(tmp_path, overrides=["training.class_weight=heavy"])
    # A class name needs a target of class names (a table's): said when the data loads.
    with pytest.raises(RecipeError, match="class_weight.*class names and 'balanced' need"):
        runner.prepare(_recipe(tmp_path, overrides=["training.class_weight={cat: 1.0}"]))


def _empty_data_files(folder):
    for path in folder.iterdir():
        if ".data-" in path.name:
            path.write_bytes(b"")


def test_evaluate_fallback_and_garbled_resume_keep_tensorflow_quiet(trained, tmp_path):
    import gc
    import logging

    import tensorflow as tf

    logged = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: logged.append(record.getMessage())
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    gc.collect()
    tf.get_logger().addHandler(handler)
    try:
        _empty_data_files(run / "checkpoints")  # the final weights
        with pytest.warns(RuntimeWarning, match="final weights"):
            runner.evaluate_run(str(run))
        _kill_after_last_checkpoint(run)
        (run / "checkpoints" / "latest" / "checkpoint").write_text("garbage {{ \0")
        with pytest.warns(RuntimeWarning, match="garbled"):
            training_run.resume(str(run), epochs=4, verbose=0)
        gc.collect()  # TensorFlow logs unrestored checkpoint values when a status is freed
    finally:
        tf.get_logger().removeHandler(handler)
    noise = [m for m in logged if any(word in m.lower() for word in (
        "checkpoint", "parseerror", "deprecated", "restored object"))]
    assert noise == []


def test_resume_falls_back_to_best_when_no_latest_checkpoint_reads(trained, tmp_path):
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    _kill_after_last_checkpoint(run)
    _empty_data_files(run / "checkpoints" / "latest")
    with pytest.warns(RuntimeWarning, match=r"no checkpoint in .*latest can be read.*ckpt-1 "
                                            r".*newest intact best checkpoint .*best.ckpt-"):
        result = training_run.resume(str(run), epochs=4, verbose=0)
    assert len(result.history["loss"]) == 4
    assert (run / "checkpoints" / "final.index").is_file()


def test_resume_with_every_checkpoint_damaged_says_so(trained, tmp_path, capsys):
    run = tmp_path / "run"
    _finished_run(trained, tmp_path)
    _kill_after_last_checkpoint(run)
    _empty_data_files(run / "checkpoints" / "latest")
    _empty_data_files(run / "checkpoints" / "best")
    assert cli.main(["train", "--resume", str(run), "--verbose", "0"]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint in" in err and "can be read" in err and "best holds no intact" in err
    assert "save_best_only" not in err


def test_a_run_dir_that_cannot_be_created_names_the_path_and_why(tmp_path):
    (tmp_path / "somefile").write_text("")
    with pytest.raises(ValueError, match=r"cannot create the run directory .*somefile.sub: "
                                         r".*somefile is a file, not a folder"):
        run_directory.create_run("x", str(tmp_path / "somefile" / "sub"))
    with pytest.raises(ValueError, match=r"cannot create the run directory .*somefile.a.b"):
        run_directory.create_run("x", None, root=str(tmp_path / "somefile" / "a" / "b"))
    if os.path.isdir("/proc") and sys.platform.startswith("linux"):
        with pytest.raises(ValueError, match=r"cannot create the run directory /proc/x: "
                                             r"making /proc/x failed: No such file"):
            run_directory.create_run("x", "/proc/x")


def test_resume_through_the_latest_link_keeps_it_pointing_at_the_run(trained, tmp_path,
                                                                     monkeypatch):
    # `--resume runs/<name>/latest` (as the README shows) used to finish by pointing latest
    # at itself, a link loop that broke the history's write and every later use of latest.
    template = trained[0]
    run = tmp_path / "runs" / "moons" / template.name
    _moved_run(template, run, tmp_path)
    latest = tmp_path / "runs" / "moons" / "latest"
    os.symlink(os.readlink(template.parent / "latest"), latest)  # the module run's own link
    monkeypatch.chdir(tmp_path)
    assert os.path.realpath(latest) == str(run)
    assert cli.main(["train", "--resume", "runs/moons/latest", "--set", "training.epochs=4",
                     "--verbose", "0"]) == 0
    assert os.path.islink(latest) and os.readlink(latest) == run.name
    history = json.loads((latest / "history.json").read_text())
    assert len(history["loss"]) == 4


def test_a_run_still_training_is_said_to_be_so_not_sent_to_resume(tmp_path):
    import subprocess
    import sys

    run = tmp_path / "run"
    (run / "checkpoints" / "latest").mkdir(parents=True)
    (run / run_directory.RECIPE_FILE).write_text("name: busy\n")
    (run / "checkpoints" / "latest" / "ckpt-1.index").write_bytes(b"")
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (run / ".lock").write_text(f"{trainer.pid}\n")  # as its RunLock writes it
        with pytest.raises(ValueError, match=rf"is still training \(process {trainer.pid}\).*"
                                             r"Wait for it to finish"):
            run_directory.find_run(str(run))
    finally:
        trainer.kill()
        trainer.wait()
    with pytest.raises(ValueError, match="graphfit train --resume"):  # its process is gone
        run_directory.find_run(str(run))


@pytest.mark.parametrize("checkpoint", [False, True], ids=["none", "written"])
def test_an_unfinished_run_is_sent_where_it_can_go(tmp_path, checkpoint):
    """`export`, `evaluate` and `predict` need a finished run: an unfinished one is sent to
    --resume only when it wrote a checkpoint that --resume can continue from."""
    run = tmp_path / "run"
    (run / "checkpoints" / "latest").mkdir(parents=True)
    (run / run_directory.RECIPE_FILE).write_text("name: unfinished\n")
    if checkpoint:
        (run / "checkpoints" / "latest" / "ckpt-1.index").write_bytes(b"")
    with pytest.raises(ValueError) as error:
        run_directory.find_run(str(run))
    message = str(error.value)
    assert "did not finish" in message
    if checkpoint:
        assert f"graphfit train --resume {run}" in message
    else:
        assert "--resume" not in message
        assert f"train its recipe again (`graphfit train {run / 'recipe.yaml'}`)" in message


def _early_stopping_run(tmp_path, capsys, training: str, early_stopping: str):
    """(history, metrics, stdout) of a sinc recipe run with EarlyStopping(restore_best_weights),
    without XLA (its compiles would be most of the time; what is checked is whose weights
    end the run)."""
    run, captured = _train_recipe(
        tmp_path, capsys, "{source: sinc, n_samples: 64}", 4,
        f"optimizer: {{type: SGD, learning_rate: 0.05}}\ntraining: {{epochs: 3, batch_size: 16, "
        f"jit_compile: false{training}}}\ncallbacks: [{{type: EarlyStopping, {early_stopping}, "
        f"restore_best_weights: true}}]\n", verbose="2", status=0)
    return (json.loads((run / "history.json").read_text()),
            json.loads((run / "metrics.json").read_text()), captured.out)


def test_restored_early_stopping_weights_are_the_final_numbers_and_say_so(tmp_path, capsys):
    """EarlyStopping(restore_best_weights) saves an earlier epoch's weights: the final train
    numbers are that epoch's (as val and test, measured on them), and the summary says so
    (the progress lines above it are the last epoch's)."""
    history, metrics, out = _early_stopping_run(tmp_path, capsys, ", test_split: 0.25",
                                                "patience: 1, min_delta: 100.0")
    assert len(history["loss"]) == 2  # stopped after epoch 2; epoch 1 is the best
    assert metrics["train"]["loss"] == pytest.approx(history["loss"][0])
    assert metrics["val"]["loss"] == pytest.approx(history["val_loss"][0], rel=1e-5)
    assert "final weights: epoch 1's, restored by EarlyStopping" in out


def test_no_restored_weights_are_announced_when_the_best_epoch_is_the_last(tmp_path, capsys):
    history, metrics, out = _early_stopping_run(tmp_path, capsys, "",
                                                "monitor: loss, patience: 5")
    assert history["loss"][-1] == min(history["loss"])  # the training loss went down
    assert "final weights:" not in out
    assert metrics["train"]["loss"] == pytest.approx(history["loss"][-1])

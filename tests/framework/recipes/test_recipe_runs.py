"""Recipes end to end: every shipped recipe trains, runs are complete and never overwritten,
print-config round-trips, evaluate and predict work from a run directory alone."""

import contextlib
import csv
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import graphfit as gf
from graphfit import cli
from graphfit.recipes import load_recipe
from graphfit.recipes.running import run_directory, runner, training_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPES = os.path.join(REPO, "recipes")
# fit_many recipes fit a formula, with no model to train or inspect (tests/fitting).
SHIPPED = sorted(f for f in os.listdir(RECIPES) if f.endswith(".yaml")
                 and not f.endswith("_many_fits.yaml"))
SHORT = ["--set", "training.epochs=2", "--verbose", "0"]


def _train(path, run_dir, *extra):
    return cli.main(["train", path, "--run-dir", str(run_dir), *SHORT, *extra])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A working directory with one finished quickstart run under runs/quickstart/.

    Without XLA: the tests that use it are about the run directory (finetuning from it,
    evaluate, predict, latest); the shipped recipes train with their own settings, XLA
    included, in test_every_shipped_recipe_trains_into_a_complete_run, and an XLA run is
    evaluated and predicted from in test_mixed_precision_training.py."""
    folder = tmp_path_factory.mktemp("work")
    previous = os.getcwd()
    os.chdir(folder)
    try:
        recipe = load_recipe(os.path.join(RECIPES, "quickstart.yaml"),
                             ["training.epochs=2", "training.jit_compile=false"])
        result = training_run.train(recipe, verbose=0)
        yield folder, result
    finally:
        os.chdir(previous)


@pytest.fixture(scope="module")
def shipped_run(tmp_path_factory):
    """`shipped_run(name)`: the shipped recipe `name` trained once for the module (2 epochs,
    its own settings, XLA included) with `graphfit train`, as (exit code, run folder, what it
    printed); a test that only needs such a run reuses it instead of training its own."""
    done = {}

    def run(name):
        if name not in done:
            folder = tmp_path_factory.mktemp(name.removesuffix(".yaml")) / "run"
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                code = _train(os.path.join(RECIPES, name), folder)
            done[name] = code, folder, printed.getvalue()
        return done[name]

    return run


def test_recipes_folder_holds_the_promised_recipes():
    assert {"quickstart.yaml", "digits_cnn_batchnorm.yaml", "breast_cancer_auc.yaml",
            "regression_sinc.yaml", "finetune_frozen.yaml"} <= set(SHIPPED)


@pytest.mark.parametrize("name", [n for n in SHIPPED if n != "finetune_frozen.yaml"])
def test_every_shipped_recipe_trains_into_a_complete_run(name, shipped_run):
    code, run, printed = shipped_run(name)
    assert code == 0
    assert f"run directory: {run}" in printed
    for entry in ("recipe.yaml", "overrides.yaml", "versions.json", "metrics.json",
                  "history.json", "preprocessing.json", "checkpoints/final.index"):
        assert (run / entry).is_file(), entry
    # Every recipe holds out validation and test splits, but a curve fit that fits all its
    # points (validation_split and test_split 0: global_decay_fit.yaml).
    training = load_recipe(os.path.join(RECIPES, name)).config["training"]
    stages = {"train"} | {stage for stage, split, data in (
        ("val", "validation_split", "validation_data"), ("test", "test_split", "test_data"))
        if training[split] > 0 or training[data] is not None}
    assert stages == ({"train"} if name == "global_decay_fit.yaml" else {"train", "val", "test"})
    assert stages <= set(os.listdir(run / "logs"))
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics) == stages
    assert all(np.isfinite(v) for stage in metrics.values() for v in stage.values())
    assert run_directory.read_json(str(run / "versions.json"))["graphfit"] == gf.__version__
    assert (run / "overrides.yaml").read_text() == "- training.epochs=2\n"
    if name == "breast_cancer_auc.yaml":
        assert all("auc" in metrics[stage] for stage in ("train", "val", "test"))


def test_finetune_keeps_the_frozen_base_as_trained(workdir, tmp_path):
    _, base = workdir
    recipe = load_recipe(os.path.join(RECIPES, "finetune_frozen.yaml"), ["training.epochs=2"])
    assert recipe.model["base"]["run"] == base.run_dir  # runs/quickstart/latest, resolved
    result = training_run.train(recipe, run_dir=str(tmp_path / "fine"), verbose=0)
    model = result.model
    assert [layer.name for layer in model.layers[-2:]] == ["new_hidden", "new_head"]
    base_layers = model.layers[:-2]
    assert len(base_layers) == len(base.model.layers) - 1
    for mine, theirs in zip(base_layers, base.model.layers):
        assert not mine.trainable
        for a, b in zip(mine.variables, theirs.variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy())  # loaded, then untouched
    assert {id(v) for v in model.trainable_variables} == {
        id(v) for layer in model.layers[-2:] for v in layer.variables}


def test_print_config_is_a_recipe_that_reproduces_the_run(tmp_path, capsys):
    source = os.path.join(RECIPES, "spirals_graph.yaml")
    # Without XLA, whose compile would be most of the two trainings' time; the round trip
    # and the equal runs are what is checked.
    sets = ["training.epochs=2", "data.n_samples=300", "training.jit_compile=false"]
    overrides = [arg for item in sets for arg in ("--set", item)]
    assert cli.main(["print-config", source, *overrides]) == 0
    resolved_text = capsys.readouterr().out
    saved = tmp_path / "elsewhere" / "saved.yaml"
    saved.parent.mkdir()
    saved.write_text(resolved_text)
    first = load_recipe(source, sets)
    again = load_recipe(str(saved))
    assert again.config == first.config  # nothing lost, nothing re-defaulted differently
    a = training_run.train(first, run_dir=str(tmp_path / "a"), verbose=0)
    b = training_run.train(again, run_dir=str(tmp_path / "b"), verbose=0)
    assert a.metrics == b.metrics
    for x, y in zip(a.model.get_weights(), b.model.get_weights()):
        np.testing.assert_array_equal(x, y)


def test_evaluate_reproduces_the_final_numbers_from_the_run_directory(workdir, capsys):
    _, result = workdir
    assert cli.main(["evaluate", result.run_dir]) == 0
    out = capsys.readouterr().out
    for stage in ("val", "test"):
        expected = ", ".join(f"{k}={v:.4f}" for k, v in result.metrics[stage].items())
        assert f"{stage}: {expected}" in out
    values = runner.evaluate_run(result.run_dir)
    for stage in ("val", "test"):
        for key, value in result.metrics[stage].items():
            assert values[stage][key] == pytest.approx(value, rel=1e-6)


def test_predict_writes_classes_and_probabilities(workdir, tmp_path, capsys):
    _, result = workdir
    x, _ = gf.datasets.load_digits()
    rows = x[:25]
    inputs = tmp_path / "new.csv"
    with open(inputs, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([f"pixel_{i}" for i in range(64)])
        writer.writerows(rows.tolist())
    output = tmp_path / "out" / "predictions.csv"
    assert cli.main(["predict", result.run_dir, "--input", str(inputs),
                     "--output", str(output)]) == 0
    assert "wrote 25 predictions" in capsys.readouterr().out
    with open(output) as handle:
        table = list(csv.reader(handle))
    assert table[0] == ["class"] + [f"probability_{k}" for k in range(10)]
    probabilities = np.array(table[1:], dtype=np.float64)[:, 1:]
    logits = result.model.predict(rows, verbose=0)
    expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5, atol=1e-7)
    assert [int(r[0]) for r in table[1:]] == logits.argmax(axis=1).tolist()


def test_latest_names_the_newest_finished_run(workdir):
    folder, result = workdir
    assert run_directory.find_run(str(folder / "runs" / "quickstart" / "latest")) == \
        result.run_dir


def test_runs_are_never_overwritten(tmp_path, capsys):
    first = run_directory.create_run("r", None, root=str(tmp_path))
    second = run_directory.create_run("r", None, root=str(tmp_path))
    assert first != second and os.path.isdir(first) and os.path.isdir(second)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("precious")
    code = _train(os.path.join(RECIPES, "quickstart.yaml"), occupied)
    assert code == 2
    assert "already exists and is not empty; runs are never overwritten" in \
        capsys.readouterr().err
    assert os.listdir(occupied) == ["keep.txt"]
    assert (occupied / "keep.txt").read_text() == "precious"


def test_evaluate_and_predict_refuse_what_is_not_a_run(tmp_path, capsys):
    assert cli.main(["evaluate", str(tmp_path)]) == 2
    assert "is not a graphfit run directory (it has no recipe.yaml)" in capsys.readouterr().err
    assert cli.main(["predict", str(tmp_path / "nope"), "--input", "a.csv",
                     "--output", "b.csv"]) == 2
    assert "run directory not found" in capsys.readouterr().err


def test_predict_rejects_inputs_of_the_wrong_width(workdir, tmp_path, capsys):
    _, result = workdir
    inputs = tmp_path / "narrow.csv"
    inputs.write_text("a,b\n1,2\n")
    assert cli.main(["predict", result.run_dir, "--input", str(inputs),
                     "--output", str(tmp_path / "o.csv")]) == 2
    assert "the inputs have 2 values per row but the model takes 64" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("kind, expected", [
    ("layers", "Dense"), ("optimizers", "SGD"), ("losses", "BinaryCrossentropy"),
    ("metrics", "AUC"), ("datasets", "moons"), ("callbacks", "TensorBoard"),
])
def test_list(kind, expected, capsys):
    assert cli.main(["list", kind]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert expected in names


def test_readme_main_job_through_the_console_script(tmp_path):
    # Without XLA: the process boundary (the installed console script) and runs/.../latest
    # are the point here; quickstart's XLA training is in test_every_shipped_recipe_....
    script = os.path.join(os.path.dirname(sys.executable), "graphfit")
    done = subprocess.run(
        [script, "train", os.path.join(RECIPES, "quickstart.yaml"), "--set", "training.epochs=1",
         "--set", "training.jit_compile=false", "--verbose", "0"], cwd=tmp_path,
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "test: loss=" in done.stdout
    runs = sorted(os.listdir(tmp_path / "runs" / "quickstart"))
    assert len(runs) == 2 and runs[1] == "latest"
    # latest is a real path (a symlink to the run), not only a name graphfit resolves.
    latest = tmp_path / "runs" / "quickstart" / "latest"
    assert latest.is_symlink() and os.readlink(latest) == runs[0]
    assert json.loads((latest / "metrics.json").read_text())["test"]


def test_resume_reaches_the_weights_of_an_uninterrupted_run(tmp_path, capsys):
    source = os.path.join(RECIPES, "spirals_graph.yaml")
    # Without XLA (three models would each compile it): resuming under XLA is checked in
    # tests/framework/saving/test_checkpoints.py and test_run_safety.py.
    small = ["data.n_samples=240", "training.batch_size=16", "training.jit_compile=false"]
    full = training_run.train(load_recipe(source, small + ["training.epochs=4"]),
                              run_dir=str(tmp_path / "full"), verbose=0)
    cut = tmp_path / "cut"
    training_run.train(load_recipe(source, small + ["training.epochs=2"]), run_dir=str(cut),
                       verbose=0)
    for name in os.listdir(cut / "checkpoints"):  # as if killed after epoch 2's checkpoint
        if name.startswith("final"):
            os.remove(cut / "checkpoints" / name)
    os.remove(cut / "metrics.json")
    assert cli.main(["train", "--resume", str(cut), "--set", "training.epochs=4",
                     "--verbose", "0"]) == 0
    assert f"run directory: {cut}" in capsys.readouterr().out
    resumed, _ = runner.load_run(str(cut))
    for a, b in zip(full.model.get_weights(), resumed.model.get_weights()):
        np.testing.assert_array_equal(a, b)
    history = json.loads((cut / "history.json").read_text())
    assert history["loss"] == full.history["loss"]  # epochs 1-2 kept, 3-4 resumed
    assert json.loads((cut / "metrics.json").read_text()) == full.metrics
    assert cli.main(["train", "--resume", str(cut), "--verbose", "0"]) == 2
    assert "has already trained 4 epochs (its recipe asks for 4); give --set " \
        "training.epochs=N with N > 4" in capsys.readouterr().err
    assert run_directory.read_yaml(str(cut / "overrides.yaml")) == [
        "data.n_samples=240", "training.batch_size=16", "training.jit_compile=false",
        "training.epochs=2", "training.epochs=4"]
    assert cli.main(["train", "--resume", str(cut), "--set", "seed=3"]) == 2
    assert "only training.epochs=N" in capsys.readouterr().err


def test_recipe_callbacks_write_inside_the_run_and_say_why_training_stopped(tmp_path, capsys):
    recipe = tmp_path / "stop.yaml"
    recipe.write_text(
        "data: {source: moons, n_samples: 200}\n"
        "model: [{type: Dense, units: 1}]\n"
        "loss: {type: BinaryCrossentropy, from_logits: true}\n"
        "optimizer: {type: SGD, learning_rate: 0.0}\n"  # nothing improves: stops at once
        "training: {epochs: 20, jit_compile: false}\n"  # callbacks: XLA is beside the point
        "callbacks:\n"
        "  - {type: EarlyStopping, monitor: val_loss, patience: 1}\n"
        "  - {type: CSVLogger, filename: epochs.csv}\n")
    run = tmp_path / "run"
    assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "2"]) == 0
    out = capsys.readouterr().out
    assert "Stopped: EarlyStopping: val_loss did not improve for 1 epoch" in out
    rows = (run / "epochs.csv").read_text().splitlines()
    assert rows[0].startswith("epoch,") and len(rows) == 1 + 2  # header, epochs 1 and 2
    history = json.loads((run / "history.json").read_text())
    assert len(history["loss"]) == 2
    assert os.path.isdir(run / "checkpoints" / "latest")


def test_evaluate_writes_the_test_run_at_the_last_epoch(workdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, result = workdir
    test_logs = os.path.join(result.run_dir, "logs", "test")
    before = len(os.listdir(test_logs))
    runner.evaluate_run(result.run_dir)
    assert len(os.listdir(test_logs)) == before + 1
    events = EventAccumulator(test_logs)
    events.Reload()
    steps = sorted({event.step for event in events.Tensors("loss")})
    assert steps == [1]  # epochs=2: fit's final test and evaluate's are both at step 1


def test_a_run_that_goes_non_finite_fails_and_saves_no_final_weights(tmp_path, capsys):
    recipe = tmp_path / "nan.yaml"
    recipe.write_text(
        "data: {source: sinc, n_samples: 200}\n"
        "model: [{type: Dense, units: 16, activation: tanh}, {type: Dense, units: 1}]\n"
        "loss: mse\n"
        "optimizer: {type: SGD, learning_rate: 1.0e+6}\n"
        "training: {epochs: 3, batch_size: 8}\n"
        "callbacks: [{type: TerminateOnNaN}]\n")
    run = tmp_path / "run"
    assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "0"]) == 1
    err = capsys.readouterr().err
    assert "train failed: TrainingFailed: the loss became non-finite at step" in err
    saved = os.listdir(run / "checkpoints") if (run / "checkpoints").exists() else []
    assert not any(name.startswith("final") for name in saved)  # no good epoch: nothing
    assert not (run / "metrics.json").exists()
    json.loads((run / "history.json").read_text(), parse_constant=pytest.fail)  # strict JSON


def test_schedule_and_learning_rate_callback_conflict_is_a_recipe_problem(tmp_path, capsys):
    recipe = tmp_path / "lr.yaml"
    recipe.write_text(
        "data: {source: moons}\nmodel: [{type: Dense, units: 1}]\nloss: mse\n"
        "optimizer:\n  type: SGD\n  learning_rate: {type: ExponentialDecay, "
        "initial_learning_rate: 0.1, decay_steps: 10, decay_rate: 0.9}\n"
        "callbacks:\n  - {type: ReduceLROnPlateau}\n")
    assert cli.main(["validate", str(recipe)]) == 2
    assert f"{recipe}:8:6: callbacks[0].type: ReduceLROnPlateau sets the learning rate, but " \
           f"optimizer.learning_rate is a schedule" in capsys.readouterr().err


def test_predict_with_a_single_input_graph_model(shipped_run, tmp_path, capsys):
    code, run, _ = shipped_run("spirals_graph.yaml")  # the shipped recipe's run, reused
    assert code == 0
    np.savez(tmp_path / "points.npz", x=np.array([[0.1, 0.2], [-0.5, 0.3]], np.float32))
    assert cli.main(["predict", str(run), "--input", str(tmp_path / "points.npz"),
                     "--output", str(tmp_path / "p.csv")]) == 0
    assert "wrote 2 predictions (class, probability_0, probability_1)" in capsys.readouterr().out


def test_recipe_metric_objects_keep_keras_default_names(tmp_path):
    # Checking a recipe builds its metrics once already; the run's must not be renumbered
    # (`precision_1`): the log keys are the names Keras gives the first object of a class.
    recipe = tmp_path / "metrics.yaml"
    recipe.write_text(
        "data: {source: breast_cancer}\n"
        "model: [{type: Dense, units: 1}]\n"
        "loss: {type: BinaryCrossentropy, from_logits: true}\n"
        "metrics: [auc, {type: Precision}, {type: TruePositives, thresholds: 0.3},\n"
        "          {type: Recall, name: my_recall}, {type: MeanSquaredError}]\n"
        "optimizer: adam\n"
        "training: {epochs: 1}\n")
    from graphfit.recipes.running.builder import compile_arguments

    config = load_recipe(str(recipe)).config
    for _ in range(2):
        names = [getattr(m, "name", m) for m in compile_arguments(config)["metrics"]]
        assert names == ["auc", "precision", "true_positives", "my_recall",
                         "mean_squared_error"]

"""`graphfit tune` in this process: the shipped study (trial runs, the table, the best recipe,
plots, HParams, MLflow nested runs, `graphfit compare`), failed trials, and every bad input
refused before any trial."""

import csv
import glob
import os

import pytest

from graphfit.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
RECIPE = os.path.join(ROOT, "recipes", "digits_tune.yaml")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The shipped study, 3 one-epoch trials, tracked in MLflow: (folder, printed output)."""
    import contextlib
    import io

    folder = str(tmp_path_factory.mktemp("tune") / "study")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["tune", RECIPE, "--study-dir", folder, "--set", "tune.n_trials=3",
                     "--mlflow"])
    assert code == 0, out.getvalue()
    return folder, out.getvalue()


def _rows(folder):
    with open(os.path.join(folder, "trials.csv"), newline="") as handle:
        return list(csv.DictReader(handle))


def test_each_trial_is_an_ordinary_run_and_the_study_folder_reports_them(study):
    folder, printed = study
    rows = _rows(folder)
    assert [row["trial"] for row in rows] == ["0", "1", "2"]
    assert {row["state"] for row in rows} == {"complete"}
    for row in rows:
        run = row["run_dir"]
        assert run == os.path.join(folder, "trials", f"{int(row['trial']):04d}")
        for name in ("recipe.yaml", "metrics.json", "history.json", "checkpoints/final.index"):
            assert os.path.exists(os.path.join(run, name)), name
        assert 16 <= int(row["model.layers.0.units"]) <= 128
        assert 1e-3 <= float(row["optimizer.learning_rate"]) <= 0.3
        assert 0.0 <= float(row["val_accuracy"]) <= 1.0
    # The printed table, the best trial and where the report is.
    assert "learning_rate" in printed and "best trial:" in printed
    for name in ("optimization_history.png", "param_importances.png",
                 "parallel_coordinate.png", "study.db"):
        assert os.path.isfile(os.path.join(folder, name)), name
    best = max(rows, key=lambda row: float(row["val_accuracy"]))
    assert f"best trial: {best['trial']} " in printed


def test_the_best_recipe_is_the_best_trials_point_and_trains(study, tmp_path):
    from graphfit.recipes import load_recipe
    from graphfit.recipes.running import run_directory
    from graphfit.recipes.running.training_run import train

    folder, _ = study
    best = max(_rows(folder), key=lambda row: float(row["val_accuracy"]))
    recipe = load_recipe(os.path.join(folder, "best_recipe.yaml"))
    assert "tune" not in recipe.config
    trial_recipe = run_directory.read_yaml(os.path.join(best["run_dir"], "recipe.yaml"))
    assert recipe.config["optimizer"] == trial_recipe["optimizer"]
    assert recipe.config["model"] == trial_recipe["model"]
    result = train(recipe, run_dir=str(tmp_path / "best"), verbose=0)
    # The same recipe and seed: the trial's numbers again.
    assert result.metrics["val"]["accuracy"] == pytest.approx(float(best["val_accuracy"]),
                                                              abs=1e-6)


def test_tensorboard_hparams_sessions_hold_the_tuned_values(study):
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    folder, _ = study
    row = _rows(folder)[1]
    accumulator = event_accumulator.EventAccumulator(os.path.join(row["run_dir"], "logs"))
    accumulator.Reload()
    content = accumulator.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    session = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert session.hparams["model.layers.0.units"].number_value == int(
        row["model.layers.0.units"])
    assert session.hparams["optimizer.learning_rate"].number_value == pytest.approx(
        float(row["optimizer.learning_rate"]))
    # The study's experiment: the tuned keys and the metrics, at the study folder's top.
    config = event_accumulator.EventAccumulator(os.path.join(folder, "hparams"))
    config.Reload()
    content = config.SummaryMetadata("_hparams_/experiment").plugin_data.content
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content).experiment
    assert [h.name for h in experiment.hparam_infos] == [
        "optimizer.learning_rate", "model.layers.0.units", "model.layers.2.rate"]


def test_mlflow_holds_the_study_and_each_trial_as_a_nested_run(study):
    from mlflow.tracking import MlflowClient

    folder, _ = study
    client = MlflowClient(tracking_uri="sqlite:///" + os.path.join(folder, "mlflow",
                                                                   "mlflow.db"))
    experiment = client.get_experiment_by_name("digits_tune")
    runs = client.search_runs([experiment.experiment_id])
    parents = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    trials = [run for run in runs if "mlflow.parentRunId" in run.data.tags]
    assert len(parents) == 1 and len(trials) == 3
    assert {run.data.tags["mlflow.parentRunId"] for run in trials} == {
        parents[0].info.run_id}
    rows = {f"trial {row['trial']}": row for row in _rows(folder)}
    for run in trials:
        row = rows[run.info.run_name]
        assert run.data.params["model.layers.0.units"] == row["model.layers.0.units"]
        assert {"train_loss", "val_loss", "val_accuracy", "test_loss"} <= set(run.data.metrics)
        assert run.data.metrics["final_val_accuracy"] == pytest.approx(
            float(row["val_accuracy"]), abs=1e-4)
        assert run.info.status == "FINISHED"
    artifacts = [a.path for a in client.list_artifacts(parents[0].info.run_id)]
    assert "trials.csv" in artifacts and "best_recipe.yaml" in artifacts


def test_compare_prints_final_metrics_and_the_settings_that_differ(study, capsys):
    folder, _ = study
    assert main(["compare", folder]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    assert header[0] == "run" and "val_accuracy" in header and "test_accuracy" in header
    assert {"optimizer.learning_rate", "model.layers.0.units", "model.layers.2.rate"} <= \
        set(header)
    assert "seed" not in header and "optimizer.momentum" not in header  # the same in all
    assert len(lines) == 4


def test_a_failing_point_is_recorded_with_its_reason_and_the_study_goes_on(tmp_path, capsys):
    folder = str(tmp_path / "study")
    space = "tune.space={optimizer.learning_rate: {choice: [0.05, 1.0e+30]}}"
    assert main(["tune", RECIPE, "--study-dir", folder, "--set", space, "--set",
                 "tune.sampler=grid", "--set", "tune.n_trials=2"]) == 0
    rows = {float(row["optimizer.learning_rate"]): row for row in _rows(folder)}
    assert rows[0.05]["state"] == "complete"
    assert rows[1e30]["state"] == "fail"
    assert "non-finite" in rows[1e30]["reason"]
    assert "failed" in capsys.readouterr().out


BAD = {
    "empty": (["tune.space={}"], "tune.space: the search space is empty"),
    "contradictory": (["tune.space={optimizer.learning_rate: {log_uniform: [0.1, 0.01]}}"],
                      "the range [0.1, 0.01] is empty"),
    "no such key": (["tune.space={optimizer.learning_rat: {log_uniform: [0.01, 0.1]}}"],
                    "has no argument 'learning_rat'; did you mean 'learning_rate'?"),
    "no such layer": (["tune.space={model.layers.7.units: {int: [8, 16]}}"],
                      "no item 7 here (the list has 4)"),
    "choice without its keys": (["tune.space={optimizer.type: {choice: [SGD, Adam]}}"],
                                "Adam has no argument 'momentum'"),
    "choice of nothing": (["tune.space={training.batch_size: {choice: []}}"],
                          "choice has no options; give at least two"),
    "metric not logged": (["tune.metric=val_auc"], "'val_auc' is not logged"),
    "metric misspelt": (["tune.metric=val_acuracy"], "'val_acuracy' is not logged by this "
                        "recipe's runs (did you mean 'val_accuracy'?). They log: loss, "),
    "test metric": (["tune.metric=test_accuracy"], "must not see"),
    "grid of reals": (["tune.sampler=grid"], "the grid sampler needs a finite list"),
    "unknown pruner option": (["tune.pruner={type: median, patience: 3}"], "patience"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_a_clear_error_before_any_trial(case, tmp_path, capsys):
    overrides, expected = BAD[case]
    folder = tmp_path / "study"
    arguments = ["tune", RECIPE, "--study-dir", str(folder)]
    for override in overrides:
        arguments += ["--set", override]
    assert main(arguments) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert "nothing was run" in err and "Traceback" not in err
    assert err.count("\n") <= 3  # one problem (or two), said once however many corners
    assert not folder.exists()


def test_a_choice_with_each_options_keys_rebuilds_the_section():
    from graphfit.tuning.plan import plan_study, trial_recipe

    space = ("tune.space={optimizer.learning_rate: {log_uniform: [0.001, 0.1]}, "
             "optimizer.type: {choice: {SGD: {optimizer.momentum: {uniform: [0.0, 0.9]}, "
             "optimizer.nesterov: true}, Adam: {optimizer.beta_1: {value: 0.8}}}}}")
    plan = plan_study(RECIPE, [space, "tune.metric=val_loss"], check=False)
    corners = plan.space.corners()
    assert len(corners) == 2 * (2 + 1)  # learning-rate ends x (SGD's momentum ends, Adam)
    adam = next(c for c in corners if ("optimizer.type", "Adam", True) in c)
    optimizer = trial_recipe(RECIPE, plan.overrides, adam).config["optimizer"]
    assert optimizer["type"] == "Adam" and optimizer["beta_1"] == 0.8
    assert "momentum" not in optimizer and optimizer["learning_rate"] in (0.001, 0.1)


def test_an_unreachable_storage_is_refused_before_any_trial(tmp_path, capsys):
    url = "postgresql+psycopg://user:secret@127.0.0.1:9/nothing"
    assert main(["tune", RECIPE, "--study-dir", str(tmp_path / "s"), "--storage", url]) == 2
    err = capsys.readouterr().err
    assert "cannot open the study database" in err and "secret" not in err
    assert not glob.glob(str(tmp_path / "s" / "trials" / "*"))

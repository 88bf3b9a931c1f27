"""Each trial's end state (complete, pruned after epoch k, failed) said everywhere a trial is
recorded: its run's trial.json, its MLflow run's tag, TensorBoard's HParams session and
`graphfit compare`; and the hint to continue an interrupted trial only when it can be."""

import json
import os

import pytest

from graphfit.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
RECIPE = os.path.join(ROOT, "recipes", "digits_tune.yaml")


@pytest.fixture(scope="module")
def pruned_study(tmp_path_factory):
    """Two 2-epoch trials tracked in MLflow; the pruner prunes trial 0 after its first epoch.
    Returns (study folder, optuna study)."""
    import optuna

    from graphfit.tuning.plan import plan_study
    from graphfit.tuning.study import StudySettings
    from graphfit.tuning.tracking import StudyTracker
    from graphfit.tuning.trial import Objective

    class PruneTrialZero(optuna.pruners.BasePruner):
        def prune(self, study, trial):
            return trial.number == 0

    folder = str(tmp_path_factory.mktemp("pruned") / "study")
    plan = plan_study(RECIPE, ["training.epochs=2", "tune.n_trials=2"], check=False)
    study = optuna.create_study(direction=plan.direction, pruner=PruneTrialZero(),
                                sampler=optuna.samplers.RandomSampler(seed=0))
    tracker = StudyTracker.for_study(plan, StudySettings(folder, mlflow=""), study)
    study.optimize(Objective(plan, folder, verbose=False, tracker=tracker), n_trials=2)
    return folder, study


def _run(folder, number):
    return os.path.join(folder, "trials", f"{number:04d}")


def test_the_trial_json_beside_metrics_json_says_the_state(pruned_study):
    folder, study = pruned_study
    assert [t.state.name for t in study.trials] == ["PRUNED", "COMPLETE"]
    with open(os.path.join(_run(folder, 0), "trial.json")) as handle:
        assert json.load(handle) == {"trial": 0, "state": "pruned", "epochs": 1}
    with open(os.path.join(_run(folder, 1), "trial.json")) as handle:
        assert json.load(handle) == {"trial": 1, "state": "complete", "epochs": 2}


def test_the_mlflow_trial_run_is_tagged_with_its_state_and_logs_its_test(pruned_study):
    from mlflow.tracking import MlflowClient

    folder, _ = pruned_study
    client = MlflowClient(tracking_uri="sqlite:///" + os.path.join(folder, "mlflow",
                                                                   "mlflow.db"))
    experiment = client.get_experiment_by_name("digits_tune")
    runs = {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}
    pruned, complete = runs["trial 0"], runs["trial 1"]
    assert pruned.data.tags["graphfit.trial_state"] == "pruned"
    assert pruned.data.tags["graphfit.trial_epochs"] == "1"
    assert complete.data.tags["graphfit.trial_state"] == "complete"
    assert complete.data.tags["graphfit.trial_epochs"] == "2"
    assert pruned.info.status == complete.info.status == "FINISHED"
    # The test split's numbers per epoch, as a complete trial logs them.
    for run in (pruned, complete):
        assert {"test_loss", "test_accuracy", "final_test_loss"} <= set(run.data.metrics)
    history = client.get_metric_history(pruned.info.run_id, "test_loss")
    assert [m.step for m in history] == [0]


def test_the_hparams_session_of_a_pruned_trial_does_not_end_in_success(pruned_study):
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    folder, _ = pruned_study
    statuses = []
    for number in (0, 1):
        accumulator = event_accumulator.EventAccumulator(os.path.join(_run(folder, number),
                                                                      "logs"))
        accumulator.Reload()
        content = accumulator.SummaryMetadata("_hparams_/session_end_info").plugin_data.content
        statuses.append(plugin_data_pb2.HParamsPluginData.FromString(
            content).session_end_info.status)
    assert statuses == [api_pb2.STATUS_FAILURE, api_pb2.STATUS_SUCCESS]


def test_compare_shows_each_trials_state(pruned_study, capsys):
    folder, _ = pruned_study
    assert main(["compare", folder]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["run", "state"]
    assert "pruned after epoch 1" in lines[1] and " complete " in lines[2] + " "


def test_compare_of_plain_runs_has_no_state_column():
    from graphfit.tuning.compare import comparison_table

    header, _ = comparison_table([("a", {"x": 1}, {"val": {"loss": 0.5}})])
    assert header == ["run", "val_loss"]


def _interrupted_trial(tmp_path, monkeypatch, make_files):
    """A trial whose training is interrupted (Ctrl-C) after `make_files(run)`; returns
    (its run directory, the reason recorded)."""
    import optuna

    from graphfit.recipes.running import training_run
    from graphfit.tuning.optuna_objects import FAIL_REASON
    from graphfit.tuning.plan import plan_study
    from graphfit.tuning.trial import Objective

    def interrupted(recipe, run_dir, **_):
        make_files(run_dir)
        raise KeyboardInterrupt

    monkeypatch.setattr(training_run, "train", interrupted)
    plan = plan_study(RECIPE, [], check=False)
    study = optuna.create_study(direction=plan.direction)
    with pytest.raises(KeyboardInterrupt):
        study.optimize(Objective(plan, str(tmp_path), verbose=False), n_trials=1)
    return _run(str(tmp_path), 0), study.trials[0].user_attrs[FAIL_REASON]


def test_an_interrupt_before_any_checkpoint_gives_no_resume_hint(tmp_path, monkeypatch):
    def first_epoch_unfinished(run):
        os.makedirs(os.path.join(run, "checkpoints", "best", "ckpt-1_temp"))

    run, reason = _interrupted_trial(tmp_path, monkeypatch, first_epoch_unfinished)
    assert "interrupted" in reason and "--resume" not in reason
    assert f"{run} holds no intact checkpoint" in reason


def test_an_interrupt_after_a_checkpoint_names_the_run_to_resume(pruned_study, tmp_path,
                                                                 monkeypatch):
    import shutil

    def one_epoch_saved(run):  # a trained run's checkpoints, as ModelCheckpoint saves them
        shutil.copytree(os.path.join(_run(pruned_study[0], 1), "checkpoints"),
                        os.path.join(run, "checkpoints"))

    run, reason = _interrupted_trial(tmp_path, monkeypatch, one_epoch_saved)
    assert reason.endswith(f"the run directory can be continued with graphfit train "
                           f"--resume {run}")


def test_a_trial_whose_heartbeat_stopped_names_its_run_directory(pruned_study, tmp_path):
    from types import SimpleNamespace

    from graphfit.tuning.optuna_objects import RUN_DIR, fail_reason

    folder, _ = pruned_study
    resumable = fail_reason(SimpleNamespace(user_attrs={RUN_DIR: _run(folder, 1)}))
    assert "RUN_DIR" not in resumable
    assert resumable.endswith(f"graphfit train --resume {_run(folder, 1)}")
    empty = fail_reason(SimpleNamespace(user_attrs={RUN_DIR: str(tmp_path)}))
    assert "no heartbeat" in empty and "--resume" not in empty and str(tmp_path) in empty

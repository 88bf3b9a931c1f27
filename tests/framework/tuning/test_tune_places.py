"""`graphfit tune`'s --storage and --mlflow places checked before anything is created (exit 2,
the option named, what is wrong and how to fix it), and a finished study's resume saying how
to run more trials."""

import os

import pytest

from graphfit.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
RECIPE = os.path.join(ROOT, "recipes", "digits_tune.yaml")


def _places(tmp_path):
    (tmp_path / "file.yaml").write_text("seed: 0\n")
    return {
        "mlflow sqlite under a file": (
            ["--mlflow", f"sqlite:///{tmp_path}/file.yaml/x/ml.db"],
            f"--mlflow sqlite:///{tmp_path}/file.yaml/x/ml.db: {tmp_path}/file.yaml is a "
            f"file, not a folder"),
        "mlflow file store in a missing folder": (
            ["--mlflow", f"file://{tmp_path}/nope/mlruns"],
            f"the folder {tmp_path}/nope does not exist; create the folder first"),
        "mlflow file store under /proc": (
            ["--mlflow", "file:///proc/nope/mlruns"], "the folder /proc/nope does not exist"),
        "mlflow file store MLflow refuses": (
            ["--mlflow", f"file://{tmp_path}/mlruns"],
            "MLflow refuses its file store (maintenance mode) unless "
            "MLFLOW_ALLOW_FILE_STORE=true is set"),
        "mlflow sqlite in a missing folder": (
            ["--mlflow", f"sqlite:///{tmp_path}/missing/dir/ml.db"],
            f"the folder {tmp_path}/missing/dir does not exist"),
        "storage sqlite in a missing folder": (
            ["--storage", f"sqlite:///{tmp_path}/missing/dir/s.db"],
            f"--storage sqlite:///{tmp_path}/missing/dir/s.db: the folder "
            f"{tmp_path}/missing/dir does not exist"),
    }


CASES = ["mlflow sqlite under a file", "mlflow file store in a missing folder",
         "mlflow file store under /proc", "mlflow file store MLflow refuses",
         "mlflow sqlite in a missing folder", "storage sqlite in a missing folder"]


@pytest.mark.parametrize("case", CASES)
def test_a_place_that_cannot_be_written_is_refused_before_anything_is_created(
        case, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    arguments, expected = _places(tmp_path)[case]
    folder = tmp_path / "study"
    assert main(["tune", RECIPE, "--study-dir", str(folder), *arguments]) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert "Traceback" not in err and "server is running" not in err
    assert not folder.exists()
    assert not (tmp_path / "missing").exists()  # no folder named in a URL is made


def test_a_study_with_its_trials_already_says_how_to_run_more(tmp_path, capsys):
    from graphfit.tuning import optuna_objects as objects
    from graphfit.tuning.plan import plan_study

    folder = str(tmp_path / "study")
    plan = plan_study(RECIPE, ["tune.n_trials=2"], check=False)
    os.makedirs(folder)
    study = objects.open_study(plan, objects.open_storage(objects.default_storage(folder),
                                                          plan))
    failed = objects.optuna().trial.TrialState.FAIL
    for _ in range(2):  # interrupted trials: failed, counted
        study.add_trial(objects.optuna().trial.create_trial(state=failed))
    assert main(["tune", RECIPE, "--study-dir", folder, "--set", "tune.n_trials=2"]) == 0
    out = capsys.readouterr().out
    assert "0 of 2 trials to run (2 before)" in out
    assert "to run more, raise it, e.g. --set tune.n_trials=4" in out
    assert not os.path.isdir(os.path.join(folder, "trials"))

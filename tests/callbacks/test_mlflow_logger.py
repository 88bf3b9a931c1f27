"""MLflowLogger: a recipe run logged to a local MLflow store, read back with MLflow's own
client: the flattened recipe as parameters, every stage's metrics per epoch, the run's files
and plots, and the exported SavedModel."""

import os

import pytest

from graphfit.recipes import load_recipe
from graphfit.recipes.running.training_run import train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlflow")
    recipe = load_recipe(os.path.join(ROOT, "recipes", "quickstart.yaml"), [
        "training.epochs=2", "training.jit_compile=false",
        "callbacks=[{type: MLflowLogger, experiment: quick, tags: {team: vision}}]"])
    os.environ["GRAPHFIT_PLOTS"] = "1"  # the plots are artifacts too
    try:
        result = train(recipe, run_dir=str(folder / "run"), verbose=0)
    finally:
        os.environ["GRAPHFIT_PLOTS"] = "0"
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri="sqlite:///" + os.path.join(result.run_dir, "mlflow",
                                                                   "mlflow.db"))
    experiment = client.get_experiment_by_name("quick")
    (run,) = client.search_runs([experiment.experiment_id])
    return client, run, result


def test_parameters_are_the_resolved_recipe_flattened(logged):
    _, run, result = logged
    params = run.data.params
    assert params["optimizer.type"] == "SGD"
    assert float(params["optimizer.learning_rate"]) == 0.05
    assert params["model.layers.0.units"] == "64"
    assert params["training.epochs"] == "2"
    assert run.data.tags["team"] == "vision"
    assert run.data.tags["graphfit.run_dir"] == result.run_dir
    assert run.info.run_name == "run" and run.info.status == "FINISHED"


def test_every_stage_has_its_own_metrics_per_epoch(logged):
    client, run, result = logged
    for stage, prefix, steps in (("loss", "train_", [0, 1]), ("val_loss", "", [0, 1]),
                                 ("test_loss", "", [1])):  # fit tests after the last epoch
        history = client.get_metric_history(run.info.run_id, prefix + stage)
        assert [point.step for point in history] == steps
        assert [point.value for point in history] == pytest.approx(result.history[stage])
    assert run.data.metrics["final_test_accuracy"] == pytest.approx(
        result.metrics["test"]["accuracy"])


def test_the_run_files_plots_and_exported_model_are_artifacts(logged):
    client, run, _ = logged
    artifacts = {item.path for item in client.list_artifacts(run.info.run_id)}
    assert {"recipe.yaml", "metrics.json", "history.json", "learning_curves.png",
            "model"} <= artifacts
    model = {item.path for item in client.list_artifacts(run.info.run_id, "model")}
    assert "model/saved_model.pb" in model


def test_bad_arguments_are_named():
    from graphfit.callbacks import MLflowLogger

    with pytest.raises(ValueError, match="experiment must be a non-empty string"):
        MLflowLogger(experiment="")
    with pytest.raises(ValueError, match="log_params must be a dict"):
        MLflowLogger(log_params=[1])

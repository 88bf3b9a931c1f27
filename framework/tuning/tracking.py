"""`graphfit tune --mlflow`: the study as an MLflow run, each trial a nested run under it.

The study's run is created once (its id kept in the study's storage, so every process and
every resumed `graphfit tune` nests under the same run); each trial's `MLflowLogger` logs the
trial's recipe, per-epoch metrics, plots and files (its SavedModel is left out: export the
best trial with `graphfit export`).
"""

from __future__ import annotations

import os

from graphfit.callbacks.mlflow_logger import MLflowLogger

__all__ = ["StudyTracker", "PARENT_ATTR"]

PARENT_ATTR = "mlflow_parent_run_id"


class StudyTracker:
    """Makes each trial's `MLflowLogger`, nested under the study's MLflow run."""

    def __init__(self, tracking_uri: str, log_dir: str, experiment: str, parent_run_id: str):
        self.tracking_uri = tracking_uri
        self.log_dir = log_dir
        self.experiment = experiment
        self.parent_run_id = parent_run_id

    @classmethod
    def for_study(cls, plan, settings, study) -> "StudyTracker":
        """The study's tracker; creates the study's MLflow run the first time."""
        log_dir = os.path.abspath(os.path.join(settings.study_dir, "mlflow"))
        probe = MLflowLogger(tracking_uri=settings.mlflow or None, log_dir=log_dir,
                             experiment=plan.study_name, run_name=f"study {plan.study_name}",
                             log_params={"tune." + key: value for key, value in
                                     _tune_params(plan).items()},
                             log_model=False, tags={"graphfit.study": plan.study_name})
        parent = study.user_attrs.get(PARENT_ATTR)
        if parent is None:
            probe.on_train_begin()  # creates the experiment and the study's run
            parent = probe.run_id
            study.set_user_attr(PARENT_ATTR, parent)
        return cls(probe.tracking_uri, log_dir, plan.study_name, parent)

    def callback(self, trial, run_dir: str) -> MLflowLogger:
        """The trial's logger (a nested run named after the trial)."""
        return MLflowLogger(tracking_uri=self.tracking_uri, log_dir=self.log_dir,
                            experiment=self.experiment, run_name=f"trial {trial.number}",
                            parent_run_id=self.parent_run_id, log_model=False,
                            tags={"optuna.trial": trial.number})

    def tag_state(self, run_id: str, state: str, epochs: int | None) -> None:
        """Tags a trial's run with its end state (`graphfit.trial_state`: complete, pruned or
        failed) and the epochs it trained (`graphfit.trial_epochs`)."""
        from mlflow.tracking import MlflowClient

        from graphfit.tuning.trial_state import EPOCHS_TAG, STATE_TAG

        client = MlflowClient(tracking_uri=self.tracking_uri)
        client.set_tag(run_id, STATE_TAG, state)
        if epochs is not None:
            client.set_tag(run_id, EPOCHS_TAG, str(epochs))

    def finish(self, study_dir: str) -> None:
        """Logs the study's report (table, best recipe, plots) to the study's run."""
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.tracking_uri)
        for name in sorted(os.listdir(study_dir)):
            if name in ("trials.csv", "best_recipe.yaml") or name.endswith(".png"):
                client.log_artifact(self.parent_run_id, os.path.join(study_dir, name))
        client.set_terminated(self.parent_run_id)


def _tune_params(plan) -> dict:
    tune = plan.tune
    return {"metric": plan.metric, "direction": plan.direction, "n_trials": tune["n_trials"],
            "sampler": tune["sampler"]["type"], "pruner": tune["pruner"]["type"],
            "space": ", ".join(plan.space.keys())}

"""`MLflowLogger`: a run tracked in MLflow (the optional extra `graphfit[mlflow]`).

Per epoch, every stage's metrics apart (`train_loss`, `val_loss`, `test_accuracy`, ...);
in a recipe run also the resolved recipe flattened into parameters
(`optimizer.learning_rate`, `model.layers.0.units`), and, once the run's files are written,
its final metrics (`final_val_accuracy`), recipe, history, plots and exported SavedModel as
artifacts. `graphfit tune --mlflow` logs each trial as a nested run of the study's run.
"""

from __future__ import annotations

import math
import os

from graphfit.callbacks.callback import Callback
from graphfit.core.registry import CALLBACKS

__all__ = ["MLflowLogger", "flatten"]

_VALUE_LIMIT = 6000  # MLflow's longest parameter value
_RUN_FILES = ("recipe.yaml", "overrides.yaml", "metrics.json", "history.json",
              "preprocessing.json", "versions.json")


def flatten(data, prefix: str = "") -> dict[str, str]:
    """Nested recipe data as {dotted key: text}: lists by index (`model.layers.0.units`)."""
    flat: dict[str, str] = {}
    items = data.items() if isinstance(data, dict) else enumerate(data) \
        if isinstance(data, list) else None
    if items is None:
        flat[prefix] = str(data)[:_VALUE_LIMIT]
        return flat
    if not data and prefix:
        flat[prefix] = "[]" if isinstance(data, list) else "{}"
    for key, value in items:
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


@CALLBACKS.register
class MLflowLogger(Callback):
    """Logs a training run to MLflow.

    Args:
        tracking_uri: any MLflow tracking URI (a server `http://...`, `sqlite:///...`,
            `databricks`). None: the MLFLOW_TRACKING_URI environment variable if set, else a
            local store in `log_dir` (`sqlite:///<log_dir>/mlflow.db`, artifacts beside it:
            MLflow keeps its older plain-folder store in maintenance mode only).
        log_dir: the local store's folder (in a recipe, relative to the run directory).
        experiment: the MLflow experiment's name (created when missing).
        run_name: the MLflow run's name (default: the run directory's name).
        log_params: parameters to log (a recipe run adds its resolved recipe, flattened).
        parent_run_id: log as a nested run of this MLflow run.
        log_model: in a recipe run, export the finished run as a SavedModel
            (`graphfit export`) and log it as the artifact `model`.
        tags: more MLflow tags.

    Attributes:
        run_id: the MLflow run's id, once training began.

    Raises:
        ValueError: for a bad argument (named, with the value received).

    Example (in a recipe: `callbacks: [{type: MLflowLogger, experiment: digits}]`):

        >>> logger = MLflowLogger(log_dir="/tmp/mlflow-store", experiment="digits")
        >>> logger.tracking_uri
        'sqlite:////tmp/mlflow-store/mlflow.db'
    """

    def __init__(self, tracking_uri: str | None = None, log_dir: str = "mlflow",
                 experiment: str = "graphfit", run_name: str | None = None,
                 log_params: dict | None = None, parent_run_id: str | None = None,
                 log_model: bool = True, tags: dict | None = None):
        super().__init__()
        for name, value in (("tracking_uri", tracking_uri), ("run_name", run_name),
                            ("parent_run_id", parent_run_id)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{name} must be a non-empty string or None. "
                                 f"Received: {name}={value!r}")
        for name, value in (("log_dir", log_dir), ("experiment", experiment)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string. "
                                 f"Received: {name}={value!r}")
        for name, value in (("log_params", log_params), ("tags", tags)):
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{name} must be a dict or None. Received: {name}={value!r}")
        if not isinstance(log_model, bool):
            raise ValueError(f"log_model must be True or False. Received: log_model="
                             f"{log_model!r}")
        self.log_dir = os.path.abspath(os.path.expanduser(log_dir))
        self.tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or \
            "sqlite:///" + os.path.join(self.log_dir, "mlflow.db")
        self.experiment = experiment
        self.run_name = run_name
        self.log_params = dict(log_params or {})
        self.parent_run_id = parent_run_id
        self.log_model = log_model
        self.tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self.run_dir: str | None = None
        self.run_id: str | None = None
        self._client = None
        self._epoch = 0
        self._training = False
        self._epoch_tests: dict = {}  # the test_* numbers logged with the last epoch

    def use_recipe(self, config: dict, run_dir: str) -> None:
        """Called by a recipe run: log its resolved recipe, and its files when it ends."""
        self.log_params = {**flatten(config), **self.log_params}
        self.run_dir = run_dir
        self.run_name = self.run_name or os.path.basename(os.path.normpath(run_dir))

    def _start(self) -> None:
        import logging

        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        for name in ("mlflow", "alembic"):  # the store's set-up notes on first use
            logging.getLogger(name).setLevel(logging.WARNING)
        os.makedirs(self.log_dir, exist_ok=True)
        self._client = client = MlflowClient(tracking_uri=self.tracking_uri)
        found = client.get_experiment_by_name(self.experiment)
        experiment_id = found.experiment_id if found else client.create_experiment(
            self.experiment, artifact_location=self._artifact_location())
        tags = dict(self.tags)
        if self.parent_run_id:
            tags["mlflow.parentRunId"] = self.parent_run_id
        if self.run_dir:
            tags["graphfit.run_dir"] = self.run_dir
        run = client.create_run(experiment_id, run_name=self.run_name, tags=tags)
        self.run_id = run.info.run_id
        params = [Param(key, str(value)[:_VALUE_LIMIT]) for key, value in self.log_params.items()]
        for start in range(0, len(params), 100):  # MLflow takes 100 per batch
            client.log_batch(self.run_id, params=params[start:start + 100])

    def _artifact_location(self) -> str | None:
        if self.tracking_uri.startswith("sqlite:///") and os.path.dirname(
                self.tracking_uri[len("sqlite:///"):]) == self.log_dir:
            return "file://" + os.path.join(self.log_dir, "artifacts")
        return None  # the server's own

    def on_train_begin(self, logs=None):
        self._training = True
        if self.run_id is None:
            self._start()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def _log(self, values: dict, step: int, prefix_train: str = "train_") -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = []
        for key, value in (values or {}).items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue  # an array-valued metric: not a scalar to plot
            if not math.isfinite(number):
                continue
            stage = key.split("_", 1)[0]
            name = key if stage in ("val", "test") or not prefix_train else prefix_train + key
            metrics.append(Metric(name, number, now, step))
        if metrics and self._client is not None:
            self._client.log_batch(self.run_id, metrics=metrics)

    def on_epoch_end(self, epoch, logs=None):
        self._log(logs, epoch)
        self._epoch_tests = {k: v for k, v in (logs or {}).items() if k.startswith("test_")}

    def on_test_end(self, logs=None, stage="test"):
        if not self._training and self._client is not None and stage == "test":
            self._log({f"test_{k}": v for k, v in (logs or {}).items()}, self._epoch)

    def on_train_end(self, logs=None):
        self._training = False
        # Training that stopped early (a pruned trial, EarlyStopping) or restored other
        # weights is tested once more, after its last epoch: logged at that epoch's step, as
        # a run that trained all its epochs logs its last test.
        tests = {k: v for k, v in (logs or {}).items()
                 if k.startswith("test_") and self._epoch_tests.get(k) != v}
        self._log(tests, self._epoch)
        if self.run_dir is None:  # not a recipe run: nothing more will come
            self.end()

    def on_run_end(self, result) -> None:
        """Called once a recipe run's files are written: final metrics and artifacts."""
        if self._client is None:
            return
        final = {f"final_{stage}_{name}": value for stage, values in result.metrics.items()
                 for name, value in values.items()}
        self._log(final, max(len(result.history.get("loss", [])) - 1, 0), prefix_train="")
        run = result.run_dir
        for name in sorted(os.listdir(run)):
            if name in _RUN_FILES or name.endswith(".png"):
                self._client.log_artifact(self.run_id, os.path.join(run, name))
        if self.log_model:
            from graphfit.export import export_run

            target = os.path.join(run, "saved_model")
            if not os.path.isdir(target):
                export_run(run, target)
            self._client.log_artifacts(self.run_id, target, "model")
        self.end()

    def end(self, status: str = "FINISHED") -> None:
        """Ends the MLflow run (FINISHED, FAILED or KILLED)."""
        if self._client is not None and self.run_id is not None:
            self._client.set_terminated(self.run_id, status)
            self._client = None

"""One trial of a study: a point of the space trained as an ordinary run.

The run directory is `<study folder>/trials/<number>` (recipe, checkpoints, TensorBoard logs
with the trial's hyperparameters, plots), so `graphfit evaluate`, `predict`, `export` and
`train --resume` work on it. A pruned trial stops after the epoch its pruner says so and
still finishes its run; a failed one (a non-finite loss, a recipe error at that point) records
why, and the study goes on. Each trial's end state is written beside its run's metrics.json
(`trial.json`, see `trial_state`) and tagged on its MLflow run.
"""

from __future__ import annotations

import math
import os
import time

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.stop_reasons import UnsuccessfulStop
from graphfit.tuning.failure_log import quiet_failure
from graphfit.tuning.optuna_objects import FAIL_REASON, RUN_DIR, optuna
from graphfit.tuning.plan import StudyPlan, trial_recipe
from graphfit.tuning.resume_hint import resume_hint
from graphfit.tuning.space import describe
from graphfit.tuning.termination import Terminated
from graphfit.tuning.trial_state import write_trial_state

__all__ = ["PruningCallback", "Objective", "TRIALS", "final_value"]

TRIALS = "trials"  # the study folder's subfolder of trial runs


class PruningCallback(Callback):
    """Reports a metric to an Optuna trial after every epoch and stops training when the
    trial's pruner says it will not beat the trials before it.

    Args:
        trial: an `optuna.Trial` (anything with `report(value, step)` and `should_prune()`).
        metric: the per-epoch log key reported (`val_loss`, `val_accuracy`, ...).

    Attributes:
        pruned_at: the 0-based epoch after which the trial was pruned, or None.

    Example:

        >>> import numpy as np
        >>> import graphfit as gf
        >>> class Trial:  # what the callback uses of optuna.Trial
        ...     def report(self, value, step): print("epoch", step)
        ...     def should_prune(self): return True
        >>> model = gf.Sequential([gf.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> pruning = PruningCallback(Trial(), "val_loss")
        >>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=5, verbose=0,
        ...               validation_data=(np.ones((4, 2)), np.ones((4, 1))),
        ...               callbacks=[pruning])
        epoch 0
        >>> pruning.pruned_at
        0
    """

    def __init__(self, trial, metric: str):
        super().__init__()
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be a per-epoch log key such as 'val_loss'. "
                             f"Received: metric={metric!r}")
        self.trial = trial
        self.metric = metric
        self.pruned_at: int | None = None

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.metric)
        if value is None or not math.isfinite(float(value)):
            return  # a non-finite loss fails the run on its own
        self.trial.report(float(value), epoch)
        if self.trial.should_prune():
            self.pruned_at = epoch
            self.model.stop_training = True
            # Not a success: TensorBoard's HParams session of the run ends as FAILURE.
            self.model.stop_reason = UnsuccessfulStop(
                f"pruned by the study's pruner after epoch {epoch + 1}")


def final_value(metrics: dict, metric: str) -> float:
    """The run's final number for a per-epoch key: `val_accuracy` -> metrics["val"]["accuracy"]
    (measured on the final weights), `loss` -> metrics["train"]["loss"]."""
    stage, _, name = metric.partition("_")
    if stage == "val" and name:
        return float(metrics["val"][name])
    return float(metrics["train"][metric])


def _reason(error: BaseException) -> tuple[str, bool]:
    """(why the trial failed, whether it is the user's to fix: no traceback then)."""
    from graphfit.recipes.reading.problems import RecipeError
    from graphfit.recipes.running.training_run import TrainingFailed

    if isinstance(error, RecipeError):
        return f"the recipe is not valid at this point: {error}", True
    if isinstance(error, TrainingFailed):
        return str(error), True
    return f"{type(error).__name__}: {error}", False


class Objective:
    """Optuna's objective: suggests a point, trains its run, returns the metric."""

    def __init__(self, plan: StudyPlan, study_dir: str, verbose: bool = True, tracker=None):
        self.plan = plan
        self.study_dir = study_dir
        self.verbose = verbose
        self.tracker = tracker  # graphfit.tuning.tracking.StudyTracker, or None

    def _say(self, text: str) -> None:
        if self.verbose:
            print(text, flush=True)

    def _record(self, trial, run: str, logger, state: str, epochs: int | None,
                end: str | None = None) -> None:
        """The trial's state in its run directory (trial.json) and on its MLflow run (a tag;
        a pruned trial's run stays FINISHED: it trained and wrote its files as planned)."""
        write_trial_state(run, trial.number, state, epochs)
        if logger is not None and logger.run_id is not None:
            self.tracker.tag_state(logger.run_id, state, epochs)
        if logger is not None and end is not None:
            logger.end(end)

    def __call__(self, trial) -> float:
        from graphfit.recipes.running.training_run import TrainingFailed, train

        plan, started = self.plan, time.monotonic()
        assignment = plan.space.suggest(trial)
        run = os.path.abspath(os.path.join(self.study_dir, TRIALS, f"{trial.number:04d}"))
        trial.set_user_attr(RUN_DIR, run)
        point = describe(assignment)
        pruning = PruningCallback(trial, plan.metric)
        logger = self.tracker.callback(trial, run) if self.tracker else None
        try:
            recipe = trial_recipe(plan.recipe_path, plan.overrides, assignment)
            if logger:
                logger.use_recipe(recipe.config, run)
            extra = [pruning] + ([logger] if logger else [])
            result = train(recipe, run_dir=run, verbose=0, callbacks=extra)
            value = final_value(result.metrics, plan.metric)
            if not math.isfinite(value):
                raise TrainingFailed(f"{plan.metric} is {value}")
        except KeyboardInterrupt as interrupt:
            self._record(trial, run, logger, "failed", None, "KILLED")
            how = "SIGTERM" if isinstance(interrupt, Terminated) else "Ctrl-C"
            trial.set_user_attr(FAIL_REASON, f"interrupted ({how}); {resume_hint(run)}")
            raise
        except Exception as error:
            reason, expected = _reason(error)
            if expected:
                quiet_failure(trial.number)
            self._record(trial, run, logger, "failed", None, "FAILED")
            trial.set_user_attr(FAIL_REASON, reason)
            self._say(f"trial {trial.number} failed after {time.monotonic() - started:.1f} s "
                      f"[{point}]: {reason.splitlines()[0]}")
            raise
        seconds = time.monotonic() - started
        epochs = len(result.history.get("loss", []))
        self._record(trial, run, logger, "pruned" if pruning.pruned_at is not None
                     else "complete", epochs)
        if pruning.pruned_at is not None:
            self._say(f"trial {trial.number} pruned after epoch {pruning.pruned_at + 1} "
                      f"({plan.metric}={value:.4f}, {seconds:.1f} s) [{point}]")
            raise optuna().TrialPruned(f"pruned after epoch {pruning.pruned_at + 1}")
        self._say(f"trial {trial.number}: {plan.metric}={value:.4f} ({seconds:.1f} s) "
                  f"[{point}]")
        return value

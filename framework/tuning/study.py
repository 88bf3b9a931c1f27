"""Running a study: trials in this process or in `jobs` processes, on Optuna's storage.

The storage (SQLite in the study folder by default, or a PostgreSQL / MySQL URL that every
machine points at) holds the study: trial numbers are handed out by it, so no two processes,
on one machine or many, run the same trial. Running the same command again resumes the study
up to its `n_trials` (all processes together); a trial whose process died (Ctrl-C, a crash,
a kill) is marked failed, by the trial itself or, once its heartbeats stop, by the next
process that looks, and keeps its run directory.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sys

from graphfit.tuning import optuna_objects as objects
from graphfit.tuning.plan import StudyPlan, plan_study
from graphfit.tuning.termination import Terminated, sigterm_as_interrupt
from graphfit.tuning.trial import Objective

__all__ = ["run_study", "run_worker", "StudySettings", "counted_trials"]


@dataclasses.dataclass
class StudySettings:
    """Where and how a study runs (the command line's options)."""

    study_dir: str
    storage: str | None = None  # None: SQLite in study_dir
    jobs: int = 1
    verbose: bool = True
    mlflow: str | None = None  # a tracking URI, "" for the local store in the study folder
    threads: int | None = None  # TensorFlow threads per trial process

    @property
    def url(self) -> str:
        return self.storage or objects.default_storage(self.study_dir)


def counted_trials(study) -> int:
    """Trials started or finished (those another process is running count too)."""
    states = objects.optuna().trial.TrialState
    return len(study.get_trials(deepcopy=False, states=(
        states.COMPLETE, states.PRUNED, states.FAIL, states.RUNNING)))


class _Budget:
    """Stops this process's optimize once the whole study has its n_trials."""

    def __init__(self, n_trials: int):
        self.n_trials = n_trials

    def __call__(self, study, trial) -> None:
        if counted_trials(study) >= self.n_trials:
            study.stop()


def _tracker(plan: StudyPlan, settings: StudySettings, study):
    if settings.mlflow is None:
        return None
    from graphfit.tuning.tracking import StudyTracker

    return StudyTracker.for_study(plan, settings, study)


def _work(plan: StudyPlan, settings: StudySettings, study, share: int) -> None:
    if counted_trials(study) >= plan.tune["n_trials"]:
        return
    objective = Objective(plan, settings.study_dir, settings.verbose,
                          _tracker(plan, settings, study))
    study.optimize(objective, n_trials=share, timeout=plan.tune["timeout"],
                   catch=(Exception,), callbacks=[_Budget(plan.tune["n_trials"])],
                   gc_after_trial=True)


def run_worker(path: str, overrides: list, settings: StudySettings, index: int,
               share: int) -> None:
    """One trial process of `--jobs N` (spawned: a fresh interpreter)."""
    import warnings

    from graphfit.cli.quiet_tensorflow import import_tensorflow

    warnings.filterwarnings("ignore")
    import_tensorflow()
    if settings.threads:
        from graphfit.cli.threads import use_threads

        use_threads(settings.threads)
    plan = plan_study(path, overrides, check=False)
    storage = objects.open_storage(settings.url, plan)
    study = objects.open_study(plan, storage, index)
    try:
        with sigterm_as_interrupt():
            _work(plan, settings, study, share)
    except KeyboardInterrupt:
        sys.exit(130)


def _shares(remaining: int, jobs: int) -> list[int]:
    jobs = max(1, min(jobs, remaining))
    return [remaining // jobs + (1 if i < remaining % jobs else 0) for i in range(jobs)]


def _in_processes(plan: StudyPlan, settings: StudySettings, shares: list[int]) -> None:
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=run_worker, name=f"graphfit-tune-{index}",
                                 args=(plan.recipe_path, plan.overrides, settings, index,
                                       share))
                 for index, share in enumerate(shares)]
    for process in processes:
        process.start()
    try:
        for process in processes:
            process.join()
    except KeyboardInterrupt as interrupt:  # Ctrl-C reached them too: each marks its trial
        if isinstance(interrupt, Terminated):  # SIGTERM reached this process only
            for process in processes:
                process.terminate()
        for process in processes:
            process.join()
        raise
    failed = [p.name for p in processes if p.exitcode not in (0, 130)]
    if failed:
        raise RuntimeError(f"trial process(es) {', '.join(failed)} stopped with an error "
                           f"(exit codes {[p.exitcode for p in processes]}); run the same "
                           f"command again to resume the study")


def _check_locations(settings: StudySettings) -> None:
    """The --storage and --mlflow places, checked before the study folder is made."""
    from graphfit.tuning.locations import check_sqlite_folder, check_tracking_uri

    if settings.storage:
        check_sqlite_folder(settings.storage, "--storage")
    uri = settings.mlflow or (os.environ.get("MLFLOW_TRACKING_URI") if
                              settings.mlflow is not None else None)
    if uri:
        check_tracking_uri(uri)


def run_study(plan: StudyPlan, settings: StudySettings):
    """Runs (or resumes) the plan's study; writes the study folder's report.

    Returns:
        The `optuna.Study`.

    Raises:
        StudyError: the storage cannot be opened (a SQLite or MLflow folder that does not
            exist: refused before anything is created), or holds another study of that name.
    """
    from graphfit.tuning.report import write_report

    _check_locations(settings)  # before anything is created
    created = not os.path.isdir(settings.study_dir)
    os.makedirs(settings.study_dir, exist_ok=True)
    try:
        storage = objects.open_storage(settings.url, plan)
        study = objects.open_study(plan, storage)
    except objects.StudyError:
        if created and not os.listdir(settings.study_dir):
            os.rmdir(settings.study_dir)  # leave no empty study folder behind
        raise
    objects.optuna().storages.fail_stale_trials(study)
    remaining = plan.tune["n_trials"] - counted_trials(study)
    if settings.verbose:
        done = plan.tune["n_trials"] - remaining
        print(f"study {plan.study_name!r} in {objects.shown_url(settings.url)}: "
              f"{max(remaining, 0)} of {plan.tune['n_trials']} trials to run"
              + (f" ({done} before)" if done else "")
              + f"; {plan.direction} {plan.metric}", flush=True)
    if remaining <= 0:  # also with --quiet: it is why nothing runs
        done = plan.tune["n_trials"] - remaining
        print(f"the study already has its tune.n_trials={plan.tune['n_trials']} trials "
              f"(failed and pruned ones count); to run more, raise it, e.g. "
              f"--set tune.n_trials={done + plan.tune['n_trials']}", flush=True)
    tracker = _tracker(plan, settings, study)  # the study's MLflow run, before any trial
    try:
        with sigterm_as_interrupt():
            if remaining > 0 and settings.jobs <= 1:
                _work(plan, settings, study, remaining)
            elif remaining > 0:
                _in_processes(plan, settings, _shares(remaining, settings.jobs))
    finally:  # the report of what ran, also after Ctrl-C or SIGTERM
        write_report(study, plan, settings.study_dir, settings.verbose)
        if tracker is not None:
            tracker.finish(settings.study_dir)
    return study

"""Optuna's sampler, pruner, storage and study for a `StudyPlan` (Optuna is the optional extra
`graphfit[tune]`; nothing here is imported before a study runs)."""

from __future__ import annotations

import json
import os
import time

import numpy as np

__all__ = ["optuna", "make_sampler", "make_pruner", "open_storage", "open_study",
           "shown_url", "StudyError", "FAIL_REASON", "RUN_DIR", "fail_reason"]

FAIL_REASON = "fail_reason"  # the user attribute that says why a trial failed
RUN_DIR = "run_dir"  # ... and where its run directory is
SPACE_ATTR = "graphfit_space"


class StudyError(ValueError):
    """A study that cannot start (its storage, or a clash with the stored study)."""


def optuna():
    """The optuna module, or a clear error naming the extra to install."""
    try:
        import optuna as module
    except ImportError:
        raise StudyError("graphfit tune needs Optuna: pip install 'graphfit[tune]'") from None
    import warnings

    module.logging.set_verbosity(module.logging.WARNING)
    # Heartbeats and fail_stale_trials are marked experimental since Optuna 2.9.
    warnings.filterwarnings("ignore", category=module.exceptions.ExperimentalWarning)
    return module


def _options(entry: dict) -> dict:
    return {key: value for key, value in entry.items() if key != "type"}


def make_sampler(plan, index: int, trials_before: int = 0):
    """The plan's sampler; process `index` of a study gets seed + index, so two processes
    never draw the same random points. A study resumed with `trials_before` trials in its
    storage mixes that count into the seed: the same seed would replay the random points of
    the first run's trials (TPE's and the random sampler's start draw them from the seed)."""
    samplers = optuna().samplers
    entry, seed = plan.tune["sampler"], plan.seed + index
    if trials_before:
        seed = int(np.random.SeedSequence([plan.seed, index, trials_before]).generate_state(1)[0])
    kind, options = entry["type"], _options(entry)
    try:
        if kind == "grid":
            return samplers.GridSampler(plan.space.grid(), seed=seed, **options)
        if kind == "cmaes":
            return samplers.CmaEsSampler(seed=seed, **options)
        if kind == "random":
            return samplers.RandomSampler(seed=seed, **options)
        return samplers.TPESampler(seed=seed, **options)
    except TypeError as error:  # an option the sampler does not take
        raise ValueError(f"{kind}: {error}") from None


def make_pruner(plan, index: int = 0):
    """The plan's pruner (`none`: Optuna's NopPruner)."""
    pruners = optuna().pruners
    entry = plan.tune["pruner"]
    kind, options = entry["type"], _options(entry)
    classes = {"median": pruners.MedianPruner, "successive_halving":
               pruners.SuccessiveHalvingPruner, "none": pruners.NopPruner}
    try:
        return classes[kind](**options)
    except TypeError as error:
        raise ValueError(f"{kind}: {error}") from None


def shown_url(url: str) -> str:
    """The storage URL with its password hidden."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: shown as given, cut
        return url[:80]


STALE_REASON = "its process stopped during the trial (killed or crashed: no heartbeat)"


def fail_reason(trial) -> str:
    """Why a failed trial failed: what the trial recorded, else its process died (Optuna
    marked it failed when its heartbeats stopped, or it was interrupted before recording);
    then whether its run directory can be continued (it holds an intact checkpoint)."""
    recorded = trial.user_attrs.get(FAIL_REASON)
    if recorded:
        return recorded
    run = trial.user_attrs.get(RUN_DIR)
    if not run:
        return STALE_REASON
    from graphfit.tuning.resume_hint import resume_hint

    return f"{STALE_REASON}; {resume_hint(run)}"


def open_storage(url: str, plan):
    """Optuna's RDB storage at `url` with heartbeats, connected now (a StudyError that says
    why, before any trial, if it cannot be reached)."""
    module = optuna()
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else \
        {"pool_pre_ping": True}
    for attempt in range(3):
        try:
            return module.storages.RDBStorage(
                url, engine_kwargs=engine, heartbeat_interval=plan.tune["heartbeat_interval"],
                grace_period=plan.tune["grace_period"])
        except ModuleNotFoundError as error:
            raise StudyError(f"--storage {shown_url(url)}: its database driver is not "
                             f"installed ({error.name}); for PostgreSQL pip install "
                             f"'psycopg[binary]', for MySQL pip install pymysql") from None
        except Exception as error:  # SQLAlchemy's: bad URL, no server, refused login, ...
            if attempt < 2 and _may_pass(error):
                time.sleep(1.0)  # another process creating the tables at the same moment
                continue
            reason = str(getattr(error, "orig", None) or error).strip().splitlines()
            raise StudyError(f"--storage {shown_url(url)}: cannot open the study database: "
                             f"{reason[0] if reason else type(error).__name__}. Check the URL "
                             f"(dialect+driver://user:password@host:port/database) and that "
                             f"the server is running and reachable") from None


def _may_pass(error: Exception) -> bool:
    """Errors of two processes creating Optuna's tables at once (not a wrong URL)."""
    text = str(error).lower()
    return any(word in text for word in ("already exists", "duplicate", "unique constraint",
                                         "database is locked"))


def open_study(plan, storage, index: int = 0):
    """Creates the study, or loads it to resume; refuses one searched over another space or
    in the other direction."""
    module = optuna()
    study = module.create_study(storage=storage, study_name=plan.study_name,
                                direction=plan.direction, load_if_exists=True,
                                sampler=make_sampler(plan, index), pruner=make_pruner(plan))
    if study.trials:  # resumed: new random points, not the first run's again
        study.sampler = make_sampler(plan, index, len(study.trials))
    space = json.dumps({"space": plan.tune["space"], "metric": plan.metric}, sort_keys=True)
    stored = study.user_attrs.get(SPACE_ATTR)
    if stored is None:
        study.set_user_attr(SPACE_ATTR, space)
    elif stored != space or study.direction.name.lower() != plan.direction:
        raise StudyError(f"the study {plan.study_name!r} in this storage searched another "
                         f"space, metric or direction; give the recipe another "
                         f"tune.study_name (or --study-dir) for a new study")
    return study


def default_storage(study_dir: str) -> str:
    """SQLite in the study folder."""
    return "sqlite:///" + os.path.abspath(os.path.join(study_dir, "study.db"))


__all__ += ["default_storage"]

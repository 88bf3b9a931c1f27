"""A resumed study draws new points: its sampler's seed mixes in the trials the storage
already holds (the recipe's seed alone replayed the first run's random points, trial for
trial), and a fresh study from the same seed still draws the same points as before."""

import types

import optuna

from graphfit.tuning import optuna_objects


def _plan(kind):
    return types.SimpleNamespace(
        tune={"sampler": {"type": kind}, "pruner": {"type": "none"}, "space": {"x": "x"}},
        seed=7, study_name="s", direction="minimize", metric="loss")


def _run(study, trials):
    study.optimize(lambda trial: trial.suggest_float("x", 0.0, 1.0), n_trials=trials)
    return [t.params["x"] for t in study.trials]


def test_a_resumed_study_draws_other_points_than_its_first_run():
    for kind in ("tpe", "random"):
        storage = optuna.storages.InMemoryStorage()
        first = _run(optuna_objects.open_study(_plan(kind), storage), 3)
        resumed = _run(optuna_objects.open_study(_plan(kind), storage), 3)
        assert resumed[:3] == first and not set(resumed[3:]) & set(first), kind
        again = _run(optuna_objects.open_study(_plan(kind), optuna.storages.InMemoryStorage()), 3)
        assert again == first, kind  # the seed still makes a fresh study reproducible

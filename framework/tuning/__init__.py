"""graphfit.tuning: hyperparameter search from a recipe's `tune:` section, on Optuna.

`graphfit tune RECIPE` checks the whole space before the first trial (`plan_study`), runs each
trial as an ordinary run directory (`Objective`, `PruningCallback`), on one machine or many
through Optuna's storage (`run_study`), and writes the study folder's report. `graphfit
compare` tabulates runs (`comparison_table`). Optuna is the optional extra `graphfit[tune]`.
The names load when first used, so the command line starts without them.
"""

import importlib

__all__ = ["StudyPlan", "plan_study", "SearchSpace", "StudySettings", "run_study",
           "Objective", "PruningCallback", "comparison_table"]

_HOMES = {"StudyPlan": "plan", "plan_study": "plan", "SearchSpace": "space",
          "StudySettings": "study", "run_study": "study", "Objective": "trial",
          "PruningCallback": "trial", "comparison_table": "compare"}


def __getattr__(name):
    if name in _HOMES:
        return getattr(importlib.import_module(f"graphfit.tuning.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'graphfit.tuning' has no attribute {name!r}")

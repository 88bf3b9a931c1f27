"""Everything `graphfit tune` checks before the first trial, as one `StudyPlan`.

The study's recipe and its `tune:` section (the usual file:line:col problems); every corner of
the space as a recipe of its own (each problem reported at the `tune.space` entry that leads
to it, with the point and the recipe's own message); the metric against what a run of the
recipe logs; the sampler and pruner with their options. Nothing runs before all of it passes.
"""

from __future__ import annotations

import dataclasses

from graphfit.recipes.reading.problems import Problem, RecipeError
from graphfit.recipes.reading.recipe import Recipe, load_recipe
from graphfit.recipes.reading.tune_schema import direction_of, is_type_path, space_of
from graphfit.tuning.space import SearchSpace, describe, overrides

__all__ = ["StudyPlan", "plan_study", "trial_recipe"]

NO_TUNE = "tune=null"  # a trial's recipe is an ordinary recipe: no tune section


@dataclasses.dataclass
class StudyPlan:
    """A checked study: the recipe, its resolved `tune:` section and the search space."""

    recipe_path: str
    overrides: list[str]
    recipe: Recipe
    tune: dict
    space: SearchSpace
    metric: str
    direction: str
    corners_checked: int = 0

    @property
    def study_name(self) -> str:
        return self.tune["study_name"] or self.recipe.config["name"]

    @property
    def seed(self) -> int:
        seed = self.tune["seed"]
        return self.recipe.config["seed"] if seed is None else seed


def trial_recipe(path: str, user_overrides: list[str], assignment) -> Recipe:
    """The ordinary recipe of one point of the space (RecipeError if it is not valid)."""
    return load_recipe(path, list(user_overrides) + [NO_TUNE] + overrides(assignment))


def _load_study_recipe(path: str, user_overrides: list[str]) -> Recipe:
    recipe = load_recipe(path, user_overrides)
    if recipe.config.get("tune") is None:
        raise RecipeError([Problem((), "has no tune: section, so there is nothing to search; "
                                       "add tune: {metric: ..., space: {...}} (see "
                                       "recipes/digits_tune.yaml)", recipe.position(()))])
    return recipe


def _parts(key: str) -> tuple:
    from graphfit.recipes.reading.overrides import parse_key

    return parse_key(key)


def _blame(problem: Problem, assignment) -> tuple:
    """The assignment entry most likely behind a corner's problem: the one whose key shares
    the longest start with the problem's key (the last such: an option's own keys)."""
    best, best_length = assignment[0], 0
    for entry in assignment:
        length = 0
        for mine, theirs in zip(_parts(entry[0]), problem.path):
            if mine != theirs:
                break
            length += 1
        if length and length >= best_length:
            best, best_length = entry, length
    return best


def _entry_path(space: SearchSpace, key: str) -> tuple:
    """The position path of `key` inside tune.space (inside a choice's option if it is one)."""
    for top, spec in space.space.items():
        if top == key:
            return ("tune", "space", key)
        for option, branch in (spec.get("branches") or {}).items():
            if key in (branch or {}):
                return ("tune", "space", top, "choice", option, key)
    return ("tune", "space")


def _corner_problems(plan: StudyPlan, error: RecipeError, assignment) -> list[tuple]:
    found = []
    for problem in error.problems:
        key, value, _ = _blame(problem, assignment)
        path = _entry_path(plan.space, key)
        hint = ""
        spec = plan.space.space.get(key, {})
        if is_type_path(_parts(key)) and spec.get("type") == "choice" and not spec["branches"]:
            hint = (f" (a choice of types whose options need keys of their own is written "
                    f"{key}: {{choice: {{{value}: {{{key.rsplit('.', 1)[0]}.<argument>: ...}},"
                    f" ...}}}}: the section is rebuilt from each option's keys)")
        message = (f"at the point {{{describe(assignment)}}}{hint} the recipe is not "
                   f"valid: {problem}")
        found.append((Problem(path, message, plan.recipe.position(path)),
                      (path, problem.path, problem.message)))
    return found


def _check_corners(plan: StudyPlan) -> None:
    problems: list[Problem] = []
    seen = set()
    corners = plan.space.corners()
    for assignment in corners:
        try:
            trial_recipe(plan.recipe_path, plan.overrides, assignment)
        except RecipeError as error:
            for problem, key in _corner_problems(plan, error, assignment):
                if key not in seen:  # the same mistake at many corners is one problem
                    seen.add(key)
                    problems.append(problem)
    plan.corners_checked = len(corners)
    if problems:
        raise RecipeError(problems)


def _logged_keys(recipe: Recipe) -> list[str]:
    """The per-epoch log keys a run of `recipe` writes (its model built on its data)."""
    from graphfit.recipes.running.runner import prepare

    prepared = prepare(recipe, distribute=False)
    names = prepared.model.metrics_names
    stages = [""] + (["val_"] if prepared.splits.val is not None else [])
    return [stage + name for stage in stages for name in names]


def _check_metric(plan: StudyPlan, first_corner) -> None:
    from graphfit.core.registry import did_you_mean

    keys = _logged_keys(trial_recipe(plan.recipe_path, plan.overrides, first_corner))
    written = plan.tune["metric"] is not None
    metric = plan.tune["metric"] or ("val_loss" if "val_loss" in keys else "loss")
    path = ("tune", "metric") if written else ("tune",)
    if metric.startswith("test_"):
        message = (f"{metric!r} is measured on the test split, which a search must not see "
                   f"(the best trial's test numbers would be too good); use the validation "
                   f"split's {'val_' + metric[5:]!r}")
    elif metric not in keys:
        hint = did_you_mean(metric, keys, " (did you mean {!r}?)", otherwise="")
        validation = "" if any(key.startswith("val_") for key in keys) else \
            " (val_*: add training.validation_split)"
        message = (f"{metric!r} is not logged by this recipe's runs{hint}. They log: "
                   f"{', '.join(keys)}{validation}")
    else:
        plan.metric = metric
        plan.direction = direction_of({**plan.tune, "metric": metric})
        return
    raise RecipeError([Problem(path, message, plan.recipe.position(path))])


def _check_search_objects(plan: StudyPlan) -> None:
    from graphfit.tuning.optuna_objects import make_pruner, make_sampler

    for key, make in (("sampler", make_sampler), ("pruner", make_pruner)):
        try:
            make(plan, 0)
        except (TypeError, ValueError) as error:
            path = ("tune", key)
            raise RecipeError([Problem(path, str(error), plan.recipe.position(path))]) \
                from None


def plan_study(path: str, user_overrides=(), check: bool = True) -> StudyPlan:
    """Reads the study's recipe and checks it all (see the module's docstring).

    Args:
        path: the recipe file with a `tune:` section.
        user_overrides: `--set key=value` strings (tune.* keys included).
        check: False in a trial process of a study already checked (the corners, the metric
            and the sampler are not checked again).

    Raises:
        RecipeError: every problem, positioned in the recipe file.
    """
    user_overrides = list(user_overrides)
    recipe = _load_study_recipe(path, user_overrides)
    tune = recipe.config["tune"]
    plan = StudyPlan(path, user_overrides, recipe, tune, SearchSpace(space_of(tune["space"])),
                     tune["metric"] or "val_loss", direction_of(tune))
    if check:
        _check_corners(plan)
        _check_search_objects(plan)
        _check_metric(plan, plan.space.corners()[0])
    elif tune["metric"] is None:
        plan.metric = "val_loss" if recipe.config["training"]["validation_split"] > 0 or \
            recipe.config["training"]["validation_data"] is not None else "loss"
        plan.direction = direction_of({**tune, "metric": plan.metric})
    return plan

"""graphfit.recipes: YAML recipes, checked before any training, and the runs they produce.

    >>> import graphfit as gf
    >>> recipe = gf.recipes.recipe_from_text(
    ...     "data: {source: moons}\\n"
    ...     "model: [{type: Dense, units: 1}]\\n"
    ...     "loss: {type: BinaryCrossentropy, from_logits: true}\\n", "moons.yaml")
    >>> recipe.training["epochs"], recipe.optimizer["type"], recipe.data["n_samples"]
    (10, 'Adam', 500)
"""

from graphfit.recipes.reading.problems import Position, Problem, RecipeError
from graphfit.recipes.reading.recipe import Recipe, load_recipe, recipe_from_text
from graphfit.recipes.running.runner import evaluate_run, load_run, prepare
from graphfit.recipes.running.training_run import RunResult, resume, train

__all__ = ["Position", "Problem", "Recipe", "RecipeError", "RunResult", "evaluate_run",
           "load_recipe", "load_run", "prepare", "recipe_from_text", "resume", "train"]

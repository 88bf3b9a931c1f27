"""graphfit.recipes: YAML recipes, checked before any training, and the runs they produce.

    >>> import graphfit as gf
    >>> recipe = gf.recipes.recipe_from_text(
    ...     "data: {source: moons}\\n"
    ...     "model: [{type: Dense, units: 1}]\\n"
    ...     "loss: {type: BinaryCrossentropy, from_logits: true}\\n", "moons.yaml")
    >>> recipe.training["epochs"], recipe.optimizer["type"], recipe.data["n_samples"]
    (10, 'Adam', 500)

The names below load on first use (PEP 562): reading a recipe's file and YAML needs no
TensorFlow, so `graphfit validate` reports a syntax error or a missing file before importing
it; the runs (and the checks that look up layers and optimizers) import it when they start.
"""

from graphfit.core.lazy_names import lazy_names as _lazy_names

# public name -> its module
_LAZY = {
    "Position": "graphfit.recipes.reading.problems",
    "Problem": "graphfit.recipes.reading.problems",
    "Recipe": "graphfit.recipes.reading.recipe",
    "RecipeError": "graphfit.recipes.reading.problems",
    "RunResult": "graphfit.recipes.running.training_run",
    "evaluate_run": "graphfit.recipes.running.runner",
    "load_recipe": "graphfit.recipes.reading.recipe",
    "load_run": "graphfit.recipes.running.runner",
    "prepare": "graphfit.recipes.running.runner",
    "recipe_from_text": "graphfit.recipes.reading.recipe",
    "resume": "graphfit.recipes.running.training_run",
    "train": "graphfit.recipes.running.training_run",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_names(__name__, _LAZY, globals())

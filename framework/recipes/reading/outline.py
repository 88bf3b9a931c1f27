"""A recipe's outline: is it a mapping of sections at all? Checked before TensorFlow.

A recipe that is empty or is not a mapping (a list, a scalar: a stray dash or colon) has
nothing more to check, so it is reported from here, before the full check imports TensorFlow
to look up layers, optimizers and losses (several seconds). The full check
(`sections.check_recipe`) runs only on a recipe whose outline is sound, so each problem is
found in one place.

Everything inside the sections, unknown section names included, is left to the full check:
a recipe reports every problem at once, and an unknown key belongs beside the others (a bad
layer, a missing section) that need the registries.

Example:

    >>> from graphfit.recipes.reading.schema import Checker
    >>> from graphfit.recipes.reading.yaml_source import parse_yaml
    >>> checker = Checker(parse_yaml("- data\\n- model\\n", "my.yaml"))
    >>> check_outline(checker)
    >>> print(checker.problems[0])  # doctest: +ELLIPSIS
    my.yaml:1:1: a recipe must be a mapping of sections (name, seed, ...), got ['data', ...
"""

from __future__ import annotations

from graphfit.recipes.reading.schema import Checker, shown

__all__ = ["RECIPE_SECTIONS", "check_outline", "is_many_fits"]

# The sections of a model's recipe, in the order messages list them; `sections.RECIPE` holds
# the schema of each (a test keeps the two in step).
RECIPE_SECTIONS = ("name", "seed", "imports", "data", "model", "loss", "metrics", "optimizer",
                   "training", "callbacks", "distribute", "run_dir", "tune")


def is_many_fits(config) -> bool:
    """Whether a (resolved or raw) recipe is a `fit_many:` recipe."""
    return isinstance(config, dict) and "fit_many" in config


def check_outline(checker: Checker) -> None:
    """Reports a recipe that is empty or is not a mapping of sections."""
    data = checker.document.data
    if data is None:
        checker.report((), "the recipe is empty: it needs at least the sections data, model "
                           "and loss (see recipes/quickstart.yaml)")
    elif not isinstance(data, dict):
        checker.report((), f"a recipe must be a mapping of sections ({', '.join(RECIPE_SECTIONS)})"
                           f", got {shown(data)}")

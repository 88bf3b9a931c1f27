"""A recipe's outline: the checks of its shape that need nothing but the YAML.

A recipe that is empty, is not a mapping of sections, or names a section that does not exist
is reported from here, before the full check imports TensorFlow to look up layers,
optimizers and losses (several seconds): these are the mistakes made most often while a
recipe is being written. The full check (`sections.check_recipe`) runs only on a recipe
whose outline is sound, so each problem is found in one place.

Example:

    >>> from graphfit.recipes.reading.schema import Checker
    >>> from graphfit.recipes.reading.yaml_source import parse_yaml
    >>> checker = Checker(parse_yaml("data: {source: moons}\\ntrainig: {epochs: 3}\\n", "my.yaml"))
    >>> check_outline(checker)
    >>> print(checker.problems[0])  # doctest: +ELLIPSIS
    my.yaml:2:1: trainig: unknown key 'trainig'; did you mean 'training'? Valid keys: name, ...
"""

from __future__ import annotations

from graphfit.recipes.reading.schema import AnyValue, Checker, Field, Section, shown

__all__ = ["RECIPE_SECTIONS", "check_outline", "is_many_fits"]

# The sections of a model's recipe, in the order messages list them; `sections.RECIPE` holds
# the schema of each (a test keeps the two in step).
RECIPE_SECTIONS = ("name", "seed", "imports", "data", "model", "loss", "metrics", "optimizer",
                   "training", "callbacks", "distribute", "run_dir", "tune")

_OUTLINE = Section({name: Field(AnyValue(), None) for name in RECIPE_SECTIONS})


def is_many_fits(config) -> bool:
    """Whether a (resolved or raw) recipe is a `fit_many:` recipe."""
    return isinstance(config, dict) and "fit_many" in config


def check_outline(checker: Checker) -> None:
    """Reports an empty recipe, one that is not a mapping, and unknown sections (a
    `fit_many:` recipe's own keys are left to its schema)."""
    data = checker.document.data
    if data is None:
        checker.report((), "the recipe is empty: it needs at least the sections data, model "
                           "and loss (see recipes/quickstart.yaml)")
    elif not isinstance(data, dict):
        checker.report((), f"a recipe must be a mapping of sections ({', '.join(RECIPE_SECTIONS)})"
                           f", got {shown(data)}")
    elif not is_many_fits(data):
        _OUTLINE.check_unknown_keys(data, (), checker)

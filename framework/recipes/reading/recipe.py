"""Loading a recipe: its draft (YAML with positions, overrides, the outline), then imports
and the whole schema.

The draft needs no TensorFlow (`draft`); the whole schema does (the layer, optimizer and loss
registries), so `check_draft` imports it on first use, not this module.

Example:

    >>> text = "data: {source: digits}\\nmodel: [{type: Dense, units: 10}]\\nloss: mse\\n"
    >>> recipe = recipe_from_text(text, "quick.yaml", overrides=["training.epochs=2"],
    ...                           default_name="quick")
    >>> recipe.name, recipe.training["epochs"], recipe.training["batch_size"]
    ('quick', 2, 32)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml

from graphfit.recipes.reading.draft import Draft, draft_from_text, read_draft
from graphfit.recipes.reading.problems import Position, RecipeError, in_reading_order
from graphfit.recipes.reading.schema import Checker
from graphfit.recipes.reading.user_code import code_references

__all__ = ["Recipe", "check_draft", "load_recipe", "recipe_from_text"]


@dataclasses.dataclass
class Recipe:
    """A checked recipe with every default filled in.

    Attributes:
        config: the resolved recipe as plain data (what `print-config` shows and a run saves).
        source: the file it was read from.
        overrides: the `key=value` overrides applied to it.
        user_code: the modules, classes and functions of the user's that the recipe imports
            or runs (`CodeReference`s, in reading order; `str()` of each is one line to print),
            including those of a `model.base` run's recipe.
        safe: read in safe mode: no user code was imported or called, so the entries that
            name user code are listed in `user_code` but were not checked.
    """

    config: dict[str, Any]
    source: str
    overrides: list[str]
    positions: dict = dataclasses.field(default_factory=dict, repr=False)
    user_code: list = dataclasses.field(default_factory=list, repr=False)
    safe: bool = False

    def __getattr__(self, section: str):
        config = self.__dict__.get("config", {})
        if section in config:
            return config[section]
        raise AttributeError(section)

    def position(self, path: tuple) -> Position | None:
        """Where `path` (or its nearest ancestor) was written, for run-time errors."""
        path = tuple(path)
        while path not in self.positions and path:
            path = path[:-1]
        return self.positions.get(path)

    def to_yaml(self) -> str:
        """The resolved recipe as YAML; itself a valid recipe that reproduces the run."""
        header = f"# graphfit recipe resolved from {self.source}"
        if self.overrides:
            header += " with --set " + " --set ".join(self.overrides)
        return header + "\n" + yaml.safe_dump(self.config, sort_keys=False,
                                              default_flow_style=False, width=100)


def recipe_from_text(text: str, source: str, overrides=(), base_dir: str | None = None,
                     default_name: str = "recipe", safe: bool = False,
                     data_files: bool = True) -> Recipe:
    """Checks recipe text (see `load_recipe`); `source` is the name used in messages."""
    draft = draft_from_text(text, source, overrides, base_dir=base_dir,
                            default_name=default_name)
    return check_draft(draft, safe=safe, data_files=data_files)


def load_recipe(path: str, overrides=(), safe: bool = False, data_files: bool = True) -> Recipe:
    """Reads and checks a recipe file, reporting every problem at once.

    Args:
        path: the YAML file.
        overrides: `key=value` strings, as given to `--set`.
        safe: check everything that can be checked without importing or calling any of the
            user's code (`imports:`, `class_path:`, `data.function:` are listed in
            `Recipe.user_code`, not imported). For recipes from people you do not trust.
        data_files: check that the data files exist and hold the columns named; False for a
            finished run's recipe read to predict or export, whose training data may be gone.

    Returns:
        The `Recipe`, defaults filled in, file paths made absolute.

    Raises:
        RecipeError: listing every problem as `file:line:col: dotted.key: message`. A problem
            of the file, its YAML, an override or the outline (`draft.read_draft`) is reported
            alone, before the rest is checked.
    """
    return check_draft(read_draft(path, overrides), safe=safe, data_files=data_files)


def check_draft(draft: Draft, safe: bool = False, data_files: bool = True) -> Recipe:
    """Checks a draft against the whole schema (imports TensorFlow: the registries), with
    its duplicate keys; `safe` and `data_files` as for `load_recipe`."""
    from graphfit.recipes.reading.sections import check_recipe

    document = draft.document
    checker = Checker(document)
    checker.problems.extend(document.problems)  # duplicate keys, reported with the rest
    checker.base_dir = draft.base_dir
    checker.safe = safe
    checker.data_files = data_files
    checker.base_references = []  # the user code a `model.base` run's recipe would run
    references = code_references(document.data, document.position)  # before checks add keys
    config = check_recipe(checker, draft.default_name)
    if checker.problems:
        raise RecipeError(in_reading_order(checker.problems))
    return Recipe(config, draft.source, draft.overrides, document.positions,
                  references + checker.base_references, safe)

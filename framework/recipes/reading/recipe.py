"""Loading a recipe: YAML with positions, overrides, imports, then the whole schema.

Example:

    >>> text = "data: {source: digits}\\nmodel: [{type: Dense, units: 10}]\\nloss: mse\\n"
    >>> recipe = recipe_from_text(text, "quick.yaml", overrides=["training.epochs=2"],
    ...                           default_name="quick")
    >>> recipe.name, recipe.training["epochs"], recipe.training["batch_size"]
    ('quick', 2, 32)
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import yaml

from graphfit.recipes.reading.overrides import apply_overrides
from graphfit.recipes.reading.problems import Position, Problem, RecipeError
from graphfit.recipes.reading.schema import Checker
from graphfit.recipes.reading.sections import check_recipe
from graphfit.recipes.reading.user_code import code_references
from graphfit.recipes.reading.yaml_source import MAX_BYTES, parse_yaml, size_problem

__all__ = ["Recipe", "load_recipe", "recipe_from_text"]


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
    document = parse_yaml(text, source, keep_going=True)
    document.positions.setdefault((), Position(source, 1, 1))
    overrides = list(overrides)
    apply_overrides(document, overrides)
    checker = Checker(document)
    checker.problems.extend(document.problems)  # duplicate keys, reported with the rest
    checker.base_dir = os.path.abspath(base_dir or os.getcwd())
    checker.safe = safe
    checker.data_files = data_files
    checker.base_references = []  # the user code a `model.base` run's recipe would run
    references = code_references(document.data, document.position)  # before checks add keys
    config = check_recipe(checker, default_name)
    if checker.problems:
        raise RecipeError(sorted(checker.problems, key=_reading_order))
    return Recipe(config, source, overrides, document.positions,
                  references + checker.base_references, safe)


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
        RecipeError: listing every problem as `file:line:col: dotted.key: message`.
    """
    if not os.path.isfile(path):
        where = Position(path, 0, 0)
        message = ("is a directory; give the recipe's .yaml file" if os.path.isdir(path)
                   else "recipe file not found")
        raise RecipeError([Problem((), message, where)])
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)  # never more: a huge file is refused unread
            size = max(os.fstat(handle.fileno()).st_size, len(raw))
    except OSError as error:
        raise RecipeError([Problem((), f"cannot read the recipe: {error}",
                                   Position(path, 0, 0))]) from None
    too_large = size_problem(raw, size, path)
    if too_large:
        raise RecipeError([too_large])
    text = _decode(raw, path)
    stem = os.path.splitext(os.path.basename(path))[0]
    return recipe_from_text(text, path, overrides, base_dir=os.path.dirname(os.path.abspath(path)),
                            default_name=stem, safe=safe, data_files=data_files)


def _decode(raw: bytes, path: str) -> str:
    """The recipe's text; bytes that are not UTF-8 are reported at their line and column."""
    try:
        return raw.decode("utf-8-sig")  # a byte-order mark from an editor is harmless
    except UnicodeDecodeError as error:
        start = error.start
        line_start = raw.rfind(b"\n", 0, start) + 1
        line = raw.count(b"\n", 0, start) + 1
        column = len(raw[line_start:start].decode("utf-8", errors="replace")) + 1
        raise RecipeError([Problem((), f"the recipe is not UTF-8 text: the byte "
                                       f"0x{raw[start]:02x} cannot be read; save the file as "
                                       f"UTF-8", Position(path, line, column))]) from None


def _reading_order(problem: Problem):
    position = problem.position
    is_override = position is None or position.line == 0
    return (is_override, position.line if position else 0, position.column if position else 0)

"""Recipe problems: what is wrong, at which key, at which line and column.

Every check of a recipe adds `Problem`s to a list instead of raising at the first one, so a
user sees all of them at once; `RecipeError` carries the list and prints one line per problem in
the form compilers use, which editors and terminals turn into links:

    recipes/my.yaml:12:7: model.layers[1].units: must be an integer >= 1, got -3

Example:

    >>> problem = Problem(("training", "epochs"), "must be an integer >= 1, got 0",
    ...                   Position("my.yaml", 4, 11))
    >>> print(RecipeError([problem]))
    my.yaml:4:11: training.epochs: must be an integer >= 1, got 0
"""

from __future__ import annotations

import dataclasses

__all__ = ["Position", "Problem", "RecipeError", "dotted"]


@dataclasses.dataclass(frozen=True)
class Position:
    """Where a value was written: a file and its 1-based line and column, or an override
    (`--set key=value`, line 0)."""

    source: str
    line: int
    column: int

    def __str__(self) -> str:
        # An override has no lines: line 0 prints the override itself.
        return f"{self.source}:{self.line}:{self.column}" if self.line else self.source


def dotted(path) -> str:
    """("model", "layers", 1, "units") -> "model.layers[1].units"."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(recipe)"


@dataclasses.dataclass
class Problem:
    """One thing wrong with a recipe."""

    path: tuple
    message: str
    position: Position | None = None

    def __str__(self) -> str:
        where = f"{self.position}: " if self.position else ""
        key = f"{dotted(self.path)}: " if self.path else ""
        return f"{where}{key}{self.message}"


class RecipeError(ValueError):
    """A recipe (or an override of it) is not valid; `problems` lists every problem found.

    The command line prints `str(error)` and exits with code 2, without a traceback.
    """

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))

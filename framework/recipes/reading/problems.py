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
import re

__all__ = ["Position", "Problem", "RecipeError", "dotted", "in_reading_order", "shorten",
           "short_repr"]

SHOWN_LENGTH = 80  # a value longer than this is cut in messages (a recipe may hold megabytes)
_MESSAGE_LENGTH = 2000  # the last guard: no problem line is longer than this
# A quoted run this long is a value echoed back (by a constructor's own message, say). An
# opening quote follows no letter or digit (a bytes or raw prefix aside) and a closing one is
# followed by none, so the apostrophes of prose ("class's records") never pair up and cut
# the advice between them.
_LONG_QUOTED = re.compile(r"(?:(?<![^\W_])|(?<=\b[bBrRuU]))(?:'[^'\n]{200,}'|\"[^\"\n]{200,}\")"
                          r"(?![^\W_])")


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


def shorten(text: str, limit: int = SHOWN_LENGTH) -> str:
    """`text`, cut to `limit` characters with "…" when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_repr(value, limit: int = SHOWN_LENGTH) -> str:
    """`repr(value)` for a message, cut to `limit` characters with "…" when longer."""
    if isinstance(value, str) and len(value) > limit:
        value = value[:limit]  # never build the repr of megabytes just to cut it
    return shorten(repr(value), limit)


def dotted(path) -> str:
    """("model", "layers", 1, "units") -> "model.layers[1].units"; a mapping key that is a
    number (a schedule's epoch "10") is written as an index too: "schedule[10]"."""
    text = ""
    for part in path:
        part = part if isinstance(part, int) else shorten(str(part))
        indexed = isinstance(part, int) or (part.isdigit() and text)
        text += f"[{part}]" if indexed else (f".{part}" if text else part)
    return text or "(recipe)"


def _short_message(message: str) -> str:
    message = _LONG_QUOTED.sub(lambda match: shorten(match.group(0)), message)
    return shorten(message, _MESSAGE_LENGTH)


@dataclasses.dataclass
class Problem:
    """One thing wrong with a recipe."""

    path: tuple
    message: str
    position: Position | None = None

    def __post_init__(self):
        self.message = _short_message(self.message)

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


def in_reading_order(problems) -> list[Problem]:
    """The problems sorted as the file reads: by line and column, overrides (line 0) last."""
    def order(problem: Problem):
        position = problem.position
        is_override = position is None or position.line == 0
        return (is_override, position.line if position else 0,
                position.column if position else 0)

    return sorted(problems, key=order)

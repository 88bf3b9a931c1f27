"""A recipe's draft: its file read, its YAML parsed, the overrides applied, its outline
checked; everything that needs no TensorFlow.

`graphfit validate`, `train` and `print-config` read the draft first, so a missing file, a
YAML syntax error, a bad `--set` or a recipe that is not a mapping is reported in a fraction
of a second; only a sound draft goes on to `recipe.check_draft`, whose checks import
TensorFlow (the layer, optimizer and loss registries) and report every other problem at once.

Example:

    >>> draft = draft_from_text("data: {source: digits}\\nmodel: []\\nloss: mse\\n", "quick.yaml",
    ...                         overrides=["training.epochs=2"])
    >>> draft.document.data["training"], draft.default_name
    ({'epochs': 2}, 'recipe')
"""

from __future__ import annotations

import dataclasses
import os

from graphfit.recipes.reading.outline import check_outline
from graphfit.recipes.reading.overrides import apply_overrides
from graphfit.recipes.reading.problems import Position, Problem, RecipeError, in_reading_order
from graphfit.recipes.reading.schema import Checker
from graphfit.recipes.reading.yaml_source import MAX_BYTES, Document, parse_yaml, size_problem

__all__ = ["Draft", "draft_from_text", "read_draft"]


@dataclasses.dataclass
class Draft:
    """A recipe parsed, with its overrides applied and a sound outline; not checked further.

    Attributes:
        document: the YAML with positions, overrides applied; duplicate keys, if any, in
            `document.problems` (reported with the full check's problems).
        source: the file it was read from (the name used in messages).
        overrides: the `key=value` overrides applied to it.
        base_dir: the folder relative paths of the recipe start from (absolute).
        default_name: the run's name when the recipe gives none.
    """

    document: Document
    source: str
    overrides: list[str]
    base_dir: str
    default_name: str = "recipe"


def draft_from_text(text: str, source: str, overrides=(), base_dir: str | None = None,
                    default_name: str = "recipe") -> Draft:
    """Parses recipe text and applies the overrides; `source` is the name used in messages.

    Raises:
        RecipeError: a YAML syntax error, malformed overrides, or an outline problem (with
            any duplicate keys beside it).
    """
    document = parse_yaml(text, source, keep_going=True)
    document.positions.setdefault((), Position(source, 1, 1))
    overrides = list(overrides)
    apply_overrides(document, overrides)
    checker = Checker(document)
    check_outline(checker)
    if checker.problems:
        raise RecipeError(in_reading_order(document.problems + checker.problems))
    return Draft(document, source, overrides, os.path.abspath(base_dir or os.getcwd()),
                 default_name)


def read_draft(path: str, overrides=()) -> Draft:
    """Reads a recipe file into a `Draft` (see `draft_from_text`); its run's default name is
    the file's stem, and its relative paths start from the file's folder.

    Raises:
        RecipeError: also for a missing, unreadable, too large or non-UTF-8 file.
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
    return draft_from_text(text, path, overrides, base_dir=os.path.dirname(os.path.abspath(path)),
                           default_name=stem)


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

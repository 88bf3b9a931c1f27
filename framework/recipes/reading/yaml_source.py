"""Reading recipe YAML safely, keeping where every value came from.

PyYAML's `safe_load` forgets positions, silently keeps the last of two duplicate keys and, being
YAML 1.1, reads `1e-3` as a string. Recipes need all three done right, so this module composes the
document with a `yaml.SafeLoader` subclass (safe tags only: no Python objects are ever built),
rejects duplicate keys, reads every number form a user types as a number, and returns the plain
data next to a map from each key path to its `Position`.

Example:

    >>> document = parse_yaml("optimizer:\\n  learning_rate: 1e-3\\n", "my.yaml")
    >>> document.data
    {'optimizer': {'learning_rate': 0.001}}
    >>> str(document.positions[("optimizer", "learning_rate")])
    'my.yaml:2:3'
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import yaml

from graphfit.recipes.reading.problems import Position, Problem, RecipeError, short_repr

__all__ = ["Document", "parse_yaml", "parse_value", "size_problem", "MAX_BYTES"]

Path = tuple  # a key path: ("model", "layers", 2, "units")

# YAML 1.1 traps, closed by resolving plain scalars the YAML 1.2 way:
# - floats: 1.1 only reads "1.0e-3" (dot and signed exponent); users write "1e-3", "5E4";
# - booleans: 1.1 reads yes/no/on/off (the "Norway problem": a column named NO is False);
# - integers: 1.1 reads "010" as octal 8 and "1:30" as 90;
# - dates: 1.1 turns "2024-01-31" into a date object.
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_INT = re.compile(r"^(?:[-+]?[0-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_REPLACED = {"tag:yaml.org,2002:float", "tag:yaml.org,2002:int", "tag:yaml.org,2002:bool",
             "tag:yaml.org,2002:timestamp"}


_PLAIN_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}


# A recipe is a page of settings; these bounds refuse huge files, alias bombs ("billion
# laughs"), deep nesting and recursive aliases quickly and in bounded memory, long before any
# real recipe. The byte size is checked before YAML reads a character (its reader is slow).
MAX_BYTES = 512 * 1024  # a recipe names its data files, it does not hold data
MAX_VALUES = 100_000  # values after aliases and merges are expanded
MAX_DEPTH = 64  # mappings and lists inside each other


class _TooLarge(Exception):
    def __init__(self, message: str, mark):
        super().__init__(message)
        self.mark = mark


class _RecipeLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars; SafeConstructor builds only plain data."""

    def flatten_mapping(self, node):
        super().flatten_mapping(node)  # each nested merge is flattened through here first
        if len(node.value) > MAX_VALUES:
            raise _TooLarge(_too_many(), node.start_mark)

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node).replace("_", "")
        if text.lower().startswith(("0x", "0o")):
            return int(text, 0)
        return int(text, 10)  # "010" is ten, not eight


_RecipeLoader.add_constructor("tag:yaml.org,2002:int", _RecipeLoader.construct_yaml_int)
_RecipeLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_RecipeLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
_RecipeLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_RecipeLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))


# PyYAML's words for the most common mistakes, with what they usually mean.
_HINTS = {
    "mapping values are not allowed here": "; usually a wrong indentation, or a ':' inside "
                                           "a value that needs quotes",
    "found character '\\t' that cannot start any token": "; YAML indents with spaces, not tabs",
    "expected <block end>, but found '<block mapping start>'": "; this line is indented "
                                                               "differently from the lines "
                                                               "above it",
    "but found another document": "; a recipe is one YAML document: remove the '---' line",
}


@dataclasses.dataclass
class Document:
    """A parsed recipe: its plain data and the position of every key path in it."""

    data: Any
    positions: dict[Path, Position]
    problems: list = dataclasses.field(default_factory=list)  # kept with keep_going=True

    def position(self, path: Path) -> Position | None:
        """The position of `path`, or of its nearest ancestor that has one."""
        path = tuple(path)
        while path:
            if path in self.positions:
                return self.positions[path]
            path = path[:-1]
        return self.positions.get(())


def _position(source: str, mark) -> Position:
    return Position(source, mark.line + 1, mark.column + 1)


def _too_many() -> str:
    return (f"the recipe expands to more than {MAX_VALUES} values (a very long list, or "
            f"aliases '*name' repeated inside each other); a recipe names its data files "
            f"(csv, npz, a data function), it does not hold data")


def _size(count: int) -> str:
    for unit, scale in (("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if count >= scale:
            return f"{count:,} bytes ({count / scale:.1f} {unit})"
    return f"{count:,} bytes"


def size_problem(head: bytes, size: int, source: str) -> Problem | None:
    """The problem of a recipe of `size` bytes beyond MAX_BYTES, or None; `head` is (at least)
    its first MAX_BYTES bytes, which place the problem where the limit is passed."""
    if size <= MAX_BYTES:
        return None
    head = head[:MAX_BYTES]
    line_start = head.rfind(b"\n") + 1
    where = (Position(source, head.count(b"\n") + 1,
                      len(head[line_start:].decode("utf-8", errors="replace")) + 1)
             if not source.startswith("--set") else Position(source, 0, 0))
    return Problem((), f"the recipe is {_size(size)}, more than the limit of {_size(MAX_BYTES)}"
                       f" (reached here); a recipe names its data files (csv, npz, a data "
                       f"function), it does not hold data", where)


def _check_nesting(text: str) -> None:
    """Refuses nesting deeper than MAX_DEPTH from the event stream, before composing (whose
    recursion a deep document would exhaust)."""
    loader = _RecipeLoader(text)
    try:
        depth = values = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.NodeEvent):  # refused before composing a long list
                values += 1
                if values > MAX_VALUES:
                    raise _TooLarge(_too_many(), event.start_mark)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _TooLarge(f"values are nested more than {MAX_DEPTH} levels deep; a "
                                    f"recipe this deep is refused", event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        loader.dispose()


def _walk(node, path: Path, source: str, positions: dict, problems: list, constructor) -> Any:
    """Plain data for `node`, recording positions and duplicate keys on the way."""
    if len(path) > MAX_DEPTH:  # only aliases can get here: a recursive one, `&a [*a]`
        raise _TooLarge(f"values are nested more than {MAX_DEPTH} levels deep (an alias "
                        f"inside itself?); a recipe this deep is refused", node.start_mark)
    constructor.values_seen = getattr(constructor, "values_seen", 0) + 1
    if constructor.values_seen > MAX_VALUES:
        raise _TooLarge(_too_many(), node.start_mark)
    positions.setdefault(path, _position(source, node.start_mark))
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_TAGS:
        # Only plain data: a tag such as !!python/object is refused, never interpreted.
        raise yaml.constructor.ConstructorError(
            None, None, f"the tag {node.tag!r} is not allowed in a recipe (plain data only)",
            node.start_mark)
    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)  # resolves `<<:` merge keys as safe_load does
        result: dict = {}
        for key_node, value_node in node.value:
            key = constructor.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                problems.append(Problem(path, f"a key must be a plain name, got {short_repr(key)}",
                                        _position(source, key_node.start_mark)))
                continue
            key = str(key) if not isinstance(key, str) else key
            if key in result:
                first = positions[path + (key,)]
                problems.append(Problem(
                    path + (key,),
                    f"duplicate key {short_repr(key)} (first given at line {first.line}); YAML "
                    f"would silently keep only the last one. Remove one of them.",
                    _position(source, key_node.start_mark)))
                continue
            positions[path + (key,)] = _position(source, key_node.start_mark)
            result[key] = _walk(value_node, path + (key,), source, positions, problems,
                                constructor)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_walk(item, path + (index,), source, positions, problems, constructor)
                for index, item in enumerate(node.value)]
    return constructor.construct_object(node, deep=True)


def parse_yaml(text: str, source: str, keep_going: bool = False) -> Document:
    """Parses one YAML document with positions.

    Args:
        text: the YAML text.
        source: the name positions carry (a file path, or "--set key=value").
        keep_going: return duplicate keys in `Document.problems` (the first value kept)
            instead of raising, so the recipe's other problems are found in the same pass.

    Returns:
        A `Document`; an empty text gives `data=None`.

    Raises:
        RecipeError: for YAML syntax errors (with the line and column YAML reports), more than
            one document, or duplicate keys (all of them).
    """
    _check_size(text, source)
    loader = None
    try:
        _check_nesting(text)
        loader = _RecipeLoader(text)
        node = loader.get_single_node()
        positions: dict[Path, Position] = {}
        problems: list[Problem] = []
        data = None if node is None else _walk(node, (), source, positions, problems, loader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = _position(source, mark) if mark else Position(source, 1, 1)
        reason = error.problem or "cannot read it"
        context = ""
        if error.context and error.context != reason:
            opened = error.context_mark
            at = (f" at line {opened.line + 1}, column {opened.column + 1}"
                  if opened and mark and opened.line != mark.line else "")
            context = f" ({error.context}{at})"
        reason += _HINTS.get(reason, "")
        kind = ("YAML syntax error" if isinstance(error, (yaml.scanner.ScannerError,
                                                          yaml.parser.ParserError))
                else "YAML error")
        raise RecipeError([Problem((), f"{kind}: {reason}{context}", where)]) from None
    except _TooLarge as error:
        raise RecipeError([Problem((), str(error), _position(source, error.mark))]) from None
    except yaml.reader.ReaderError as error:  # a character YAML does not allow (NUL, ...)
        raise RecipeError([_reader_problem(error, text, source)]) from None
    except yaml.YAMLError as error:
        raise RecipeError([Problem((), f"YAML error: {error}", Position(source, 1, 1))]) from None
    finally:
        if loader is not None:
            loader.dispose()
    if problems and not keep_going:
        raise RecipeError(problems)
    return Document(data, positions, problems)


def _check_size(text: str, source: str) -> None:
    if len(text) * 4 <= MAX_BYTES:  # UTF-8 takes at most 4 bytes a character
        return
    head = text[: MAX_BYTES + 1].encode("utf-8", errors="surrogatepass")
    size = len(head) if len(head) <= MAX_BYTES else len(
        text.encode("utf-8", errors="surrogatepass"))
    problem = size_problem(head, size, source)
    if problem:
        raise RecipeError([problem])


def _reader_problem(error, text: str, source: str) -> Problem:
    before = text[: max(error.position, 0)]
    line, column = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    character = ("the NUL character (a binary file, or bytes from a bad copy?)"
                 if error.character in ("\0", 0) else f"the character {error.character!r}")
    return Problem((), f"the recipe holds {character}, which YAML text cannot contain; remove "
                       f"it", Position(source, line, column) if source[:5] != "--set" else
                   Position(source, 0, 0))


def parse_value(text: str, source: str) -> Document:
    """A single value as a recipe would read it (for `--set key=value`): "1e-3" is a float,
    "[64, 32]" a list, "relu" a string, "null" None."""
    return parse_yaml(text, source) if text.strip() else Document("", {(): Position(source, 1, 1)})

"""`--set key=value` overrides: dotted keys into the recipe, values read as YAML.

`--set optimizer.learning_rate=1e-3` sets a float, `--set model.layers[0].units=128` (or
`model.layers.0.units`) reaches into a list, `--set training.validation_data=null` clears a key.
A missing section is created; whether the key is valid is then checked by the schema like any
key of the file, and a problem in an override is reported against the override itself.

Example:

    >>> from graphfit.recipes.reading.yaml_source import parse_yaml
    >>> document = parse_yaml("training:\\n  epochs: 10\\n", "my.yaml")
    >>> apply_overrides(document, ["training.epochs=3", "optimizer.learning_rate=1e-3"])
    >>> document.data
    {'training': {'epochs': 3}, 'optimizer': {'learning_rate': 0.001}}
    >>> str(document.position(("training", "epochs")))
    '--set training.epochs=3'
"""

from __future__ import annotations

import re

from graphfit.recipes.reading.problems import Position, Problem, RecipeError, short_repr, shorten
from graphfit.recipes.reading.yaml_source import Document, parse_value

__all__ = ["apply_overrides", "parse_key"]

_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")


def parse_key(key: str) -> tuple:
    """"model.layers[1].units" or "model.layers.1.units" -> ("model", "layers", 1, "units").

    Raises:
        ValueError: for an empty or malformed key.
    """
    path: list = []
    for part in key.split("."):
        if part.isdigit():
            path.append(int(part))
            continue
        match = _PART.match(part)
        if not match:
            raise ValueError(f"{short_repr(key)} is not a dotted key such as training.epochs or "
                             f"model.layers[0].units")
        path.append(match.group(1))
        path.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    if not path or isinstance(path[0], int):
        raise ValueError(f"{short_repr(key)} must start with a section name such as training")
    return tuple(path)


def _not_a_mapping(node, key) -> str:
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "a list", type(None): "null"}
    return (f"cannot set {short_repr(key)} inside it: it is {kinds.get(type(node), 'a value')} "
            f"({short_repr(node)}), not a mapping")


def _place(data: dict, path: tuple, value, where: Position) -> None:
    """Sets `path` in `data` to `value`, creating missing mappings; raises RecipeError."""
    node = data
    for depth, part in enumerate(path[:-1]):
        head = path[: depth + 1]
        nxt = path[depth + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                size = len(node) if isinstance(node, list) else 0
                raise RecipeError([Problem(head, f"no item {part} here (the list has {size})",
                                           where)])
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise RecipeError([Problem(head[:-1], _not_a_mapping(node, part), where)])
            if node.get(part) is None:
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            size = len(node) if isinstance(node, list) else 0
            raise RecipeError([Problem(path, f"no item {last} here (the list has {size})",
                                       where)])
    elif not isinstance(node, dict):
        raise RecipeError([Problem(path[:-1], _not_a_mapping(node, last), where)])
    node[last] = value


def apply_overrides(document: Document, overrides: list[str]) -> None:
    """Applies each `key=value` to `document` in place, positions included.

    Raises:
        RecipeError: listing every malformed override (no "=", a bad key, bad YAML in the
            value, an index past the end of a list).
    """
    problems: list[Problem] = []
    if document.data is None and overrides:
        document.data = {}
    for text in overrides:
        key, equals, raw = text.partition("=")
        where = Position(f"--set {shorten(key)}{equals}{shorten(raw)}", 0, 0)
        try:
            if not equals:
                raise ValueError("must look like key=value (for example training.epochs=3)")
            path = parse_key(key.strip())
            if not isinstance(document.data, dict):
                raise ValueError("the recipe is not a mapping, so it has no keys to set")
            value = parse_value(raw, where.source)
            _place(document.data, path, value.data, where)
        except ValueError as error:
            if isinstance(error, RecipeError):
                problems.extend(_at(problem, where) for problem in error.problems)
            else:
                problems.append(Problem((), str(error), where))
            continue
        for known in [p for p in document.positions if p[: len(path)] == path]:
            del document.positions[known]
        for sub_path in value.positions:
            document.positions[path + tuple(sub_path)] = where
        for depth in range(1, len(path)):  # sections the override created
            document.positions.setdefault(path[:depth], where)
    if problems:
        raise RecipeError(problems)


def _at(problem: Problem, where: Position) -> Problem:
    return Problem(problem.path, problem.message, where)

"""A recipe's search space (`tune.space`, checked by `recipes.reading.tune_schema`) as Optuna
suggestions, `--set` overrides and the corner points checked before any trial.

A point of the space is an *assignment*: (dotted key, value, rebuilds) triples; `rebuilds` is
true for a choice at `<section>.type` written with each option's own keys, whose section is
replaced by `{type: option}` before the option's keys are set.

Example:

    >>> space = SearchSpace({
    ...     "optimizer.learning_rate": {"type": "float", "low": 0.001, "high": 0.1,
    ...                                 "log": True, "step": None},
    ...     "model.layers.0.units": {"type": "int", "low": 16, "high": 64, "log": False,
    ...                              "step": 16}})
    >>> [overrides(corner) for corner in space.corners()][-1]
    ['optimizer.learning_rate=0.1', 'model.layers.0.units=64']
"""

from __future__ import annotations

import itertools
import json

from graphfit.recipes.reading.tune_schema import is_type_path

__all__ = ["SearchSpace", "overrides", "describe"]

CORNER_LIMIT = 64  # more corners than this: each entry's extremes with the others at theirs


def _label(value):
    """What Optuna stores for a choice option (it keeps None, bools, numbers and strings)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True)


def _top(spec: dict):
    """The largest value `spec` can take (Optuna stops a stepped range at its last step)."""
    step = spec["step"]
    if step is None:
        return spec["high"]
    top = spec["low"] + ((spec["high"] - spec["low"]) // step) * step
    return type(spec["low"])(top) if spec["type"] == "int" else float(top)


class SearchSpace:
    """The resolved `tune.space`: {dotted key: spec}."""

    def __init__(self, space: dict):
        self.space = space

    def suggest(self, trial) -> list[tuple]:
        """Asks an Optuna trial for one point; returns its assignment."""
        return _suggest(self.space, trial)

    def corners(self, limit: int = CORNER_LIMIT) -> list[list[tuple]]:
        """The extreme points: every combination of each entry's ends (and every option of
        a choice), or, past `limit` points, each entry's ends with the others at their
        first ends."""
        options = [_options(key, spec) for key, spec in self.space.items()]
        count = 1
        for entry in options:
            count *= len(entry)
        if count <= limit:
            return [sum(parts, []) for parts in itertools.product(*options)]
        base = [entry[0] for entry in options]
        points = [sum(base, [])]
        for index, entry in enumerate(options):
            for option in entry[1:]:
                points.append(sum(base[:index] + [option] + base[index + 1:], []))
        return points

    def grid(self) -> dict[str, list]:
        """GridSampler's search space; ValueError naming an entry a grid cannot list."""
        grid: dict[str, list] = {}
        for key, spec, _ in _entries(self.space):
            if spec["type"] == "value":
                continue
            if spec["type"] == "choice":
                grid[key] = [_label(choice) for choice in spec["choices"]]
            elif spec["step"] is None and spec["type"] == "float":
                raise ValueError(f"{key}: the grid sampler needs a finite list of values; "
                                 f"give it a step, or a choice: [...]")
            else:
                step = spec["step"] or 1
                count = int((_top(spec) - spec["low"]) // step) + 1
                if count > 1000:
                    raise ValueError(f"{key}: {count} grid values; give a larger step")
                grid[key] = [spec["low"] + i * step for i in range(count)]
        return grid

    def keys(self) -> list[str]:
        """Every tuned key (options' keys too), in order."""
        return [key for key, spec, _ in _entries(self.space) if spec["type"] != "value"]


def _entries(space: dict, where: tuple = ()):
    for key, spec in space.items():
        yield key, spec, where
        for option, branch in (spec.get("branches") or {}).items():
            yield from _entries(branch, where + (key, option))


def _suggest(space: dict, trial) -> list[tuple]:
    assignment = []
    for key, spec in space.items():
        kind = spec["type"]
        if kind == "value":
            assignment.append((key, spec["value"], False))
        elif kind == "choice":
            labels = [_label(choice) for choice in spec["choices"]]
            label = trial.suggest_categorical(key, labels)
            value = spec["choices"][labels.index(label)]
            rebuilds = spec["branches"] is not None and is_type_path(tuple(key.split(".")))
            assignment.append((key, value, rebuilds))
            if spec["branches"] is not None:
                assignment.extend(_suggest(spec["branches"][value] or {}, trial))
        elif kind == "int":
            assignment.append((key, trial.suggest_int(key, spec["low"], spec["high"],
                                                      step=spec["step"] or 1, log=spec["log"]),
                               False))
        else:
            assignment.append((key, trial.suggest_float(key, spec["low"], spec["high"],
                                                        step=spec["step"], log=spec["log"]),
                               False))
    return assignment


def _options(key: str, spec: dict) -> list[list[tuple]]:
    """The ends of one entry, each a partial assignment."""
    kind = spec["type"]
    if kind == "value":
        return [[(key, spec["value"], False)]]
    if kind in ("int", "float"):
        return [[(key, spec["low"], False)], [(key, _top(spec), False)]]
    if spec["branches"] is None:
        return [[(key, choice, False)] for choice in spec["choices"]]
    rebuilds = is_type_path(tuple(key.split(".")))
    points = []
    for option in spec["choices"]:
        for corner in SearchSpace(spec["branches"][option] or {}).corners() or [[]]:
            points.append([(key, option, rebuilds)] + corner)
    return points


def overrides(assignment: list[tuple]) -> list[str]:
    """`--set` strings for a point: the rebuilt sections first, then every key."""
    first = [f"{key.rsplit('.', 1)[0]}={json.dumps({'type': value})}"
             for key, value, rebuilds in assignment if rebuilds]
    rest = [f"{key}={json.dumps(value)}" for key, value, rebuilds in assignment
            if not rebuilds]
    return first + rest


def describe(assignment: list[tuple]) -> str:
    """"optimizer.learning_rate=0.01, model.layers.0.units=64" for messages."""
    return ", ".join(f"{key}={_short(value)}" for key, value, _ in assignment)


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(value) if not isinstance(value, str) else value

"""A small schema language for recipes: typed fields with defaults, ranges and docs.

Checking a value never raises: it returns the value with defaults filled in and adds a
`Problem` (with the dotted key and the file position) for everything wrong, so one pass
reports all problems. Unknown keys get a "did you mean".

Example:

    >>> from graphfit.recipes.reading.yaml_source import parse_yaml
    >>> training = Section({"epochs": Field(Integer(min=1), 10, "passes over the data"),
    ...                     "shuffle": Field(Boolean(), True, "reshuffle every epoch")})
    >>> checker = Checker(parse_yaml("training:\\n  epoch: 3\\n", "my.yaml"))
    >>> training.check(checker.document.data["training"], ("training",), checker)
    {'epochs': 10, 'shuffle': True}
    >>> print(checker.problems[0])
    my.yaml:2:3: training.epoch: unknown key 'epoch'; did you mean 'epochs'? ...
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Callable

from graphfit.core.registry import did_you_mean
from graphfit.recipes.reading.problems import Problem, short_repr
from graphfit.recipes.reading.yaml_source import Document

__all__ = ["REQUIRED", "INVALID", "Field", "Checker", "Spec", "Integer", "Number", "Boolean",
           "String", "Either", "ListOf", "Nullable", "Section", "Custom", "AnyValue", "shown"]

REQUIRED = object()  # a field without a default
INVALID = object()  # what a check returns for a value it rejected (a problem is recorded)


def shown(value) -> str:
    """A value as a message shows it, with its YAML kind where that explains the problem."""
    kinds = {bool: "a boolean", str: "a string", list: "a list", dict: "a mapping",
             type(None): "null"}
    kind = kinds.get(type(value))
    if isinstance(value, float) and not math.isfinite(value):
        kind = "not a finite number"
    text = short_repr(value)
    return f"{text} ({kind})" if kind and not isinstance(value, type(None)) else text


class Checker:
    """Collects problems while a recipe document is checked."""

    def __init__(self, document: Document):
        self.document = document
        self.problems: list[Problem] = []

    def report(self, path, message: str, at=None) -> None:
        """Records a problem at `path`, positioned at `at` (default: `path`) in the file."""
        path = tuple(path)
        self.problems.append(Problem(path, message, self.document.position(at or path)))

    def quietly(self, spec: "Spec", value, path) -> tuple[Any, list[Problem]]:
        """Checks without recording: (result, the problems it would have recorded)."""
        probe = Checker(self.document)
        result = spec.check(value, path, probe)
        return result, probe.problems


class Spec:
    """One kind of value."""

    def check(self, value, path: tuple, checker: Checker):  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclasses.dataclass
class Field:
    """A key of a `Section`: its spec, its default (or REQUIRED) and a one-line doc."""

    spec: Spec
    default: Any = REQUIRED
    doc: str = ""


def _bound_text(minimum, maximum, min_open=False, max_open=False) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>' if min_open else '>='} {minimum}")
    if maximum is not None:
        parts.append(f"{'<' if max_open else '<='} {maximum}")
    return " and ".join(parts)


@dataclasses.dataclass
class Integer(Spec):
    min: int | None = None
    max: int | None = None

    def describe(self) -> str:
        bounds = _bound_text(self.min, self.max)
        return f"an integer {bounds}".strip()

    def check(self, value, path, checker):
        in_range = isinstance(value, int) and not isinstance(value, bool) and (
            (self.min is None or value >= self.min) and (self.max is None or value <= self.max))
        if not in_range:
            checker.report(path, f"must be {self.describe()}, got {shown(value)}")
            return INVALID
        return value


@dataclasses.dataclass
class Number(Spec):
    """A number; `finite` (the default) refuses .inf and -.inf too (NaN is never a number
    here), so no key needs its own check for them: a key whose infinity means something
    ("no limit") says `Number(finite=False)`."""

    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    finite: bool = True

    def describe(self) -> str:
        bounds = _bound_text(self.min, self.max, self.min_open, self.max_open)
        return f"a number {bounds}".strip()

    def check(self, value, path, checker):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            checker.report(path, f"must be {self.describe()}, got {shown(value)}")
            return INVALID
        if self.finite and math.isinf(value):
            checker.report(path, f"must be a finite {self.describe()[2:]}, got {shown(value)}")
            return INVALID
        low_ok = self.min is None or (value > self.min if self.min_open else value >= self.min)
        high_ok = self.max is None or (value < self.max if self.max_open else value <= self.max)
        if not (low_ok and high_ok):
            checker.report(path, f"must be {self.describe()}, got {shown(value)}")
            return INVALID
        return float(value)


class Boolean(Spec):
    def describe(self) -> str:
        return "true or false"

    def check(self, value, path, checker):
        if not isinstance(value, bool):
            checker.report(path, f"must be true or false, got {shown(value)}")
            return INVALID
        return value


@dataclasses.dataclass
class String(Spec):
    choices: tuple[str, ...] | None = None

    def describe(self) -> str:
        if self.choices and len(self.choices) == 1:
            return repr(self.choices[0])
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        return "a string"

    def check(self, value, path, checker):
        if not isinstance(value, str):
            checker.report(path, f"must be {self.describe()}, got {shown(value)}")
            return INVALID
        if self.choices and value not in self.choices:
            hint = did_you_mean(value, self.choices, "; did you mean {!r}?")
            checker.report(path, f"must be {self.describe()}, got {short_repr(value)}{hint}")
            return INVALID
        if not self.choices and not value.strip():
            checker.report(path, "must not be empty")
            return INVALID
        return value


class Either(Spec):
    """The first alternative that accepts the value; otherwise one problem naming them all."""

    def __init__(self, *alternatives: Spec):
        self.alternatives = alternatives

    def describe(self) -> str:
        return " or ".join(a.describe() for a in self.alternatives)

    def check(self, value, path, checker):
        for alternative in self.alternatives:
            result, problems = checker.quietly(alternative, value, path)
            if not problems:
                return result
        checker.report(path, f"must be {self.describe()}, got {shown(value)}")
        return INVALID


class Nullable(Spec):
    def __init__(self, inner: Spec):
        self.inner = inner

    def describe(self) -> str:
        return f"{self.inner.describe()}, or null"

    def check(self, value, path, checker):
        return None if value is None else self.inner.check(value, path, checker)


@dataclasses.dataclass
class ListOf(Spec):
    item: Spec
    min_length: int = 0
    single_ok: bool = False  # a lone item stands for a list of one

    def describe(self) -> str:
        return f"a list (each item {self.item.describe()})"

    def check(self, value, path, checker):
        if self.single_ok and not isinstance(value, list):
            value = [value]
        if not isinstance(value, list):
            checker.report(path, f"must be {self.describe()}, got {shown(value)}")
            return INVALID
        if len(value) < self.min_length:
            checker.report(path, f"needs at least {self.min_length} item(s), got {len(value)}")
            return INVALID
        return [self.item.check(item, path + (index,), checker)
                for index, item in enumerate(value)]


class AnyValue(Spec):
    """Plain data checked later (for example by a constructor)."""

    def describe(self) -> str:
        return "any value"

    def check(self, value, path, checker):
        return value


class Custom(Spec):
    """A check written as a function (value, path, checker) -> resolved value or INVALID."""

    def __init__(self, check: Callable, description: str):
        self._check = check
        self.description = description

    def describe(self) -> str:
        return self.description

    def check(self, value, path, checker):
        return self._check(value, path, checker)


class Section(Spec):
    """A mapping with known keys: unknown keys are problems, missing keys get defaults."""

    def __init__(self, fields: dict[str, Field], doc: str = ""):
        self.fields = fields
        self.doc = doc

    def describe(self) -> str:
        return "a mapping"

    def check(self, value, path, checker):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            checker.report(path, f"must be a mapping with keys {', '.join(self.fields)}, "
                                 f"got {shown(value)}")
            return INVALID
        self.check_unknown_keys(value, path, checker)
        resolved = {}
        for key, field in self.fields.items():
            if key in value:
                resolved[key] = field.spec.check(value[key], path + (key,), checker)
            elif field.default is REQUIRED:
                checker.report(path, f"missing required key {key!r} ({field.doc})")
                resolved[key] = INVALID
            elif isinstance(field.default, dict):
                # A default section still gets its own defaults filled in.
                resolved[key] = field.spec.check(copy.deepcopy(field.default), path + (key,),
                                                 checker)
            else:
                resolved[key] = copy.deepcopy(field.default)
        return resolved

    def check_unknown_keys(self, value: dict, path, checker) -> None:
        for key in value:
            if key not in self.fields:
                hint = did_you_mean(key, self.fields, "; did you mean {!r}?", otherwise=".")
                checker.report(path + (key,), f"unknown key {short_repr(key)}{hint} Valid keys: "
                                              f"{', '.join(self.fields)}")

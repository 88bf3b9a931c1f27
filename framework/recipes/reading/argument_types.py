"""Checking the kind of each constructor argument a recipe gives, before the constructor runs.

YAML keeps quotes: `from_logits: "false"` is the string "false", which Python treats as true.
A constructor that does not check its arguments' types would silently do the opposite of what
was written, so every argument is compared with what the constructor says it accepts, from the
most to the least precise source:

1. the constructor's type annotations (`use_bias: bool = True`, `momentum: float = 0.0`);
2. for Keras classes, which have no annotations, the type their docstring's `Args:` section
   names ("decay_rate: A Python float.", "staircase: Boolean.");
3. the default value's type (a bool default wants a bool, a number default wants a number);
4. otherwise (no annotation, no default): a string that reads as a boolean or a number
   ("true", "0.5") is refused, since the quotes are almost surely a mistake.

Numbers must also fit what TensorFlow stores them in: integers in int64, floats in float32
(`learning_rate: 1e300` would become infinity). An argument may be null where its default is.

Example:

    >>> class Example:
    ...     def __init__(self, units: int, use_bias=True, rate=None):
    ...         pass
    >>> argument_problem(Example, "use_bias", "false")
    "must be true or false, got 'false' (a string); write false without quotes"
    >>> argument_problem(Example, "units", 64) is None
    True
"""

from __future__ import annotations

import inspect
import math
import re
import types
import typing

import numpy as np

__all__ = ["argument_problem", "argument_problem_at", "declared_kinds"]

_INT64 = 2 ** 63
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_LOOKS_BOOL = re.compile(r"^(?:true|false)$", re.I)
_LOOKS_NUMBER = re.compile(r"^[-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?\.?inf$|"
                           r"^\.?nan$", re.I)

# The kinds a YAML value can have, and the Python types that carry them.
_KINDS = {"bool": (bool,), "int": (int,), "number": (int, float), "str": (str,),
          "null": (type(None),), "list": (list, tuple), "dict": (dict,),
          "collection": (list, tuple, dict)}
_WORDS = {"bool": "true or false", "int": "an integer", "number": "a number",
          "str": "a string", "null": "null", "list": "a list", "dict": "a mapping",
          "collection": ""}

# "decay_rate: A Python float. ..." -> number; only a plain, single type word counts.
_DOC_TYPE = re.compile(
    r"^(?:an?\s+)?(?:(?:python|scalar|positive|non-negative|nonnegative|optional)\s+)*"
    r"(boolean|bool|integer|int|float|floating point number|string|str)s?$", re.I)
_DOC_KIND = {"boolean": "bool", "bool": "bool", "integer": "int", "int": "int",
             "float": "number", "floating point number": "number", "string": "str",
             "str": "str"}


def _hint_kinds(hint) -> set[str] | None:
    """The YAML kinds an annotation accepts, or None when it cannot say (Any, a class)."""
    if hint is None or hint is type(None):
        return {"null"}
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        kinds: set[str] = set()
        for member in typing.get_args(hint):
            member_kinds = _hint_kinds(member)
            if member_kinds is None:
                return None  # one member accepts anything we cannot name
            kinds |= member_kinds
        return kinds
    if origin is typing.Literal:
        return {kind for value in typing.get_args(hint) for kind in _value_kinds(value)}
    simple = {bool: {"bool"}, int: {"int"}, float: {"number"}, str: {"str"}}
    if hint in simple:
        return simple[hint]
    base = origin or hint
    if base in (list, tuple, set, frozenset) or base in _abc("Sequence", "Iterable",
                                                             "Collection"):
        return {"list"}
    if base is dict or base in _abc("Mapping", "MutableMapping"):
        return {"dict"}
    return None


def _abc(*names: str) -> tuple:
    import collections.abc
    return tuple(getattr(collections.abc, name) for name in names) + tuple(
        getattr(typing, name) for name in names)


def _value_kinds(value) -> set[str]:
    if isinstance(value, bool):
        return {"bool"}
    if isinstance(value, int):
        return {"int", "number"}
    if isinstance(value, float):
        return {"number"}
    for kind, carriers in _KINDS.items():
        if isinstance(value, carriers):
            return {kind}
    return set()


def _annotations(cls) -> dict:
    """The constructor's resolved annotations; each unresolvable one is left out."""
    function = cls.__init__
    try:
        return typing.get_type_hints(function)
    except Exception:  # a name only imported for type checkers: resolve one by one
        hints = {}
        namespace = getattr(inspect.getmodule(function), "__dict__", {})
        for name, text in getattr(function, "__annotations__", {}).items():
            try:
                hints[name] = eval(text, namespace) if isinstance(text, str) else text
            except Exception:
                continue
        return hints


def _docstring_kinds(cls) -> dict[str, set[str]]:
    """Keras's own argument types, from the `Args:` section of the class docstring."""
    doc = inspect.getdoc(cls) or ""
    section = re.split(r"^Args:\s*$", doc, maxsplit=1, flags=re.M)
    if len(section) < 2:
        return {}
    kinds = {}
    for match in re.finditer(r"^\s{0,8}(\w+): *([^\n]*)", section[1], re.M):
        name, text = match.groups()
        first = re.split(r"[.,;(]", text, maxsplit=1)[0].strip()
        found = _DOC_TYPE.match(first)
        if found:
            kinds[name] = {_DOC_KIND[found.group(1).lower()]}
        elif first.lower().startswith("whether "):
            kinds[name] = {"bool"}
    return kinds


def _documented(cls, name: str, longest: int = 200) -> str | None:
    """The first sentence the class docstring's `Args:` section gives argument `name` (what
    a wrongly typed value was meant to be: `damping: "marquardt" ... or "identity".`), for
    graphfit's own classes (Keras's docstrings change from release to release)."""
    if not cls.__module__.startswith("graphfit"):
        return None
    section = re.split(r"^Args:\s*$", inspect.getdoc(cls) or "", maxsplit=1, flags=re.M)
    if len(section) < 2:
        return None
    found = re.search(rf"^([ \t]*){name}(?: \([^)]*\))?: *(.*(?:\n\1[ \t]+\S.*)*)",
                      section[1], re.M)
    if not found:
        return None
    text = " ".join(found.group(2).split())
    sentence = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    return sentence if len(sentence) <= longest else sentence[:longest - 3].rstrip() + "..."


def declared_kinds(cls, name: str, parameter: inspect.Parameter) -> set[str] | None:
    """The YAML kinds `cls(name=...)` accepts, or None when nothing says."""
    hint = _annotations(cls).get(name, inspect.Parameter.empty)
    kinds = None if hint is inspect.Parameter.empty else _hint_kinds(hint)
    if kinds is None and cls.__module__.startswith("keras"):
        kinds = _docstring_kinds(cls).get(name)
    default = parameter.default
    if kinds is None and default is not inspect.Parameter.empty:
        if isinstance(default, bool):
            kinds = {"bool"}
        elif isinstance(default, (int, float)):
            # An int default often takes fractions too (min_delta); a number default may also
            # take a structure the constructor reads (a learning-rate schedule mapping).
            kinds = {"number", "int", "collection"}
    if kinds is not None and default is None:
        kinds = kinds | {"null"}
    elif kinds is not None and default is not inspect.Parameter.empty:
        # The default's own kind is always valid ("use_cudnn: Whether ...", default "auto").
        kinds = kinds | _value_kinds(default)
    return kinds


def _range_problem(value) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return f"is too large: {value} does not fit in a 64-bit integer"
    if isinstance(value, float):
        if math.isnan(value):
            return "must be a number, got NaN"
        if math.isinf(value):  # nothing a recipe configures is infinite: a limit is left out
            return (f"must be a finite number, got {value!r}; leave the argument out (or "
                    f"null, where it may be) for no limit")
        if abs(value) > _FLOAT32_MAX:
            return (f"is too large: {value!r} overflows float32 (largest about 3.4e+38) and "
                    f"would become infinity")
    return None


def _kind_problem(value, kinds: set[str]) -> str | None:
    if "collection" in kinds and isinstance(value, (list, dict)):
        return None
    if _value_kinds(value) & kinds or (isinstance(value, int) and "number" in kinds
                                       and not isinstance(value, bool)):
        return None
    from graphfit.recipes.reading.schema import shown

    wanted = " or ".join(_WORDS[kind] for kind in ("bool", "int", "number", "str", "list",
                                                    "dict", "null")
                         if kind in kinds and not (kind == "int" and "number" in kinds))
    message = f"must be {wanted}, got {shown(value)}"
    if isinstance(value, str) and _unquoted_fits(value, kinds):
        message += f"; write {value.strip()} without quotes"
    return message


def _unquoted_fits(text: str, kinds: set[str]) -> bool:
    """Whether `text` written without quotes would be accepted: "write 1e300 without quotes"
    or "write nan without quotes" would only trade this problem for another one."""
    if not (_LOOKS_BOOL.match(text.strip()) or _LOOKS_NUMBER.match(text.strip())):
        return False
    from graphfit.recipes.reading.yaml_source import parse_value

    try:
        value = parse_value(text.strip(), "value").data
    except ValueError:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if not isinstance(value, (bool, int, float)) or _range_problem(value):
        return False
    return bool(_value_kinds(value) & kinds) or (
        isinstance(value, int) and not isinstance(value, bool) and "number" in kinds)


def _owner(cls, name: str):
    """The class whose `__init__` names `name` (a subclass may pass it on in **kwargs)."""
    for owner in getattr(cls, "__mro__", (cls,)):
        try:
            parameters = inspect.signature(owner.__init__).parameters
        except (TypeError, ValueError):
            continue
        parameter = parameters.get(name)
        if parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD,
                                                        parameter.KEYWORD_ONLY):
            return owner, parameter
    return cls, None


def argument_problem(cls, name: str, value) -> str | None:
    """What is wrong with `cls(name=value)` as far as the declared types tell, or None."""
    found = argument_problem_at(cls, name, value)
    return found[1] if found else None


def argument_problem_at(cls, name: str, value) -> tuple[tuple, str] | None:
    """Like `argument_problem`, with where inside `value` the problem is: () for the value
    itself, (1,) for its second item, ("10",) for its key "10"."""
    inside = _nested_range_problem(value)
    if inside:  # numbers inside (boundaries, a schedule's rates, an initializer's value)
        return inside
    problem = _range_problem(value) or _declared_problem(cls, name, value)
    return ((), problem) if problem else None


def _nested_range_problem(value, depth: int = 0) -> tuple[tuple, str] | None:
    """(where inside `value`, what) for the first number nested in it that does not fit."""
    items = (enumerate(value) if isinstance(value, list)
             else value.items() if isinstance(value, dict) else ())
    for key, item in items:
        problem = _range_problem(item) if isinstance(item, (int, float)) else None
        if problem:
            return (key,), problem
        found = _nested_range_problem(item, depth + 1) if depth < 32 else None
        if found:
            return (key, *found[0]), found[1]
    return None


def _declared_problem(cls, name: str, value) -> str | None:
    owner, parameter = _owner(cls, name)
    if parameter is None:
        return None
    kinds = declared_kinds(owner, name, parameter)
    if kinds is not None:
        problem = _kind_problem(value, kinds)
        documented = _documented(owner, name) if problem else None
        return f"{problem} ({name}: {documented})" if documented else problem
    if (isinstance(value, str) and parameter.default in (None, inspect.Parameter.empty)
            and (_LOOKS_BOOL.match(value.strip()) or _LOOKS_NUMBER.match(value.strip()))):
        message = (f"got {value!r} (a string) where {cls.__name__} does not say it takes a "
                   f"string; ")
        if _unquoted_fits(value, {"bool", "number"}):
            return message + f"write {value.strip()} without quotes for a boolean or number"
        return message + "a boolean (true or false) or a finite number is expected"
    return None

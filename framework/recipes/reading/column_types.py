"""The `columns:` mapping of a `table` source and the `text:` options of a `text_folder`:
each column's declared type and its options (see `graphfit.tabular.columns.OPTIONS`),
checked without reading the data (a column whose type is inferred is checked when it is).
"""

from __future__ import annotations

from graphfit.recipes.reading.problems import short_repr
from graphfit.recipes.reading.schema import INVALID, shown
from graphfit.tabular.columns import TYPES, option_problems

__all__ = ["check_columns", "check_text_options"]


def _missing_form(options: dict) -> dict:
    """`missing: constant VALUE` written as one string: {constant: VALUE}."""
    value = options.get("missing")
    if isinstance(value, str) and value.startswith("constant "):
        options["missing"] = {"constant": value[len("constant "):]}
    return options


def check_columns(value, path, checker):
    if value is None:
        return {}
    if not isinstance(value, dict):
        checker.report(path, f"must be a mapping {{column: {{type: ..., options}}}}, got "
                             f"{shown(value)}")
        return INVALID
    resolved = {}
    for name, entry in value.items():
        where = path + (name,)
        if isinstance(entry, str):  # `age: numeric`: the type alone
            entry = {"type": entry}
        if not isinstance(entry, dict):
            checker.report(where, f"must be a type ({' | '.join(TYPES)}) or a mapping with "
                                  f"type and options, got {shown(entry)}")
            continue
        options = _missing_form(dict(entry))
        kind = options.pop("type", None)
        if kind is not None and kind not in TYPES:
            checker.report(where + ("type",), f"must be one of {' | '.join(TYPES)}, got "
                                              f"{short_repr(kind)}")
            continue
        if kind is not None:
            for key, message in option_problems(kind, options):
                checker.report(where + (key,), message)
        resolved[str(name)] = dict(options, **({"type": kind} if kind else {}))
    return resolved


def check_text_options(value, path, checker):
    if value is None:
        return {}
    if not isinstance(value, dict):
        checker.report(path, f"must be a mapping of text options, got {shown(value)}")
        return INVALID
    options = _missing_form(dict(value))
    for key, message in option_problems("text", options):
        checker.report(path + (key,), message)
    return options

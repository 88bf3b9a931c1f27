"""Python functions that layers take as arguments, and their `'module:name'` references.

A layer that runs a user's function (BlackBox's F, GradientHook's `fn`) accepts the function
itself or a reference `'package.module:name'` to it. Configs and recipes hold the reference:
it is plain data, and importing it gives the same function back in another process.

Example:

    >>> from graphfit.layers import user_functions
    >>> user_functions.resolve("function", "math:sqrt", "BlackBox 'plant'")(9.0)
    3.0
    >>> import math
    >>> user_functions.reference_of(math.sqrt)
    'math:sqrt'
"""

from __future__ import annotations

import importlib
from typing import Callable

__all__ = ["resolve", "reference_of", "config_reference"]


def resolve(argument: str, value, owner: str) -> Callable:
    """`value` as a callable: itself when callable, else the import of `'module:name'`.

    Args:
        argument: the constructor argument's name, for messages.
        value: a callable or a string `'module:name'` (`name` may be dotted: `Class.method`).
        owner: who asks, e.g. "BlackBox 'plant'", for messages.

    Raises:
        ValueError: `value` is neither, or the reference does not import or is not callable.
    """
    if callable(value):
        return value
    if not isinstance(value, str) or value.count(":") != 1 or value.startswith(":") \
            or value.endswith(":"):
        raise ValueError(
            f"{owner}: {argument} must be a callable or a reference 'package.module:name' to "
            f"one. Received: {argument}={value!r}")
    module_name, attribute = value.split(":")
    try:
        found = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"{owner}: {argument}={value!r} names the module {module_name!r}, which does not "
            f"import ({error}). Check the spelling, and that the module is on the Python "
            f"path.") from error
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ValueError(
                f"{owner}: {argument}={value!r}: module {module_name!r} has no attribute "
                f"{attribute!r}.")
        found = getattr(found, part)
    if not callable(found):
        raise ValueError(
            f"{owner}: {argument}={value!r} names a {type(found).__name__}, not a function.")
    return found


def reference_of(function) -> str | None:
    """`'module:qualname'` that imports back to `function` itself, or None (a lambda, a
    function defined inside another, a bound method, a callable object)."""
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    reference = f"{module}:{qualname}"
    try:
        found = resolve("function", reference, "")
    except ValueError:
        return None
    return reference if found is function else None


def config_reference(argument: str, given, function, owner: str) -> str:
    """What a config stores for a function argument: the reference given, or one found for
    the callable given.

    Raises:
        ValueError: the callable cannot be named by an import (a lambda, a closure).
    """
    if isinstance(given, str):
        return given
    reference = reference_of(function)
    if reference is None:
        raise ValueError(
            f"{owner}: get_config() cannot name {argument}={function!r}: only a function "
            f"defined at the top level of a module can be written in a config. Define it at "
            f"module level (or pass {argument}='package.module:name'), or keep the model in "
            f"Python instead of a config or recipe.")
    return reference

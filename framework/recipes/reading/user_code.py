"""The user's code a recipe names: importing it, calling it, and what it may name.

A recipe reaches Python code in four ways: `imports:` (modules), `class_path:` (a class),
`data.function:` (a function) and a layer's function argument (`Layer.function_arguments`:
BlackBox's `function`, GradientHook's `fn`). Whatever that code does while it is imported or
called (raise, fail to compile, call `sys.exit`) becomes a `UserCodeError` whose message shows
the user's own error and the user's own file and line, never graphfit's frames; the recipe
checks report it at the entry that named the code.

What a recipe may name (outside safe mode): a Python function or class (`def` or `class`
source code), defined in a module that is not part of Python's standard library. That refuses
builtins and C functions (`os:system`, `builtins:eval`), and the standard library's Python
functions that run commands or code (`subprocess:run`), whichever module re-exports them,
because the test is on where the object was defined, not on the name written in the recipe.
A recipe is data: naming code should never turn it into a shell. Safe mode, which imports
nothing, refuses by name what it can: a reference whose top-level module is in the standard
library (`check_not_standard_library`). `imports:` never takes a standard-library module.

Example:

    >>> check_runnable(len, "builtins:len")
    Traceback (most recent call last):
    ...
    graphfit.recipes.reading.user_code.UserCodeError: builtins:len is a built-in function; ...
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import sys
import sysconfig
import traceback

from graphfit.recipes.reading.problems import Position, dotted

__all__ = ["UserCodeError", "CodeReference", "import_module", "import_attribute", "call",
           "check_runnable", "check_not_standard_library", "check_importable",
           "code_references", "describe_error", "user_frame", "is_library_file"]


class UserCodeError(ValueError):
    """The user's code named by a recipe cannot be imported, found, or run."""


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    for name, module in list(sys.modules.items()):
        if name == "graphfit" or name.startswith("graphfit."):
            roots.update(getattr(module, "__path__", []) or [])
    return tuple(os.path.realpath(root) + os.sep for root in roots if root)


def is_library_file(name: str) -> bool:
    """Whether source file `name` is not the user's: Python's, an installed package's,
    graphfit's, generated code (`<string>`, tf.function's converted copies)."""
    return (name.startswith("<") or "__autograph_generated_file" in name
            or os.path.realpath(name).startswith(_library_roots()))


def user_frame(error: BaseException) -> str | None:
    """`file:line` of the deepest frame of the user's own code in the error's traceback."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if not is_library_file(frame.filename):
            return f"{frame.filename}:{frame.lineno}"
    return None


_user_frame = user_frame


def describe_error(error: BaseException) -> str:
    """The user's error as one line: its type, message and the user's file:line."""
    if isinstance(error, SystemExit):
        return (f"it called sys.exit({error.code!r}); a module a recipe names must not exit "
                f"(guard script code with `if __name__ == \"__main__\":`)")
    if isinstance(error, SyntaxError):
        return f"SyntaxError: {error.msg} ({error.filename}, line {error.lineno})"
    message = " ".join(str(error).split())
    where = _user_frame(error)
    return (f"{type(error).__name__}: {message}" if message else type(error).__name__) + (
        f" (at {where})" if where else "")


def import_module(name: str):
    """Imports a module of the user's; every failure becomes a `UserCodeError`."""
    try:
        return importlib.import_module(name)
    except KeyboardInterrupt:
        raise
    except ModuleNotFoundError as error:
        if error.name and (name == error.name or name.startswith(error.name + ".")):
            raise UserCodeError(f"cannot import {name!r}: no module named {error.name!r} (a "
                                f"module next to the recipe is found; is the name right?)"
                                ) from None
        raise UserCodeError(f"cannot import {name!r}: {describe_error(error)}") from error
    except BaseException as error:  # SystemExit included: the user's module must not end us
        raise UserCodeError(f"cannot import {name!r}: {describe_error(error)}") from error


def import_attribute(reference: str, separator: str):
    """`package.module.Class` (separator ".") or `package.module:function` (":").

    Raises:
        UserCodeError: saying which part could not be imported or found, or what the module
            did while it was imported.
    """
    from graphfit.core.registry import did_you_mean

    module_name, _, attribute = reference.rpartition(separator)
    if not module_name or not attribute:
        form = "package.module.Class" if separator == "." else "package.module:function"
        raise UserCodeError(f"must look like {form!r}, got {reference!r}")
    module = import_module(module_name)
    if not hasattr(module, attribute):
        public = [n for n in dir(module) if not n.startswith("_")]
        hint = did_you_mean(attribute, public, "; did you mean {!r}?")
        raise UserCodeError(f"module {module_name!r} has no attribute {attribute!r}{hint}")
    return getattr(module, attribute)


def _standard_library(module_name: str | None) -> bool:
    top = (module_name or "builtins").partition(".")[0]
    return top in sys.stdlib_module_names or top == "builtins"


def check_runnable(obj, reference: str) -> None:
    """Refuses what a recipe may not name (see the module docstring for the rule)."""
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        kind = ("a built-in function" if inspect.isbuiltin(obj)
                else f"a {type(obj).__name__}, not a Python function or class")
        raise UserCodeError(f"{reference} is {kind}; a recipe may name only Python functions "
                            f"and classes of your own modules")
    module = getattr(obj, "__module__", None)
    if _standard_library(module):
        raise UserCodeError(f"{reference} is defined in Python's standard library "
                            f"({module}); a recipe may name only functions and classes of "
                            f"your own or installed packages' modules")


def check_not_standard_library(reference: str) -> None:
    """Refuses, from the name alone (importing nothing), a `class_path` or `data.function`
    reference into Python's standard library: what safe mode can check of the rule above."""
    top = reference.strip().partition(":")[0].partition(".")[0]
    if _standard_library(top):
        raise UserCodeError(f"{reference} names a module of Python's standard library "
                            f"({top}); a recipe may name only functions and classes of your "
                            f"own or installed packages' modules")


def check_importable(name: str) -> None:
    """Refuses an `imports:` entry that is a standard-library module (importing nothing):
    such a module registers no graphfit class, and importing one only runs its code."""
    top = name.strip().partition(".")[0]
    if _standard_library(top):
        raise UserCodeError(f"{name!r} is a module of Python's standard library; 'imports:' is "
                            f"for your own (or installed) modules that register layers, "
                            f"losses or callbacks, and a standard-library module registers "
                            f"nothing (importing it would only run its code). Remove it")


def call(function, reference: str, arguments: dict):
    """Calls the user's `function(**arguments)`; every failure becomes a `UserCodeError`."""
    try:
        return function(**arguments)
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        raise UserCodeError(f"{reference} failed: {describe_error(error)}") from error


@dataclasses.dataclass(frozen=True)
class CodeReference:
    """One piece of the user's code that a recipe would import or run.

    Attributes:
        path: the recipe key naming it, such as ("data", "function").
        kind: "module" (imported), "class" (imported, then constructed) or "function"
            (imported, then called).
        reference: what the recipe wrote: `package.module`, `package.module.Class` or
            `package.module:function`.
        position: where it was written.
    """

    path: tuple
    kind: str
    reference: str
    position: Position | None = None

    def __str__(self) -> str:
        actions = {"module": "imports module", "class": "imports and constructs class",
                   "function": "imports and calls function"}
        where = f"{self.position}: " if self.position else ""
        return f"{where}{dotted(self.path)}: {actions[self.kind]} {self.reference}"


def _function_arguments(type_name) -> tuple[str, ...]:
    """The function-reference arguments (`Layer.function_arguments`) of the built-in layer
    `type_name`; none for anything else (a class graphfit has not registered is user code
    already, listed by its `imports:` or `class_path`)."""
    if not isinstance(type_name, str):
        return ()
    from graphfit.core.registry import LAYERS  # graphfit's own layers: imports no user code

    cls = LAYERS.get(type_name) if type_name in LAYERS.names() else None
    return tuple(getattr(cls, "function_arguments", ()))


def code_references(data, position) -> list[CodeReference]:
    """Every module, class and function of the user's that the recipe `data` names, in
    reading order; `position(path)` gives where each was written. Imports nothing."""
    found: list[CodeReference] = []

    def add(path, kind, reference):
        if isinstance(reference, str) and reference.strip():
            found.append(CodeReference(tuple(path), kind, reference, position(path)))

    def walk(value, path):
        if isinstance(value, dict):
            if value.get("source") == "function":
                add(path + ("function",), "function", value.get("function"))
            for argument in _function_arguments(value.get("type")):
                add(path + (argument,), "function", value.get(argument))
            add(path + ("class_path",), "class", value.get("class_path"))
            for key, item in value.items():
                walk(item, path + (key,))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, path + (index,))

    if isinstance(data, dict):
        imports = data.get("imports")
        for index, name in enumerate(imports if isinstance(imports, list) else []):
            add(("imports", index), "module", name)
        walk({k: v for k, v in data.items() if k != "imports"}, ())
    return found

"""The public boundary: no module reaches another module's `_private` names.

DESIGN.md: "Each package exports its public names in `__all__`; no module imports another's
`_private` names." This test parses every source file of the package (framework/, layers/,
optimizers/, callbacks/) and fails on

1. `from graphfit... import _name`, or an import of a graphfit module whose dotted path has a
   `_private` part (`graphfit.layers._arguments`);
2. `module._name`, where `module` is a name bound by importing a graphfit module
   (`transforms._positive`, `schedules._BUILT_IN`);
3. `obj._name` on any other object but `self`, `cls` and `super()`, unless the same file
   defines `_name` (a module may use its own private names) or `_name` belongs to a
   third-party object (listed below, with the reason);

and checks that every package `__init__.py` there defines `__all__`, naming only names it has.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The folders and the packages setuptools maps them onto (pyproject.toml `package-dir`).
PACKAGES = {"framework": "graphfit", "layers": "graphfit.layers",
            "optimizers": "graphfit.optimizers", "callbacks": "graphfit.callbacks"}

# Private attributes of TensorFlow and Keras objects, which graphfit cannot rename.
THIRD_PARTY = {
    "_stats_registry": "tensorflow.python.framework.ops: the registry of op FLOP statistics",
    "_get_function": "tf.Graph: looks up a function a traced graph calls",
    "_flatten_layers": "keras.layers.Layer: its sublayers (Keras has no public walk)",
    "_value": "a Keras 3 variable's backing tf.Variable",
    "_replace": "typing.NamedTuple: its documented copy-with-changes method",
}

# Violations in files this change did not own. Owned by lead, to be fixed; then remove them.
LEAD_TO_FIX: dict = {}  # (file, what) -> why it is still here


def _sources() -> list[pathlib.Path]:
    return sorted(path for folder in PACKAGES for path in (ROOT / folder).rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(module: str, name: str | None = None) -> bool:
    """Whether `module` (or its attribute `name`) is a graphfit module."""
    try:
        value = importlib.import_module(module)
        if name is not None:
            value = getattr(value, name, None)
            if value is None:
                value = importlib.import_module(f"{module}.{name}")
    except ImportError:
        return False
    return isinstance(value, types.ModuleType)


def _module_names(tree: ast.AST) -> set[str]:
    """Names the file binds to graphfit modules (`from graphfit.core import registry`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("graphfit") and alias.asname:
                    names.add(alias.asname)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("graphfit"):
            for alias in node.names:
                if _is_module(node.module, alias.name):
                    names.add(alias.asname or alias.name)
    return names


def _own_names(tree: ast.AST) -> set[str]:
    """Private names the file defines: functions, classes, assignments, `self._x = ...`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {name for name in names if _private(name)}


def _import_problems(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [f"import of private module {a.name}" for a in node.names
                if a.name.startswith("graphfit") and any(map(_private, a.name.split(".")))]
    module = node.module or ""
    if not module.startswith("graphfit"):
        return []
    problems = [f"import {a.name}" for a in node.names if _private(a.name)]
    if any(map(_private, module.split("."))):
        problems.append(f"import from private module {module}")
    return problems


def _attribute_problem(node: ast.Attribute, modules: set[str], own: set[str]) -> str | None:
    if not _private(node.attr):
        return None
    value = node.value
    if isinstance(value, ast.Name) and value.id in modules:
        return f".{node.attr}"  # a module's private name: never allowed
    if isinstance(value, ast.Name) and value.id in ("self", "cls"):
        return None
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id == "super"):
        return None
    if node.attr in own or node.attr in THIRD_PARTY:
        return None
    return f".{node.attr}"


def _violations(path: pathlib.Path) -> list[tuple[str, int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    modules, own = _module_names(tree), _own_names(tree)
    relative = path.relative_to(ROOT).as_posix()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            problems = _import_problems(node)
        elif isinstance(node, ast.Attribute):
            problems = [p for p in [_attribute_problem(node, modules, own)] if p]
        else:
            continue
        found += [(relative, node.lineno, problem) for problem in problems]
    return found


def test_no_module_reaches_another_modules_private_names():
    found = [v for path in _sources() for v in _violations(path)]
    unexpected = [f"{file}:{line}: {what}" for file, line, what in found
                  if (file, what) not in LEAD_TO_FIX]
    assert not unexpected, (
        "Private names used across modules (make the name public and documented, or list a "
        "third-party attribute in THIRD_PARTY with the reason):\n" + "\n".join(unexpected))


def test_lead_allowlist_has_no_stale_entries():
    found = {(file, what) for path in _sources() for file, _, what in _violations(path)}
    stale = [entry for entry in LEAD_TO_FIX if entry not in found]
    assert not stale, f"Fixed: remove from LEAD_TO_FIX: {stale}"


def _packages() -> list[str]:
    names = []
    for folder, package in PACKAGES.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            parts = init.parent.relative_to(ROOT / folder).parts
            names.append(".".join([package, *parts]))
    return names


@pytest.mark.parametrize("package", _packages())
def test_package_declares_all_and_every_name_exists(package):
    module = importlib.import_module(package)
    assert hasattr(module, "__all__"), f"{package}/__init__.py defines no __all__"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not have: {missing}"


def test_the_checker_catches_each_kind_of_violation(tmp_path):
    source = tmp_path / "bad.py"
    source.write_text(
        "from graphfit.core.registry import _same_definition\n"
        "from graphfit.optimizers import schedules\n"
        "import graphfit.layers._hidden as hidden\n"
        "names = schedules._BUILT_IN\n"
        "def f(layer):\n"
        "    return layer._secret, layer._value\n")
    tree = ast.parse(source.read_text())
    modules, own = _module_names(tree), _own_names(tree)
    problems = [p for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for p in _import_problems(node)]
    problems += [p for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                 for p in [_attribute_problem(node, modules, own)] if p]
    assert sorted(problems) == sorted([
        "import _same_definition", "import of private module graphfit.layers._hidden",
        "._BUILT_IN", "._secret"])

"""The engine's layout holds (docs/guides/architecture.md): the training package and the core
name no concrete layer or optimizer, callbacks read only the model's public attributes, and the
files and functions of core/ and training/ stay small.

Static checks: every source file is parsed, imports anywhere in a file included.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import graphfit as gf
from graphfit import layers, optimizers

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENGINE = ("framework/core", "framework/training")
# What the engine may not import: concrete layers, and Levenberg–Marquardt's machinery.
FORBIDDEN_IMPORTS = ("graphfit.layers", "graphfit.optimizers.levenberg_marquardt")
# The extension points' base classes, which the engine may name.
GENERIC_NAMES = {"Layer", "BaseOptimizer", "Optimizer", "SecondOrderOptimizer",
                 "GradientTransform", "Chain", "chain", "get", "serialize", "deserialize",
                 "schedules", "transforms", "after_update"}


def _engine_files() -> list[pathlib.Path]:
    return sorted(path for folder in ENGINE for path in (ROOT / folder).glob("*.py"))


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def test_engine_files_are_found():
    names = {path.name for path in _engine_files()}
    assert {"step_context.py", "layer.py", "compiled_steps.py", "loops.py"} <= names


@pytest.mark.parametrize("path", _engine_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_engine_imports_no_layer_and_no_levenberg_marquardt(path):
    tree = ast.parse(path.read_text())
    bad = [(line, module) for line, module in _imported_modules(tree)
           if any(module == f or module.startswith(f + ".") for f in FORBIDDEN_IMPORTS)]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def _concrete_names() -> set[str]:
    names = set(layers.__all__) | set(optimizers.__all__)
    return {name for name in names if name[:1].isupper()} - GENERIC_NAMES


def test_concrete_names_are_the_library():
    names = _concrete_names()
    assert {"Dense", "ClassMeans", "Embedding", "GINConv", "BlackBox", "LevenbergMarquardt",
            "SGD", "PerExampleClipping", "LossScaleOptimizer", "CenterLoss"} <= names


@pytest.mark.parametrize("path", _engine_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_engine_code_names_no_concrete_layer_or_optimizer(path):
    """In code, not prose: names, attributes and isinstance targets."""
    concrete = _concrete_names()
    used = []
    for node in ast.walk(ast.parse(path.read_text())):
        name = (node.id if isinstance(node, ast.Name)
                else node.attr if isinstance(node, ast.Attribute) else None)
        if name in concrete:
            used.append((node.lineno, name))
    assert not used, f"{path.relative_to(ROOT)} names {used}"


def _public_model_attributes() -> set[str]:
    model = gf.Sequential([layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    names = set(dir(type(model))) | set(vars(model))
    return {name for name in names if not name.startswith("_")} - {"compile_state"}


def _model_attribute_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, attribute) for every `model.x`, `self.model.x` and `getattr(model, "x")`."""

    def is_model(node) -> bool:
        return (isinstance(node, ast.Name) and node.id == "model") or (
            isinstance(node, ast.Attribute) and node.attr == "model")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_model(node.value):
            found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
              and is_model(node.args[0]) and isinstance(node.args[1], ast.Constant)):
            found.append((node.lineno, node.args[1].value))
    return found


def test_callbacks_use_only_public_model_attributes():
    public = _public_model_attributes()
    assert {"optimizer", "step_recorders", "stop_reason", "train_step_graph"} <= public
    files = sorted((ROOT / "callbacks").rglob("*.py"))
    uses = {path: _model_attribute_uses(ast.parse(path.read_text())) for path in files}
    assert sum(map(len, uses.values())) > 20  # the walk finds the callbacks' model uses
    bad = {str(path.relative_to(ROOT)): [(line, name) for line, name in found
                                         if name not in public]
           for path, found in uses.items()}
    assert not {k: v for k, v in bad.items() if v}


MAX_FILE_LINES, MAX_FUNCTION_LINES = 400, 60


@pytest.mark.parametrize("path", _engine_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_engine_files_and_functions_are_small(path):
    text = path.read_text()
    assert text.count("\n") < MAX_FILE_LINES, f"{path.relative_to(ROOT)} is too long"
    long = [(node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{path.relative_to(ROOT)}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_only_update_hooks_and_the_step_context_keep_a_stack():
    """Module-global stacks only where the semantics need one: the update hooks a forward
    pass collects, and the one open step's context."""
    owners = sorted(
        str(path.relative_to(ROOT))
        for folder in ("framework", "layers", "optimizers", "callbacks")
        for path in (ROOT / folder).rglob("*.py")
        if any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ContextStack"
               for node in ast.walk(ast.parse(path.read_text()))))
    assert owners == ["framework/core/step_context.py", "framework/core/update_hooks.py"]

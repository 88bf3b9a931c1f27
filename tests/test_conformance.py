"""Conformance from the registries: every registered layer (models included) goes through the
layer contract and every registered optimizer through the optimizer contract, with the small
example arguments of `graphfit.testing.examples`. A registered class without an example fails
here, so no layer or optimizer skips its contract."""

from __future__ import annotations

import sys

import pytest

from graphfit.core.registry import LAYERS, OPTIMIZERS, Registry
from graphfit.models.model import Model
from graphfit.testing import LAYER_EXAMPLES, OPTIMIZER_EXAMPLES

EXAMPLES_MODULE = "graphfit/testing/examples.py (framework/testing/examples.py)"


def built_in_names(registry: Registry) -> list[str]:
    """Names of classes that graphfit itself defines and registers.

    A class counts when it lives in a graphfit module and is reachable there by its name:
    that leaves out what tests and docstring examples register while the suite runs (classes
    defined inside functions or doctests), and what users register from their own modules.
    """
    names = []
    for name in registry.names():
        cls = registry.get(name)
        module = sys.modules.get(cls.__module__)
        if cls.__module__.startswith("graphfit.") and getattr(module, cls.__qualname__,
                                                              None) is cls:
            names.append(name)
    return names


# Read once, at collection, before any test registers a class of its own.
LAYER_NAMES = built_in_names(LAYERS)
OPTIMIZER_NAMES = built_in_names(OPTIMIZERS)


def _missing_message(kind: str, table: str, missing: list[str]) -> str:
    return (
        f"Registered {kind}s without example arguments: {', '.join(missing)}. Add an entry to "
        f"{table} in {EXAMPLES_MODULE} so that each goes through the {kind} contract."
    )


def test_every_registered_class_has_examples_and_every_example_a_class():
    layers_missing = [n for n in built_in_names(LAYERS) if n not in LAYER_EXAMPLES]
    assert not layers_missing, _missing_message("layer", "LAYER_EXAMPLES", layers_missing)
    optimizers_missing = [n for n in built_in_names(OPTIMIZERS) if n not in OPTIMIZER_EXAMPLES]
    assert not optimizers_missing, _missing_message("optimizer", "OPTIMIZER_EXAMPLES",
                                                    optimizers_missing)
    stale = sorted(set(LAYER_EXAMPLES) - set(LAYER_NAMES)) + sorted(
        set(OPTIMIZER_EXAMPLES) - set(OPTIMIZER_NAMES))
    assert not stale, f"Examples for names nothing registers: {', '.join(stale)}"
    assert {"Sequential", "GraphModel", "Dense"} <= set(LAYER_NAMES)


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_layer_contract(name):
    examples = LAYER_EXAMPLES.get(name)
    assert examples, _missing_message("layer", "LAYER_EXAMPLES", [name])
    for example in examples:
        example.run(LAYERS.get(name))


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_layer_is_documented_and_declares_its_xla_flag(name):
    cls = LAYERS.get(name)
    assert cls.__doc__ and "Example" in cls.__doc__, f"{name}'s docstring needs an Example"
    if not issubclass(cls, Model):  # a model's flag comes from the layers it holds
        flag = getattr(cls, "xla_friendly_on_cpu", None)
        assert isinstance(flag, bool), (
            f"{name} must declare xla_friendly_on_cpu = True or False (measured on CPU)"
        )


@pytest.mark.parametrize("name", OPTIMIZER_NAMES)
def test_optimizer_contract(name):
    examples = OPTIMIZER_EXAMPLES.get(name)
    assert examples, _missing_message("optimizer", "OPTIMIZER_EXAMPLES", [name])
    for example in examples:
        example.run()

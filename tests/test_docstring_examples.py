"""Every example in graphfit's docstrings runs and prints what it says."""

import doctest
import importlib
import pkgutil

import pytest

import graphfit
from graphfit import callbacks, layers, optimizers, recipes

# The subpackages live in their own folders (package-dir), so each is walked on its own.
MODULES = sorted(
    {package.__name__ for package in (graphfit, layers, optimizers, callbacks, recipes)}
    | {
        info.name
        for package in (graphfit, layers, optimizers, callbacks, recipes)
        for info in pkgutil.iter_modules(package.__path__, prefix=package.__name__ + ".")
        if not info.ispkg
    }
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"

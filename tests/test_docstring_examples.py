"""Every example in graphfit's docstrings runs and prints what it says."""

import doctest
import importlib
import pkgutil

import pytest

import graphfit
from graphfit import callbacks, layers, optimizers

# The root packages live in their own folders (package-dir), so each is walked on its own,
# with every subpackage below it.
MODULES = sorted(
    {package.__name__ for package in (graphfit, layers, optimizers, callbacks)}
    | {
        info.name
        for package in (graphfit, layers, optimizers, callbacks)
        for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")
    }
)


def test_every_package_is_walked():
    assert "graphfit.training.compiled_steps" in MODULES
    assert "graphfit.optimizers.levenberg_marquardt.optimizer" in MODULES
    assert "graphfit.datasets" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"

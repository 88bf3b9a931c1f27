"""Public names of a package that load on first use (PEP 562), for its `__init__`.

`import graphfit`, its command line's `--help`, and reading a recipe's YAML must not wait
several seconds for TensorFlow because a package's `__init__` imported everything it
exports. Each such package keeps a table of its public names and gets its module-level
`__getattr__` and `__dir__` from `lazy_names`:

    >>> table = {"sqrt": ("math", "sqrt"), "json": ("json", None), "dumps": "json"}
    >>> namespace = {}
    >>> getattr_, dir_ = lazy_names("example", table, namespace)
    >>> getattr_("sqrt")(9.0), getattr_("dumps")([1]), getattr_("json").__name__
    (3.0, '[1]', 'json')
    >>> sorted(namespace), dir_()
    (['dumps', 'json', 'sqrt'], ['dumps', 'json', 'sqrt'])
"""

from __future__ import annotations

import importlib
from typing import Callable

__all__ = ["lazy_names"]


def lazy_names(package: str, table: dict, namespace: dict) -> tuple[Callable, Callable]:
    """`(__getattr__, __dir__)` for the package `package`.

    Args:
        package: the package's name, for the error message.
        table: `{public name: module}` (the attribute of that name), or
            `{public name: (module, attribute)}`, attribute None for the module itself.
        namespace: the package's `globals()`: a loaded name is stored there, so later
            lookups skip `__getattr__`.

    A name outside the table raises AttributeError, which lets `from package import x`
    fall back to importing a submodule `x`.
    """

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        target = table[name]
        module_name, attribute = (target, name) if isinstance(target, str) else target
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__

"""Replacing a method of one object for the duration of a block, that object only.

Features that need to see or change what particular layers compute (the output of a named
layer for a Jacobian, a gradient tap's identity, Levenberg–Marquardt's closed-form Jacobian of
a `Dense`) replace the method on those instances while their pass is traced, instead of every
layer reporting to them. The replacement is written into the instance's `__dict__`, where
attribute lookup finds it before the class's method; other instances, the class and other
threads' models are untouched, and the original is put back on exit. Blocks nest: an inner
replacement wraps whatever the outer one installed.

Example:

    >>> class Greeter:
    ...     def greet(self, name):
    ...         return f"hello {name}"
    >>> greeter, other = Greeter(), Greeter()
    >>> with replaced_method(greeter, "greet", lambda greet: lambda name: greet(name).upper()):
    ...     greeter.greet("ada"), other.greet("ada")
    ('HELLO ADA', 'hello ada')
    >>> greeter.greet("ada")
    'hello ada'
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

__all__ = ["replaced_method"]

_ABSENT = object()


@contextlib.contextmanager
def replaced_method(obj: Any, name: str, make: Callable[[Callable], Callable]) -> Iterator[None]:
    """Inside the block, `obj.<name>` is `make(current)`, where `current` is the bound method
    (or the replacement an enclosing block installed) that the replacement may call.

    Args:
        obj: the object whose method to replace (an instance, never a class).
        name: the method's name.
        make: builds the replacement from the current method.
    """
    namespace = vars(obj)
    before = namespace.get(name, _ABSENT)
    namespace[name] = make(getattr(obj, name))
    try:
        yield
    finally:
        if before is _ABSENT:
            del namespace[name]
        else:
            namespace[name] = before

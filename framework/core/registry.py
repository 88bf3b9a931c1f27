"""Name registries: how a recipe's `type: Dense` finds the class `Dense`.

Each family (layers, optimizers, callbacks) has one `Registry`. Built-in classes register
themselves with the decorator; user classes do the same, and a recipe reaches them once its
`imports:` list has imported the module that defines them.

Example:

    >>> import graphfit as gf
    >>> @gf.register_layer
    ... class Doubler(gf.Layer):
    ...     def call(self, x, training=False):
    ...         return 2.0 * x
    >>> gf.registry.LAYERS.get("Doubler") is Doubler
    True
"""

from __future__ import annotations

import difflib
import importlib
from typing import Callable, TypeVar

__all__ = ["Registry", "LAYERS", "OPTIMIZERS", "CALLBACKS", "register_layer", "closest",
           "did_you_mean", "unknown_name_error"]

T = TypeVar("T")


def _typo_distance(a: str, b: str) -> int:
    """Edits from `a` to `b`: insertions, deletions, substitutions and swaps of neighbours
    (optimal string alignment), so "adma" is one typo from "adam"."""
    previous, current = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        before, previous, current = previous, current, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1,
                             previous[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
    return current[len(b)]


def closest(name: str, candidates) -> str | None:
    """The candidate that looks most like `name`, or None when nothing is close.

    Among the close candidates (difflib's), the fewest typos away wins: "adma" is "Adam"
    (one swap), not the longer "Adamax" that difflib ranks first.
    """
    candidates = [c for c in candidates if isinstance(c, str)]  # an invalid entry: skipped
    matches = difflib.get_close_matches(name.lower(), {c.lower() for c in candidates}, n=5,
                                        cutoff=0.6)
    if not matches:
        return None
    # min keeps the first of equals, so ties go as difflib ranks them.
    match = min(matches, key=lambda c: _typo_distance(name.lower(), c))
    # "Dense" and "dense" fold together: prefer the one whose case matches best.
    same = [c for c in candidates if c.lower() == match]
    return max(same, key=lambda c: difflib.SequenceMatcher(None, name, c).ratio())


def did_you_mean(name: str, candidates, template: str = " Did you mean {!r}?",
                 otherwise: str = "") -> str:
    """The "did you mean" hint of an error message: the one home of that wording.

    Args:
        name: the unknown name the user wrote.
        candidates: the valid names.
        template: the hint, with `{!r}` where the closest candidate goes; the default suits a
            message of sentences, "; did you mean {!r}?" a recipe problem.
        otherwise: the text when no candidate is close (or the closest is `name` itself).

    Returns:
        The hint, e.g. " Did you mean 'Dense'?", or `otherwise`.

    Example:

        >>> did_you_mean("Dens", ["Dense", "Dropout"])
        " Did you mean 'Dense'?"
        >>> did_you_mean("xyz", ["Dense"], "; did you mean {!r}?", otherwise=".")
        '.'
    """
    suggestion = closest(str(name), candidates)
    return template.format(suggestion) if suggestion and suggestion != name else otherwise


def unknown_name_error(kind: str, name: str, valid, advice: str) -> ValueError:
    """"Unknown {kind} 'x'. Did you mean 'y'? Valid {kind} names: ...; {advice}" as an error."""
    hint = did_you_mean(name, valid)
    return ValueError(
        f"Unknown {kind} {name!r}.{hint} Valid {kind} names: {', '.join(sorted(valid))}; {advice}"
    )


class Registry:
    """A mapping from names to classes of one family, with helpful lookup errors.

    Args:
        kind: what the family holds, used in messages ("layer", "optimizer", ...).
        builtins: the module whose import registers the built-in classes; imported on the
            first lookup, so a lookup never depends on what the caller happened to import.
    """

    def __init__(self, kind: str, builtins: str | None = None):
        self.kind = kind
        self._builtins = builtins
        self._registered: dict[str, type] = {}

    @property
    def _entries(self) -> dict[str, type]:
        if self._builtins is not None:
            module, self._builtins = self._builtins, None  # once; the import registers
            importlib.import_module(module)
        return self._registered

    def register(self, cls: type[T] | None = None, *, name: str | None = None):
        """Registers `cls` under `name` (default: the class name). Usable as a decorator.

        Raises:
            ValueError: if a different class already holds the name.
        """

        def add(target: type[T]) -> type[T]:
            key = name or target.__name__
            existing = self._entries.get(key)
            if existing is not None and existing is not target and not _same_definition(
                existing, target
            ):
                raise ValueError(
                    f"A {self.kind} named {key!r} is already registered "
                    f"({existing.__module__}.{existing.__qualname__}). Register "
                    f"{target.__module__}.{target.__qualname__} under another name with "
                    f"register(name=...)."
                )
            self._entries[key] = target
            return target

        return add(cls) if cls is not None else add

    def get(self, name: str) -> type:
        """The class registered as `name`.

        Raises:
            ValueError: naming the unknown name, the closest known name and all valid names.
        """
        if name in self._entries:
            return self._entries[name]
        hint = did_you_mean(name, self._entries)
        raise ValueError(
            f"Unknown {self.kind} {name!r}.{hint} Known {self.kind}s: "
            f"{', '.join(sorted(self._entries))}. A user class must be registered with "
            f"the register decorator and its module imported first."
        )

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries


def _same_definition(a: type, b: type) -> bool:
    # Re-running a module (a notebook cell, importlib.reload) defines the class again.
    return a.__module__ == b.__module__ and a.__qualname__ == b.__qualname__


LAYERS = Registry("layer", builtins="graphfit.layers")
OPTIMIZERS = Registry("optimizer", builtins="graphfit.optimizers")
CALLBACKS = Registry("callback", builtins="graphfit.callbacks")
# Losses of graphfit's or a user's own, reached by name in compile(loss=...) and recipes
# besides Keras's (graphfit's own read a layer's state, so they live with the layers).
LOSSES = Registry("loss", builtins="graphfit.layers")


def register_layer(cls: type[T] | None = None, *, name: str | None = None) -> Callable | type[T]:
    """Decorator that makes a `Layer` subclass reachable by name from recipes and configs."""
    return LAYERS.register(cls, name=name)

"""Names: Keras-style snake case and unique default layer names."""

from __future__ import annotations

import contextlib
import re

__all__ = ["snake_case", "unique_name", "names_unchanged"]

_counters: dict[str, int] = {}  # base name -> how many names it has given


def snake_case(name: str) -> str:
    """'Conv2D' -> 'conv2d', 'BatchNormalization' -> 'batch_normalization' (Keras's rule)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def unique_name(base: str) -> str:
    """'dense', then 'dense_1', 'dense_2', ... within this process (as Keras names layers)."""
    index = _counters.get(base, 0)
    _counters[base] = index + 1
    return base if index == 0 else f"{base}_{index}"


@contextlib.contextmanager
def names_unchanged():
    """Layers made inside take names without using them up (recipe checks build trial
    instances; the real model must still get 'conv2d', not 'conv2d_1')."""
    saved = dict(_counters)
    try:
        yield
    finally:
        _counters.clear()
        _counters.update(saved)

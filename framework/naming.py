"""Names: Keras-style snake case and unique default layer names."""

from __future__ import annotations

import itertools
import re

__all__ = ["snake_case", "unique_name"]

_counters: dict[str, itertools.count] = {}


def snake_case(name: str) -> str:
    """'Conv2D' -> 'conv2d', 'BatchNormalization' -> 'batch_normalization' (Keras's rule)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def unique_name(base: str) -> str:
    """'dense', then 'dense_1', 'dense_2', ... within this process (as Keras names layers)."""
    index = next(_counters.setdefault(base, itertools.count()))
    return base if index == 0 else f"{base}_{index}"

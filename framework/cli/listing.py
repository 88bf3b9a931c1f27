"""What `graphfit list` prints, from a snapshot shipped with graphfit.

Listing the built-in names must not wait for TensorFlow (several seconds), so the catalog
(`graphfit.recipes.reading.catalog`, which imports every layer, optimizer and Keras) is
written once into `catalog.json` beside this file; a test fails when the two differ.
Regenerate it with:

    python -m graphfit.cli.listing --write
"""

from __future__ import annotations

import json
import pathlib
import sys

__all__ = ["KINDS", "SNAPSHOT", "entries", "live_catalog", "write_snapshot"]

KINDS = ("layers", "optimizers", "losses", "metrics", "datasets", "callbacks")
SNAPSHOT = pathlib.Path(__file__).with_name("catalog.json")


def entries(kind: str) -> list[tuple[str, str]]:
    """(name, one-line summary) pairs of one kind, sorted by name, from the snapshot."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}. Received: kind={kind!r}")
    catalog = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    return [(name, summary) for name, summary in catalog[kind]]


def live_catalog() -> dict[str, list[list[str]]]:
    """The catalog computed from the registries now (imports TensorFlow)."""
    from graphfit.recipes.reading import catalog

    return {kind: [list(pair) for pair in catalog.entries(kind)] for kind in KINDS}


def write_snapshot() -> None:
    """Writes `live_catalog()` into the shipped snapshot."""
    text = json.dumps(live_catalog(), indent=1, ensure_ascii=False, sort_keys=True)
    SNAPSHOT.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m graphfit.cli.listing --write")
    write_snapshot()
    print(f"wrote {SNAPSHOT}")

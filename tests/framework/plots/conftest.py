"""Shared helpers: a captured Figure per written PNG, and PNG checks."""

import struct

import pytest

from graphfit.plots import backend


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; fails on anything that is not a PNG."""
    with open(path, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


@pytest.fixture
def figures(monkeypatch):
    """{basename of the PNG: the Figure saved to it}, for the PNGs written during a test."""
    import os

    saved = {}
    original = backend.save_png

    def capture(figure, path, dpi=110):
        saved[os.path.basename(path)] = figure
        return original(figure, path, dpi)

    monkeypatch.setattr(backend, "save_png", capture)
    return saved

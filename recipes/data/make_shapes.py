"""Writes recipes/data/shapes/: small PNG images of circles, squares and triangles.

    python recipes/data/make_shapes.py [--count 80] [--size 32] [--seed 0] [--output DIR]

Each image is one filled shape of a random light colour, size and position on a plain background
of a random dark colour, `size` x `size` RGB. The class is the shape, so a small conv net tells
them apart almost perfectly (recipes/shapes_images.yaml). Pure Python and NumPy (the PNG
encoder is below), so the folder is the same on every machine for the same seed.
"""

from __future__ import annotations

import argparse
import os
import struct
import zlib

import numpy as np

CLASSES = ("circle", "square", "triangle")


def png_bytes(image: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of `image` (height, width, 3)."""
    height, width, _ = image.shape
    raw = b"".join(b"\x00" + image[row].astype(np.uint8).tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def shape_mask(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask of one shape, 30-70 % of the image wide, at a random place."""
    radius = rng.uniform(0.15, 0.35) * size
    cy, cx = rng.uniform(radius + 1, size - radius - 1, size=2)
    y, x = np.mgrid[0:size, 0:size] + 0.5
    if kind == "circle":
        return (y - cy) ** 2 + (x - cx) ** 2 <= radius ** 2
    if kind == "square":
        half = radius * 0.85
        return (np.abs(y - cy) <= half) & (np.abs(x - cx) <= half)
    # an upright triangle: apex at the top, base at the bottom
    top, bottom = cy - radius, cy + radius
    half_width = (y - top) / (2 * radius) * radius * 1.1
    return (y >= top) & (y <= bottom) & (np.abs(x - cx) <= half_width)


def shape_image(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    background = rng.integers(0, 110, size=3)  # a dark background, a light shape
    foreground = rng.integers(150, 256, size=3)
    image = np.empty((size, size, 3), np.int64)
    image[:] = background
    image[shape_mask(kind, size, rng)] = foreground
    return image


def write_shapes(output: str, count: int = 60, size: int = 32, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for kind in CLASSES:
        os.makedirs(os.path.join(output, kind), exist_ok=True)
    for index in range(count):
        for kind in CLASSES:
            path = os.path.join(output, kind, f"{kind}_{index:03d}.png")
            with open(path, "wb") as handle:
                handle.write(png_bytes(shape_image(kind, size, rng)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=80, help="images per class")
    parser.add_argument("--size", type=int, default=32, help="height and width in pixels")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "shapes"))
    args = parser.parse_args()
    write_shapes(args.output, args.count, args.size, args.seed)


if __name__ == "__main__":
    main()

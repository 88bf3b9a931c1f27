"""Small real data sets shipped with graphfit (no download at run time).

- digits: UCI optical recognition of handwritten digits, 1797 images of 8×8 pixels, 10 classes
  (E. Alpaydin, C. Kaynak, 1998; CC BY 4.0).
- breast cancer: UCI Wisconsin diagnostic breast cancer, 569 samples, 30 features, binary
  (W. Wolberg, W. Street, O. Mangasarian, 1995; CC BY 4.0).

Example:

    >>> import graphfit as gf
    >>> x, y = gf.datasets.load_digits()
    >>> x.shape, y.shape, float(x.max())
    ((1797, 64), (1797,), 1.0)
"""

from __future__ import annotations

import gzip
import importlib.resources

import numpy as np

__all__ = ["load_digits", "load_breast_cancer", "names"]


def _data_file(name: str):
    return importlib.resources.files("graphfit").joinpath("data", name)


def load_digits(as_images: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The digits data: (x, y).

    Args:
        as_images: False gives x of shape (1797, 64); True gives (1797, 8, 8, 1) for conv nets.

    Returns:
        x as float32 pixels scaled from 0..16 to [0, 1], y as int32 labels 0..9, in the file's
        order (shuffle or split as you need).
    """
    with _data_file("digits.csv.gz").open("rb") as raw, gzip.open(raw, "rt") as text:
        table = np.loadtxt(text, delimiter=",", dtype=np.float32)
    x = table[:, :64] / 16.0
    y = table[:, 64].astype(np.int32)
    return (x.reshape(-1, 8, 8, 1) if as_images else x), y


def load_breast_cancer() -> tuple[np.ndarray, np.ndarray]:
    """The Wisconsin breast-cancer data: (x, y).

    Returns:
        x as float32 of shape (569, 30), raw features (standardize them before training), and
        y as int32 labels, 0 malignant and 1 benign.
    """
    with _data_file("breast_cancer.csv").open("r") as text:
        table = np.loadtxt(text, delimiter=",", skiprows=1, dtype=np.float64)
    return table[:, :30].astype(np.float32), table[:, 30].astype(np.int32)


def names() -> list[str]:
    """The built-in data sets."""
    return ["digits", "breast_cancer"]

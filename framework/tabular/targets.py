"""Targets, splits and weights of a table: class names to ids, stratified splits, class and
sample weights.

- `ClassNames`: a target column of class names mapped to ids with a Keras `StringLookup`
  whose vocabulary is the training split's names, sorted (so `leave` is 0, `stay` 1); an
  unseen name in another split is an error quoting its line.
- `split_indices`: the seeded, reproducible train / validation / test row indices, stratified
  by a column when asked: each class is shuffled and cut by the fractions on its own, so every
  split holds each class in the data's proportion, within one sample.
- `balanced_class_weight`: Keras / scikit-learn's "balanced" weights,
  `n_samples / (n_classes * count(class))`.

Example:

    >>> names = ClassNames.fit(["stay", "leave", "stay"])
    >>> names.names, names.ids(["leave", "stay"]).tolist()
    (['leave', 'stay'], [0, 1])
    >>> balanced_class_weight([0, 1, 1, 1], 2)
    {0: 2.0, 1: 0.6666666666666666}
"""

from __future__ import annotations

import dataclasses

import numpy as np

from graphfit.tabular.columns import TableError

__all__ = ["ClassNames", "split_indices", "balanced_class_weight"]


@dataclasses.dataclass
class ClassNames:
    """The classes of a target column, in id order.

    Attributes:
        names: the class names; a name's id is its index.

    Example:

        >>> ClassNames.fit(["b", "a", "b"]).names
        ['a', 'b']
    """

    names: list

    @classmethod
    def fit(cls, values) -> "ClassNames":
        """The sorted distinct names of `values` (the training split's targets)."""
        present = sorted({str(v) for v in values if str(v) != ""})
        if len(present) < 2:
            raise TableError(f"the target column has {len(present)} class(es) in the training "
                             f"split ({', '.join(present) or 'none'}); a classifier needs at "
                             f"least two")
        return cls(present)

    def ids(self, values, lines=None, source: str = "the table") -> np.ndarray:
        """int32 ids of `values` (a Keras StringLookup over `names`, no OOV bucket).

        Raises:
            TableError: a value that is not a known class (quoted with its line).
        """
        import keras

        values = np.asarray([str(v) for v in values], dtype=object)
        known = set(self.names)
        for index, value in enumerate(values):
            if value not in known:
                where = f"line {lines[index]}" if lines is not None else f"row {index + 1}"
                raise TableError(f"{source}, {where}: the target {value!r} is not a class of "
                                 f"the training split ({', '.join(self.names)})")
        lookup = keras.layers.StringLookup(vocabulary=self.names, num_oov_indices=0)
        return np.asarray(lookup(values.astype(str))).astype(np.int32)


def split_indices(count: int, validation: float, test: float, seed: int, shuffle: bool,
                  strata=None):
    """(train, validation, test) row indices; by `strata` (a label per row) when given.

    Unstratified: one permutation by `seed`, test last, validation before it (as every
    recipe source splits). Stratified: the same cut per class, classes in sorted order, each
    split's rows then in row order.
    """
    def cut(order):
        n_test, n_val = int(round(len(order) * test)), int(round(len(order) * validation))
        n_train = len(order) - n_test - n_val
        return order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]

    rng = np.random.default_rng(seed)
    if strata is None:
        return cut(rng.permutation(count) if shuffle else np.arange(count))
    strata = np.asarray([str(s) for s in strata], dtype=object)
    pieces = ([], [], [])
    for value in sorted(set(strata)):
        rows = np.flatnonzero(strata == value)
        for piece, chosen in zip(pieces, cut(rng.permutation(rows) if shuffle else rows)):
            piece.append(chosen)
    return tuple(np.sort(np.concatenate(piece)).astype(np.int64) for piece in pieces)


def balanced_class_weight(y, num_classes: int) -> dict:
    """{class id: n_samples / (n_classes * count)} of the labels `y` (sklearn's "balanced");
    a class absent from `y` gets weight 1."""
    y = np.asarray(y).reshape(-1).astype(np.int64)
    counts = np.bincount(y, minlength=num_classes)
    return {k: (float(len(y) / (num_classes * counts[k])) if counts[k] else 1.0)
            for k in range(num_classes)}

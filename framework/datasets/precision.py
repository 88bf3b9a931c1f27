"""The warning for numbers that float32 merges.

graphfit reads numbers as float32 unless asked for float64 (a table's raw form; CSV and NPZ
files in a float32 recipe). float32 keeps about 7 significant digits, so distinct values can
become equal: time stamps 1700000020 and 1700000040 both read as 1700000000, and a fit or a
split then works on data the file does not hold, with no error.

Example:

    >>> import warnings
    >>> exact = np.array([1700000020.0, 1700000040.0])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warned = warn_if_merged("t", exact, exact.astype(np.float32), "data.csv",
    ...                             "keep float64")
    >>> warned, "2 distinct values" in str(caught[0].message)
    (True, True)
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["warn_if_merged"]


def warn_if_merged(name: str, exact: np.ndarray, rounded: np.ndarray, source: str,
                   fix: str) -> bool:
    """Warns when `rounded` (float32) holds fewer distinct finite values than `exact`;
    returns whether it warned.

    Args:
        name: the column or array, for the message.
        exact, rounded: the same values before and after rounding to float32.
        source: the file, for the message.
        fix: how to keep the digits, for the message.
    """
    finite = np.isfinite(exact)
    before = len(np.unique(exact[finite]))
    after = len(np.unique(rounded[finite]))
    if after < before:
        warnings.warn(
            f"{source}: {name} has {before} distinct values but float32 keeps about 7 "
            f"significant digits and leaves {after}. Subtract an offset in the file (a time "
            f"from its start), or {fix}.", stacklevel=4)
    return after < before

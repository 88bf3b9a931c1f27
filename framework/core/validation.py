"""Argument validators: the one home of graphfit's Keras-style argument checks.

Every public constructor and function checks its arguments up front and raises `ValueError`
naming the argument and the value received, as Keras does ("units must be a positive integer.
Received: units=-1"). The checks shared by several modules live here, so that the same mistake
reads the same everywhere. Each validator returns the value converted (an `int`, a `float`),
or None where None is allowed. Booleans are refused where a number is expected: `True` is an
int to Python, but `epochs=True` is a mistake, not 1.

Example:

    >>> from graphfit.core import validation
    >>> validation.positive_int("units", 3)
    3
    >>> validation.positive_int("units", -1)
    Traceback (most recent call last):
    ...
    ValueError: units must be a positive integer. Received: units=-1
    >>> validation.one_of("padding", "same", ("valid", "same"))
    'same'
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

__all__ = [
    "is_integer",
    "is_real",
    "invalid",
    "positive_int",
    "non_negative_int",
    "int_at_least",
    "positive_float",
    "finite_number",
    "number_in_range",
    "one_of",
    "choices_text",
    "verbosity",
]


def is_integer(value) -> bool:
    """Whether `value` is a Python or NumPy integer, bools excluded."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """Whether `value` is a finite Python or NumPy real number, bools excluded."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def invalid(name: str, value, requirement: str) -> ValueError:
    """The error "`name` must be `requirement`. Received: name=value" (Keras's wording).

    Args:
        name: the argument's name, as the user wrote it.
        value: the value received.
        requirement: what the argument must be, e.g. "a positive integer".

    Returns:
        The `ValueError`, for the caller to raise.
    """
    return ValueError(f"{name} must be {requirement}. Received: {name}={value!r}")


def _or_none(requirement: str, allow_none: bool) -> str:
    return f"{requirement} or None" if allow_none else requirement


def positive_int(name: str, value, *, allow_none: bool = False,
                 none_means: str | None = None) -> int | None:
    """`value` as an int >= 1 (or None where allowed).

    Args:
        name: the argument's name.
        value: the value received.
        allow_none: whether None is accepted (and returned).
        none_means: with `allow_none`, what None does, for the message (", or None to
            keep every checkpoint").

    Raises:
        ValueError: "name must be a positive integer. Received: name=value".
    """
    if value is None and allow_none:
        return None
    if not is_integer(value) or value < 1:
        requirement = "a positive integer"
        if allow_none:
            requirement += f", or None {none_means}" if none_means else " or None"
        raise invalid(name, value, requirement)
    return int(value)


def non_negative_int(name: str, value, *, allow_none: bool = False) -> int | None:
    """`value` as an int >= 0 (or None where allowed).

    Raises:
        ValueError: "name must be a non-negative integer. Received: name=value".
    """
    if value is None and allow_none:
        return None
    if not is_integer(value) or value < 0:
        raise invalid(name, value, _or_none("a non-negative integer", allow_none))
    return int(value)


def int_at_least(name: str, value, minimum: int) -> int:
    """`value` as an int >= `minimum` ("a positive integer" when `minimum` is 1).

    Raises:
        ValueError: "name must be an integer >= minimum. Received: name=value".
    """
    if not is_integer(value) or value < minimum:
        raise invalid(name, value,
                      "a positive integer" if minimum == 1 else f"an integer >= {minimum}")
    return int(value)


def positive_float(name: str, value, *, allow_none: bool = False) -> float | None:
    """`value` as a finite float > 0 (or None where allowed).

    Raises:
        ValueError: "name must be a positive float. Received: name=value".
    """
    if value is None and allow_none:
        return None
    if not is_real(value) or value <= 0:
        raise invalid(name, value, _or_none("a positive float", allow_none))
    return float(value)


def finite_number(name: str, value, *, minimum: float | None = None,
                  exclusive: bool = False, allow_none: bool = False) -> float | None:
    """`value` as a finite float, optionally bounded below.

    Args:
        name: the argument's name.
        value: the value received.
        minimum: the smallest value accepted, or None for no bound.
        exclusive: whether `minimum` itself is refused (`> minimum` rather than `>=`).
        allow_none: whether None is accepted (and returned).

    Raises:
        ValueError: "name must be a finite number >= minimum. Received: name=value".
    """
    if value is None and allow_none:
        return None
    too_small = minimum is not None and is_real(value) and (
        value <= minimum if exclusive else value < minimum)
    if not is_real(value) or too_small:
        bound = "" if minimum is None else f" {'>' if exclusive else '>='} {minimum}"
        raise invalid(name, value, _or_none(f"a finite number{bound}", allow_none))
    return float(value)


def number_in_range(name: str, value, low: float, high: float, *,
                    include_low: bool = True, include_high: bool = True) -> float:
    """`value` as a float in the interval from `low` to `high`.

    Raises:
        ValueError: "name must be a float in [low, high). Received: name=value" (the
            brackets show which ends are included).
    """
    inside = is_real(value) and (low <= value if include_low else low < value) and (
        value <= high if include_high else value < high)
    if not inside:
        interval = f"{'[' if include_low else '('}{low:g}, {high:g}{']' if include_high else ')'}"
        raise invalid(name, value, f"a float in {interval}")
    return float(value)


def choices_text(choices: Sequence[Any]) -> str:
    """"'a', 'b' or 'c'": the choices for a message (ints shown bare, strings quoted)."""
    shown = [repr(c) for c in choices]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _same_choice(value, choice) -> bool:
    if isinstance(value, bool) != isinstance(choice, bool):
        return False
    try:
        return bool(value == choice)
    except (TypeError, ValueError):  # an array compared with a string, ...
        return False


def one_of(name: str, value, choices: Sequence[Any]):
    """`value`, which must equal one of `choices` (a bool never equals 0 or 1 here).

    Raises:
        ValueError: "name must be 'a', 'b' or 'c'. Received: name=value".
    """
    if not any(_same_choice(value, choice) for choice in choices):
        raise invalid(name, value, choices_text(choices))
    return value


def verbosity(value, *, allow_auto: bool = False) -> int:
    """Keras's `verbose`: 0 (silent), 1 (progress bar), 2 (one line per epoch), and
    'auto' (1) where allowed.

    Raises:
        ValueError: "verbose must be 0, 1 or 2. Received: verbose=value".
    """
    if allow_auto and value == "auto":
        return 1
    return int(one_of("verbose", value, (0, 1, 2, "auto") if allow_auto else (0, 1, 2)))

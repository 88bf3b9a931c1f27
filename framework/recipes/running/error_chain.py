"""The chain of an exception: the error, then the ones it was raised from or while handling."""

from __future__ import annotations

__all__ = ["error_chain"]


def error_chain(error: BaseException | None, limit: int = 16) -> list[BaseException]:
    """`error` and those it was raised from (`__cause__`) or while handling (`__context__`),
    outermost first and innermost last; at most `limit` links, and a cycle ends it.

    Example:

        >>> try:
        ...     try:
        ...         raise KeyError("inner")
        ...     except KeyError as inner:
        ...         raise ValueError("outer") from inner
        ... except ValueError as outer:
        ...     [type(link).__name__ for link in error_chain(outer)]
        ['ValueError', 'KeyError']
    """
    seen: list[BaseException] = []
    while error is not None and error not in seen and len(seen) < limit:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen

"""Which recipe entry made which object, and errors from running them told at that entry.

The builder records every object it makes from a recipe entry (a layer, a loss, a metric, the
optimizer, a callback) with the entry's key (`record`). When anything raises while the recipe
runs (building the model, checking the data, a training step, a callback), `entry_of` walks the
error's traceback, innermost frame first, to the first method of a recorded object: the entry
that made it is the one to name. So every section that builds its objects through the builder
gets its errors placed for free, and no error needs a handler of its own.

An error from the user's own code (a `class_path` layer's `build` or `call`, a callback, a
layer's user function) is told as

    recipe.yaml:LINE:COL: model.layers[0]: RuntimeError: cannot build (at my_layers.py:12)

with the user's own file and line (one frame) and exit code 1 (`EntryFailed`); one from
graphfit's or Keras's own objects, before training, is a bad recipe (exit 2, `RecipeError`).

Example:

    >>> class Layerish:
    ...     def call(self):
    ...         raise RuntimeError("no")
    >>> made = Layerish()
    >>> record(made, ("model", "layers", 0))
    >>> try:
    ...     made.call()
    ... except RuntimeError as error:
    ...     entry_of(error)
    ('model', 'layers', 0)
"""

from __future__ import annotations

import contextlib
import re
import weakref

from graphfit.recipes.reading.problems import Problem, RecipeError
from graphfit.recipes.running.error_chain import error_chain

__all__ = ["record", "entry_of", "EntryFailed", "user_location", "failure", "reported"]

_MADE: dict[int, tuple[weakref.ref, tuple]] = {}


class EntryFailed(RuntimeError):
    """The user's code behind a recipe entry failed while the recipe ran (exit code 1).

    `problem` says where (the entry's file, line and column) and what (the user's error and
    its file and line); `str()` is that one line.
    """

    def __init__(self, problem: Problem, user_code: bool = True):
        self.problem = problem
        self.user_code = user_code  # False: graphfit's or Keras's own object, during training
        super().__init__(str(problem))


def record(obj, path: tuple) -> None:
    """Notes that the recipe entry at `path` made `obj` (kept only while `obj` lives)."""
    key = id(obj)
    try:
        ref = weakref.ref(obj, lambda _: _MADE.pop(key, None))
    except TypeError:  # cannot be weakly referenced: not followed
        return
    _MADE[id(obj)] = (ref, tuple(path))


def _recorded(obj) -> tuple | None:
    found = _MADE.get(id(obj))
    return found[1] if found and found[0]() is obj else None


def entry_of(error: BaseException) -> tuple | None:
    """The key of the recipe entry whose object's method raised `error` (the innermost such
    method, of the error and those it was raised from), or None."""
    for link in reversed(error_chain(error)):
        tb, frames = link.__traceback__, []
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        for frame in reversed(frames):
            owner = frame.f_locals.get("self")
            path = _recorded(owner) if owner is not None else None
            if path is not None:
                return path
    return None


# "File "/home/me/layers.py", line 17, in call  *": a frame of converted user code that
# tf.function writes into its error messages (the traceback itself shows generated files).
_CONVERTED_FRAME = re.compile(r'File "([^"]+)", line (\d+), in \S+\s+\*')


def user_location(error: BaseException) -> str | None:
    """`file:line` of the user's own code where `error` (or one it came from) was raised."""
    from graphfit.recipes.reading import user_code

    for link in reversed(error_chain(error)):
        where = user_code.user_frame(link)
        if where:
            return where
    for link in error_chain(error):
        for file, line in reversed(_CONVERTED_FRAME.findall(str(link))):
            if not user_code.is_library_file(file):
                return f"{file}:{line}"
    return None


def _innermost_message(error: BaseException) -> BaseException:
    """The user's own exception: tf.function re-raises it with its stack in the message,
    from the original (which carries the plain message)."""
    if "in user code:" not in str(error):
        return error
    for link in reversed(error_chain(error)):  # the original first (a StagingError wraps it)
        if "in user code:" not in str(link):
            return link
    return error


def failure(error: BaseException, recipe, fallback: tuple | None = None,
            before_training: bool = True) -> Exception | None:
    """The positioned error to raise instead of `error`: an `EntryFailed` when the user's
    code raised it, a `RecipeError` for graphfit's or Keras's own objects before training,
    or None when no recipe entry made what raised it (and no `fallback` key is given)."""
    from graphfit.recipes.reading.components import clean_message

    path = entry_of(error) or fallback
    if path is None:
        return None
    where = user_location(error)
    plain = _innermost_message(error)
    message = f"{type(plain).__name__}: {clean_message(plain)}"
    if where:
        problem = Problem(path, f"{message} (at {where})", recipe.position(path))
        return EntryFailed(problem)
    problem = Problem(path, clean_message(plain), recipe.position(path))
    return RecipeError([problem]) if before_training else EntryFailed(problem, False)


@contextlib.contextmanager
def reported(recipe, before_training: bool = True):
    """Re-raises an error from what a recipe entry made as `failure` says (a `RecipeError`
    and the user's interrupt pass unchanged)."""
    try:
        yield
    except (RecipeError, EntryFailed, KeyboardInterrupt):
        raise
    except Exception as error:
        from graphfit.recipes.running.disk_faults import is_disk_fault

        if is_disk_fault(error):
            raise  # the disk, not the entry: told as such by the run
        placed = failure(error, recipe, before_training=before_training)
        if placed is None:
            raise
        raise placed from error

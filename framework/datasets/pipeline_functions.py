"""graphfit's own `tf.data` functions are traced as written; a user's are converted by AutoGraph.

`tf.data` runs AutoGraph on every function given to `map`, `filter`, `flat_map`,
`interleave`, `reduce` and the like, and on every function those call: each one's source is
parsed and rewritten once per process. The first stream dataset of a process spent most of
its build converting graphfit's own pipeline functions (parsing records, to (x, y), shuffle
windows, key-hash splits), which are plain TensorFlow without Python control flow on tensors
(`benchmarks/stream_first_batch.py`). They are marked `own_function`, that is
`tf.autograph.experimental.do_not_convert`: traced as written, with AutoGraph off for what
they call and for the `tf.data` functions they build (`one_pass` building its `map`).

Because of that, an own function never calls the user's code directly: it calls
`user_function(fn)(...)`, which converts `fn` as `tf.data` would have (a Python `if` on a
tensor in a `Stream`'s `transform` still works; `graphfit.core.autograph_scope`).

Example:

    >>> import tensorflow as tf
    >>> doubled = tf.data.Dataset.range(3).map(own_function(lambda n: 2 * n))
    >>> [int(n) for n in doubled.as_numpy_iterator()]
    [0, 2, 4]
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from graphfit.core.autograph_scope import convert_user_code

__all__ = ["own_function", "user_function"]


def own_function(fn: Callable) -> Callable:
    """`fn`, a function of graphfit's for a `tf.data` transformation, marked so that AutoGraph
    leaves it, and the functions it calls or builds, unconverted."""
    return tf.autograph.experimental.do_not_convert(fn)


def user_function(fn: Callable) -> Callable:
    """`fn`, a user's function that an `own_function` calls, converted by AutoGraph inside a
    trace as `tf.data` converts the functions it is given (unchanged eagerly, and unchanged
    when graphfit defines it)."""
    return convert_user_code(fn)

"""`tf.function` for graphfit's own per-model functions: the steps and the loops over them.

TensorFlow counts a `tf.function`'s traces by its Python code, not by the function object,
and warns of "excessive retracing" when five of the last calls under one code traced. Each
model traces its own steps and loops, from the same code, so a user who builds and fits a
few models in one process (a search over layer sizes) read that warning about graphfit's
internals, as if their own code retraced. Wrapped in a `functools.partial`, each model's
function is counted on its own; a model that really retraces its steps still warns.

Example:

    >>> import tensorflow as tf
    >>> def double(x):
    ...     return 2 * x
    >>> first, second = per_model_function(double), per_model_function(double)
    >>> int(first(tf.constant(3))), first.experimental_get_tracing_count()
    (6, 1)
"""

from __future__ import annotations

import functools
from typing import Callable

import tensorflow as tf

__all__ = ["per_model_function"]


def per_model_function(fn: Callable, **options):
    """`tf.function(fn, **options)`, its traces counted for this function object alone."""
    return tf.function(functools.partial(fn), **options)

"""AutoGraph converts the user's code, never graphfit's own.

A `tf.function` with AutoGraph on rewrites every Python function it reaches, so that `if` and
`for` over tensors become `tf.cond` and `tf.while_loop`. graphfit writes its graph control
flow explicitly (`tf.cond`, `tf.while_loop`) and traces its own steps and loops with
`autograph=False`. What the user writes still converts: where graphfit calls user code inside
a trace (a layer's `call`, an activation function, a loss or residual function, an optimizer's
`update_rule`, `minimize` or `apply_gradients`, a gradient transform, a variable constraint),
`convert_user_code` hands it to AutoGraph, as Keras 2 did for subclassed layers. Converted user
code that calls back into graphfit (a layer, `super().train_step`, `apply_gradients`) meets
entry points marked with the public `tf.autograph.experimental.do_not_convert` (`graphfit_api`),
as Keras marks its own, so AutoGraph's recursion stops there.

`convert_user_code` uses `tf.__internal__.autograph.tf_convert`, the call Keras 2 made for the
same purpose: the public `tf.autograph.to_graph` raises on code whose source it cannot read
(a doctest, a REPL session) where this runs it unconverted with a warning. `tf_convert` takes
AutoGraph's control status (`tensorflow.python.autograph.core.ag_ctx`, the same private
module Keras 2 passed it from): the one other private name here, and it goes with `tf_convert`.
"""

from __future__ import annotations

import functools
from typing import Callable

import tensorflow as tf
from tensorflow.python.autograph.core import ag_ctx as _autograph_context

__all__ = ["graphfit_api", "convert_user_code", "traced_function"]

_PACKAGE = __name__.split(".")[0]

#: Marks a graphfit function that user code calls inside a trace: AutoGraph leaves it (and
#: what it calls) unconverted.
graphfit_api = tf.autograph.experimental.do_not_convert


def convert_user_code(fn: Callable) -> Callable:
    """`fn` as AutoGraph would run it in a trace: converted inside a `tf.function` (graphfit's
    own functions stay as they are), unchanged eagerly."""
    if not tf.inside_function() or _defined_by_graphfit(fn):
        return fn
    # Enabled explicitly: graphfit traces its own steps with autograph=False, and the user's
    # code they call converts all the same.
    enabled = _autograph_context.ControlStatusCtx(_autograph_context.Status.ENABLED)
    return tf.__internal__.autograph.tf_convert(fn, enabled)


def _defined_by_graphfit(fn: Callable) -> bool:
    """Whether `fn` is graphfit's own code: a method graphfit defines and the user did not
    override (`Model.train_step`, `LevenbergMarquardt.minimize`, `Dense.call`), which
    AutoGraph would otherwise convert as user-requested code."""
    function = getattr(fn, "__func__", fn)
    function = getattr(function, "__wrapped__", function)  # through graphfit_api
    module = getattr(function, "__module__", None) or ""
    return module == _PACKAGE or module.startswith(_PACKAGE + ".")


def traced_function(fn, **options):
    """`tf.function(fn, **options)`, its traces counted for this function object alone.

    TensorFlow counts traces by a function's code and warns of "excessive retracing" when
    several calls under one code trace: every model's steps come from the same code here, so a
    user fitting a few models in one process would read that warning about graphfit's own
    functions. Wrapped in a `functools.partial`, each model's functions count on their own.
    """
    return tf.function(functools.partial(fn), **options)

"""AutoGraph converts the user's code, never graphfit's own.

A `tf.function` with AutoGraph on rewrites every Python function it reaches, so that `if` and
`for` over tensors become `tf.cond` and `tf.while_loop`. TensorFlow skips its own modules and
Keras (`tensorflow.python.autograph.core.config.CONVERSION_RULES`); graphfit's layers, losses,
optimizers and training loop were converted on every trace, which cost seconds: the first
epoch of a two-layer MLP took 2.4 s, 0.5 s without it. graphfit writes its graph control flow
explicitly (`tf.cond`, `tf.while_loop`), so its modules join that list here.

What the user writes still converts: where graphfit calls user code inside a trace (a layer's
`call`, an activation function, a loss or residual function, an optimizer's `update_rule`,
`minimize` or `apply_gradients`, a gradient transform, a variable constraint),
`convert_user_code` hands it to AutoGraph, as Keras 2 did for subclassed layers. Metric
functions go through Keras's `MeanMetricWrapper`, which never converted them, in Keras either.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf
from tensorflow.python.autograph.core import ag_ctx as _autograph_context
from tensorflow.python.autograph.core import config as _autograph_config
from tensorflow.python.autograph.core import config_lib as _autograph_rules

__all__ = ["skip_graphfit_modules", "convert_user_code"]

_PACKAGE = __name__.split(".")[0]


def skip_graphfit_modules() -> None:
    """Adds graphfit's package to AutoGraph's do-not-convert rules (once)."""
    rules = _autograph_config.CONVERSION_RULES
    if any(isinstance(rule, _autograph_rules.DoNotConvert) and rule.matches(_PACKAGE)
           for rule in rules):
        return
    _autograph_config.CONVERSION_RULES = (_autograph_rules.DoNotConvert(_PACKAGE),) + tuple(rules)


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
    override (`Model.train_step`, `LevenbergMarquardt.minimize`, `Dense.call`). AutoGraph
    would convert it as user-requested code, bypassing the do-not-convert rules, and its
    source conversion cost a third of the first trace of a Levenberg–Marquardt step."""
    function = getattr(fn, "__func__", fn)
    module = getattr(function, "__module__", None) or ""
    return module == _PACKAGE or module.startswith(_PACKAGE + ".")

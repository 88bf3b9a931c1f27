"""The machinery behind `graphfit.autodiff.per_example_gradients` (and per-example clipping).

Each example's gradient comes from its own forward and backward pass on a batch of one:
`tf.vectorized_map` runs all of them at once (pfor turns the ops of one example into batched
ops), `tf.map_fn` one after the other. The loss of example i is its term of the batch loss:
the compiled losses evaluated on that example alone, divided by the batch size for the
mean-reduced ones, so the per-example gradients sum to the batch gradient.
"""

from __future__ import annotations

import warnings

import tensorflow as tf

from graphfit.core import update_hooks
from graphfit.training.losses import LossSet

__all__ = ["METHODS", "resolve_loss_set", "example_loss", "compute"]

METHODS = ("auto", "vectorized", "loop")
_MEAN = ("sum_over_batch_size", "mean")
_SUM = ("sum",)


def resolve_loss_set(model, loss) -> LossSet:
    """The compiled `LossSet` for loss=None, else a `LossSet` of `loss`, built for the model.

    Raises:
        ValueError: when loss is None and the model has no compiled loss.
    """
    if loss is None:
        state = getattr(model, "compile_state", None)
        loss_set = None if state is None else state.loss_set
        if loss_set is None:
            raise ValueError(
                f"Model {model.name!r} has no compiled loss: pass loss= (e.g. loss='mse') or "
                f"call model.compile(loss=...) first."
            )
    else:
        loss_set = LossSet(loss)
    if not loss_set.built:
        loss_set.build(model.output_names, model.dtype)
    for output, item in loss_set.losses.items():
        reduction = getattr(item, "reduction", "sum_over_batch_size")
        if reduction not in _MEAN + _SUM:
            where = f" of output {output!r}" if output else ""
            raise ValueError(
                f"Per-example gradients need a batch loss that is a sum of per-example terms: "
                f"reduction 'sum_over_batch_size' (Keras's default) or 'sum'. The loss "
                f"{item.name!r}{where} has reduction={reduction!r}."
            )
    return loss_set


def example_loss(loss_set: LossSet, y, y_pred, sample_weight, batch_size) -> tf.Tensor:
    """One example's term of the batch loss (y, y_pred, sample_weight: a batch of one)."""
    total = None
    for output, item in loss_set.losses.items():
        true = y if output is None else y[output]
        pred = y_pred if output is None else y_pred[output]
        value = item(true, pred, sample_weight=sample_weight)
        if getattr(item, "reduction", "sum_over_batch_size") in _MEAN:
            value = value / tf.cast(batch_size, value.dtype)
        if loss_set.output_names is not None:  # LossSet weighs outputs only with several
            value = value * tf.cast(loss_set.weights[output], value.dtype)
        total = value if total is None else total + value
    return total


def compute(model, loss_set: LossSet, x, y, sample_weight, variables, training: bool,
            method: str) -> list[tf.Tensor]:
    """[(batch, *var.shape) for each variable]: the per-example gradients of one batch.

    Works eagerly and inside a traced step (XLA included). Update hooks are collected and
    dropped. See `autodiff.per_example_gradients` for the arguments.
    """
    batch_size = tf.shape(tf.nest.flatten(x)[0])[0]
    elements = {"x": x, "y": y}
    if sample_weight is not None:
        elements["sample_weight"] = sample_weight

    def one_example(element):
        batched = tf.nest.map_structure(lambda t: t[None], element)
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            with update_hooks.collect_updates():  # dropped: statistics never move here
                y_pred = model(batched["x"], training=training)
            loss = example_loss(loss_set, batched["y"], y_pred,
                                batched.get("sample_weight"), batch_size)
        return tape.gradient(loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def vectorized():
        return tf.vectorized_map(one_example, elements, fallback_to_while_loop=False)

    def loop():
        signature = [tf.TensorSpec(v.shape, v.dtype) for v in variables]
        return tf.map_fn(one_example, elements, fn_output_signature=signature)

    if method == "vectorized":
        return list(_isolated(vectorized))
    if method == "loop":
        return list(_in_function(loop))
    try:
        return list(_isolated(vectorized))
    except Exception as error:  # pfor's "No pfor vectorization defined for <op>", and kin
        reason = _first_line(error)
    gradients = list(_in_function(loop))
    # Python: inside a traced step this warns once per trace, not once per step.
    warnings.warn(
        f"Per-example gradients could not be vectorized ({reason}); they are computed one "
        f"example at a time with tf.map_fn, which is slower. Pass method='loop' to skip the "
        f"attempt.", stacklevel=3)
    return gradients


def _isolated(fn):
    """Runs a vectorization attempt so that a failure while tracing leaves no half-built ops
    (a random generator's state read, say) in the caller's graph: in a function of its own.
    Eagerly (and under XLA) pfor already traces its own function."""
    return fn() if tf.executing_eagerly() else _in_function(fn)


def _in_function(fn):
    return tf.function(fn)()


def _first_line(error: Exception) -> str:
    for line in str(error).splitlines():
        line = line.strip()
        if "vectorization" in line or "Error:" in line:
            return line.split("Error: ", 1)[-1]
    return type(error).__name__

"""Residual rows of a loss, for Levenberg–Marquardt: the loss as a sum of squares.

Levenberg–Marquardt needs the loss `f` in the form `f ≈ ‖r‖²` locally: a vector of rows whose
Jacobian `C` gives the curvature `CᵀC` (half the Gauss–Newton matrix of `f`) and a vector `ρ`
with `Cᵀρ = ½∇f`. This module writes each supported Keras loss that way, with exactly the
sample weighting and reduction graphfit's loss uses, so `‖ρ‖²` *is* the mean squared error
that `fit` reports:

- mean squared error: `r = sqrt(w) · (y_pred − y)`, one row per output element, where `w` is
  the element's weight in the loss (`sample_weight` / normalizer / the size of the last axis;
  Keras's `sum_over_batch_size` normalizer is the number of per-example losses). Then
  `‖r‖² == loss` exactly and `ρ = r`.
- cross-entropy (sparse, categorical, binary; from logits or probabilities): the generalized
  Gauss–Newton matrix `Jᵀ H J`, `H` the Hessian of the loss with respect to the model's output.
  For softmax cross-entropy on logits `z`, `H = w (diag(p) − ppᵀ) = w L Lᵀ` with
  `L = (I − p1ᵀ) diag(√p)`, so the rows are `sqrt(w/2) · √p ⊙ (z − pᵀz)` (with `p` held
  constant) and `ρ = sqrt(w/2) · (√p − y/√p)`; binary cross-entropy on logits uses
  `H = σ(1−σ)`. On probabilities `H` is the (diagonal) Hessian of `−y log p`.
- any loss with a `residuals(y_true, y_pred)` method whose per-example value is the sum of the
  squared residuals (`ResidualLoss` builds one from a function): `r = sqrt(w) · residuals`.

The per-element weights `w` come from Keras itself: a probe loss with the same reduction is
differentiated with respect to its per-example values, which gives each value's weight in the
reduced loss (sample weights, normalizer, `mean_with_sample_weight`) without re-implementing
Keras's reduction rules. Without sample weights (on one replica) the weights are that gradient
written out, `divide_no_nan(1, N)` or 1, equal bit for bit and without the probe's ops in the
traced step (`_unweighted_reduction`).
"""

from __future__ import annotations

import math
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from graphfit.core import autograph_scope, step_context, update_hooks
from graphfit.core.layer_losses import REGULARIZATION_LOSS
from graphfit.training import distribution
from graphfit.training.losses import FunctionLoss

__all__ = ["ResidualLoss", "linearizable", "check_linearizable", "gradient_from_rows",
           "element_weights", "loss_rows", "batch_rows"]

_KINDS = {
    keras.losses.MeanSquaredError: "mse",
    keras.losses.CategoricalCrossentropy: "categorical",
    keras.losses.SparseCategoricalCrossentropy: "sparse_categorical",
    keras.losses.BinaryCrossentropy: "binary",
}
_FUNCTION_KINDS = {
    "mean_squared_error": "mse", "mse": "mse",
    "categorical_crossentropy": "categorical",
    "sparse_categorical_crossentropy": "sparse_categorical",
    "binary_crossentropy": "binary",
}


class ResidualLoss(keras.losses.Loss):
    """A loss given by residuals: per example, the sum of the squared residuals.

    `LevenbergMarquardt` linearizes the residuals themselves, so any least-squares problem
    (a physics-informed fit, a weighted or transformed misfit) trains with it. With the
    default reduction the loss is the mean over examples of `sum(residuals**2)`.

    Args:
        fn: `fn(y_true, y_pred) -> residuals`, a tensor with the batch as its first axis.
        name: the name shown in logs; default the function's name.
        reduction: a Keras reduction; default "sum_over_batch_size".
        dtype: the dtype the loss computes in (graphfit sets the model's).
        mixes_examples: True when an example's residuals depend on other examples of the
            batch (differences between neighbours, a batch-wide normalization). The default
            False lets `LevenbergMarquardt` differentiate each example on a batch of its own,
            which is only exact when they do not.

    Example:

        >>> import tensorflow as tf
        >>> loss = ResidualLoss(lambda y, p: (p - y) / 0.5)
        >>> float(loss(tf.constant([[1.0], [2.0]]), tf.constant([[1.5], [2.0]])))
        0.5
    """

    def __init__(self, fn: Callable, name: str | None = None,
                 reduction: str = "sum_over_batch_size", dtype=None,
                 mixes_examples: bool = False):
        if not callable(fn):
            raise ValueError(f"fn must be a callable (y_true, y_pred) -> residuals. "
                             f"Received: fn={fn!r}")
        default = getattr(fn, "__name__", "")
        default = default if default.isidentifier() else "residual_loss"  # not "<lambda>"
        super().__init__(name=name or default, reduction=reduction, dtype=dtype)
        self.fn = fn
        self.mixes_examples = bool(mixes_examples)

    def residuals(self, y_true, y_pred) -> tf.Tensor:
        """The residuals `fn(y_true, y_pred)` in the loss's dtype; labels one axis short of
        the outputs, or one longer (a trailing axis of 1), are first matched to them as
        Keras's own losses do: 1-D labels of a one-output model would otherwise broadcast
        against its (batch, 1) outputs into a batch × batch matrix."""
        fn = autograph_scope.convert_user_code(self.fn)
        y_true, y_pred = _match_ranks(tf.cast(y_true, y_pred.dtype), y_pred)
        return tf.convert_to_tensor(fn(y_true, y_pred))

    def call(self, y_true, y_pred):
        r = self.residuals(y_true, y_pred)
        return tf.reduce_sum(tf.square(r), axis=tf.range(1, tf.rank(r)))

    def get_config(self):
        return {**super().get_config(), "fn": self.fn, "mixes_examples": self.mixes_examples}


def _kind(loss) -> str | None:
    if hasattr(loss, "residuals"):
        return "residuals"
    for cls, kind in _KINDS.items():
        if isinstance(loss, cls):
            return kind
    if isinstance(loss, FunctionLoss):
        return _FUNCTION_KINDS.get(getattr(loss.fn, "__name__", ""))
    return None


def linearizable(loss) -> bool:
    """Whether `loss_rows` can write `loss` as a sum of squares."""
    return _kind(loss) is not None


def check_linearizable(losses: dict) -> None:
    """Raises a ValueError naming the loss (and output) LevenbergMarquardt cannot linearize:
    one `linearizable` refuses, or a cross-entropy with `ignore_class` (its rows would still
    count the ignored examples' curvature)."""
    for output, loss in losses.items():
        where = f"the loss {loss.name!r}" + (f" of output {output!r}" if output else "")
        if not linearizable(loss):
            raise ValueError(
                f"LevenbergMarquardt cannot write {where} as a sum of squares. Use mean squared "
                "error, a cross-entropy, or a loss with a residuals(y_true, y_pred) method "
                "(optimizers.ResidualLoss).")
        if getattr(loss, "ignore_class", None) is not None:
            raise ValueError(
                f"LevenbergMarquardt cannot linearize {where} with ignore_class="
                f"{loss.ignore_class!r}: give the examples of that class sample_weight 0 "
                "instead, which both the loss and its curvature respect.")


def gradient_from_rows(losses: dict) -> bool:
    """Whether `Cᵀρ` of `loss_rows` is exactly half the gradient of the loss `fit` reports,
    for every loss of `losses` (by output): so for mean squared error and residual losses,
    whose value *is* the sum of the squared rows. A cross-entropy's rows give its curvature,
    but Keras computes the loss itself from the logits behind a final sigmoid or softmax and
    clips probabilities: its gradient is taken from the loss."""
    return all(_kind(loss) in ("mse", "residuals") for loss in losses.values())


def _match_ranks(y_true, y_pred):
    """Keras's `squeeze_or_expand_to_same_rank` (losses apply it before computing)."""
    true_rank, pred_rank = y_true.shape.rank, y_pred.shape.rank
    if true_rank == pred_rank + 1 and y_true.shape[-1] == 1:
        if pred_rank == 1:
            y_pred = y_pred[:, None]
        else:
            y_true = tf.squeeze(y_true, -1)
    elif pred_rank == true_rank + 1 and y_pred.shape[-1] == 1:
        if true_rank == 1:
            y_true = y_true[:, None]
        else:
            y_pred = tf.squeeze(y_pred, -1)
    return y_true, y_pred


class _ReductionProbe(keras.losses.Loss):
    """Returns its `y_pred` as the per-example losses: Keras then reduces them as the probed
    loss would, so the gradient of the result is the weight of each per-example loss."""

    def call(self, y_true, y_pred):
        del y_true
        return y_pred


def element_weights(loss, y_true, y_pred, sample_weight) -> tf.Tensor:
    """The weight of each squared term in the reduced loss, for the full batch.

    For mean squared error and binary cross-entropy: one weight per output element (the
    per-example value's weight divided by the size of the averaged last axis); for
    categorical cross-entropy: one per example (per value of `loss.call`); for a residual
    loss: one per example. Each has the batch as its first axis, so chunks slice it.

    Raises:
        ValueError: for a loss without reduction (`reduction=None`).
    """
    reduction = getattr(loss, "reduction", "sum_over_batch_size")
    if reduction in (None, "none"):
        raise ValueError(
            f"LevenbergMarquardt needs a loss reduced to a scalar. Received the loss "
            f"{loss.name!r} with reduction={reduction!r}."
        )
    kind = _kind(loss)
    y_pred = tf.convert_to_tensor(y_pred)
    y_true = tf.cast(tf.convert_to_tensor(y_true), y_pred.dtype)
    averaged = kind in ("mse", "binary")  # these average over the last axis
    shape = tf.shape(y_pred)
    if averaged:  # labels broadcast against the outputs, as in Keras's loss
        y_true, y_pred = _match_ranks(y_true, y_pred)
        shape = tf.broadcast_dynamic_shape(tf.shape(y_true), tf.shape(y_pred))
    value_shape = shape[:1] if kind == "residuals" else shape[:-1]
    weights = _unweighted_reduction(reduction, sample_weight, value_shape, y_pred.dtype)
    if weights is None:
        values = tf.zeros(value_shape, y_pred.dtype)
        probe = _ReductionProbe(reduction=reduction, dtype=y_pred.dtype.name)
        with tf.GradientTape() as tape:
            tape.watch(values)
            reduced = probe(values, values, sample_weight=sample_weight)
            # Keras divides a mean by the replicas; the replica's own mean is wanted (see
            # there).
            reduced, _ = distribution.undo_keras_scaling(reduced, {})
        # The reduction is linear in the values, so this gradient is the exact weight.
        weights = tape.gradient(reduced, values)
    if averaged:
        size = tf.cast(shape[-1], y_pred.dtype)
        weights = tf.broadcast_to(weights[..., None] / size, shape)
        # The static shape the dynamic one has (the rows then reshape without shape ops).
        weights.set_shape(tf.broadcast_static_shape(y_true.shape, y_pred.shape))
        return tf.stop_gradient(weights)
    return tf.stop_gradient(tf.broadcast_to(weights, value_shape))


def _unweighted_reduction(reduction, sample_weight, value_shape, dtype):
    """The probe's gradient in closed form where Keras's rule is plain (no sample weights,
    one replica): `divide_no_nan(1, N)` for each of the N values of a mean, 1 for a sum;
    TensorFlow's gradient of `divide_no_nan(sum(v), N)` is that same quotient, so the
    weights are equal bit for bit, without the probe's tape and its backward ops (about 30
    of the Levenberg–Marquardt step's). None: the probe decides."""
    if (sample_weight is not None or tf.distribute.get_strategy().num_replicas_in_sync != 1
            or reduction not in ("sum", "sum_over_batch_size", "mean",
                                 "mean_with_sample_weight")):
        return None
    static = tf.get_static_value(value_shape)
    if static is not None and tuple(static) in ((), (0,)):  # Keras returns these unreduced
        return None
    if reduction == "sum":
        return tf.ones(value_shape, dtype)
    count = tf.cast(tf.reduce_prod(value_shape), dtype)
    return tf.fill(value_shape, tf.math.divide_no_nan(tf.constant(1, dtype), count))


def _expand_to(weights, tensor):
    """Per-example weights, broadcast over the example's other axes."""
    while weights.shape.rank < tensor.shape.rank:
        weights = weights[..., None]
    return weights


def loss_rows(loss, y_true, y_pred, weights) -> tuple[tf.Tensor, tf.Tensor]:
    """Residual rows of one loss, for the examples of `y_pred` (a chunk of the batch).

    Args:
        loss: a Keras loss for which `linearizable(loss)` holds.
        y_true: the labels of these examples.
        y_pred: the model's output for them (differentiable in the trainable variables).
        weights: `element_weights` of the full batch, sliced to these examples.

    Returns:
        `(rows, rho)`, both of shape `(examples, k)`: `rows` differentiable, its Jacobian the
        curvature factor `C`; `rho` constant, with `Cᵀ rho = ½ ∇ loss` (summed over chunks).

    Raises:
        ValueError: for a loss that cannot be written as a sum of squares.
    """
    kind = _kind(loss)
    dtype = y_pred.dtype
    weights = tf.cast(weights, dtype)
    if kind == "residuals":
        r = autograph_scope.convert_user_code(loss.residuals)(y_true, y_pred)
        rows = tf.sqrt(_expand_to(weights, r)) * r
        return _flat(rows), _flat(tf.stop_gradient(rows))
    if kind == "mse":
        y_true, y_pred = _match_ranks(tf.cast(y_true, dtype), y_pred)
        rows = tf.sqrt(weights) * (y_pred - y_true)
        return _flat(rows), _flat(tf.stop_gradient(rows))
    if kind in ("categorical", "sparse_categorical"):
        return _softmax_rows(loss, kind, y_true, y_pred, weights)
    if kind == "binary":
        return _binary_rows(loss, y_true, y_pred, weights)
    raise ValueError(
        f"LevenbergMarquardt cannot write the loss {getattr(loss, 'name', loss)!r} as a sum "
        "of squares. Supported: mean squared error, categorical, sparse categorical and "
        "binary cross-entropy, or a loss with a residuals(y_true, y_pred) method "
        "(optimizers.ResidualLoss)."
    )


def batch_rows(batch, y_pred0):
    """The residual rows of a training batch, for every output with a loss.

    Args:
        batch: the training step's `StepBatch` (model, loss_set, x, y, sample_weight).
        y_pred0: the model's output on the whole batch (training=True).

    Returns:
        `(data, rows_for, rows_per_example)`: the batch with each output's per-element loss
        weights (computed once, on the whole batch); `rows_for(part)` giving the flat
        `(rows, rho)` of a slice of `data` (each output's rows scaled by the square root of
        its loss weight); and the rows per example (None when not static).
    """
    loss_set = batch.loss_set
    names = loss_set.output_names
    keys = [None] if names is None else [k for k in names if k in loss_set.losses]
    pick = (lambda s, k: s) if names is None else (lambda s, k: s[k])
    weights = {str(k): element_weights(
        loss_set.losses[k], pick(batch.y, k), pick(y_pred0, k), batch.sample_weight)
        for k in keys}
    labels = {str(k): pick(batch.y, k) for k in keys}
    data = {"x": batch.x, "y": labels, "w": weights}
    if batch.y is not None:  # every output's labels, for layers that read them in training
        data["labels"] = batch.y
    model = batch.model

    def rows_for(part):
        # Jacobian passes never move moving averages; layers that read labels get this
        # slice's, and a loss a layer adds cannot be linearized.
        with update_hooks.collect_updates(), \
                step_context.training_step(part.get("labels")) as context:
            y_pred = model(part["x"], training=True)
        _refuse_added_losses(context)
        rows, rhos = [], []
        for k in keys:
            r, rho = loss_rows(loss_set.losses[k], part["y"][str(k)], pick(y_pred, k),
                               part["w"][str(k)])
            scale = tf.cast(math.sqrt(loss_set.weights[k]), r.dtype)
            rows.append(r * scale)
            rhos.append(rho * scale)
        rows = rows[0] if len(rows) == 1 else tf.concat(rows, axis=1)
        rhos = rhos[0] if len(rhos) == 1 else tf.concat(rhos, axis=1)
        return tf.reshape(rows, [-1]), tf.reshape(rhos, [-1])

    per_example = 0
    for k in keys:
        shape = _row_shape(loss_set.losses[k], pick(batch.y, k), pick(y_pred0, k))
        per_example = None if per_example is None or not shape.is_fully_defined() \
            else per_example + int(np.prod(shape.as_list()))
    return data, rows_for, per_example


def _row_shape(loss, y_true, y_pred) -> tf.TensorShape:
    """The static shape of one example's rows of `loss` (`loss_rows`): the outputs' for a
    cross-entropy, their broadcast with the labels' for mean squared error and binary
    cross-entropy, the residuals' own for a residual loss (whose function is traced once
    more for it). Not the outputs' alone: labels of another shape, or a residual function
    with several rows per output, give more rows per example."""
    kind = _kind(loss)
    y_pred = tf.convert_to_tensor(y_pred)
    if kind == "residuals":
        return tf.TensorShape(loss.residuals(y_true, y_pred).shape[1:])
    if kind in ("mse", "binary") and y_true is not None:
        y_true, y_pred = _match_ranks(tf.cast(tf.convert_to_tensor(y_true), y_pred.dtype),
                                      y_pred)
        try:
            return tf.broadcast_static_shape(y_true.shape, y_pred.shape)[1:]
        except ValueError:  # shapes that cannot broadcast: the loss itself says so
            return y_pred.shape[1:]
    return y_pred.shape[1:]


def _refuse_added_losses(context) -> None:
    # The weight penalties are not the batch's: their rows join JᵀJ (`regularization`).
    names = sorted({name for name, _ in context.added_losses if name != REGULARIZATION_LOSS})
    if names:
        raise ValueError(
            f"LevenbergMarquardt cannot linearize the losses that layers add to the training "
            f"loss in call() ({names}: add_loss, an activity_regularizer, ClassMeans's "
            f"center_loss_weight): it only sees the compiled loss and L2 weight penalties. Use "
            f"a first-order optimizer (Adam, SGD), or put the loss on a model output "
            f"(graphfit.training.losses.CenterLoss).")


def _flat(rows):
    """`rows` as (examples, rows per example); a static row count reshapes without the
    shape ops a dynamic one traces."""
    per_example = rows.shape[1:].num_elements()
    if per_example:  # known and nonzero: the batch axis is then -1
        return tf.reshape(rows, [-1, per_example])
    return tf.reshape(rows, [tf.shape(rows)[0], -1])


def _config(loss, key, default):
    return loss.get_config().get(key, default) if hasattr(loss, "get_config") else default


def _softmax_rows(loss, kind, y_true, y_pred, weights):
    dtype = y_pred.dtype
    classes = y_pred.shape[-1]
    if kind == "sparse_categorical":
        labels = tf.cast(y_true, tf.int32)
        if labels.shape.rank == y_pred.shape.rank:
            labels = tf.squeeze(labels, -1)
        target = tf.one_hot(labels, classes, dtype=dtype)
    else:
        target = tf.cast(y_true, dtype)
        smoothing = _config(loss, "label_smoothing", 0.0) or 0.0
        if smoothing:
            target = target * (1.0 - smoothing) + smoothing / classes
    scale = tf.sqrt(_expand_to(weights, y_pred) / 2.0)
    tiny = tf.constant(_tiny(dtype), dtype)
    if _config(loss, "from_logits", False):
        p = tf.stop_gradient(tf.nn.softmax(y_pred, axis=-1))
        sqrt_p = tf.sqrt(tf.maximum(p, tiny))
        centered = y_pred - tf.reduce_sum(p * y_pred, axis=-1, keepdims=True)
        rows = scale * sqrt_p * centered
        rho = scale * (sqrt_p - target / sqrt_p)
    else:
        # -sum(y log p) on probabilities: H = diag(y / p²), so the rows are √y / p ⊙ p.
        p = tf.stop_gradient(tf.maximum(y_pred, tiny))
        factor = tf.sqrt(target) / p
        rows = scale * factor * y_pred
        rho = -scale * tf.sqrt(target)
    return _flat(rows), _flat(tf.stop_gradient(rho))


def _binary_rows(loss, y_true, y_pred, weights):
    dtype = y_pred.dtype
    y_true, y_pred = _match_ranks(tf.cast(y_true, dtype), y_pred)
    smoothing = _config(loss, "label_smoothing", 0.0) or 0.0
    if smoothing:
        y_true = y_true * (1.0 - smoothing) + 0.5 * smoothing
    scale = tf.sqrt(weights / 2.0)
    tiny = tf.constant(_tiny(dtype), dtype)
    if _config(loss, "from_logits", False):
        s = tf.stop_gradient(tf.sigmoid(y_pred))
        root = tf.sqrt(tf.maximum(s * (1.0 - s), tiny))
        rows = scale * root * y_pred
        rho = scale * (s - y_true) / root
    else:
        p = tf.stop_gradient(tf.clip_by_value(y_pred, tiny, 1.0 - tiny))
        curvature = y_true / tf.square(p) + (1.0 - y_true) / tf.square(1.0 - p)
        root = tf.sqrt(tf.maximum(curvature, tiny))
        rows = scale * root * y_pred
        rho = scale * (-y_true / p + (1.0 - y_true) / (1.0 - p)) / root
    return _flat(rows), _flat(tf.stop_gradient(rho))


def _tiny(dtype: tf.DType) -> float:
    # Probabilities below this are treated as this: keeps 1/√p finite (Keras clips at 1e-7).
    return 1e-7 if dtype == tf.float32 else 1e-15

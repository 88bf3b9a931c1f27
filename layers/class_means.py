"""`ClassMeans`: per-class running means of features, kept by labels (center loss)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.core import data_checks, step_context, update_hooks, validation
from graphfit.core.layer import InputSpec, Layer
from graphfit.core.registry import register_layer

__all__ = ["ClassMeans"]


@register_layer
class ClassMeans(Layer):
    """Keeps a running mean of its input features for each class; passes the features on.

    The output is the input, unchanged, in every mode. In training (`training=True`, the
    layer not frozen) it reads the batch's labels, which the training step publishes
    (`graphfit.core.step_context`): the labels are never a model input, so `predict` needs
    none. With `f` the features of class `k` in the batch (`n_k` of them, duplicates counted
    exactly through segment sums) and `m = mean(f)`:

    - class `k` seen before: `means[k] <- momentum * means[k] + (1 - momentum) * m`;
    - class `k` seen for the first time (`counts[k] == 0`): `means[k] <- m`, so a centre
      starts at its class's features, not decayed from zero;
    - class `k` absent from the batch: unchanged;
    - `counts[k] <- counts[k] + n_k`: the training examples of class `k` seen so far (int64);
    - `spread_total` grows by `sum_i ||f_i - c_{y_i}||^2`, the squared distances of the
      batch's features to their class centre before this update (for a class seen for the
      first time, to its new centre).

    These are update hooks (`Layer.add_update`): inside `fit` they run once per training step,
    after the optimizer's update; `evaluate`, `predict`, Levenberg–Marquardt trial passes,
    Jacobians and per-example gradients never move them. At the end of every epoch the layer
    reports `<name>_within_class_spread` (the mean of those squared distances over the epoch's
    training examples) and `<name>_center_shift` (the mean distance the centres of the classes
    already seen at the previous epoch's end moved during the epoch; 0 for the first epoch)
    in the epoch's logs and TensorBoard's train run.

    **Under a `tf.distribute` strategy** each replica sees a slice of the global batch. The
    layer declares its hooks with per-class sums (feature sums, examples seen, squared
    distances to the old centres; `Layer.add_update_over_replicas`): the replicas' sums are
    added up (all-reduced as sums, not averaged) and the new means, counts and
    `spread_total` computed from the global sums, so they equal one device's on the same
    global batches, a class seen by one replica only included. One difference remains: the
    center loss (below) of a class seen for the very first time measures each replica's
    examples against that replica's own mean of the class, not the global batch's.

    With `center_loss_weight > 0` the layer also adds the center loss (Wen et al., 2016)
    `center_loss_weight * mean_i 0.5 * ||f_i - c_{y_i}||^2` to the training loss, reported
    (weight included) as `<name>_center_loss`: its gradient reaches the features only; the
    centres move by the update above. The same loss on a model output is
    `graphfit.training.losses.CenterLoss`.

    Args:
        num_classes: the number of classes; labels must lie in `0..num_classes - 1`.
        momentum: in [0, 1): the weight of the old mean (0 keeps the last batch's mean).
        labels_of: the output whose labels the layer reads, for a model with several outputs;
            None: the only output's.
        center_loss_weight: >= 0; the weight of the center loss the layer adds in training
            (0: none).
        name, dtype, trainable: as for every layer; under a mixed policy the per-class
            statistics add up in float32 (the spread total in float64, as always).

    Raises:
        ValueError: for a bad argument; in training, for labels out of range (in the step)
            or when no labels reach the layer (called with `training=True` outside `fit`
            without `labels=`).

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> centers = layers.ClassMeans(num_classes=3, momentum=0.5)
        >>> x = tf.constant([[1.0, 0.0], [3.0, 0.0], [0.0, 4.0]])
        >>> y = centers(x, training=True, labels=tf.constant([0, 0, 2]))  # applied at once
        >>> centers.means.numpy().tolist(), centers.counts.numpy().tolist()
        ([[2.0, 0.0], [0.0, 0.0], [0.0, 4.0]], [2, 0, 1])
        >>> _ = centers(tf.constant([[4.0, 2.0]]), training=True, labels=tf.constant([0]))
        >>> centers.means.numpy()[0].tolist()  # 0.5 * [2, 0] + 0.5 * [4, 2]
        [3.0, 1.0]
    """

    casts_integer_inputs = True

    def __init__(self, num_classes: int, momentum: float = 0.9, labels_of: str | None = None,
                 center_loss_weight: float = 0.0, name: str | None = None, dtype=None,
                 trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.num_classes = validation.positive_int("num_classes", num_classes)
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float, np.number)) \
                or not 0.0 <= float(momentum) < 1.0:
            raise ValueError(
                f"ClassMeans: momentum must be a number in [0, 1) (the weight of the old mean; "
                f"0.9 averages over about 10 batches). Received: momentum={momentum!r}")
        self.momentum = float(momentum)
        if labels_of is not None and (not isinstance(labels_of, str) or not labels_of):
            raise ValueError(
                f"ClassMeans: labels_of must be an output name or None. Received: "
                f"labels_of={labels_of!r}")
        self.labels_of = labels_of
        if isinstance(center_loss_weight, bool) or not isinstance(
                center_loss_weight, (int, float, np.number)) or not center_loss_weight >= 0:
            raise ValueError(
                f"ClassMeans: center_loss_weight must be a number >= 0 (0: no center loss). "
                f"Received: center_loss_weight={center_loss_weight!r}")
        self.center_loss_weight = float(center_loss_weight)
        self.input_spec = InputSpec(ndim=2, hint="Give (batch, features).")
        self._reported = None  # (means, counts, spread_total) at the last epoch's end

    def build(self, input_shape) -> None:
        features = tf.TensorShape(input_shape)[-1]
        if features is None:
            raise ValueError(f"ClassMeans {self.name!r} needs inputs (batch, features) with a "
                             f"known number of features. Received: {input_shape}")
        self.means = self.add_weight("means", (self.num_classes, int(features)),
                                     initializer="zeros", trainable=False)
        self.counts = self.add_weight("counts", (self.num_classes,), initializer="zeros",
                                      trainable=False, dtype=tf.int64)
        self.spread_total = self.add_weight("spread_total", (), initializer="zeros",
                                            trainable=False, dtype=tf.float64)
        self.input_spec = InputSpec(ndim=2, axes={-1: int(features)},
                                    hint="Give (batch, features).")

    def call(self, inputs, training: bool = False, labels=None):
        if not training or not self.trainable:
            return inputs
        if labels is None:
            labels = step_context.labels_for(self.name, self.labels_of)
        if labels is None:
            # Passes that only trace the model (model.update_ops, Jacobians) list the hooks
            # and drop them; applying one (eagerly at once, or by a step) raises the error.
            for variable in (self.means, self.counts, self.spread_total):
                update_hooks.register_update(_MissingLabels(self, variable, "assign"), variable)
            return inputs
        labels = self._checked_labels(labels, inputs)
        # Per-class statistics in float32 under a mixed policy: sums over many batches.
        features = tf.cast(inputs, self.variable_dtype)
        old = (tf.convert_to_tensor(self.means), tf.convert_to_tensor(self.counts),
               tf.convert_to_tensor(self.spread_total))  # read before any hook assigns
        sums = self._batch_sums(features, labels, old[0])
        new_means, centres = self._moved(sums["features"], sums["seen"], old[0], old[1])
        distances = self.center_distances(features, labels, centres)
        spread = old[2] + tf.reduce_sum(tf.cast(distances, tf.float64)) * 2.0
        self._declare((new_means, old[1] + sums["seen"], spread), sums, old)
        if self.center_loss_weight > 0.0:
            step_context.add_loss(f"{self.name}_center_loss",
                                  self.center_loss_weight * tf.reduce_mean(distances))
        return inputs

    def _declare(self, values, sums, old) -> None:
        """The three hooks: on one device the values as computed; over replicas, from the
        replicas' summed per-class sums (`update_hooks`), so counts add up and a class seen
        by one replica only keeps its own mean."""
        means, counts, spread = old
        finishers = (lambda s: self._moved(s["features"], s["seen"], means, counts)[0],
                     lambda s: counts + s["seen"],
                     lambda s: self._spread_from_sums(s, means, counts, spread))
        for variable, value, finish in zip((self.means, self.counts, self.spread_total),
                                           values, finishers):
            self.add_update_over_replicas(variable, value, sums=sums, finish=finish)

    def _batch_sums(self, features, labels, means) -> dict:
        """Per class: the feature sums, the examples seen, and the squared distances to the
        old centre `sum_i 0.5 * ||f_i - means[y_i]||^2` (float64): sums over the rows."""
        return {
            "features": tf.math.unsorted_segment_sum(features, labels, self.num_classes),
            "seen": tf.math.unsorted_segment_sum(tf.ones_like(labels, tf.int64), labels,
                                                 self.num_classes),
            "squares": tf.math.unsorted_segment_sum(
                tf.cast(self.center_distances(features, labels, means), tf.float64), labels,
                self.num_classes),
        }

    def _spread_from_sums(self, sums, means, counts, spread):
        """`spread_total` after the update, from (global) per-class sums: for a class seen for
        the first time its centre is its batch mean m, and
        sum_i ||f_i - m||^2 = sum_i ||f_i - c||^2 - n * ||m - c||^2 for the old centre c."""
        seen = sums["seen"]
        batch_means = sums["features"] / tf.maximum(tf.cast(seen, means.dtype), 1.0)[:, None]
        shift = tf.reduce_sum(tf.square(tf.cast(batch_means, tf.float64)
                                        - tf.cast(means, tf.float64)), axis=-1)
        first = (seen > 0) & (counts == 0)
        correction = tf.where(first, 0.5 * tf.cast(seen, tf.float64) * shift, 0.0)
        return spread + (tf.reduce_sum(sums["squares"]) - tf.reduce_sum(correction)) * 2.0

    def _outside(self, found: str) -> str:
        """The message of labels outside the classes; `found` says which."""
        return (f"ClassMeans {self.name!r}: labels must lie in 0..{self.num_classes - 1} "
                f"(num_classes={self.num_classes}); {found}. Fix the labels or raise "
                f"num_classes.")

    def batch_checks(self, inputs, training: bool) -> list:
        """In training: every label the batch gives the layer names one of its classes
        (inside a compiled step XLA would drop the step's own check, and an id out of range
        would silently miss its class)."""
        if not training or not self.trainable:
            return []
        labels = step_context.labels_for(self.name, self.labels_of)
        if labels is None:
            return []
        ids = tf.reshape(tf.convert_to_tensor(labels), [-1])
        if not (ids.dtype.is_integer or ids.dtype.is_floating):
            return []  # the step's own check says what is wrong with them
        ids = tf.cast(ids, tf.float64)
        return [((ids >= 0) & (ids < self.num_classes),
                 self._outside("a batch holds a label outside"))]

    def _checked_labels(self, labels, inputs) -> tf.Tensor:
        labels = tf.convert_to_tensor(labels)
        if labels.shape.rank == 2 and labels.shape[-1] == 1:
            labels = labels[:, 0]
        if labels.shape.rank != 1:
            raise ValueError(
                f"ClassMeans {self.name!r} needs one class id per example (labels of shape "
                f"(batch,) or (batch, 1)); received labels of shape {labels.shape}. One-hot "
                f"labels: pass their argmax.")
        labels = tf.cast(labels, tf.int32)
        if step_context.current() is not None:
            # Inside a step the loop has run `batch_checks` on this batch already; an assert
            # here would only make XLA log that it ignores it.
            return labels
        message = data_checks.DATA_CHECK_MARK + self._outside("a batch holds a label outside")
        checks = [tf.debugging.assert_non_negative(labels, message=message),
                  tf.debugging.assert_less(labels, self.num_classes, message=message),
                  tf.debugging.assert_equal(tf.shape(labels)[0], tf.shape(inputs)[0], message=(
                      f"ClassMeans {self.name!r}: the labels and the features have different "
                      f"batch sizes."))]
        with tf.control_dependencies(checks):
            return tf.identity(labels)

    def _moved(self, sums, seen, means, counts):
        """(new means, the centre each class is measured against) from the per-class feature
        sums and counts of the batch and the old means and counts."""
        present = (seen > 0)[:, None]
        batch_means = sums / tf.maximum(tf.cast(seen, sums.dtype), 1.0)[:, None]
        first = present & (counts == 0)[:, None]
        moved = means * self.momentum + batch_means * (1.0 - self.momentum)
        new_means = tf.where(first, batch_means, tf.where(present, moved, means))
        centres = tf.where(first, batch_means, means)
        return new_means, centres

    def center_distances(self, features, labels, centres=None) -> tf.Tensor:
        """`0.5 * ||f_i - c_{y_i}||^2` per example, the centres constant to the gradient.

        Args:
            features: (batch, features).
            labels: (batch,) int class ids.
            centres: (num_classes, features); default the running means.
        """
        centres = self.means if centres is None else centres
        chosen = tf.stop_gradient(tf.gather(tf.cast(centres, features.dtype), labels))
        return 0.5 * tf.reduce_sum(tf.square(features - chosen), axis=-1)

    def epoch_counters(self) -> dict[str, float]:
        """`<name>_within_class_spread` and `<name>_center_shift` of the epoch just ended."""
        if not self.built:
            return {}
        means, counts = self.means.numpy(), self.counts.numpy()
        total = float(self.spread_total.numpy())
        last_means, last_counts, last_total = self._reported or (
            np.zeros_like(means), np.zeros_like(counts), 0.0)
        examples = int(counts.sum() - last_counts.sum())
        spread = (total - last_total) / examples if examples > 0 else 0.0
        known = last_counts > 0
        shift = float(np.linalg.norm(means[known] - last_means[known], axis=-1).mean()) \
            if known.any() else 0.0
        self._reported = (means, counts, total)
        return {f"{self.name}_within_class_spread": spread, f"{self.name}_center_shift": shift}


class _MissingLabels(update_hooks.UpdateHook):
    """The hook of a training pass that got no labels: listed like any hook, an error if
    applied (the means cannot move without labels)."""

    def new_value(self, value):
        raise ValueError(
            f"ClassMeans {self.layer.name!r} reads the batch's labels in training, and none "
            f"reached it: train it with fit(x, y), call it as layer(x, training=True, "
            f"labels=y), or open graphfit.core.step_context.training_step(y) around the "
            f"forward pass (a custom train_step).")

"""The center loss, whose centres are a `ClassMeans` layer's running means."""

from __future__ import annotations

import keras
import tensorflow as tf

from graphfit.core.registry import LOSSES
from graphfit.layers.class_means import ClassMeans

__all__ = ["CenterLoss"]


@LOSSES.register
class CenterLoss(keras.losses.Loss):
    """The center loss (Wen et al., 2016): `mean_i 0.5 * ||f_i - c_{y_i}||^2`.

    Put it on a model output that gives the features `f` (batch, features), with integer
    class ids `y` as that output's labels; the centres `c` are the running means of a
    `layers.ClassMeans` layer, which move by its update hooks (once per training step), never
    by this loss's gradient: the gradient reaches the features only. The loss finds its layer
    when the model trains: the layer named `class_means`, else the output's own layer when
    it is a ClassMeans, else the model's only ClassMeans. A single-output model can use
    `ClassMeans(center_loss_weight=...)` instead.

    Args:
        class_means: the name of the ClassMeans layer; None finds it as above.
        name, reduction, dtype: as for every Keras loss.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers
        >>> model = gf.GraphModel({"x": (4,)}, [
        ...     gf.Node(layers.Dense(2, name="embedding"), "x"),
        ...     gf.Node(layers.ClassMeans(3, momentum=0.5, labels_of="logits", name="centers"),
        ...             "embedding"),
        ...     gf.Node(layers.Dense(3, name="logits"), "centers")], ["logits", "centers"])
        >>> model.compile(optimizer="adam", loss={
        ...     "logits": "sparse_categorical_crossentropy", "centers": layers.CenterLoss()},
        ...     loss_weights={"logits": 1.0, "centers": 0.1})
        >>> x, y = np.ones((6, 4), "float32"), np.array([0, 1, 2, 0, 1, 2])
        >>> history = model.fit(x, {"logits": y, "centers": y[:, None]}, epochs=1, verbose=0)
        >>> sorted(k for k in history.history if k.startswith("centers"))
        ['centers_center_shift', 'centers_loss', 'centers_within_class_spread']
    """

    def __init__(self, class_means: str | None = None, name: str = "center_loss",
                 reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if class_means is not None and (not isinstance(class_means, str) or not class_means):
            raise ValueError(f"CenterLoss: class_means must be the name of a ClassMeans layer "
                             f"or None. Received: class_means={class_means!r}")
        self.class_means = class_means
        self._layer = None

    def bind_model(self, model, output: str | None) -> None:
        """Finds the ClassMeans layer whose means are the centres (see the class docstring).

        Raises:
            ValueError: when there is no such layer, or several and `class_means` is unset.
        """
        if self._layer is not None:
            return
        if self.class_means is not None:
            layer = model.get_layer(self.class_means)
            if not isinstance(layer, ClassMeans):
                raise ValueError(f"CenterLoss: layer {self.class_means!r} is a "
                                 f"{type(layer).__name__}, not a ClassMeans.")
            self._layer = layer
            return
        found = [l for l in model.flatten_layers(include_self=False)
                 if isinstance(l, ClassMeans)]
        own = [l for l in found if l.name == output]
        if own or len(found) == 1:
            self._layer = (own or found)[0]
            return
        raise ValueError(
            f"CenterLoss needs the ClassMeans layer that keeps the centres; model "
            f"{model.name!r} has " + (f"several {[l.name for l in found]}: name one with "
                                      f"CenterLoss(class_means=...)." if found else
                                      "none: add a layers.ClassMeans before the features' "
                                      "output."))

    def call(self, y_true, y_pred):
        if self._layer is None:
            raise ValueError(
                "CenterLoss is not bound to a ClassMeans layer: use it in model.compile(loss=...)"
                " so that fit and evaluate find the layer (or call bind_model(model, output)).")
        labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
        return self._layer.center_distances(y_pred, labels)

    def residuals(self, y_true, y_pred):
        """`sqrt(0.5) * (f_i - c_{y_i})`: the loss is the mean of their squared sums
        (so Levenberg–Marquardt can linearize it)."""
        labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
        centres = tf.stop_gradient(tf.gather(tf.cast(self._layer.means, y_pred.dtype), labels))
        return (y_pred - centres) * tf.cast(0.5 ** 0.5, y_pred.dtype)

    def get_config(self) -> dict:
        return {**super().get_config(), "class_means": self.class_means}
